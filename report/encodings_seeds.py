"""The seeds' shapes for report/encodings.sh, against a running rpcbench-echo and the
Python WSTest servers of tests/fixtures/interop/server.py (started here, pinned to the
server's CPU, killed by PID on exit):

- seed 000: `ab -c 5 -k` for a while on EchoStruct:10 against rpcbench-echo's /soap and
  /RPC2, spyne and SimpleXMLRPCServer: requests per second, and failed requests by
  Connect, Receive, Length and Exceptions. The bodies are written by stacks that are not
  ours (zeep's for SOAP, xmlrpc.client's for XML-RPC), the same bytes to each server.
  Goal G2: rpcbench-echo's SOAP at least 10 times spyne's requests per second.
- seed 003: CALLS EchoStruct:10 calls through each client stack (rpcbench's soap, xmlrpc
  and json over http-keepalive; zeep, xmlrpc.client, jsonrpclib-pelix), every reply
  checked: user, system and total CPU seconds and real seconds of the process (its
  rusage from wait4).

Usage: encodings_seeds.py HTTP_ADDR TCP_ADDR RPCBENCH SERVER_CPU CLIENT_CPU AB_SECS CALLS
Prints two tables and G2; exits 1 when a stack or an ab run failed."""

import os
import re
import subprocess
import sys
import tempfile
import time
import xmlrpc.client

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "interop")
sys.path.insert(0, FIXTURES)
from client import test_struct  # noqa: E402

ACTION = '"uri:WSTestWeb-TestService/EchoStruct"'


def table(cols, rows):
    widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
    for cells in [cols] + rows:
        print("  ".join(str(c).rjust(w) if i else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths))))


def python_servers(cpu):
    """tests/fixtures/interop/server.py on `cpu`: the process and its six ports."""
    proc = subprocess.Popen(
        ["taskset", "-c", str(cpu), sys.executable, os.path.join(FIXTURES, "server.py")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    ports = [int(p) for p in line.split()]
    if len(ports) != 6:
        proc.kill()
        sys.exit(f"encodings_seeds.py: the Python servers did not start: {proc.stderr.read()}")
    return proc, ports


def bodies(http):
    """EchoStruct:10 of seq 1 as zeep and xmlrpc.client write it."""
    import zeep
    from lxml import etree

    structs = [test_struct(1, k) for k in range(10)]
    client = zeep.Client(f"http://{http}/soap?wsdl")
    envelope = client.create_message(client.service, "EchoStruct", array={"TestStruct": structs})
    soap = etree.tostring(envelope, xml_declaration=True, encoding="utf-8")
    rpc = xmlrpc.client.dumps((structs,), "EchoStruct", encoding="utf-8").encode()
    return soap, rpc


def ab(cpu, secs, url, body, content_type, header=None):
    """`ab -c 5 -k -t SECS`: (requests per second, failed, connect, receive, length,
    exceptions), or None when ab did not run."""
    with tempfile.NamedTemporaryFile(suffix=".xml", delete=False) as f:
        f.write(body)
    cmd = ["taskset", "-c", str(cpu), "ab", "-q", "-k", "-c", "5", "-t", str(secs), "-n", "10000000",
           "-p", f.name, "-T", content_type]
    if header:
        cmd += ["-H", header]
    try:
        out = subprocess.run(cmd + [url], capture_output=True, text=True, timeout=secs + 60).stdout
    finally:
        os.unlink(f.name)
    rps = re.search(r"Requests per second:\s+([\d.]+)", out)
    failed = re.search(r"Failed requests:\s+(\d+)", out)
    kinds = re.search(r"\(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", out)
    if not rps or not failed:
        return None
    split = [int(x) for x in kinds.groups()] if kinds else [0, 0, 0, 0]
    return (float(rps.group(1)), int(failed.group(1)), *split)


def timed(cmd):
    """Runs `cmd`: (exit status, user s, system s, real s)."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    real = time.monotonic() - start
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"  {' '.join(cmd[:3])} ...: exit {code}: {err.strip()[:300]}", file=sys.stderr)
    return code, usage.ru_utime, usage.ru_stime, real


def main():
    http, tcp, rpcbench, cpu_server, cpu_client, ab_secs, calls = sys.argv[1:8]
    calls, ab_secs = int(calls), int(float(ab_secs)) or 1
    failed = False
    proc, ports = python_servers(cpu_server)
    try:
        xmlrpc_port, spyne_port = ports[3], ports[4]
        soap, rpc = bodies(http)
        soap_type = "text/xml; charset=utf-8"
        print(f"seed 000's shape: ab -c 5 -k for {ab_secs} s, EchoStruct:10 ({len(soap)} B of SOAP, {len(rpc)} B of XML-RPC)")
        runs = [
            ("rpcbench-echo", "soap", f"http://{http}/soap", soap, soap_type, f"SOAPAction: {ACTION}"),
            ("spyne 2.14", "soap", f"http://127.0.0.1:{spyne_port}/soap", soap, soap_type, f"SOAPAction: {ACTION}"),
            ("rpcbench-echo", "xmlrpc", f"http://{http}/RPC2", rpc, "text/xml", None),
            ("SimpleXMLRPCServer", "xmlrpc", f"http://127.0.0.1:{xmlrpc_port}/RPC2", rpc, "text/xml", None),
        ]
        rows, rps = [], {}
        for server, encoding, url, body, content_type, header in runs:
            got = ab(cpu_client, ab_secs, url, body, content_type, header)
            if got is None:
                failed = True
                rows.append([server, encoding] + ["-"] * 6)
                continue
            rps[(server, encoding)] = got[0]
            rows.append([server, encoding, f"{got[0]:.1f}"] + [str(x) for x in got[1:]])
        table(["server", "encoding", "req/s", "failed", "connect", "receive", "length", "exceptions"], rows)
        print()
        print(f"seed 003's shape: {calls} EchoStruct:10 calls per client stack, every reply checked")
        client_py = os.path.join(FIXTURES, "client.py")
        base = [rpcbench, "--target", "127.0.0.1", "--http-port", http.rsplit(":", 1)[1],
                "--tcp-port", tcp.rsplit(":", 1)[1], "--transports", "http-keepalive",
                "--message", "echo-struct:10", "-n", str(calls), "--warmup", "0", "--names", "ip",
                "--placement", "none", "--no-progress", "--format", "json", "--out", os.devnull]
        stacks = [(f"rpcbench {e}", base + ["--encoding", e]) for e in ("soap", "xmlrpc", "json")]
        stacks += [(s, [sys.executable, client_py, http, str(calls), "--bench", s])
                   for s in ("zeep", "xmlrpc.client", "jsonrpclib")]
        rows = []
        for name, cmd in stacks:
            code, user, system, real = timed(["taskset", "-c", str(cpu_client)] + cmd)
            if code != 0:
                failed = True
                rows.append([name, "-", "-", "-", "-"])
                continue
            rows.append([name, f"{user:.2f}", f"{system:.2f}", f"{user + system:.2f}", f"{real:.2f}"])
        table(["client stack", "user s", "system s", "total s", "real s"], rows)
        print()
        ours, theirs = rps.get(("rpcbench-echo", "soap")), rps.get(("spyne 2.14", "soap"))
        print("G2 rpcbench-echo's SOAP against spyne's under the same ab, goal at least 10")
        if ours and theirs:
            ratio = ours / theirs
            print(f"  {ratio:.1f} ({ours:.0f} against {theirs:.0f} req/s)  {'PASS' if ratio >= 10 else 'MISS'}")
        else:
            print("  - (an ab run failed)")
    finally:
        proc.kill()
        proc.wait()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/env bash
# WSTest's table: the same call in each encoding, at
# growing sizes, with what it costs on each side. One rpcbench-echo --threads 1 pinned to
# CPU 0, rpcbench pinned to CPU 1 (as report/load.sh), one worker, closed loop:
#
#   rpcbench --target … --transports tcp,http-keepalive,grpc
#            --encoding postcard,protobuf,json,msgpack,xmlrpc,soap --message <the sizes below>
#            --duration S --rounds 3 --names ip
#
# (grpc carries protobuf only.) Messages: echo-void, echo-struct:1,2,5,10,100,1000,
# echo-list:1,8,64, echo-synthetic:1KiB,64KiB,1MiB; with --scale small, echo-void,
# echo-struct:1 and echo-struct:100 at 0.2 s a cell (what tests/encodings.rs runs in CI).
#
# It prints one row per transport × encoding × message: calls/s, mean and p99 µs, the
# client's encode and decode µs, the server's decode and encode µs (from its
# server-timing or the frame trailer), client and server CPU µs per call (the server's
# from /stats threads_cpu: `-` below 100 clock ticks), the server's resident memory after
# the cell (MiB, from /stats), request and reply body bytes, and
# wire bytes per call both ways (TCP_INFO). Then the goals, each printed PASS or MISS and
# never judged by the exit status:
#   G1 linear growth: per transport and encoding, server CPU per call at echo-struct:1000
#      over echo-struct:100, between 5 and 15;
#   G3 envelope cost: per encoding, echo-void's mean over http-keepalive within 1.15 times
#      that of /echo with an empty payload (one more run, the same way);
#   G4 no hidden copies: per encoding and message, the client's encode + decode in the
#      call (tcp) within 1.5 times the same codec timed alone in-process
#      (examples/codec_time.rs, 10,000 iterations).
# and the codec's share of the server's CPU at echo-struct:10 (seed 001's profile).
#
# Then the seeds' own shapes (report/encodings_seeds.py, with the Python servers of
# tests/fixtures/interop/server.py on the server's CPU): `ab -c 5 -k` on EchoStruct:10
# against rpcbench-echo's /soap and /RPC2, spyne and SimpleXMLRPCServer (10 s; 1 s with
# --scale small; seed 000), and 1000 EchoStruct:10 calls (100) through each client stack,
# rpcbench's soap, xmlrpc and json and zeep, xmlrpc.client and jsonrpclib-pelix, timed in
# user, system and real seconds (seed 003); with goal
#   G2 rpcbench-echo's SOAP at least 10 times spyne's requests per second under ab.
#
# Usage: report/encodings.sh [--scale small|full] [--seconds S] [--json FILE] [--no-build]
# (RPCBENCH_BIN_DIR=DIR: use the binaries in DIR, built already.)
#
# Exit status: 0 when every cell ran with every call ok, 1 otherwise, 2 bad usage. Every
# process the script starts is killed by PID when it exits, also on failure.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

die() {
    echo "encodings.sh: $*" >&2
    exit 1
}

scale=full
secs=""
json_out=""
build=1
while (($# > 0)); do
    case "$1" in
    --scale | --seconds | --json)
        (($# >= 2)) || {
            echo "encodings.sh: $1 needs a value" >&2
            exit 2
        }
        case "$1" in
        --scale) scale=$2 ;;
        --seconds) secs=$2 ;;
        --json) json_out=$2 ;;
        esac
        shift 2
        ;;
    --no-build) build=0 && shift ;;
    -h | --help) usage && exit 0 ;;
    *)
        echo "encodings.sh: unknown option $1 (see --help)" >&2
        exit 2
        ;;
    esac
done
case "$scale" in
small)
    messages=echo-void,echo-struct:1,echo-struct:100
    secs=${secs:-0.2}
    ab_secs=1
    stack_calls=100
    ;;
full)
    messages=echo-void,echo-struct:1,echo-struct:2,echo-struct:5,echo-struct:10,echo-struct:100,echo-struct:1000,echo-list:1,echo-list:8,echo-list:64,echo-synthetic:1KiB,echo-synthetic:64KiB,echo-synthetic:1MiB
    secs=${secs:-2}
    ab_secs=10
    stack_calls=1000
    ;;
*)
    echo "encodings.sh: --scale is small or full" >&2
    exit 2
    ;;
esac

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=report/lib.sh
source "$root/report/lib.sh"
make_tmp rpcbench-encodings
for tool in taskset python3 ab; do
    command -v "$tool" >/dev/null || die "$tool is needed"
done
# RPCBENCH_BIN_DIR: binaries built already (the test that runs this script sets it).
bin_dir=${RPCBENCH_BIN_DIR:-}
if [[ -z $bin_dir ]]; then
    bin_dir="$root/target/release"
    if ((build)); then
        echo "building (release) ..." >&2
        cargo build --release --quiet --bin rpcbench --bin rpcbench-echo --example codec_time
    fi
fi
rb_bin="$bin_dir/rpcbench"
echo_bin="$bin_dir/rpcbench-echo"
codec_bin="$bin_dir/examples/codec_time"
for b in "$rb_bin" "$echo_bin"; do
    [[ -x $b ]] || die "$b is missing: build it (or drop --no-build)"
done

# Two CPUs when this process has them (server on the first, client on the second), else
# both on the one it has.
read -r cpu_server cpu_client < <(python3 -c 'import os
c = sorted(os.sched_getaffinity(0))
print(c[0], c[1] if len(c) > 1 else c[0])')
"taskset" -c "$cpu_server" "$echo_bin" --threads 1 --tcp 127.0.0.1:0 --http 127.0.0.1:0 \
    >"$tmp/echo.out" 2>"$tmp/echo.out.err" &
echo_pid=$!
pids+=("$echo_pid")
tcp_addr=$(listen_addr "$tmp/echo.out" tcp "$echo_pid")
http_addr=$(listen_addr "$tmp/echo.out" http "$echo_pid")

echo "server on CPU $cpu_server, client on CPU $cpu_client; ${secs} s a cell, 3 rounds" >&2
rc=0
taskset -c "$cpu_client" "$rb_bin" --target 127.0.0.1 --tcp-port "${tcp_addr##*:}" \
    --http-port "${http_addr##*:}" --transports tcp,http-keepalive,grpc \
    --encoding postcard,protobuf,json,msgpack,xmlrpc,soap --message "$messages" \
    --duration "${secs}s" --rounds 3 --names ip --placement none --no-progress \
    --format json --out "$tmp/run.json" >/dev/null 2>"$tmp/run.err" || rc=$?
grep -v '^rpcbench: .* not run with encoding' "$tmp/run.err" >&2 || true
[[ -s $tmp/run.json ]] || die "rpcbench wrote no report (exit $rc)"
# G3's baseline: /echo with an empty payload, the same way.
taskset -c "$cpu_client" "$rb_bin" --target 127.0.0.1 --tcp-port "${tcp_addr##*:}" \
    --http-port "${http_addr##*:}" --transports http-keepalive --payload 0 \
    --duration "${secs}s" --rounds 3 --names ip --placement none --no-progress \
    --format json --out "$tmp/echo.json" >/dev/null 2>>"$tmp/run.err" || rc=$?
# G4's in-process figures: each codec alone, on the client's CPU.
: >"$tmp/codec.txt"
if [[ -x $codec_bin ]]; then
    for encoding in postcard protobuf json msgpack xmlrpc soap; do
        for message in ${messages//,/ }; do
            printf '%s %s ' "$encoding" "$message" >>"$tmp/codec.txt"
            taskset -c "$cpu_client" "$codec_bin" "$encoding" "$message" >>"$tmp/codec.txt" ||
                die "codec_time $encoding $message failed"
        done
    done
else
    echo "encodings.sh: $codec_bin is missing: G4 is not measured" >&2
fi
if [[ -n $json_out ]]; then
    cp "$tmp/run.json" "$json_out"
fi

python3 - "$tmp/run.json" "$tmp/echo.json" "$tmp/codec.txt" <<'PY' || rc=1
import json, math, sys

r = json.load(open(sys.argv[1]))
MIN_TICKS = 100


def num(x, digits=3):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def phase(run, name):
    p = run["phases_us"].get(name)
    return p["mean"] if p else None


def server_cpu(run):
    c = run.get("cpu_us_per_call") or {}
    if (c.get("server_ticks") or 0) < MIN_TICKS:
        return None
    return (c.get("server_user") or 0) + (c.get("server_system") or 0)


cols = ["transport", "encoding", "message", "calls/s", "mean µs", "p99 µs", "enc µs",
        "dec µs", "srv dec µs", "srv enc µs", "cli cpu µs", "srv cpu µs", "srv RSS MiB",
        "req B", "rep B", "wire B out", "wire B in"]
rows = []
failed = 0
for run in r["runs"]:
    b = run.get("bytes_per_call") or {}
    c = run.get("cpu_us_per_call") or {}
    lat = run.get("latency_us") or {}
    failed += run["calls"] - run["ok"]
    rows.append([
        run["transport"], run["encoding"], run["message"], f"{run['calls_per_s']:.0f}",
        num(lat.get("mean")), num(lat.get("p99")), num(phase(run, "encode")),
        num(phase(run, "decode")), num(phase(run, "server_decode")),
        num(phase(run, "server_encode")),
        num((c.get("client_user") or 0) + (c.get("client_system") or 0)),
        num(server_cpu(run)),
        num((c.get("server_rss_bytes") or 0) / 2**20 if c.get("server_rss_bytes") else None),
        num(b.get("request_body")), num(b.get("reply_body")),
        num(b.get("wire_sent")), num(b.get("wire_received")),
    ])
widths = [max(len(str(x)) for x in col) for col in zip(cols, *rows)]
line = lambda cells: "  ".join(str(c).rjust(w) if i > 2 else str(c).ljust(w)
                               for i, (c, w) in enumerate(zip(cells, widths)))
print(line(cols))
for row in rows:
    print(line(row))
print()
print("G1 linear growth: server CPU per call at echo-struct:1000 over echo-struct:100, goal 5 to 15")
by = {(x["transport"], x["encoding"], x["message"]): x for x in r["runs"]}
if not any(m == "echo-struct:1000" for (_, _, m) in by):
    print("  - (no echo-struct:1000 cell at this scale: --scale full)")
for (t, e, m), run in sorted(by.items()):
    if m != "echo-struct:1000":
        continue
    small = by.get((t, e, "echo-struct:100"))
    a, s = server_cpu(run), server_cpu(small) if small else None
    if a is None or s is None or s == 0:
        print(f"  {t} {e}: - (below {MIN_TICKS} clock ticks: run longer cells)")
        continue
    ratio = a / s
    print(f"  {t} {e}: {ratio:.2f}  {'PASS' if 5 <= ratio <= 15 else 'MISS'}")
print("G3 envelope cost: echo-void's mean over http-keepalive against /echo of 0 bytes, goal at most 1.15")
try:
    echo = json.load(open(sys.argv[2]))["runs"][0]["latency_us"]["mean"]
except (OSError, ValueError, KeyError, IndexError, TypeError):
    echo = None
voids = [(e, x) for (t, e, m), x in sorted(by.items()) if t == "http-keepalive" and m == "echo-void"]
if echo is None or not voids:
    print("  - (no echo-void cell, or the /echo run failed)")
for e, run in voids:
    ratio = run["latency_us"]["mean"] / echo
    print(f"  {e}: {ratio:.2f} ({num(run['latency_us']['mean'])} against {num(echo)} µs)  {'PASS' if ratio <= 1.15 else 'MISS'}")
print("G4 no hidden copies: encode + decode in the call (tcp) over the codec alone, goal at most 1.5")
alone = {}
for line in open(sys.argv[3]):
    parts = line.split()
    if len(parts) == 6:
        alone[(parts[0], parts[1])] = float(parts[3]) + float(parts[5])
if not alone:
    print("  - (examples/codec_time was not run)")
for (t, e, m), run in sorted(by.items()):
    if t != "tcp" or (e, m) not in alone or alone[(e, m)] <= 0:
        continue
    in_call = (phase(run, "encode") or 0) + (phase(run, "decode") or 0)
    ratio = in_call / alone[(e, m)]
    print(f"  {e} {m}: {ratio:.2f} ({num(in_call)} against {num(alone[(e, m)])} µs)  {'PASS' if ratio <= 1.5 else 'MISS'}")
print("seed 001's shape: the codec's share of the server's CPU per call (its decode and encode over its CPU)")
sized = "echo-struct:10" if any(m == "echo-struct:10" for (_, _, m) in by) else "echo-struct:100"
for (t, e, m), run in sorted(by.items()):
    if m != sized:
        continue
    cpu = server_cpu(run)
    codec = (phase(run, "server_decode") or 0) + (phase(run, "server_encode") or 0)
    if cpu is None or cpu == 0:
        print(f"  {t} {e} {m}: - (below {MIN_TICKS} clock ticks: run longer cells)")
        continue
    print(f"  {t} {e} {m}: {100 * codec / cpu:.0f}% ({num(codec)} of {num(cpu)} µs)")
if failed:
    print(f"{failed} calls were not ok", file=sys.stderr)
    sys.exit(1)
PY
echo
# The seeds' own shapes: ab against the SOAP and XML-RPC servers, ours and Python's, and
# the CPU of each client stack over the same calls.
python3 "$root/report/encodings_seeds.py" "$http_addr" "$tcp_addr" "$rb_bin" \
    "$cpu_server" "$cpu_client" "$ab_secs" "$stack_calls" || rc=1
exit "$rc"

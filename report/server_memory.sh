#!/usr/bin/env bash
# Memory per idle connection: rpcbench-echo against nginx, as RSS growth of the server
# process while N connections are held open, and the threads it needs for them.
#
# Rows, each against a server of its own (so memory one kind freed is not reused by the next):
#   echo-tcp-idle    N raw TCP connections to rpcbench-echo, one verified echo done on each,
#                    then silent
#   echo-http-loris  N HTTP connections to rpcbench-echo, each holding half a request
#                    header (slowloris: `GET /echo HTTP/1.1`, a Host line, half a header)
#   echo-http-kept   N HTTP/1.1 keep-alive connections to rpcbench-echo after one request
#   nginx-http-loris the same N slowloris connections to nginx (one worker; its RSS)
#   nginx-http-kept  the same N keep-alive connections to nginx
# The RSS after closing them is printed too: memory a server gives back.
#
# A small Python client (below, in this file) opens the connections from one process,
# sequentially, so no listen backlog overflows. `ulimit -n` is raised for the servers and
# the client (as root past the hard limit, else up to it).
#
# With --attacks it measures slow and hostile readers instead (issue #23), each row at SCALE
# times the size of the issue's table, against a fresh rpcbench-echo and against nginx (one
# worker, the files served from disk) under the same readers:
#   h1        100*SCALE HTTP/1.1 connections, each asking a 16 MiB reply and never reading
#   h2-full   SCALE HTTP/2 connections, SETTINGS_INITIAL_WINDOW_SIZE 0, each with every
#             stream the server allows (100, nginx's and h2o's limit too) asking 16 MiB
#   h2-many   200*SCALE HTTP/2 connections at window 0, 20 streams of 1 MiB each
#   tcp       100*SCALE raw TCP connections asking 16 MiB replies, never reading (no nginx)
# It prints RSS before, while the readers hold on and after they left, what the issue
# allows (--max-buffered plus 32 KiB per open connection, over the start), and the
# slowest of the small calls a healthy client made meanwhile (a fresh connection each,
# every 50 ms).
#
# Usage: report/server_memory.sh [--write] [--attacks]
#   --write   also write the output to report/server_memory.md (--attacks:
#             report/server_attacks.md)
#   --attacks the slow-reader table instead of the idle one
# Environment:
#   SCALE     --attacks: times the issue's sizes (default 10)
#   CONNS     connections of each kind (default 10000)
#   SETTLE    seconds to wait after opening or closing before reading RSS (default 12: the
#             raw TCP pool keeps an idle thread 10 s, so its threads have gone by then)
#   ECHO_BIN  the rpcbench-echo binary to measure (default: built here, release)
#   CARGO_TARGET_DIR  honoured like cargo does (default: target/ in the repository)
#
# Traffic stays on 127.0.0.1. Every process the script starts is killed by PID when it
# exits, also on failure.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

write_md=0
attacks=0
for arg in "$@"; do
    case "$arg" in
    --write) write_md=1 ;;
    --attacks) attacks=1 ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        echo "server_memory.sh: unknown argument: $arg" >&2
        usage >&2
        exit 2
        ;;
    esac
done

conns=${CONNS:-10000}
settle=${SETTLE:-12}
scale=${SCALE:-10}
[[ $scale =~ ^[0-9]+$ ]] && ((scale >= 1)) || {
    echo "server_memory.sh: SCALE must be a positive integer" >&2
    exit 2
}
# The attacks open up to 2000 connections per scale step.
((attacks)) && conns=$((200 * scale))
[[ $conns =~ ^[0-9]+$ ]] && ((conns >= 1)) || {
    echo "server_memory.sh: CONNS must be a positive integer" >&2
    exit 2
}
[[ $settle =~ ^[0-9]+$ ]] || {
    echo "server_memory.sh: SETTLE must be a whole number of seconds" >&2
    exit 2
}
readonly nginx_bin=/usr/sbin/nginx
# Files each server and the client need: every connection, plus listeners, logs and slack.
need_files=$((conns + 1000))

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=report/lib.sh
source "$root/report/lib.sh"

die() {
    echo "server_memory.sh: $*" >&2
    exit 1
}

if [[ ! -x $nginx_bin ]]; then
    if (($(id -u) == 0)) && command -v apt-get >/dev/null; then
        echo "installing nginx-light ..." >&2
        apt-get install -y -qq nginx-light >/dev/null || die "cannot install nginx-light"
    else
        die "$nginx_bin is required (apt-get install nginx-light)"
    fi
fi
for tool in python3 git "$nginx_bin"; do
    command -v "$tool" >/dev/null || die "$tool is required"
done

# Raise the open-files limit for everything started from here on.
hard=$(ulimit -Hn)
if [[ $hard != unlimited ]] && ((hard < need_files)); then
    ulimit -Hn "$need_files" 2>/dev/null || true
fi
hard=$(ulimit -Hn)
if [[ $hard == unlimited ]] || ((hard >= need_files)); then
    ulimit -n "$need_files"
else
    ulimit -n "$hard"
    die "need $need_files open files, the hard limit is $hard (run as root, or lower CONNS)"
fi

make_tmp server_memory
out="$tmp/output.txt"
say() {
    printf '%s\n' "$@" | tee -a "$out"
}

# ---- the client -------------------------------------------------------------------------
cat >"$tmp/hold.py" <<'PY'
"""Opens N connections of one kind to ADDR, prints `ready`, closes them all on a line
`close` from stdin and prints `closed`. Kinds: `tcp` (one verified echo each, then
silent), `loris` (half an HTTP request header each) and `kept` (one HTTP/1.1 request
answered, then the connection kept open)."""
import socket, struct, sys

kind, host, port, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# Request{seq: 1, reply_len: None, delay_us: 0, payload: b"hi"} (docs/reference.md: the raw
# TCP protocol); the reply carries seq 1, status 0, server_ns, and the payload.
ECHO = struct.pack(">I", 6) + bytes([1, 0, 0, 2]) + b"hi"
LORIS = b"GET /echo?reply_len=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
KEPT = b"GET /echo?reply_len=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"

def read_exact(s, k):
    buf = b""
    while len(buf) < k:
        chunk = s.recv(k - len(buf))
        if not chunk:
            raise SystemExit("connection closed by the server")
        buf += chunk
    return buf

socks = []
for i in range(n):
    s = socket.create_connection((host, port), timeout=10)
    if kind == "tcp":
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(ECHO)
        (length,) = struct.unpack(">I", read_exact(s, 4))
        body = read_exact(s, length)
        if body[0] != 1 or body[1] != 0 or not body.endswith(b"\x02hi"):
            raise SystemExit(f"bad echo on connection {i}: {body!r}")
    elif kind == "kept":
        s.sendall(KEPT)
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.startswith(b"HTTP/1.1 200"):
            chunk = s.recv(4096)
            if not chunk:
                raise SystemExit(f"connection {i} closed before its reply: {reply!r}")
            reply += chunk
    else:
        s.sendall(LORIS)
    socks.append(s)
print("ready", flush=True)
sys.stdin.readline()
for s in socks:
    s.close()
print("closed", flush=True)
PY

# ---- helpers ----------------------------------------------------------------------------
rss_kib() { awk '$1 == "VmRSS:" { print $2 }' "/proc/$1/status"; }
threads() { awk '$1 == "Threads:" { print $2 }' "/proc/$1/status"; }

# hold KIND HOST PORT PID NAME: opens CONNS connections of KIND, reads the RSS and threads
# of PID before, while open, and after closing; adds a row to `rows`.
rows=()
hold() {
    local kind=$1 host=$2 port=$3 pid=$4 name=$5 before after closed t_before t_open line
    before=$(rss_kib "$pid")
    t_before=$(threads "$pid")
    coproc HOLD { python3 "$tmp/hold.py" "$kind" "$host" "$port" "$conns"; }
    local hold_pid=$HOLD_PID
    pids+=("$hold_pid")
    read -r -t 300 line <&"${HOLD[0]}" || die "$name: the client did not open its connections"
    [[ $line == ready ]] || die "$name: client said: $line"
    sleep "$settle"
    after=$(rss_kib "$pid")
    t_open=$(threads "$pid")
    echo close >&"${HOLD[1]}"
    read -r -t 60 line <&"${HOLD[0]}" || die "$name: the client did not close"
    wait "$hold_pid" || die "$name: the client failed"
    sleep "$settle"
    closed=$(rss_kib "$pid")
    rows+=("$name $before $after $closed $t_before $t_open")
}

# ---- build ------------------------------------------------------------------------------
if [[ -z ${ECHO_BIN:-} ]]; then
    echo "building (release) ..." >&2
    cargo build --release --quiet --bin rpcbench-echo
    echo_bin="${CARGO_TARGET_DIR:-$root/target}/release/rpcbench-echo"
else
    echo_bin=$ECHO_BIN
fi

# ---- slow-reader attacks (--attacks) -----------------------------------------------------
if ((attacks)); then
    cat >"$tmp/attack.py" <<'PY'
"""Slow readers against an HTTP or raw TCP echo server: opens CONNS connections of one
kind, each asking for replies of LEN bytes (STREAMS of them on an HTTP/2 connection) and
never reading a byte, prints `ready`, and closes them all on a line `close` from stdin,
then prints `closed`.

Kinds:
  h1    `GET PATH?reply_len=LEN` over HTTP/1.1, one per connection
  h2    HTTP/2 with prior knowledge, SETTINGS_INITIAL_WINDOW_SIZE 0 (nothing the server
        sends on a stream may leave it), STREAMS GETs per connection
  tcp   the raw TCP frame protocol, one request of LEN pattern bytes per connection

Usage: attack.py KIND HOST PORT CONNS STREAMS LEN PATH"""
import socket, struct, sys

kind, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
conns, streams, length, path = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]


def frame(kind, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def literal(index, value):
    # Literal header field without indexing, indexed name (RFC 7541, 6.2.2), no Huffman.
    value = value.encode()
    assert len(value) < 127
    return bytes([index, len(value)]) + value


def h2_get(stream, target):
    block = literal(2, "GET") + literal(6, "http") + literal(4, target) + literal(1, host)
    return frame(0x1, 0x4 | 0x1, stream, block)  # HEADERS, END_HEADERS | END_STREAM


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


socks = []
for i in range(conns):
    try:
        s = socket.create_connection((host, port), timeout=10)
    except OSError as e:
        # A server out of files refuses the rest: the row is what it took.
        print(f"connection {i} refused: {e}", file=sys.stderr)
        break
    if kind == "h1":
        s.sendall(f"GET {path}?reply_len={length} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    elif kind == "h2":
        # SETTINGS: INITIAL_WINDOW_SIZE (0x4) = 0.
        out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(0x4, 0, 0, struct.pack(">HI", 4, 0))
        for k in range(streams):
            out += h2_get(2 * k + 1, f"{path}?reply_len={length}")
        s.sendall(out)
    elif kind == "tcp":
        # Request{seq, reply_len: Some(LEN), delay_us: 0, payload: []}
        body = varint(i + 1) + b"\x01" + varint(length) + b"\x00" + b"\x00"
        s.sendall(struct.pack(">I", len(body)) + body)
    else:
        raise SystemExit(f"unknown kind {kind}")
    socks.append(s)
print("ready", flush=True)
sys.stdin.readline()
for s in socks:
    s.close()
print("closed", flush=True)
PY
    cat >"$tmp/probe.py" <<'PY'
"""Small calls on fresh connections every 50 ms for SECONDS; then prints the slowest and
the median in milliseconds, the calls made and those that failed. Kinds: `http` (GET
PATH) and `tcp` (one echo). Usage: probe.py KIND HOST PORT PATH SECONDS"""
import socket, struct, sys, threading, time

kind, host, port, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
seconds = float(sys.argv[5])
ECHO = struct.pack(">I", 6) + bytes([1, 0, 0, 2]) + b"hi"
took, failed, stop = [], [0], threading.Event()


def one():
    start = time.monotonic()
    got = b""
    with socket.create_connection((host, port), timeout=5) as s:
        if kind == "tcp":
            s.sendall(ECHO)
        else:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
            # A reply frame is its 4-byte length and that many bytes: 10 in all when the
            # server's time fits one varint byte (under 128 ns), so read the length.
            if kind == "tcp" and len(got) >= 4 and len(got) >= 4 + struct.unpack(">I", got[:4])[0]:
                break
    done = kind == "tcp" and len(got) >= 4 and len(got) == 4 + struct.unpack(">I", got[:4])[0]
    ok = done and got.endswith(b"hi") if kind == "tcp" else got.startswith(b"HTTP/1.1 200")
    return time.monotonic() - start, ok


def run():
    while not stop.is_set():
        try:
            t, ok = one()
            took.append(t)
            failed[0] += 0 if ok else 1
        except OSError:
            failed[0] += 1
        stop.wait(0.05)


worker = threading.Thread(target=run)
worker.start()
time.sleep(seconds)
stop.set()
worker.join()
took.sort() if took else took.append(float("nan"))
print(f"{took[-1] * 1000:.1f} {took[len(took) // 2] * 1000:.1f} {len(took)} {failed[0]}", flush=True)
PY
    budget_kib=$((64 * 1024))
    arows=()
    # attack SERVER NAME KIND PID HOST PORT N STREAMS LEN PATH PROBE_KIND PROBE_PORT PROBE_PATH:
    # N readers of KIND against HOST:PORT, the RSS of PID before, while they hold on and
    # after they left, and a healthy client's calls meanwhile; adds a row to `arows`.
    attack() {
        local server=$1 name=$2 kind=$3 pid=$4 host=$5 port=$6 n=$7 streams=$8 len=$9
        local path=${10} pkind=${11} pport=${12} ppath=${13} before during after line probe
        before=$(rss_kib "$pid")
        coproc ATTACK { python3 "$tmp/attack.py" "$kind" "$host" "$port" "$n" "$streams" "$len" "$path"; }
        local attack_pid=$ATTACK_PID
        pids+=("$attack_pid")
        read -r -t 600 line <&"${ATTACK[0]}" || die "$name: the readers did not connect"
        [[ $line == ready ]] || die "$name: the readers said: $line"
        # The healthy client calls while the readers settle in.
        probe=$(python3 "$tmp/probe.py" "$pkind" "$host" "$pport" "$ppath" "$settle") ||
            die "$name: the healthy client failed"
        during=$(rss_kib "$pid")
        echo close >&"${ATTACK[1]}"
        read -r -t 120 line <&"${ATTACK[0]}" || die "$name: the readers did not close"
        wait "$attack_pid" || true
        sleep "$settle"
        after=$(rss_kib "$pid")
        arows+=("$server $name $n $before $during $after $probe")
    }
    # echo_row NAME KIND N STREAMS LEN: one row against a fresh rpcbench-echo, so what one
    # row left does not count in the next.
    echo_row() {
        local name=$1 kind=$2 n=$3 streams=$4 len=$5 pid tcp_addr http_addr host port
        "$echo_bin" --tcp 127.0.0.1:0 --http 127.0.0.1:0 --max-connections "$need_files" \
            --idle-timeout 3600s >"$tmp/echo.out" 2>"$tmp/echo.out.err" &
        pid=$!
        pids+=("$pid")
        tcp_addr=$(listen_addr "$tmp/echo.out" tcp "$pid")
        http_addr=$(listen_addr "$tmp/echo.out" http "$pid")
        host=${http_addr%:*}
        python3 - "$host" "${tcp_addr##*:}" "${http_addr##*:}" <<'PY'
import socket, struct, sys
host, tcp, http = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with socket.create_connection((host, tcp), timeout=10) as s:
    s.sendall(struct.pack(">I", 6) + bytes([1, 0, 0, 2]) + b"hi")
    s.recv(64)
with socket.create_connection((host, http), timeout=10) as s:
    s.sendall(b"GET /echo?reply_len=64 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    while s.recv(4096):
        pass
PY
        local pkind=http pport=${http_addr##*:}
        port=$pport
        if [[ $kind == tcp ]]; then
            pkind=tcp pport=${tcp_addr##*:} port=${tcp_addr##*:}
        fi
        attack rpcbench-echo "$name" "$kind" "$pid" "$host" "$port" "$n" "$streams" "$len" \
            /echo "$pkind" "$pport" "/echo?reply_len=64"
        curl -s "http://$http_addr/stats" >"$tmp/$name.stats.json" || true
        kill "$pid"
        wait "$pid" 2>/dev/null || true
    }
    mib=$((1024 * 1024))
    echo_row h1 h1 $((100 * scale)) 1 $((16 * mib))
    echo_row h2-full h2 "$scale" 100 $((16 * mib))
    echo_row h2-many h2 $((200 * scale)) 20 $mib
    echo_row tcp tcp $((100 * scale)) 1 $((16 * mib - 26))

    # nginx, one worker, the replies read from files (sendfile: the page cache, not the
    # worker's memory); HTTP/1.1 and HTTP/2 (prior knowledge) on two ports.
    www="$tmp/www"
    ndir="$tmp/nginx-attack"
    mkdir -p "$www" "$ndir"
    head -c $((16 * mib)) /dev/zero >"$www/echo"
    head -c $mib /dev/zero >"$www/echo1m"
    head -c 64 /dev/zero >"$www/small"
    # nginx's worker runs as nobody: it must be able to read the files.
    chmod a+rx "$tmp" "$www"
    chmod a+r "$www"/*
    h1_port=$(free_port 127.0.0.1)
    h2_port=$(free_port 127.0.0.1)
    {
        echo "worker_processes 1;"
        echo "worker_rlimit_nofile $need_files;"
        echo "daemon off;"
        echo "pid $ndir/nginx.pid;"
        echo "error_log $ndir/error.log error;"
        echo "events { worker_connections $((conns + 100)); }"
        echo "http {"
        echo "    access_log off;"
        for t in client_body proxy fastcgi uwsgi scgi; do
            echo "    ${t}_temp_path $ndir/$t;"
        done
        echo "    keepalive_timeout 3600s;"
        echo "    server {"
        echo "        listen 127.0.0.1:$h1_port;"
        echo "        listen 127.0.0.1:$h2_port http2;"
        echo "        root $www;"
        echo "        default_type application/octet-stream;"
        echo "    }"
        echo "}"
    } >"$ndir/nginx.conf"
    "$nginx_bin" -p "$ndir/" -e "$ndir/error.log" -c "$ndir/nginx.conf" &
    nginx_pid=$!
    pids+=("$nginx_pid")
    worker=
    for _ in $(seq 100); do
        worker=$(cat "/proc/$nginx_pid/task/$nginx_pid/children" 2>/dev/null | awk '{ print $1 }')
        [[ -n $worker ]] && break
        kill -0 "$nginx_pid" 2>/dev/null || die "nginx exited: $(cat "$ndir/error.log")"
        sleep 0.1
    done
    [[ -n $worker ]] || die "cannot find nginx's worker process"
    sleep 0.5
    attack nginx h1 h1 "$worker" 127.0.0.1 "$h1_port" $((100 * scale)) 1 $((16 * mib)) /echo \
        http "$h1_port" /small
    attack nginx h2-full h2 "$worker" 127.0.0.1 "$h2_port" "$scale" 100 $((16 * mib)) /echo \
        http "$h1_port" /small
    attack nginx h2-many h2 "$worker" 127.0.0.1 "$h2_port" $((200 * scale)) 20 $mib /echo1m \
        http "$h1_port" /small

    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
        commit="$commit (plus uncommitted changes)"
    fi
    say "# Slow and hostile readers, rpcbench-echo vs nginx ($(date -u '+%Y-%m-%d %H:%M UTC'))" \
        "commit:    $commit" \
        "kernel:    $(uname -sr)" \
        "nginx:     $("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //') (1 worker, files from disk; the worker's RSS)" \
        "echo:      $echo_bin --idle-timeout 3600s (defaults: --max-buffered 64MiB, --write-timeout 30s)" \
        "scale:     $scale x the sizes of issue #23's table; RSS read ${settle}s after the readers" \
        "           connected and ${settle}s after they left" \
        ""
    table=$(
        printf '%-13s %-7s %6s %9s %10s %9s %10s %6s %9s %8s\n' server row conns "RSS start" \
            "RSS held" allowed "RSS after" back healthy p50
        printf '%-13s %-7s %6s %9s %10s %9s %10s %6s %9s %8s\n' ------------- ------- ------ \
            --------- ---------- --------- ---------- ------ --------- --------
        for row in "${arows[@]}"; do
            read -r server name n before during after slowest median _probes failed <<<"$row"
            awk -v s="$server" -v r="$name" -v n="$n" -v b="$before" -v d="$during" \
                -v a="$after" -v m="$slowest" -v p="$median" -v f="$failed" -v bud="$budget_kib" \
                'BEGIN {
                    allowed = (s == "nginx") ? "-" : sprintf("%.0f MiB", (b + bud + 32 * n) / 1024)
                    printf "%-13s %-7s %6d %5.1f MiB %6.1f MiB %9s %6.1f MiB %+5.0f%% %6.1f ms %5.1f ms%s\n",
                        s, r, n, b / 1024, d / 1024, allowed, a / 1024, (a - b) / b * 100, m, p,
                        (f > 0 ? " (" f " failed)" : "")
                }'
        done
    )
    say "$table" ""
    say "conns:     the readers' connections (h2-full: SCALE connections of 100 streams each)" \
        "RSS held:  VmRSS while the readers hold their connections" \
        "allowed:   the start plus --max-buffered plus 32 KiB per open connection (issue #23)" \
        "back:      RSS after the readers left, against the start" \
        "healthy:   the slowest (and median) small call on a fresh connection, one every 50 ms" \
        "           while the readers held on" \
        ""
    for f in "$tmp"/*.stats.json; do
        [[ -s $f ]] || continue
        python3 - "$f" <<'PY' | tee -a "$out"
import json, os, sys
s = json.load(open(sys.argv[1]))
hits = {k: v for k, v in s["rejected"].items() if v}
name = os.path.basename(sys.argv[1])[: -len(".stats.json")]
peak = s.get("buffered_bytes_peak", 0) / 1048576
print(f"rpcbench-echo {name:<7}: buffered at most {peak:.1f} MiB; refused or closed: {hits}")
PY
    done
    if ((write_md)); then
        md="$root/report/server_attacks.md"
        cmd="report/server_memory.sh --attacks --write"
        [[ -z ${SCALE:-} ]] || cmd="SCALE=$SCALE $cmd"
        [[ -z ${SETTLE:-} ]] || cmd="SETTLE=$SETTLE $cmd"
        {
            echo "# Slow and hostile readers: rpcbench-echo vs nginx"
            echo
            echo "Produced by:"
            echo
            echo '```sh'
            echo "$cmd"
            echo '```'
            echo
            echo '```text'
            cat "$out"
            echo '```'
        } >"$md"
        echo "wrote $md" >&2
    fi
    exit 0
fi

# ---- rpcbench-echo ----------------------------------------------------------------------
# run_echo KIND NAME: a fresh rpcbench-echo, one call of each kind first (so what is
# allocated once per process is not counted), then CONNS connections of KIND; stopped after.
run_echo() {
    local kind=$1 name=$2 pid tcp_addr http_addr
    "$echo_bin" --tcp 127.0.0.1:0 --http 127.0.0.1:0 --max-connections "$need_files" \
        --idle-timeout 3600s >"$tmp/echo.out" 2>"$tmp/echo.out.err" &
    pid=$!
    pids+=("$pid")
    tcp_addr=$(listen_addr "$tmp/echo.out" tcp "$pid")
    http_addr=$(listen_addr "$tmp/echo.out" http "$pid")
    python3 - "${tcp_addr%:*}" "${tcp_addr##*:}" "${http_addr##*:}" <<'PY'
import socket, struct, sys
host, tcp, http = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with socket.create_connection((host, tcp), timeout=10) as s:
    s.sendall(struct.pack(">I", 6) + bytes([1, 0, 0, 2]) + b"hi")
    s.recv(64)
with socket.create_connection((host, http), timeout=10) as s:
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    while s.recv(4096):
        pass
PY
    if [[ $kind == tcp ]]; then
        hold "$kind" "${tcp_addr%:*}" "${tcp_addr##*:}" "$pid" "$name"
    else
        hold "$kind" "${http_addr%:*}" "${http_addr##*:}" "$pid" "$name"
    fi
    kill "$pid"
    wait "$pid" 2>/dev/null || true
}
run_echo tcp echo-tcp-idle
run_echo loris echo-http-loris
run_echo kept echo-http-kept

# ---- nginx ------------------------------------------------------------------------------
nginx_port=$(free_port 127.0.0.1)
write_nginx_conf "$tmp/nginx" 1 "127.0.0.1:$nginx_port"
sed -i "1a worker_rlimit_nofile $need_files;" "$tmp/nginx/nginx.conf"
# lib.sh's configuration allows 1024 connections; this measurement needs CONNS of them.
sed -i "s/worker_connections [0-9]*;/worker_connections $((conns + 100));/" "$tmp/nginx/nginx.conf"
"$nginx_bin" -p "$tmp/nginx/" -e "$tmp/nginx/error.log" -c "$tmp/nginx/nginx.conf" &
nginx_pid=$!
pids+=("$nginx_pid")
worker=
for _ in $(seq 100); do
    worker=$(cat "/proc/$nginx_pid/task/$nginx_pid/children" 2>/dev/null | awk '{ print $1 }')
    [[ -n $worker ]] && break
    kill -0 "$nginx_pid" 2>/dev/null || die "nginx exited: $(cat "$tmp/nginx/error.log")"
    sleep 0.1
done
[[ -n $worker ]] || die "cannot find nginx's worker process"
python3 - "$nginx_port" <<'PY'
import socket, sys, time
for _ in range(100):
    try:
        with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while s.recv(4096):
                pass
        break
    except OSError:
        time.sleep(0.1)
PY
hold loris 127.0.0.1 "$nginx_port" "$worker" nginx-http-loris
hold kept 127.0.0.1 "$nginx_port" "$worker" nginx-http-kept

# ---- table ------------------------------------------------------------------------------
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    commit="$commit (plus uncommitted changes)"
fi
say "# Memory per idle connection, rpcbench-echo vs nginx ($(date -u '+%Y-%m-%d %H:%M UTC'))" \
    "commit:    $commit" \
    "kernel:    $(uname -sr)" \
    "nginx:     $("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //') (1 worker; the worker's RSS)" \
    "echo:      $echo_bin --max-connections $need_files --idle-timeout 3600s" \
    "conns:     $conns per row, RSS read ${settle}s after opening them and ${settle}s after closing;" \
    "           each rpcbench-echo row against a fresh server" \
    ""
table=$(
    printf '%-17s %7s %11s %9s %9s %12s %9s\n' server conns "RSS growth" "per conn" threads \
        "RSS closed" returned
    printf '%-17s %7s %11s %9s %9s %12s %9s\n' ----------------- ------- ----------- \
        --------- --------- ------------ ---------
    for row in "${rows[@]}"; do
        read -r name before after closed t_before t_open <<<"$row"
        awk -v n="$name" -v c="$conns" -v b="$before" -v a="$after" -v z="$closed" \
            -v tb="$t_before" -v to="$t_open" 'BEGIN {
                g = a - b; back = (g > 0 ? (a - z) / g * 100 : 100)
                printf "%-17s %7d %7.1f MiB %5.1f KiB %9s %8.1f MiB %8.0f%%\n",
                    n, c, g / 1024, g / c, tb "->" to, z / 1024, back }'
    done
)
say "$table" ""
say "RSS growth: VmRSS with the connections open minus VmRSS before opening them" \
    "threads:    the server's threads before -> with the connections open" \
    "returned:   share of the growth given back ${settle}s after closing them"

if ((write_md)); then
    md="$root/report/server_memory.md"
    cmd="report/server_memory.sh --write"
    [[ -z ${CONNS:-} ]] || cmd="CONNS=$CONNS $cmd"
    [[ -z ${SETTLE:-} ]] || cmd="SETTLE=$SETTLE $cmd"
    {
        echo "# Memory per idle connection: rpcbench-echo vs nginx"
        echo
        echo "Produced by:"
        echo
        echo '```sh'
        echo "$cmd"
        echo '```'
        echo
        echo '```text'
        cat "$out"
        echo '```'
    } >"$md"
    echo "wrote $md" >&2
fi

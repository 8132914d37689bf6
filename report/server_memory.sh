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
# Usage: report/server_memory.sh [--write]
#   --write   also write the output to report/server_memory.md
# Environment:
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
for arg in "$@"; do
    case "$arg" in
    --write) write_md=1 ;;
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
# Request{seq: 1, reply_len: None, delay_us: 0, payload: b"hi"} (README: the raw TCP
# protocol); the reply carries seq 1, status 0, server_ns, and the payload.
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
write_nginx_conf "$tmp/nginx" "$nginx_port" 1 "worker_rlimit_nofile $need_files;"
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

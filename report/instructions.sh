#!/usr/bin/env bash
# User-space instructions per HTTP request, rpcbench-echo against nginx, counted by
# valgrind's callgrind: a figure that does not move with the host's noise the way
# requests per second do (report/bench_server.sh). Kernel work (the TCP stack, system
# calls) is not counted; both servers make the same system calls per request (one recv,
# one write or writev, a share of an epoll_wait).
#
# Each server runs alone under callgrind, pinned to CPU 0 (nginx: one worker, no master
# process); wrk -t1 -c16 on CPU 1 warms it up for 2 s, then the counters are zeroed, wrk
# runs for 5 s more, and the counters are dumped: instructions / requests in those 5 s.
#
# Usage: report/instructions.sh
# Needs valgrind (callgrind_control), wrk, nginx (nginx-light) and taskset. Traffic stays
# on 127.0.0.1; every process it starts is killed by PID when it exits.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
for tool in valgrind callgrind_control wrk taskset /usr/sbin/nginx cargo; do
    command -v "$tool" >/dev/null || {
        echo "instructions.sh: $tool is required" >&2
        exit 1
    }
done
cargo build --release --quiet --bin rpcbench-echo
bin="${CARGO_TARGET_DIR:-$root/target}/release/rpcbench-echo"

tmp=$(mktemp -d)
pid=""
cleanup() {
    if [[ -n $pid ]]; then kill "$pid" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT

# A port free just now (nginx cannot listen on port 0).
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

count() { # count NAME URL: prints NAME, requests, instructions, instructions per request
    local name=$1 url=$2 n total
    taskset -c 1 wrk -t1 -c16 -d2s "$url" >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    n=$(taskset -c 1 wrk -t1 -c16 -d5s "$url" | awk '/requests in/ { print $1 }')
    callgrind_control -d "$pid" >/dev/null 2>&1
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=""
    total=$(awk '/^summary:/ { print $2 }' "$tmp/$name.out.1")
    printf '%-13s %9s requests %13s instructions %7d per request\n' "$name" "$n" "$total" $((total / n))
}

grind=(taskset -c 0 valgrind --tool=callgrind --compress-strings=no --compress-pos=no)

"${grind[@]}" --callgrind-out-file="$tmp/echo-http.out" "$bin" --threads 1 --tcp off \
    --http 127.0.0.1:0 >"$tmp/echo.stdout" 2>"$tmp/echo.stderr" &
pid=$!
for _ in $(seq 100); do
    grep -q '^listening http' "$tmp/echo.stdout" && break
    sleep 0.1
done
port=$(awk '/^listening http/ { sub(/.*:/, "", $3); print $3 }' "$tmp/echo.stdout")
[[ -n $port ]] || { echo "instructions.sh: rpcbench-echo did not start" >&2; exit 1; }
count echo-http "http://127.0.0.1:$port/echo?reply_len=100"

port=$(free_port)
mkdir -p "$tmp/nginx"
cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes 1;
master_process off;
daemon off;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $tmp/nginx/cb; proxy_temp_path $tmp/nginx/p;
    fastcgi_temp_path $tmp/nginx/f; uwsgi_temp_path $tmp/nginx/u; scgi_temp_path $tmp/nginx/s;
    server {
        listen 127.0.0.1:$port;
        location / {
            default_type application/octet-stream;
            return 200 "$(printf 'x%.0s' $(seq 100))";
        }
    }
}
EOF
"${grind[@]}" --callgrind-out-file="$tmp/nginx.out" /usr/sbin/nginx -p "$tmp/nginx/" \
    -e "$tmp/nginx/error.log" -c "$tmp/nginx/nginx.conf" 2>"$tmp/nginx.stderr" &
pid=$!
for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && break
    sleep 0.1
done
count nginx "http://127.0.0.1:$port/echo?reply_len=100"

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
# on 127.0.0.1; every process it starts is killed by PID when it exits (after its count).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=report/lib.sh
source "$root/report/lib.sh"
die() {
    echo "instructions.sh: $*" >&2
    exit 1
}
for tool in valgrind callgrind_control wrk taskset curl python3 /usr/sbin/nginx cargo; do
    command -v "$tool" >/dev/null || die "$tool is required"
done
cargo build --release --quiet --bin rpcbench-echo
bin="${CARGO_TARGET_DIR:-$root/target}/release/rpcbench-echo"

make_tmp instructions

grind=(taskset -c 0 valgrind --tool=callgrind --compress-strings=no --compress-pos=no)

# count NAME URL: warms the server (the last one started) up, counts 5 s of requests, stops
# it, and prints NAME, requests, instructions and instructions per request.
count() {
    local name=$1 url=$2 pid=${pids[-1]} n total
    for _ in $(seq 100); do
        curl -s -o /dev/null "$url" && break
        sleep 0.1
    done
    taskset -c 1 wrk -t1 -c16 -d2s "$url" >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    n=$(taskset -c 1 wrk -t1 -c16 -d5s "$url" | awk '/requests in/ { print $1 }')
    callgrind_control -d "$pid" >/dev/null 2>&1
    # Stopped now, so the next server is counted alone.
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    total=$(awk '/^summary:/ { print $2 }' "$tmp/$name.out.1")
    [[ -n $n && -n $total ]] || die "no count for $name"
    printf '%-13s %9s requests %13s instructions %7d per request\n' "$name" "$n" "$total" $((total / n))
}

"${grind[@]}" --callgrind-out-file="$tmp/echo-http.out" "$bin" --threads 1 --tcp off \
    --http 127.0.0.1:0 >"$tmp/echo.out" 2>"$tmp/echo.out.err" &
pids+=("$!")
count echo-http "http://$(listen_addr "$tmp/echo.out" http "${pids[-1]}")/echo?reply_len=100"

port=$(free_port 127.0.0.1)
# No master process: callgrind must be counting the process that serves.
write_nginx_conf "$tmp/nginx" 100 "127.0.0.1:$port"
sed -i "1a master_process off;" "$tmp/nginx/nginx.conf"
"${grind[@]}" --callgrind-out-file="$tmp/nginx.out" /usr/sbin/nginx -p "$tmp/nginx/" \
    -e "$tmp/nginx/error.log" -c "$tmp/nginx/nginx.conf" 2>"$tmp/nginx.err" &
pids+=("$!")
count nginx "http://127.0.0.1:$port/echo?reply_len=100"

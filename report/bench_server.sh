#!/usr/bin/env bash
# Server throughput on one core: rpcbench-echo's HTTP `GET /echo?reply_len=100` against
# nginx returning a fixed 100-byte body, plus the raw TCP echo rate with 64 connections.
#
# Placement: every server runs pinned to CPU 0 (rpcbench-echo with --threads 1, nginx with
# one worker); every load generator runs pinned to CPU 1 (wrk -t1 -c64, tcp_load with 64
# connections on one thread). Traffic stays on 127.0.0.1.
#
# Usage: report/bench_server.sh [--write]
#   --write   also write the output to report/bench_server.md
# Environment:
#   DURATION  seconds per measurement, e.g. 10 or 10s (default 10s)
#   ROUNDS    rounds per server; the nginx/echo order alternates each round (default 2)
#   CARGO_TARGET_DIR  honoured like cargo does (default: target/ in the repository)
#
# Every process the script starts is killed by PID when it exits, also on failure.
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
        echo "bench_server.sh: unknown argument: $arg" >&2
        usage >&2
        exit 2
        ;;
    esac
done

duration=${DURATION:-10s}
rounds=${ROUNDS:-2}
if [[ ! $duration =~ ^([0-9]+)s?$ ]] || ((BASH_REMATCH[1] < 1)); then
    echo "bench_server.sh: DURATION must be a whole number of seconds, like 10 or 10s" >&2
    exit 2
fi
secs=${BASH_REMATCH[1]}
if [[ ! $rounds =~ ^[0-9]+$ ]] || ((rounds < 1)); then
    echo "bench_server.sh: ROUNDS must be a positive integer" >&2
    exit 2
fi
readonly server_cpu=0 client_cpu=1 conns=64 reply_len=100 nginx_bin=/usr/sbin/nginx

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=report/lib.sh
source "$root/report/lib.sh"

for tool in cargo taskset wrk curl python3 git pgrep getconf /usr/bin/time "$nginx_bin"; do
    command -v "$tool" >/dev/null || {
        echo "bench_server.sh: $tool is required" >&2
        exit 1
    }
done
if (($(nproc) < 2)); then
    echo "bench_server.sh: needs at least 2 CPUs (server on CPU $server_cpu, load on CPU $client_cpu)" >&2
    exit 1
fi

make_tmp bench_server
out="$tmp/output.txt"
load_pid= # the running load generator (its /usr/bin/time wrapper), if any

before_cleanup() {
    if [[ -n $load_pid ]]; then
        # The wrapper's child is the load generator itself.
        pkill -TERM -P "$load_pid" 2>/dev/null || true
        kill "$load_pid" 2>/dev/null || true
    fi
}

# Prints to stdout and keeps a copy for --write.
say() {
    printf '%s\n' "$@" | tee -a "$out"
}

die() {
    echo "bench_server.sh: $*" >&2
    exit 1
}

# Waits until `curl URL` answers 200 with exactly reply_len bytes, or fails after ~10 s.
check_body() {
    local name=$1 url=$2 pid=$3 got=""
    for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || die "$name exited before answering (see above)"
        got=$(curl -sS -o /dev/null -w '%{http_code} %{size_download}' "$url" 2>/dev/null) || true
        [[ $got == "200 $reply_len" ]] && return 0
        sleep 0.1
    done
    die "$name does not answer $url with 200 and $reply_len bytes (got: ${got:-nothing})"
}

# ---- build ------------------------------------------------------------------------------
echo "building (release) ..." >&2
cargo build --release --quiet --bin rpcbench-echo --example tcp_load
target_dir=${CARGO_TARGET_DIR:-$root/target}
echo_bin="$target_dir/release/rpcbench-echo"
load_bin="$target_dir/release/examples/tcp_load"

# ---- nginx ------------------------------------------------------------------------------
nginx_port=$(free_port 127.0.0.1)
write_nginx_conf "$tmp/nginx" "$reply_len" "127.0.0.1:$nginx_port"
taskset -c "$server_cpu" "$nginx_bin" -p "$tmp/nginx/" -e "$tmp/nginx/error.log" \
    -c "$tmp/nginx/nginx.conf" &
nginx_pid=$!
pids+=("$nginx_pid")
nginx_url="http://127.0.0.1:$nginx_port/echo?reply_len=$reply_len"
check_body nginx "$nginx_url" "$nginx_pid"
nginx_worker=$(pgrep -P "$nginx_pid" | head -n 1)
[[ -n $nginx_worker ]] || die "cannot find nginx's worker process"

# ---- rpcbench-echo, HTTP only, and a second one for raw TCP only --------------------------
taskset -c "$server_cpu" "$echo_bin" --threads 1 --tcp off --http 127.0.0.1:0 \
    >"$tmp/echo_http.out" 2>"$tmp/echo_http.out.err" &
echo_http_pid=$!
pids+=("$echo_http_pid")
echo_url="http://$(listen_addr "$tmp/echo_http.out" http "$echo_http_pid")/echo?reply_len=$reply_len"
check_body rpcbench-echo "$echo_url" "$echo_http_pid"

taskset -c "$server_cpu" "$echo_bin" --threads 1 --http off --tcp 127.0.0.1:0 \
    >"$tmp/echo_tcp.out" 2>"$tmp/echo_tcp.out.err" &
echo_tcp_pid=$!
pids+=("$echo_tcp_pid")
echo_tcp_addr=$(listen_addr "$tmp/echo_tcp.out" tcp "$echo_tcp_pid")

# ---- header -----------------------------------------------------------------------------
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    commit="$commit (plus uncommitted changes)"
fi
wrk_version=$(wrk -v 2>&1 | head -n 1 | sed 's/ Copyright.*//' || true)
nginx_version=$("$nginx_bin" -v 2>&1 | sed 's/^nginx version: //')
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)

say "# rpcbench-echo vs nginx, one core each ($(date -u '+%Y-%m-%d %H:%M UTC'))" \
    "commit:    $commit" \
    "kernel:    $(uname -sr)" \
    "cpu:       ${cpu_model:-unknown} ($(nproc) CPUs online)" \
    "rustc:     $(rustc --version 2>/dev/null || echo unknown)" \
    "wrk:       $wrk_version" \
    "nginx:     $nginx_version (1 worker, access_log off, keepalive_requests 1000000," \
    "           fixed $reply_len-byte body via 'return 200')" \
    "servers:   CPU $server_cpu (taskset); rpcbench-echo --threads 1" \
    "load:      CPU $client_cpu (taskset); wrk -t1 -c$conns -d${secs}s --latency;" \
    "           tcp_load: $conns connections, sequential 64-byte echo round trips, 1 thread" \
    "rounds:    $rounds per server, nginx/echo order alternating" \
    "load avg:  $(cut -d' ' -f1-3 /proc/loadavg) (before the runs)" \
    ""

# ---- measurements -----------------------------------------------------------------------
rows=() # "server round rate p50 p99 srv_cpu us_per_call load_cpu other"
nginx_rates=()
echo_rates=()
tcp_rates=()
clk_tck=$(getconf CLK_TCK)

proc_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# user + nice + system ticks of the two CPUs in use (irq and softirq time is left out: it
# is mostly our own loopback traffic).
cpus_busy() {
    awk -v a="cpu$server_cpu" -v b="cpu$client_cpu" \
        '$1 == a || $1 == b { t += $2 + $3 + $4 } END { print t }' /proc/stat
}

# Runs a load generator (the arguments after the first two) pinned to the client CPU with
# its output in FILE, and sets: srv_cpu, the server's CPU use in % of one CPU; srv_ticks;
# load_cpu, the load generator's CPU use in % of one CPU;
# other, the % of the two CPUs' time used by every process but the server and the load
# generator (other tenants of the machine; a high value means a disturbed measurement).
timed_load() {
    local file=$1 server_pid=$2
    shift 2
    local s0 s1 b0 b1 client
    s0=$(proc_ticks "$server_pid")
    b0=$(cpus_busy)
    # In the background with `wait`, so a signal reaches the EXIT trap at once.
    taskset -c "$client_cpu" /usr/bin/time -f '%U %S' -o "$file.time" "$@" >"$file" &
    load_pid=$!
    wait "$load_pid"
    load_pid=
    s1=$(proc_ticks "$server_pid")
    b1=$(cpus_busy)
    client=$(tail -n 1 "$file.time" | awk -v hz="$clk_tck" '{ printf "%d", ($1 + $2) * hz }')
    load_cpu=$(awk -v c="$client" -v hz="$clk_tck" -v t="$secs" 'BEGIN { printf "%.0f", c / (t * hz) * 100 }')
    srv_ticks=$((s1 - s0))
    srv_cpu=$(awk -v s="$srv_ticks" -v hz="$clk_tck" -v t="$secs" \
        'BEGIN { printf "%.0f", s / (t * hz) * 100 }')
    other=$(awk -v busy=$((b1 - b0)) -v s="$srv_ticks" -v c="$client" -v hz="$clk_tck" -v t="$secs" \
        'BEGIN { o = (busy - s - c) / (2 * t * hz) * 100; printf "%.0f", (o < 0 ? 0 : o) }')
}

# Server CPU time per call in microseconds: a throughput-independent cost figure.
us_per_call() {
    awk -v s="$srv_ticks" -v hz="$clk_tck" -v r="$1" -v t="$secs" \
        'BEGIN { printf "%.2f", s / hz * 1e6 / (r * t) }'
}

run_wrk() {
    local name=$1 url=$2 server_pid=$3 round=$4
    local file="$tmp/wrk_${name}_$round.txt" rate p50 p99 bad
    echo "round $round: wrk -> $name ..." >&2
    timed_load "$file" "$server_pid" wrk -t1 -c"$conns" -d"${secs}s" --latency "$url"
    rate=$(awk '$1 == "Requests/sec:" { print $2 }' "$file")
    p50=$(awk '$1 == "50%" { print $2 }' "$file")
    p99=$(awk '$1 == "99%" { print $2 }' "$file")
    [[ -n $rate && -n $p50 && -n $p99 ]] || die "cannot parse wrk output for $name:"$'\n'"$(cat "$file")"
    bad=$(grep -E 'Non-2xx|Socket errors' "$file" || true)
    [[ -z $bad ]] || die "wrk against $name saw errors: $bad"
    rows+=("$name $round $rate $p50 $p99 $srv_cpu $(us_per_call "$rate") $load_cpu $other")
    if [[ $name == nginx ]]; then nginx_rates+=("$rate"); else echo_rates+=("$rate"); fi
}

run_tcp() {
    local round=$1 rate
    local file="$tmp/tcp_$round.txt"
    echo "round $round: tcp_load -> rpcbench-echo (raw TCP) ..." >&2
    timed_load "$file" "$echo_tcp_pid" "$load_bin" "$echo_tcp_addr" --conns "$conns" \
        --duration "$secs" --size 64
    rate=$(awk '$1 == "calls/s" { print $2 }' "$file")
    [[ -n $rate ]] || die "cannot parse tcp_load output:"$'\n'"$(cat "$file")"
    rows+=("echo-tcp-raw $round $rate - - $srv_cpu $(us_per_call "$rate") $load_cpu $other")
    tcp_rates+=("$rate")
}

for ((round = 1; round <= rounds; round++)); do
    if ((round % 2 == 1)); then
        run_wrk nginx "$nginx_url" "$nginx_worker" "$round"
        run_wrk echo-http "$echo_url" "$echo_http_pid" "$round"
    else
        run_wrk echo-http "$echo_url" "$echo_http_pid" "$round"
        run_wrk nginx "$nginx_url" "$nginx_worker" "$round"
    fi
    run_tcp "$round"
done

# ---- table ------------------------------------------------------------------------------
max() { printf '%s\n' "$@" | sort -g | tail -n 1; }
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
        END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

table=$(
    printf '%-13s %5s %10s %10s %10s %8s %8s %8s %6s\n' \
        server round "req/s" p50 p99 srv-cpu "us/call" load-cpu other
    printf '%-13s %5s %10s %10s %10s %8s %8s %8s %6s\n' \
        ------------- ----- ---------- ---------- ---------- -------- -------- -------- ------
    for row in "${rows[@]}"; do
        read -r name round rate p50 p99 cpu usc lcpu oth <<<"$row"
        printf '%-13s %5s %10.0f %10s %10s %7s%% %8s %7s%% %5s%%\n' \
            "$name" "$round" "$rate" "$p50" "$p99" "$cpu" "$usc" "$lcpu" "$oth"
    done
)
say "$table" ""
say "echo-http:    GET /echo?reply_len=$reply_len on rpcbench-echo (nginx: the same URL, fixed body)" \
    "echo-tcp-raw: calls/s of 64-byte raw TCP echoes, examples/tcp_load.rs, $conns connections" \
    "              (req/s column; it keeps no latencies)" \
    "srv-cpu:      the server process's CPU time over the run, in % of one CPU (nginx: its worker)" \
    "us/call:      server CPU time per request; compares cost even when the load is the limit" \
    "load-cpu:     the load generator's CPU time, in % of one CPU (near 100%: it may be the limit)" \
    "other:        share of CPUs $server_cpu-$client_cpu used by other processes meanwhile" \
    "              (irq/softirq excluded); rows with a high value were disturbed" ""

best=$(ratio "$(max "${echo_rates[@]}")" "$(max "${nginx_rates[@]}")")
med=$(ratio "$(median "${echo_rates[@]}")" "$(median "${nginx_rates[@]}")")
summary() { printf '%-13s %s: best %.0f, median %.0f' "$1" "$2" "$(max "${@:3}")" "$(median "${@:3}")"; }
say "$(summary nginx req/s "${nginx_rates[@]}")" \
    "$(summary echo-http req/s "${echo_rates[@]}")" \
    "$(summary echo-tcp-raw calls/s "${tcp_rates[@]}")" \
    "ratio echo-http/nginx req/s: best $best (best vs best), median $med (median vs median)"
echo_usc=() nginx_usc=()
for row in "${rows[@]}"; do
    read -r name _ _ _ _ _ usc _ _ <<<"$row"
    case $name in
    nginx) nginx_usc+=("$usc") ;;
    echo-http) echo_usc+=("$usc") ;;
    esac
done
say "server CPU per request, echo-http/nginx (medians of us/call): $(ratio "$(median "${echo_usc[@]}")" "$(median "${nginx_usc[@]}")")"
# Each round runs nginx and echo-http one right after the other (in alternating order), so
# the ratio within a round is the least disturbed by the host's drift between rounds.
paired=()
for i in "${!echo_rates[@]}"; do
    paired+=("$(ratio "${echo_rates[$i]}" "${nginx_rates[$i]}")")
done
pmed=$(median "${paired[@]}")
say "ratio echo-http/nginx req/s within each round: ${paired[*]}; median $(printf '%.3f' "$pmed")"
if awk -v p="$pmed" -v m="$med" 'BEGIN { exit !(p >= 1 && m >= 1) }'; then
    say "goal (echo-http req/s >= nginx req/s; median of the rounds' ratios and median vs median): met"
else
    say "goal (echo-http req/s >= nginx req/s; median of the rounds' ratios and median vs median): NOT met"
fi

if ((write_md)); then
    md="$root/report/bench_server.md"
    cmd="report/bench_server.sh --write"
    [[ -z ${DURATION:-} ]] || cmd="DURATION=$DURATION $cmd"
    [[ -z ${ROUNDS:-} ]] || cmd="ROUNDS=$ROUNDS $cmd"
    {
        echo "# Server throughput on one core: rpcbench-echo vs nginx"
        echo
        echo "Produced by:"
        echo
        echo '```sh'
        echo "$cmd"
        echo '```'
        echo
        echo "Everything on 127.0.0.1; servers pinned to CPU $server_cpu, load generators to CPU $client_cpu:"
        echo
        echo '```sh'
        echo "taskset -c $server_cpu $nginx_bin -p TMP/ -e TMP/error.log -c TMP/nginx.conf   # 1 worker"
        echo "taskset -c $server_cpu target/release/rpcbench-echo --threads 1 --tcp off --http 127.0.0.1:0"
        echo "taskset -c $server_cpu target/release/rpcbench-echo --threads 1 --http off --tcp 127.0.0.1:0"
        echo "taskset -c $client_cpu wrk -t1 -c$conns -d${secs}s --latency 'http://ADDR/echo?reply_len=$reply_len'"
        echo "taskset -c $client_cpu target/release/examples/tcp_load ADDR --conns $conns --duration $secs --size 64"
        echo '```'
        echo
        echo "The nginx config (written to a temp dir TMP by the script):"
        echo
        echo '```nginx'
        sed -e "s#$tmp/nginx#TMP#g" -e "s#$nginx_port#PORT#" "$tmp/nginx/nginx.conf"
        echo '```'
        echo
        echo '```text'
        cat "$out"
        echo '```'
    } >"$md"
    echo "wrote $md" >&2
fi

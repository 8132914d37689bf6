#!/usr/bin/env bash
# Is rpcbench's load generator the bottleneck? rpcbench against a peer load generator at
# the same concurrency, side by side in one run, against one rpcbench-echo --threads 1
# pinned to CPU 0, every client pinned to CPU 1:
#
#   http   rpcbench --transports http-keepalive -c C --duration Ss (the event loop)
#          against wrk -t1 -cC -dSs, both POSTing the same 64 bytes to /echo
#   tcp    rpcbench --transports tcp -c C --duration Ss (the event loop)
#          against examples/tcp_load.rs --conns C --duration S (one tokio thread)
#   c1     one call at a time: rpcbench --transports http-keepalive -c 1 --duration Ss
#          (the blocking engine) mean latency against 1/(requests/s) of wrk -t1 -c1 -dSs
#
# Each pair runs R rounds, the peer first in odd rounds and rpcbench first in even ones;
# each round prints both figures and the ratio, and the summary gives the median ratio.
# Beside the rates, each client's CPU time (user + system, GNU time) per call: on a
# machine shared with other work the rates swing by several times between rounds, the
# CPU a call costs the client much less, so its ratio says more about which client would
# be the bottleneck.
# Goals: calls/s ratio rpcbench/peer >= 1.0 for http and tcp, latency ratio <= 1.15 for
# c1. The script measures and reports; it judges nothing (its exit status says only
# whether every figure was measured). The machine's other tenants move these numbers:
# read the median, and the CPU-busy line, not one round.
#
# Usage: report/load.sh [options]
#   --rounds R      rounds per pair (default 3)
#   --seconds S     length of every measurement (default 5)
#   --conns C       connections of the http and tcp pairs (default 64)
#   --pairs LIST    comma-separated subset of http,tcp,c1 (default all)
#   --raw DIR       also keep every tool's raw output (and rpcbench's JSON) in DIR
#   --no-build      use the binaries already in target/release
#
# Debian packages it needs: wrk python3 util-linux (taskset) time, plus cargo.
#
# Exit status: 0 when every figure was measured, 1 when a tool or a call failed (rpcbench
# counts every call; one that is not ok fails the run), 2 bad usage.
#
# The server listens on 127.0.0.1 port 0 and prints the ports it got. Every process the
# script starts is killed by PID when it exits, also on failure.
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
}

die() {
    echo "load.sh: $*" >&2
    exit 1
}

rounds=3
secs=5
conns=64
pair_list=http,tcp,c1
raw_dir=""
build=1
while (($# > 0)); do
    case "$1" in
    --rounds | --seconds | --conns | --pairs | --raw)
        (($# >= 2)) || {
            echo "load.sh: $1 needs a value" >&2
            exit 2
        }
        case "$1" in
        --rounds) rounds=$2 ;;
        --seconds) secs=$2 ;;
        --conns) conns=$2 ;;
        --pairs) pair_list=$2 ;;
        --raw) raw_dir=$2 ;;
        esac
        shift 2
        ;;
    --no-build)
        build=0
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        echo "load.sh: unknown argument: $1" >&2
        usage >&2
        exit 2
        ;;
    esac
done
for n in "$rounds" "$secs" "$conns"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || {
        echo "load.sh: rounds, seconds and connections must be positive integers, not '$n'" >&2
        exit 2
    }
done
IFS=',' read -ra pairs <<<"$pair_list"
for p in "${pairs[@]}"; do
    case "$p" in
    http | tcp | c1) ;;
    *)
        echo "load.sh: unknown pair '$p' (use http, tcp, c1)" >&2
        exit 2
        ;;
    esac
done
(($(nproc) >= 2)) || die "needs at least 2 CPUs: the server on CPU 0, the clients on CPU 1"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=report/lib.sh
source "$root/report/lib.sh"
for tool in taskset wrk python3; do
    command -v "$tool" >/dev/null || die "$tool is required (apt-get install -y wrk python3 util-linux)"
done
[[ -x /usr/bin/time ]] || die "GNU time is required (apt-get install -y time)"
make_tmp load
[[ -z $raw_dir ]] || mkdir -p "$raw_dir"

# Prints a command as one shell-quoted line.
show() {
    local out="" word
    for word in "$@"; do
        if [[ $word =~ ^[A-Za-z0-9_./:=@%,+-]+$ ]]; then
            out+="$word "
        else
            out+="$(printf '%q' "$word") "
        fi
    done
    printf '%s\n' "${out% }"
}

# ---- build and server ---------------------------------------------------------------------
if ((build)); then
    echo "building (release) ..." >&2
    cargo build --release --quiet --bin rpcbench --bin rpcbench-echo --example tcp_load
fi
rb_bin="$root/target/release/rpcbench"
echo_bin="$root/target/release/rpcbench-echo"
load_bin="$root/target/release/examples/tcp_load"
for b in "$rb_bin" "$echo_bin" "$load_bin"; do
    [[ -x $b ]] || die "$b is missing: build it (or drop --no-build)"
done

echo_cmd=(taskset -c 0 "$echo_bin" --threads 1 --tcp 127.0.0.1:0 --http 127.0.0.1:0)
"${echo_cmd[@]}" >"$tmp/echo.out" 2>"$tmp/echo.out.err" &
echo_pid=$!
pids+=("$echo_pid")
tcp_addr=$(listen_addr "$tmp/echo.out" tcp "$echo_pid")
http_addr=$(listen_addr "$tmp/echo.out" http "$echo_pid")
echo_url="http://$http_addr/echo"

# The same request for both HTTP clients: POST /echo, 64 bytes, octet-stream.
wrk_lua="$tmp/post64.lua"
cat >"$wrk_lua" <<EOF
wrk.method = "POST"
wrk.body = string.rep("0", 64)
wrk.headers["Content-Type"] = "application/octet-stream"
EOF

# ---- header -------------------------------------------------------------------------------
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    commit="$commit (plus uncommitted changes)"
fi
cat <<EOF
# rpcbench load against peers ($(date -u '+%Y-%m-%d %H:%M UTC'))
command:    report/load.sh --rounds $rounds --seconds $secs --conns $conns --pairs $pair_list
commit:     $commit
kernel:     $(uname -sr)
cpu:        $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo) ($(nproc) CPUs online)
server:     $(show "${echo_cmd[@]}")
tools:      $(wrk -v 2>&1 | head -n 1 | sed 's/ Copyright.*//' || true); $("$rb_bin" --version)
load avg:   $(cut -d' ' -f1-3 /proc/loadavg) (before the runs)

EOF

# Busy (non-idle) jiffies per CPU, as "cpuN busy total" lines.
cpu_jiffies() {
    awk '$1 ~ /^cpu[0-9]+$/ { b = 0; for (i = 2; i <= NF; i++) b += $i; print $1, b - $5 - $6, b }' /proc/stat
}
cpu_before=$(cpu_jiffies)

# ---- measurements -------------------------------------------------------------------------
# Each prints one figure: calls (requests) per second, or a mean latency in µs.

keep() {
    [[ -z $raw_dir ]] || cp "$1" "$raw_dir/round${round}_$(basename "$1")"
}

# timed NAME CMD...: runs CMD under GNU time, its CPU seconds (user + system) left in
# $tmp/NAME.cpu.
timed() {
    local name=$1
    shift
    /usr/bin/time -f '%U %S' -o "$tmp/$name.cpu" "$@"
}

# cpu_per_call NAME CALLS: the CPU µs per call of the command timed as NAME, kept for the
# round line in $tmp/NAME.percall.
cpu_per_call() {
    awk -v n="$2" '{ printf "%.2f\n", ($1 + $2) / n * 1e6 }' "$tmp/$1.cpu" >"$tmp/$1.percall"
}

# rb_run NAME FIELD ARGS...: runs rpcbench on CPU 1 and prints FIELD of its run record
# (calls_per_s, or the latency mean), after checking that every call was ok.
rb_run() {
    local name=$1 field=$2 file="$tmp/rpcbench_$1.json"
    shift 2
    local cmd=(taskset -c 1 "$rb_bin" --target 127.0.0.1 --tcp-port "${tcp_addr##*:}"
        --http-port "${http_addr##*:}" --names ip "$@" --duration "${secs}s" --format json
        --no-progress)
    echo "  $(show "${cmd[@]}")" >&2
    timed "rb_$name" "${cmd[@]}" >"$file" || die "rpcbench failed (exit $?): $(show "${cmd[@]}")"
    keep "$file"
    python3 - "$file" "$field" "$tmp/rb_$name.calls" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
if run["ok"] != run["calls"] or run["calls"] == 0:
    sys.exit(f"rpcbench {run['transport']}: {run['ok']} ok of {run['calls']} calls")
open(sys.argv[3], "w").write(f"{run['calls']}\n")
print(run["calls_per_s"] if sys.argv[2] == "rate" else run["latency_us"]["mean"])
PY
    cpu_per_call "rb_$name" "$(cat "$tmp/rb_$name.calls")"
}

# wrk_run NAME CONNS: wrk -t1 on CPU 1; prints its requests per second.
wrk_run() {
    local file="$tmp/wrk_$1.out" rps
    local cmd=(taskset -c 1 wrk -t1 -c"$2" -d"${secs}s" -s "$wrk_lua" "$echo_url")
    echo "  $(show "${cmd[@]}")" >&2
    timed "peer_$1" "${cmd[@]}" >"$file" 2>&1 || die "wrk failed: $(cat "$file")"
    keep "$file"
    if grep -Eq 'Non-2xx|Socket errors' "$file"; then
        die "wrk saw errors: $(grep -E 'Non-2xx|Socket errors' "$file")"
    fi
    rps=$(awk '$1 == "Requests/sec:" { print $2 }' "$file")
    [[ -n $rps ]] || die "cannot parse wrk output:"$'\n'"$(cat "$file")"
    cpu_per_call "peer_$1" "$(awk '$2 == "requests" && $3 == "in" { print $1 }' "$file")"
    echo "$rps"
}

rb_http() { rb_run http rate --transports http-keepalive -c "$conns"; }
peer_http() { wrk_run http "$conns"; }
rb_tcp() { rb_run tcp rate --transports tcp -c "$conns"; }
peer_tcp() {
    local file="$tmp/tcp_load.out" rate
    local cmd=(taskset -c 1 "$load_bin" "$tcp_addr" --conns "$conns" --duration "$secs")
    echo "  $(show "${cmd[@]}")" >&2
    timed peer_tcp "${cmd[@]}" >"$file" 2>&1 || die "tcp_load failed: $(cat "$file")"
    keep "$file"
    rate=$(awk '$1 == "calls/s" { print $2 }' "$file")
    [[ -n $rate ]] || die "cannot parse tcp_load output:"$'\n'"$(cat "$file")"
    cpu_per_call peer_tcp "$(awk '$1 == "conns" { print $8 }' "$file")"
    echo "$rate"
}
rb_c1() { rb_run c1 latency --transports http-keepalive -c 1; }
peer_c1() { awk -v r="$(wrk_run c1 1)" 'BEGIN { printf "%.3f\n", 1e6 / r }'; }

# What each pair compares, in what unit, and which way the ratio should go.
declare -A title=(
    [http]="http-keepalive -c $conns vs wrk -t1 -c$conns (calls/s)"
    [tcp]="tcp -c $conns vs tcp_load --conns $conns (calls/s)"
    [c1]="http-keepalive -c 1 vs wrk -t1 -c1 (mean µs; wrk: 1/rps)"
)
declare -A goal=([http]=">= 1.00" [tcp]=">= 1.00" [c1]="<= 1.15")
declare -A ratios=() cpu_ratios=()
for ((round = 1; round <= rounds; round++)); do
    for p in "${pairs[@]}"; do
        echo "round $round: ${title[$p]} ..." >&2
        if ((round % 2)); then
            peer=$("peer_$p")
            rb=$("rb_$p")
        else
            rb=$("rb_$p")
            peer=$("peer_$p")
        fi
        ratio=$(awk -v a="$rb" -v b="$peer" 'BEGIN { printf "%.3f", a / b }')
        ratios[$p]+=" $ratio"
        rb_cpu=$(cat "$tmp/rb_$p.percall")
        peer_cpu=$(cat "$tmp/peer_$p.percall")
        cpu_ratio=$(awk -v a="$rb_cpu" -v b="$peer_cpu" 'BEGIN { printf "%.3f", a / b }')
        cpu_ratios[$p]+=" $cpu_ratio"
        printf 'round %d  %-4s rpcbench %10.1f  peer %10.1f  ratio %s   cpu µs/call %6.2f vs %6.2f  ratio %s\n' \
            "$round" "$p" "$rb" "$peer" "$ratio" "$rb_cpu" "$peer_cpu" "$cpu_ratio"
    done
done

# The median of a pair's round ratios: one round disturbed by the host does not decide it.
med() {
    local -a vals
    read -ra vals <<<"$1"
    printf '%s\n' "${vals[@]}" | sort -g | awk '{ v[NR] = $1 }
        END { printf "%.3f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
echo
printf '%-4s  %-58s %8s  %-8s %9s  %s\n' pair "what" median goal "cpu/call" "rounds"
for p in "${pairs[@]}"; do
    printf '%-4s  %-58s %8s  %-8s %9s %s\n' "$p" "${title[$p]}" "$(med "${ratios[$p]}")" \
        "${goal[$p]}" "$(med "${cpu_ratios[$p]}")" "${ratios[$p]}"
done
echo
echo "ratio = rpcbench / peer: calls/s for http and tcp (higher is better), mean latency for"
echo "c1 (lower is better); the median over $rounds round(s), alternating which side goes first."
echo "cpu/call = the median of rpcbench's client CPU per call over the peer's (lower is better;"
echo "whole processes, start-up and warm-up included)."
echo "load avg:   $(cut -d' ' -f1-3 /proc/loadavg) (after the runs)"
# CPU 0 runs the server and CPU 1 the clients: either far below 100% while a pair ran at
# full speed means something else (another tenant, a hypervisor) held it back.
echo "cpu busy:   $(join -j 1 <(echo "$cpu_before") <(cpu_jiffies) |
    awk '{ printf "%s%s %.0f%%", sep, $1, ($4 - $2) / ($5 - $3) * 100; sep = ", " }') (during the runs)"

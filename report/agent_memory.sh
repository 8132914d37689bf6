#!/usr/bin/env bash
# Memory and CPU of one `rpcbench agent` probing many peers: RSS of the agent process, its
# threads and open files, sampled over a run, and what its /metrics counted.
#
# The peers are loopback: LIVE peers spread over 4 rpcbench-echo servers (127.0.0.1, one
# port pair each, many peer names per server), and DEAD peers on ports nobody listens on
# (connect refused at once). Each peer is probed over the default transports
# (tcp, http-keepalive, http-fresh) at --interval 1s.
#
# Usage: report/agent_memory.sh [--write]
#   --write   also write the output to report/agent_memory.md
# Environment:
#   LIVE      peers answered by an echo server (default 900)
#   DEAD      peers on closed ports (default 100)
#   SECONDS_RUN  seconds the agent runs (default 60)
#   CPUS      taskset CPU list for the agent (default 0); the echo servers run on the rest
#   CARGO_TARGET_DIR  honoured like cargo does (default: target/ in the repository)
#
# Traffic stays on 127.0.0.1. Every process the script starts is killed by PID when it
# exits, also on failure.
set -euo pipefail

write_md=0
for arg in "$@"; do
    case "$arg" in
    --write) write_md=1 ;;
    -h | --help)
        sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "agent_memory.sh: unknown argument: $arg" >&2
        exit 2
        ;;
    esac
done
live=${LIVE:-900}
dead=${DEAD:-100}
run_s=${SECONDS_RUN:-60}
cpus=${CPUS:-0}
for v in "$live" "$dead" "$run_s"; do
    [[ $v =~ ^[0-9]+$ ]] || {
        echo "agent_memory.sh: LIVE, DEAD and SECONDS_RUN must be whole numbers" >&2
        exit 2
    }
done

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# shellcheck source=report/lib.sh
source "$root/report/lib.sh"
die() {
    echo "agent_memory.sh: $*" >&2
    exit 1
}
target=${CARGO_TARGET_DIR:-$root/target}
cargo build --release --quiet --bin rpcbench --bin rpcbench-echo || die "build failed"
ulimit -n "$(ulimit -Hn)"

make_tmp agent_memory
out="$tmp/output.txt"
say() {
    printf '%s\n' "$@" | tee -a "$out"
}

# Four echo servers: connections spread over them, and over their ports.
servers=()
for i in 1 2 3 4; do
    "$target/release/rpcbench-echo" --tcp 127.0.0.1:0 --http 127.0.0.1:0 \
        >"$tmp/echo$i.out" 2>"$tmp/echo$i.out.err" &
    pids+=($!)
    t=$(listen_addr "$tmp/echo$i.out" tcp $!)
    h=$(listen_addr "$tmp/echo$i.out" http $!)
    servers+=("${t##*:} ${h##*:}")
done
{
    for ((i = 0; i < live; i++)); do
        read -r tp hp <<<"${servers[i % 4]}"
        printf -- '- name: live-%04d\n  address: 127.0.0.1\n  tcp_port: %s\n  http_port: %s\n  labels: {zone: z%d}\n' \
            "$i" "$tp" "$hp" $((i % 4))
    done
    for ((i = 0; i < dead; i++)); do
        # Ports below 1024 that nothing on this machine listens on: refused at once.
        printf -- '- name: dead-%04d\n  address: 127.0.0.1\n  tcp_port: 9\n  http_port: 19\n' "$i"
    done
} >"$tmp/peers.yaml"

taskset -c "$cpus" "$target/release/rpcbench" agent --peers "$tmp/peers.yaml" \
    --listen 127.0.0.1:0 >"$tmp/agent.out" 2>"$tmp/agent.out.err" &
agent=$!
pids+=("$agent")
maddr=$(listen_addr "$tmp/agent.out" metrics "$agent")
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$agent/status"; }
threads() { awk '/^Threads/ { print $2 }' "/proc/$agent/status"; }
fds() { find "/proc/$agent/fd" -mindepth 1 | wc -l; }
cpu() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$agent/stat"; }

say "# rpcbench agent: memory at $((live + dead)) peers" "" \
    "commit $(git rev-parse --short HEAD), $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) vCPUs;" \
    "agent pinned with taskset -c $cpus, echo servers unpinned;" \
    "$live live peers over 4 rpcbench-echo on 127.0.0.1, $dead dead (connect refused), transports tcp, http-keepalive, http-fresh, --interval 1s." \
    "" "| t (s) | RSS (MiB) | threads | open fds | CPU (s) | probes counted |" "| --- | --- | --- | --- | --- | --- |"
step=$((run_s / 6))
((step >= 1)) || step=1
for ((t = step; t <= run_s; t += step)); do
    sleep "$step"
    calls=$(curl -s "http://$maddr/metrics" | awk '/^rpcbench_probe_calls_total/ { s += $NF } END { print s + 0 }')
    say "| $t | $(awk -v k="$(rss)" 'BEGIN { printf "%.1f", k / 1024 }') | $(threads) | $(fds) | $(cpu) | $calls |"
done
metrics=$(curl -s "http://$maddr/metrics")
say "" "Probes by outcome at the end (all peers, all transports):" ""
printf '%s\n' "$metrics" | awk '/^rpcbench_probe_calls_total/ { match($0, /outcome="[^"]*"/); o = substr($0, RSTART + 9, RLENGTH - 10); s[o] += $NF }
    END { for (o in s) if (s[o] > 0) printf "- %s: %d\n", o, s[o] }' | sort | tee -a "$out"
say "" "Expected: about $(((live + dead) * 3)) probes a second, every one counted; dead peers' probes are connect_refused." \
    "Skipped (over --max-in-flight): $(printf '%s\n' "$metrics" | awk '/^rpcbench_agent_probes_skipped_total/ { print $NF }')" \
    "/metrics size: $(printf '%s\n' "$metrics" | wc -c) bytes"
kill -TERM "$agent"
wait "$agent" && say "agent exit status after SIGTERM: 0" || say "agent exit status after SIGTERM: $?"
if ((write_md)); then
    cp "$out" "$root/report/agent_memory.md"
fi

#!/usr/bin/env bash
# Two-host test bed on one Linux machine, and the comparison report made from it.
#
# Creates two network namespaces, rb-srv (10.77.0.1) and rb-cli (10.77.0.2), joined by a veth
# pair. rb-cli gets its own resolv.conf (/etc/netns/rb-cli/resolv.conf) pointing at
# rpcbench-echo's DNS responder in rb-srv on port 53. rpcbench-echo runs in rb-srv (tcp,
# http, dns); rpcbench runs in rb-cli against the server's name and its IP, every transport
# under every address mode. Then the truth checks: a server delay, a slow DNS responder, and
# established tools measuring the same paths (report/peers.sh). Finally `rpcbench report`.
#
# Traffic goes only to addresses inside the namespaces this script makes. Everything is torn
# down on exit, also on failure or Ctrl-C; running it twice in a row works.
#
# Needs root, iproute2 and util-linux (taskset); the peers need sockperf, wrk, apache2-utils
# and curl (all from Debian main; .ci/run installs them).
#
# Usage: report/testbed.sh [--calls N] [--warmup N] [--payload BYTES] [--dns-delay DUR]
#                          [--delay-us US] [--pin same|cross|none] [--out DIR] [--no-peers]
#                          [--rounds R] [--peer-calls N] [--peer-rounds R] [--peer-seconds S]
#
# The delays default to 20 ms, server and DNS alike, so that the margin of their checks (5%
# of the delay plus the reference run's noise, src/site/mod.rs) is physics: 1 ms, far above
# a timer's overshoot and far below a delay paid twice or not at all. The paced reference
# of the server delay then runs at 50 calls/s.
#
# The peers run R rounds (default 3) of N calls each (rpcbench -n N, ab -n N; sockperf and
# wrk S seconds, default 5); `rpcbench report` takes the median of each side's round means,
# so one round disturbed by the host does not decide. Peer ratios are benchmarks: the
# script's exit status is the report's, which only the truth checks set.
set -euo pipefail

CALLS=1000
WARMUP=100
PAYLOAD=64
DNS_DELAY=20ms
DELAY_US=20000
PIN=same
ROUNDS=1
OUT=report
PEERS=1
PEER_CALLS=20000
PEER_ROUNDS=3
PEER_SECONDS=5
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
        --calls) CALLS=$2; shift 2 ;;
        --warmup) WARMUP=$2; shift 2 ;;
        --payload) PAYLOAD=$2; shift 2 ;;
        --dns-delay) DNS_DELAY=$2; shift 2 ;;
        --delay-us) DELAY_US=$2; shift 2 ;;
        --pin) PIN=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --no-peers) PEERS=0; shift ;;
        --peer-calls) PEER_CALLS=$2; shift 2 ;;
        --peer-rounds) PEER_ROUNDS=$2; shift 2 ;;
        --peer-seconds) PEER_SECONDS=$2; shift 2 ;;
        -h|--help) usage ;;
        *) echo "testbed.sh: unknown option $1" >&2; usage ;;
    esac
done
case "$PIN" in
    same) SRV_PIN=(taskset -c 0); CLI_PIN=(taskset -c 0); PLACEMENT="same core (CPU 0)" ;;
    cross) SRV_PIN=(taskset -c 0); CLI_PIN=(taskset -c 1); PLACEMENT="different cores (server CPU 0, client CPU 1)" ;;
    none) SRV_PIN=(); CLI_PIN=(); PLACEMENT="not pinned" ;;
    *) echo "testbed.sh: --pin takes same, cross or none" >&2; exit 2 ;;
esac
case "$DELAY_US" in
    ''|*[!0-9]*|0) echo "testbed.sh: --delay-us takes a whole number of microseconds above 0" >&2; exit 2 ;;
esac
if [ "$(id -u)" != 0 ]; then
    echo "testbed.sh: needs root (network namespaces)" >&2
    exit 2
fi

HERE=$(cd "$(dirname "$0")/.." && pwd)
# The binaries: RPCBENCH_BIN_DIR when set (the tests pass the ones they were built with).
BIN=${RPCBENCH_BIN_DIR:-$HERE/target/release}
SRV=rb-srv
CLI=rb-cli
SRV_IP=10.77.0.1
CLI_IP=10.77.0.2
NAME=echo.rpcbench.test
TCP_PORT=7001
HTTP_PORT=7080
UDP_PORT=7002
WORK=$(mktemp -d /tmp/rb-testbed.XXXXXX)
SERVER_PID=""

in_cli() { ip netns exec "$CLI" "$@"; }

stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
        SERVER_PID=""
    fi
}

teardown() {
    stop_server
    # Deleting a namespace removes the veth end inside it, and with it the pair.
    ip netns del "$SRV" 2>/dev/null || true
    ip netns del "$CLI" 2>/dev/null || true
    rm -rf "/etc/netns/$CLI"
    rm -rf "$WORK"
}
trap teardown EXIT
trap 'exit 130' INT TERM

# A previous run killed hard may have left its namespaces: start clean.
teardown
WORK=$(mktemp -d /tmp/rb-testbed.XXXXXX)

if [ ! -x "$BIN/rpcbench" ] || [ ! -x "$BIN/rpcbench-echo" ]; then
    (cd "$HERE" && cargo build --release --locked --quiet)
fi

ip netns add "$SRV"
ip netns add "$CLI"
ip link add rb-veth-s type veth peer name rb-veth-c
ip link set rb-veth-s netns "$SRV"
ip link set rb-veth-c netns "$CLI"
ip -n "$SRV" addr add "$SRV_IP/24" dev rb-veth-s
ip -n "$CLI" addr add "$CLI_IP/24" dev rb-veth-c
for ns in "$SRV" "$CLI"; do
    ip -n "$ns" link set lo up
done
ip -n "$SRV" link set rb-veth-s up
ip -n "$CLI" link set rb-veth-c up
# Tens of thousands of client-closed connections (tcp-connect, the peers) would exhaust the
# ephemeral ports within TIME_WAIT; loopback reuses them by default, a veth does not.
ip netns exec "$CLI" sysctl -qw net.ipv4.tcp_tw_reuse=1
mkdir -p "/etc/netns/$CLI"
# `ip netns exec` bind-mounts this over /etc/resolv.conf inside rb-cli: getaddrinfo and
# hickory's system configuration both ask our responder, and nothing else.
printf 'nameserver %s\noptions timeout:2 attempts:1\n' "$SRV_IP" >"/etc/netns/$CLI/resolv.conf"

start_server() { # start_server EXTRA-ARGS...: rpcbench-echo in rb-srv, pinned
    stop_server
    # Not through in_srv: `$!` must be the server itself (ip netns exec and taskset both
    # exec into it) so that it can be stopped by PID.
    ip netns exec "$SRV" "${SRV_PIN[@]}" "$BIN/rpcbench-echo" --threads 1 --tcp "$SRV_IP:$TCP_PORT" --http "$SRV_IP:$HTTP_PORT" \
        --udp "$SRV_IP:$UDP_PORT" --dns "$SRV_IP:53" --dns-name "$NAME" "$@" >"$WORK/server.out" 2>"$WORK/server.err" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        [ "$(grep -c '^listening' "$WORK/server.out" 2>/dev/null || true)" -ge 3 ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.05
    done
    echo "testbed.sh: rpcbench-echo did not start:" >&2
    cat "$WORK/server.err" >&2
    return 1
}

bench() { # bench OUT.json ARGS...: rpcbench in rb-cli against the server's name
    local out=$1
    shift
    in_cli "${CLI_PIN[@]}" "$BIN/rpcbench" --target "$NAME" \
        --tcp-port "$TCP_PORT" --http-port "$HTTP_PORT" --udp-port "$UDP_PORT" -n "$CALLS" --warmup "$WARMUP" --payload "$PAYLOAD" \
        --rounds "$ROUNDS" --timeout 5s --format csv --out "$out" "$@" >/dev/null
}

mkdir -p "$OUT"
echo "test bed: $SRV $SRV_IP <-veth-> $CLI $CLI_IP; placement: $PLACEMENT; $CALLS calls per run"

# 1. The baseline: every transport under every address mode, by name and by IP.
start_server
bench "$OUT/testbed-base.json" --names ip,system,cached,uncached
echo "baseline done"

# 2. Truth check: a server delay shows up in every transport, once. Its reference is the
# same calls without a delay, started DELAY_US apart (--rate): a client waiting DELAY_US for
# each reply sits idle that long, and after an idle spell a small VM runs the next call
# cold (caches, a halted vCPU); the paced reference pays that too, so the difference is
# the delay alone. The report shows the rise over the back-to-back baseline as well.
bench "$OUT/testbed-delay.json" --names ip --delay-us "$DELAY_US"
bench "$OUT/testbed-paced.json" --names ip --rate "$(awk -v d="$DELAY_US" 'BEGIN { printf "%.6f", 1e6 / d }')"
echo "server delay ($DELAY_US us) and its paced reference done"

# 3. Truth check: a slow resolver costs fresh connections under uncached, and nothing else.
start_server --dns-delay "$DNS_DELAY"
bench "$OUT/testbed-dns-delay.json" --names ip,cached,uncached
echo "DNS delay ($DNS_DELAY) done"
stop_server

# 4. Peers on the same hosts and placement.
PEER_ARGS=()
if [ "$PEERS" = 1 ]; then
    "$HERE/report/peers.sh" --no-build --pin "$PIN" --server-ip "$SRV_IP" --calls "$PEER_CALLS" \
        --ab-requests "$PEER_CALLS" --rounds "$PEER_ROUNDS" --seconds "$PEER_SECONDS" \
        --server-exec "ip netns exec $SRV" --client-exec "ip netns exec $CLI" \
        --json "$OUT/testbed-peers.json" | tee "$WORK/peers.txt"
    PEER_ARGS=(--peers "$OUT/testbed-peers.json")
fi

# 5. The report. Its exit status says whether every truth check passed (the peer ratios
# beside them are benchmarks and do not count).
status=0
"$BIN/rpcbench" report "$OUT/testbed-base.json" "$OUT/testbed-delay.json" \
    "$OUT/testbed-paced.json" "$OUT/testbed-dns-delay.json" "${PEER_ARGS[@]}" --out "$OUT" \
    || status=$?
echo "report written to $OUT/README.md and $OUT/index.html (truth checks: $([ $status = 0 ] && echo pass || echo FAIL))"
exit "$status"

#!/usr/bin/env bash
# Two-host test bed on one Linux machine, and the comparison report made from it.
#
# Creates two network namespaces, rb-srv (10.77.0.1) and rb-cli (10.77.0.2), joined by a veth
# pair. rb-cli gets its own resolv.conf (/etc/netns/rb-cli/resolv.conf) pointing at
# rpcbench-echo's DNS responder in rb-srv on port 53. rpcbench-echo runs in rb-srv (tcp,
# http, udp, quic, dns); rpcbench runs in rb-cli against the server's name and its IP, every transport
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
#                          [--rtt DUR] [--jitter DUR] [--loss PCT] [--rate RATE]
#                          [--link netem|userspace|auto]
#
# A real network between the hosts: --rtt 2ms (half each way), --jitter 100us, --loss 0.5%,
# --rate 100mbit. With any of them the hosts are joined by a link with those settings
# instead of a bare veth: --link netem puts `tc qdisc ... netem` on both veth ends,
# --link userspace replaces the veth with rpcbench-link (TUN devices, same addresses, run
# under `chrt -f 50` when chrt is there), --link auto (the default) takes netem when the
# kernel has it and rpcbench-link otherwise. The report states the link and its settings
# (testbed-link.txt beside it holds the link's own counts), and every run records the RTT
# (rpcbench --link-rtt, `link_rtt_us` in the JSON). With --loss, lost calls do not
# stop the script (rpcbench runs with --max-lost).
#
# The delays default to 20 ms, server and DNS alike, so that the margin of their checks (5%
# of the delay plus the reference run's noise, crates/analysis/src/analysis/truth.rs) is physics: 1 ms, far above
# a timer's overshoot and far below a delay paid twice or not at all. The paced reference
# of the server delay then runs at 50 calls/s.
#
# rpcbench's own runs split their N calls into --rounds R (default 3, rpcbench's own
# default) interleaved rounds, the order reversed every other round: the host drifts over a
# run of every transport and mode (here a pinned same-core curl-reuse moved its median by
# 9% between two modes run back to back), and interleaved rounds meet that drift in every
# mode alike, and count it in each figure's noise. With one round the physics checks
# compared figures minutes apart, and failed on the host's drift.
#
# The peers run --peer-rounds R (default 3) of N calls each (rpcbench -n N, ab -n N; sockperf and
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
ROUNDS=3
OUT=report
PEERS=1
PEER_CALLS=20000
PEER_ROUNDS=3
PEER_SECONDS=5
RTT=""
JITTER=""
LOSS=""
RATE=""
LINK=auto
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
        --rtt) RTT=$2; shift 2 ;;
        --jitter) JITTER=$2; shift 2 ;;
        --loss) LOSS=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --link) LINK=$2; shift 2 ;;
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
case "$LINK" in
    netem|userspace|auto) ;;
    *) echo "testbed.sh: --link takes netem, userspace or auto" >&2; exit 2 ;;
esac
# to_us DUR: a duration (ns, us, ms, s) in whole microseconds, or nothing when it is not one.
to_us() {
    awk -v d="$1" 'BEGIN {
        if (match(d, /^[0-9]+(\.[0-9]+)?/) == 0) exit
        n = substr(d, 1, RLENGTH); u = substr(d, RLENGTH + 1)
        if (u == "ns") f = 0.001; else if (u == "us") f = 1; else if (u == "ms") f = 1000
        else if (u == "s" || u == "") f = 1000000; else exit
        printf "%d", n * f + 0.5 }'
}
RTT_US=0
if [ -n "$RTT" ]; then
    RTT_US=$(to_us "$RTT")
    [ -n "$RTT_US" ] || { echo "testbed.sh: --rtt takes a duration (e.g. 2ms), not $RTT" >&2; exit 2; }
fi
JITTER_US=0
if [ -n "$JITTER" ]; then
    JITTER_US=$(to_us "$JITTER")
    [ -n "$JITTER_US" ] || { echo "testbed.sh: --jitter takes a duration (e.g. 100us), not $JITTER" >&2; exit 2; }
fi
LOSS_PCT=${LOSS%\%}
if [ -n "$LOSS" ] && ! awk -v l="$LOSS_PCT" 'BEGIN { exit !(l ~ /^[0-9]+(\.[0-9]+)?$/ && l <= 100) }'; then
    echo "testbed.sh: --loss takes a percentage from 0 to 100 (e.g. 0.5%), not $LOSS" >&2
    exit 2
fi
if [ -n "$RATE" ] && ! printf '%s' "$RATE" | grep -Eq '^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$' ||
    printf '%s' "$RATE" | grep -Eq '^0+(\.0+)?[a-z]'; then
    echo "testbed.sh: --rate takes a rate above 0 with a unit (e.g. 100mbit), not $RATE" >&2
    exit 2
fi
# Whether the hosts get a link at all: any impairment asks for one.
IMPAIRED=0
if [ "$RTT_US" != 0 ] || [ "$JITTER_US" != 0 ] || [ -n "$RATE" ] ||
    { [ -n "$LOSS" ] && [ "$(awk -v l="$LOSS_PCT" 'BEGIN { print (l > 0) }')" = 1 ]; }; then
    IMPAIRED=1
fi
# One way is half the round trip: both directions pay it.
ONE_WAY_US=$((RTT_US / 2))
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
QUIC_PORT=7443
WORK=$(mktemp -d /tmp/rb-testbed.XXXXXX)
SERVER_PID=""
LINK_PID=""
LINK_USED="veth (no link settings)"

in_cli() { ip netns exec "$CLI" "$@"; }

# stop_pid PID [SIGNAL]: signals a process this script started until it is gone, then reaps
# it. Once is not always enough: a process signalled between bash's fork and its exec
# still has bash's handlers, which take the signal and lose it at the exec.
stop_pid() {
    local pid=$1 sig=${2:-TERM}
    for _ in $(seq 100); do
        kill -"$sig" "$pid" 2>/dev/null || break
        for _ in $(seq 10); do
            running "$pid" || break 2
            sleep 0.05
        done
    done
    wait "$pid" 2>/dev/null || true
}
# running PID: the process exists and has not exited (a zombie has).
running() {
    local stat
    stat=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
    [[ $stat != Z* ]]
}

stop_server() {
    if [ -n "$SERVER_PID" ]; then
        stop_pid "$SERVER_PID"
        SERVER_PID=""
    fi
}

stop_link() {
    if [ -n "$LINK_PID" ]; then
        # SIGTERM: the link prints its counts and exits; its TUN devices go with it.
        stop_pid "$LINK_PID" TERM
        LINK_PID=""
    fi
}

teardown() {
    stop_server
    stop_link
    # Deleting a namespace removes the veth end inside it, and with it the pair.
    ip netns del "$SRV" 2>/dev/null || true
    ip netns del "$CLI" 2>/dev/null || true
    rm -rf "/etc/netns/$CLI"
    rm -rf "$WORK"
}
# A second Ctrl-C must not cut the cleanup short.
trap "trap '' INT TERM; teardown" EXIT
trap 'exit 130' INT TERM
# A signal between starting a process in the background and noting its PID would leave it
# running, unknown to the trap: hold INT and TERM across the two, and act on them after.
HELD=""
hold_signals() { trap 'HELD=1' INT TERM; }
release_signals() {
    trap 'exit 130' INT TERM
    [ -z "$HELD" ] || exit 130
}

# A previous run killed hard may have left its namespaces: start clean.
teardown
WORK=$(mktemp -d /tmp/rb-testbed.XXXXXX)

if [ ! -x "$BIN/rpcbench" ] || [ ! -x "$BIN/rpcbench-echo" ]; then
    (cd "$HERE" && cargo build --release --locked --quiet)
fi

ip netns add "$SRV"
ip netns add "$CLI"
for ns in "$SRV" "$CLI"; do
    ip -n "$ns" link set lo up
done
veth_up() {
    ip link add rb-veth-s type veth peer name rb-veth-c
    ip link set rb-veth-s netns "$SRV"
    ip link set rb-veth-c netns "$CLI"
    ip -n "$SRV" addr add "$SRV_IP/24" dev rb-veth-s
    ip -n "$CLI" addr add "$CLI_IP/24" dev rb-veth-c
    ip -n "$SRV" link set rb-veth-s up
    ip -n "$CLI" link set rb-veth-c up
}
# netem_on: netem with the settings on both veth ends; fails (changing nothing) without it.
netem_on() {
    local args=(delay "${ONE_WAY_US}us")
    [ "$JITTER_US" = 0 ] || args+=("${JITTER_US}us" distribution normal)
    [ -z "$LOSS" ] || args+=(loss "${LOSS_PCT}%")
    [ -z "$RATE" ] || args+=(rate "$RATE")
    ip netns exec "$SRV" tc qdisc add dev rb-veth-s root netem "${args[@]}" 2>/dev/null || return 1
    ip netns exec "$CLI" tc qdisc add dev rb-veth-c root netem "${args[@]}"
    LINK_USED="netem ($(ip netns exec "$SRV" tc qdisc show dev rb-veth-s | head -1))"
}
userspace_on() {
    local args=(--a "$SRV=$SRV_IP/24" --b "$CLI=$CLI_IP/24" --delay "${ONE_WAY_US}us" --jitter "${JITTER_US}us")
    [ -z "$LOSS" ] || args+=(--loss "$LOSS_PCT")
    [ -z "$RATE" ] || args+=(--rate "$RATE")
    local rt=()
    # A release on time needs a CPU at once: real-time priority, where the system allows it.
    if command -v chrt >/dev/null && chrt -f 50 true 2>/dev/null; then rt=(chrt -f 50); fi
    hold_signals
    "${rt[@]}" "$BIN/rpcbench-link" "${args[@]}" >"$WORK/link.out" 2>"$WORK/link.err" &
    LINK_PID=$!
    release_signals
    for _ in $(seq 100); do
        grep -q '^rpcbench-link: up' "$WORK/link.out" 2>/dev/null && break
        kill -0 "$LINK_PID" 2>/dev/null || { wait "$LINK_PID" || true; LINK_PID=""; break; }
        sleep 0.05
    done
    if ! grep -q '^rpcbench-link: up' "$WORK/link.out" 2>/dev/null; then
        echo "testbed.sh: rpcbench-link did not start: $(cat "$WORK/link.err")" >&2
        return 1
    fi
    LINK_USED="userspace rpcbench-link ($(sed -n 's/^rpcbench-link: up .*; //p' "$WORK/link.out")${rt:+, under chrt -f 50})"
}
if [ "$IMPAIRED" = 0 ]; then
    veth_up
elif [ "$LINK" = userspace ]; then
    userspace_on
else
    veth_up
    if ! netem_on; then
        if [ "$LINK" = netem ]; then
            echo "testbed.sh: --link netem: this kernel has no netem (tc qdisc add ... netem failed); try --link userspace" >&2
            exit 1
        fi
        # auto: the veth makes way for the userspace link on the same addresses.
        ip -n "$SRV" link del rb-veth-s
        userspace_on
    fi
fi
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
    hold_signals
    ip netns exec "$SRV" "${SRV_PIN[@]}" "$BIN/rpcbench-echo" --threads 1 --tcp "$SRV_IP:$TCP_PORT" --http "$SRV_IP:$HTTP_PORT" \
        --udp "$SRV_IP:$UDP_PORT" --quic "$SRV_IP:$QUIC_PORT" --ca-out "$WORK/ca.pem" --dns "$SRV_IP:53" --dns-name "$NAME" "$@" \
        >"$WORK/server.out" 2>"$WORK/server.err" &
    SERVER_PID=$!
    release_signals
    for _ in $(seq 100); do
        # The CA's line comes once every listener is up (and its file written).
        grep -q '^ca ' "$WORK/server.out" 2>/dev/null && return 0
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
        --tcp-port "$TCP_PORT" --http-port "$HTTP_PORT" --udp-port "$UDP_PORT" --quic-port "$QUIC_PORT" --ca "$WORK/ca.pem" -n "$CALLS" --warmup "$WARMUP" --payload "$PAYLOAD" \
        --rounds "$ROUNDS" --timeout 5s --format csv --out "$out" "${BENCH_EXTRA[@]}" "$@" >/dev/null
}

mkdir -p "$OUT"
echo "test bed: $SRV $SRV_IP <-> $CLI $CLI_IP; link: $LINK_USED; placement: $PLACEMENT; $CALLS calls per run"
# With loss on the link a call may be lost; it is counted, and must not stop the script.
# The preflight is skipped then: a lost probe would read as a firewall and stop the run.
BENCH_EXTRA=()
[ -z "$LOSS" ] || BENCH_EXTRA=(--max-lost 1000000000 --no-preflight)
# Across a link every run records the RTT injected (link_rtt_us), for the round-trip
# model of `rpcbench report` (report/link_rtt.sh sweeps several RTTs and fits k).
[ "$IMPAIRED" = 0 ] || BENCH_EXTRA+=(--link-rtt "${RTT_US}us")

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
# The link used, its settings and (userspace) its own counts, beside the report and in it.
stop_link
{
    echo "link: $LINK_USED"
    [ ! -s "$WORK/link.out" ] || grep '^rpcbench-link: stats' "$WORK/link.out" || true
} >"$OUT/testbed-link.txt"
if [ -f "$OUT/README.md" ]; then
    {
        echo
        echo "## Link"
        echo
        echo "The test bed's hosts were joined by: $LINK_USED."
        echo
        sed -n 's/^rpcbench-link: stats /- /p' "$OUT/testbed-link.txt"
    } >>"$OUT/README.md"
fi
echo "report written to $OUT/README.md and $OUT/index.html (truth checks: $([ $status = 0 ] && echo pass || echo FAIL))"
exit "$status"

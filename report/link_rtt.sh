#!/usr/bin/env bash
# Round trips per call, fitted: every networked transport across rpcbench-link at each
# RTT of a list (default 0,20ms,40ms; half each way), mode ip, rpcbench --link-rtt at each,
# then `rpcbench report` over the runs, which fits k and c per transport (least squares),
# checks each mean against c + k x RTT and draws rtt.svg. The QUIC transports run a second
# time in tls13-0rtt (the request in early data: k 1 for a new connection). Needs root.
#
#   sudo report/link_rtt.sh [--rtts 0,2ms,10ms] [--calls 200] [--out report/link_rtt]
#
# Both sides on CPU 0 (taskset -c 0) under chrt -f 40 where allowed, the link under
# chrt -f 50: on a loaded host a side waiting for a CPU measures the host, not the link.
set -u
RTTS=0,20ms,40ms; CALLS=200; OUT=report/link_rtt
while [ $# -gt 0 ]; do
  case "$1" in
    --rtts) RTTS=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "link_rtt.sh: unknown argument $1 (--rtts LIST, --calls N, --out DIR)" >&2; exit 2 ;;
  esac
done
LP=""; SP=""
# The echo server's generated CA, for the QUIC transports: a file of this run's own.
CA=$(mktemp /tmp/rbk-ca.XXXXXX)
# Stops what this script started (by PID), removes its namespaces and the CA, on any exit.
trap '[ -z "$SP" ] || kill $SP 2>/dev/null; [ -z "$LP" ] || kill -TERM $LP 2>/dev/null; wait; ip netns del rbk-s 2>/dev/null; ip netns del rbk-c 2>/dev/null; rm -f "$CA"' EXIT
trap 'exit 130' INT TERM
B=${RPCBENCH_BIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)/target/release}
RT=(); LRT=()
if command -v chrt >/dev/null && chrt -f 50 true 2>/dev/null; then RT=(chrt -f 40); LRT=(chrt -f 50); fi
mkdir -p "$OUT"
ip netns add rbk-s; ip netns add rbk-c
for ns in rbk-s rbk-c; do ip -n $ns link set lo up; done
# Microseconds of a duration: 0, 250us, 2ms, 1.5ms, 1s.
us() { awk -v d="$1" 'BEGIN { n = d + 0; u = d; sub(/^[0-9.]+/, "", u);
  f = (u == "ms") ? 1000 : (u == "s") ? 1000000 : 1; printf "%d", n * f }'; }
FILES=()
for rtt in ${RTTS//,/ }; do
  one_way=$(( $(us "$rtt") / 2 ))us
  "${LRT[@]}" "$B/rpcbench-link" --a rbk-s=10.85.0.1/24 --b rbk-c=10.85.0.2/24 --delay "$one_way" > "$OUT/link-$rtt.txt" 2>&1 &
  LP=$!; sleep 0.5
  ip netns exec rbk-s "${RT[@]}" taskset -c 0 "$B/rpcbench-echo" --threads 1 --tcp 10.85.0.1:7001 --http 10.85.0.1:7080 --udp 10.85.0.1:7002 \
    --quic 10.85.0.1:7443 --ca-out "$CA" > /dev/null 2>&1 &
  SP=$!; sleep 0.5
  ip netns exec rbk-c "${RT[@]}" taskset -c 0 "$B/rpcbench" --target 10.85.0.1 --tcp-port 7001 --http-port 7080 --udp-port 7002 \
    --quic-port 7443 --ca "$CA" -n "$CALLS" --warmup 20 --names ip --security plain,tls13-0rtt --no-progress --link-rtt "$rtt" --what-if \
    --transports tcp,tcp-connect,http-fresh,http-keepalive,curl-reuse,curl-fresh,h2,h2-mux,grpc,grpc-mux,grpc-stream,udp,quic,quic-connect,h3,h3-mux,h3-fresh \
    --out "$OUT/rtt-$rtt.json" > "$OUT/rtt-$rtt.txt"
  kill $SP; wait $SP; kill -TERM $LP; wait $LP; SP=""; LP=""
  FILES+=("$OUT/rtt-$rtt.json")
done
"$B/rpcbench" report "${FILES[@]}" --out "$OUT"

#!/usr/bin/env bash
# Round trips per call, two-point estimate: every transport across rpcbench-link at 0 and
# 2 ms RTT (1 ms each way), 200 calls each, mode ip, both sides on CPU 0; writes
# /tmp/kfit-<delay>.csv. Needs root. A stop-gap for issue 13 part 2 (the fit in
# rpcbench report is not written yet); report/link_rtt.md holds one run's figures.
set -u
LP=""; SP=""
# Stops what this script started (by PID) and removes its namespaces, on any exit.
trap '[ -z "$SP" ] || kill $SP 2>/dev/null; [ -z "$LP" ] || kill -TERM $LP 2>/dev/null; wait; ip netns del rbk-s 2>/dev/null; ip netns del rbk-c 2>/dev/null' EXIT
trap 'exit 130' INT TERM
B=${RPCBENCH_BIN_DIR:-$(cd "$(dirname "$0")/.." && pwd)/target/release}
ip netns add rbk-s; ip netns add rbk-c
for ns in rbk-s rbk-c; do ip -n $ns link set lo up; done
for d in 0us 1000us; do
  chrt -f 50 $B/rpcbench-link --a rbk-s=10.85.0.1/24 --b rbk-c=10.85.0.2/24 --delay $d > /tmp/kfit-link-$d.out 2>&1 &
  LP=$!; sleep 0.5
  ip netns exec rbk-s taskset -c 0 $B/rpcbench-echo --threads 1 --tcp 10.85.0.1:7001 --http 10.85.0.1:7080 --udp 10.85.0.1:7002 > /dev/null 2>&1 &
  SP=$!; sleep 0.5
  ip netns exec rbk-c taskset -c 0 $B/rpcbench --target 10.85.0.1 --tcp-port 7001 --http-port 7080 --udp-port 7002 -n 200 --warmup 20 --names ip --transports tcp,tcp-connect,http-keepalive,http-fresh,curl-fresh,curl-reuse,h2,grpc,udp --format csv --out /tmp/kfit-$d.json > /tmp/kfit-$d.csv 2>/tmp/kfit-$d.err
  kill $SP; wait $SP; kill -TERM $LP; wait $LP; SP=""; LP=""
done

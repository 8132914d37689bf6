#!/usr/bin/env bash
# A small fleet on one machine, watched by a real Prometheus: fleet mode end to end.
#
# Four hosts as network namespaces rb-f1..rb-f4 (10.78.0.1-4) on one bridge, which lives in
# a fifth namespace, rb-fmon (10.78.0.254), with Prometheus: nothing is added to the
# machine's own network. Each host runs rpcbench-echo and `rpcbench agent` with the same
# peer list (all four hosts, itself included). Prometheus (Debian's `prometheus`, started
# here with its own configuration and data directory, stopped on exit) scrapes the four
# agents every --scrape, labelling each with `source`, and evaluates deploy/prometheus's
# recording rules (their group interval set to the scrape interval).
#
# Then host h4's echo server is stopped, and the script reads back through Prometheus's
# HTTP API (/api/v1/query):
#   1. how long until every agent's failed probes of h4 show in Prometheus: at most
#      --loss-within (default two scrape intervals);
#   2. after --after seconds, the pairs whose recorded loss
#      (pair:rpcbench_probe_loss:ratio_rate1m) is above 1%: exactly h1..h4 -> h4;
#   3. the p99 and loss pair x pair matrices, drawn as SVG heatmaps into --out
#      (fleet-p99.svg, fleet-loss.svg) with a summary (fleet.md).
# Exit status 0 when 1 and 2 hold, 1 when one does not, 2 for bad usage.
#
# Traffic goes only to addresses inside the namespaces this script makes. Everything is torn
# down on exit, also on failure or Ctrl-C; running it twice in a row works.
#
# Needs root, iproute2, python3, curl and prometheus (Debian; .ci/run installs them).
#
# Usage: report/fleet.sh [--interval DUR] [--scrape SECONDS] [--settle SECONDS]
#                        [--after SECONDS] [--loss-within SECONDS] [--out DIR]
#   --interval     the agents' probe interval (default 500ms; its timeout too)
#   --scrape       Prometheus's scrape and rule interval, whole seconds (default 1)
#   --settle       seconds of healthy fleet before h4's echo server stops (default 20)
#   --after        seconds after the stop before the pairs are read (default 10)
#   --loss-within  longest wait, in seconds, for the failed probes to show (default: two
#                  scrape intervals)
#   --out          where the SVGs and fleet.md go (default report)
set -euo pipefail

INTERVAL=500ms
SCRAPE=1
SETTLE=20
AFTER=10
LOSS_WITHIN=""
OUT=report
usage() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
        --interval) INTERVAL=$2; shift 2 ;;
        --scrape) SCRAPE=$2; shift 2 ;;
        --settle) SETTLE=$2; shift 2 ;;
        --after) AFTER=$2; shift 2 ;;
        --loss-within) LOSS_WITHIN=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        -h|--help) usage ;;
        *) echo "fleet.sh: unknown option $1" >&2; usage ;;
    esac
done
for v in "$SCRAPE" "$SETTLE" "$AFTER"; do
    case "$v" in
        ''|*[!0-9]*) echo "fleet.sh: --scrape, --settle and --after take whole seconds" >&2; exit 2 ;;
    esac
done
[ "$SCRAPE" -ge 1 ] || { echo "fleet.sh: --scrape must be at least 1" >&2; exit 2; }
LOSS_WITHIN=${LOSS_WITHIN:-$((2 * SCRAPE))}
if [ "$(id -u)" != 0 ]; then
    echo "fleet.sh: needs root (network namespaces)" >&2
    exit 2
fi
command -v prometheus >/dev/null || { echo "fleet.sh: prometheus is required (apt-get install prometheus)" >&2; exit 2; }

HERE=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=report/lib.sh
source "$HERE/report/lib.sh"
die() {
    echo "fleet.sh: $*" >&2
    exit 1
}
# The binaries: RPCBENCH_BIN_DIR when set (the tests pass the ones they were built with).
BIN=${RPCBENCH_BIN_DIR:-$HERE/target/release}
MON=rb-fmon
HOSTS=(h1 h2 h3 h4)
PROM_PORT=9090
ns_of() { echo "rb-f${1#h}"; }
ip_of() { echo "10.78.0.${1#h}"; }

declare -A ECHO_PID=()
before_cleanup() {
    for h in "${HOSTS[@]}"; do
        ip netns del "$(ns_of "$h")" 2>/dev/null || true
    done
    ip netns del "$MON" 2>/dev/null || true
}
# A previous run killed hard may have left its namespaces: start clean.
before_cleanup
make_tmp rb-fleet
# Processes first, then namespaces: make_tmp's trap stops `pids` after before_cleanup, but
# a namespace is only gone once its last process is, so stop them here too.
before_cleanup() {
    stop_started
    for h in "${HOSTS[@]}"; do
        ip netns del "$(ns_of "$h")" 2>/dev/null || true
    done
    ip netns del "$MON" 2>/dev/null || true
}

if [ ! -x "$BIN/rpcbench" ] || [ ! -x "$BIN/rpcbench-echo" ]; then
    (cd "$HERE" && cargo build --release --locked --quiet)
fi

# ---- the network: a bridge in rb-fmon, a veth from each host to it -----------------------
ip netns add "$MON"
ip -n "$MON" link set lo up
ip -n "$MON" link add rb-fbr type bridge
ip -n "$MON" addr add 10.78.0.254/24 dev rb-fbr
ip -n "$MON" link set rb-fbr up
for h in "${HOSTS[@]}"; do
    ns=$(ns_of "$h")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "rb-fv${h#h}" netns "$ns" type veth peer name "rb-fb${h#h}" netns "$MON"
    ip -n "$ns" addr add "$(ip_of "$h")/24" dev "rb-fv${h#h}"
    ip -n "$ns" link set "rb-fv${h#h}" up
    ip -n "$MON" link set "rb-fb${h#h}" master rb-fbr up
    # http-fresh connects twice a second per peer; let closed connections' ports be reused.
    ip netns exec "$ns" sysctl -qw net.ipv4.tcp_tw_reuse=1
done

# ---- the fleet ---------------------------------------------------------------------------
for h in "${HOSTS[@]}"; do
    printf -- '- name: %s\n  address: %s\n  labels: {rack: r%d}\n' "$h" "$(ip_of "$h")" $(((${h#h} + 1) / 2))
done >"$tmp/peers.yaml"
for h in "${HOSTS[@]}"; do
    ns=$(ns_of "$h")
    ip=$(ip_of "$h")
    # Not through a function: `$!` must be the program itself (ip netns exec execs it).
    ip netns exec "$ns" "$BIN/rpcbench-echo" --threads 1 --tcp "$ip:7001" --http "$ip:7080" \
        >"$tmp/echo-$h.out" 2>"$tmp/echo-$h.out.err" &
    pids+=($!)
    ECHO_PID[$h]=$!
    listen_addr "$tmp/echo-$h.out" http "$!" >/dev/null
    ip netns exec "$ns" "$BIN/rpcbench" agent --peers "$tmp/peers.yaml" --listen "$ip:9464" \
        --interval "$INTERVAL" >"$tmp/agent-$h.out" 2>"$tmp/agent-$h.out.err" &
    pids+=($!)
    listen_addr "$tmp/agent-$h.out" metrics "$!" >/dev/null
done

# ---- Prometheus --------------------------------------------------------------------------
mkdir -p "$tmp/prom/data"
sed -E "s/^( +interval: ).*/\1${SCRAPE}s/" "$HERE/deploy/prometheus/rules.yml" >"$tmp/prom/rules.yml"
{
    printf 'global:\n  scrape_interval: %ss\n  scrape_timeout: %ss\n  evaluation_interval: %ss\n' "$SCRAPE" "$SCRAPE" "$SCRAPE"
    printf 'rule_files: [rules.yml]\nscrape_configs:\n  - job_name: rpcbench-agent\n    static_configs:\n'
    for h in "${HOSTS[@]}"; do
        printf '      - targets: ["%s:9464"]\n        labels: {source: %s}\n' "$(ip_of "$h")" "$h"
    done
} >"$tmp/prom/prometheus.yml"
promtool check config "$tmp/prom/prometheus.yml" >/dev/null || die "promtool refused the generated configuration"
ip netns exec "$MON" prometheus --config.file="$tmp/prom/prometheus.yml" \
    --storage.tsdb.path="$tmp/prom/data" --web.listen-address="127.0.0.1:$PROM_PORT" \
    >"$tmp/prom/log" 2>&1 &
pids+=($!)
PROM_PID=$!

# query EXPR: the result vector of an instant query, as JSON.
query() {
    ip netns exec "$MON" curl -sf --max-time 5 "http://127.0.0.1:$PROM_PORT/api/v1/query" \
        --data-urlencode "query=$1"
}
# count EXPR: how many series the instant query returns (0 when Prometheus is not up yet).
count() {
    query "$1" 2>/dev/null | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["data"]["result"]))' 2>/dev/null || echo 0
}
# wait_for SECONDS EXPR N: waits until EXPR returns N series.
wait_for() {
    local deadline=$((SECONDS + $1))
    while [ "$(count "$2")" != "$3" ]; do
        kill -0 "$PROM_PID" 2>/dev/null || die "prometheus exited: $(tail -5 "$tmp/prom/log")"
        [ $SECONDS -lt $deadline ] || die "not within $1 s: $2 returns $(count "$2") series, not $3"
        sleep 0.2
    done
}
echo "fleet: 4 hosts up, waiting for Prometheus ..." >&2
wait_for 60 'up == 1' 4
wait_for 60 'pair:rpcbench_probe_loss:ratio_rate1m' 16
echo "fleet: all 16 pairs recorded; $SETTLE s of a healthy fleet ..." >&2
sleep "$SETTLE"
healthy=$(query 'pair:rpcbench_probe_loss:ratio_rate1m > 0.01')

# ---- h4's echo server stops --------------------------------------------------------------
# failed_of_h4: every agent's failed probes of h4 so far, as `source count` lines.
failed_of_h4() {
    query 'sum by (source) (rpcbench_probe_calls_total{peer="h4",outcome!="ok"})' |
        python3 -c 'import json,sys
for r in json.load(sys.stdin)["data"]["result"]:
    print(r["metric"]["source"], int(float(r["value"][1])))' | sort
}
before=$(failed_of_h4)
kill "${ECHO_PID[h4]}"
wait "${ECHO_PID[h4]}" 2>/dev/null || true
stopped=$(date +%s.%N)
echo "fleet: h4's echo server stopped" >&2
# Until every agent's count of failed probes of h4 has grown.
deadline=$((SECONDS + 60))
until python3 -c 'import sys
old = dict(l.split() for l in sys.argv[1].splitlines())
new = dict(l.split() for l in sys.argv[2].splitlines())
sys.exit(0 if len(new) == 4 and all(int(new[s]) > int(old.get(s, 0)) for s in new) else 1)' "$before" "$(failed_of_h4)"; do
    [ $SECONDS -lt $deadline ] || die "h4's failed probes did not show within 60 s"
    sleep 0.1
done
shown=$(python3 -c "import sys; print(f'{float(sys.argv[1]) - float(sys.argv[2]):.2f}')" "$(date +%s.%N)" "$stopped")
echo "fleet: failed probes of h4 from all 4 agents in Prometheus after $shown s" >&2
sleep "$AFTER"
lossy=$(query 'pair:rpcbench_probe_loss:ratio_rate1m > 0.01')
loss=$(query 'pair:rpcbench_probe_loss:ratio_rate1m')
p99=$(query 'pair:rpcbench_probe_duration_seconds:p99_rate1m')

# ---- judging and drawing -----------------------------------------------------------------
mkdir -p "$OUT"
set +e
python3 - "$OUT" "$shown" "$LOSS_WITHIN" "$SCRAPE" "$INTERVAL" "$healthy" "$lossy" "$loss" "$p99" <<'PY'
import json, sys
from xml.sax.saxutils import escape

out, shown, within, scrape, interval = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
healthy, lossy, loss, p99 = (json.loads(a)["data"]["result"] for a in sys.argv[6:10])
hosts = ["h1", "h2", "h3", "h4"]
pairs = lambda res: sorted((r["metric"]["source"], r["metric"]["peer"]) for r in res)
matrix = lambda res: {(r["metric"]["source"], r["metric"]["peer"]): float(r["value"][1]) for r in res}
expected = [(s, "h4") for s in hosts]
checks = [
    (f"failed probes of h4 from every agent shown in Prometheus within {within:g} s", shown <= within, f"{shown:.2f} s"),
    ("no pair above 1% loss before the stop", pairs(healthy) == [], ", ".join(f"{s}->{p}" for s, p in pairs(healthy)) or "none"),
    ("pairs above 1% loss after the stop are exactly h1..h4 -> h4", pairs(lossy) == expected,
     ", ".join(f"{s}->{p}" for s, p in pairs(lossy)) or "none"),
]

def svg(title, values, fmt, scale, path):
    """A pair x pair heatmap: rows the calling host, columns the host called; white to red
    by value / scale (clamped), grey where Prometheus has no value (NaN: no ok call)."""
    cell, left, top = 70, 60, 70
    w, h = left + cell * len(hosts) + 80, top + cell * len(hosts) + 40
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">',
             f'<rect width="{w}" height="{h}" fill="#fff"/>',
             f'<text x="{w / 2}" y="20" text-anchor="middle" font-size="14">{escape(title)}</text>',
             f'<text x="{left + cell * len(hosts) / 2}" y="45" text-anchor="middle">peer (called)</text>',
             f'<text x="15" y="{top + cell * len(hosts) / 2}" text-anchor="middle" transform="rotate(-90 15 {top + cell * len(hosts) / 2})">source (calling)</text>']
    for j, p in enumerate(hosts):
        parts.append(f'<text x="{left + cell * j + cell / 2}" y="{top - 6}" text-anchor="middle">{p}</text>')
    for i, s in enumerate(hosts):
        parts.append(f'<text x="{left - 8}" y="{top + cell * i + cell / 2 + 4}" text-anchor="end">{s}</text>')
        for j, p in enumerate(hosts):
            v = values.get((s, p))
            x, y = left + cell * j, top + cell * i
            if v is None or v != v:
                fill, label = "#ccc", "no data"
            else:
                t = max(0.0, min(1.0, v / scale))
                g = int(255 - 200 * t)
                fill, label = f"rgb(255,{g},{g})", fmt(v)
            parts.append(f'<rect x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{fill}" stroke="#888"/>')
            parts.append(f'<text x="{x + cell / 2 - 1}" y="{y + cell / 2 + 4}" text-anchor="middle">{escape(label)}</text>')
    parts.append(f'<text x="{left}" y="{h - 12}" font-size="10">Prometheus, recording rule above; h4\'s echo server stopped</text>')
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")

svg("p99 of the tcp probe, last minute", matrix(p99), lambda v: f"{v * 1e6:.0f} µs", 0.01, f"{out}/fleet-p99.svg")
svg("loss (every transport), last minute", matrix(loss), lambda v: f"{v * 100:.1f}%", 0.5, f"{out}/fleet-loss.svg")
ok = all(c[1] for c in checks)
lines = ["# Fleet test bed (report/fleet.sh)", "",
         f"4 hosts (network namespaces on one bridge), each running rpcbench-echo and rpcbench agent (--interval {interval});",
         f"Prometheus scraping the agents and evaluating deploy/prometheus/rules.yml every {scrape} s. h4's echo server is stopped.", "",
         "| check | result | measured |", "| --- | --- | --- |"]
lines += [f"| {name} | {'pass' if good else 'FAIL'} | {got} |" for name, good, got in checks]
lines += ["", "Recorded loss per pair after the stop (pair:rpcbench_probe_loss:ratio_rate1m):", "",
          "| source \\ peer | " + " | ".join(hosts) + " |", "| --- |" + " --- |" * len(hosts)]
m = matrix(loss)
lines += [f"| {s} | " + " | ".join(f"{m.get((s, p), float('nan')) * 100:.2f}%" for p in hosts) + " |" for s in hosts]
lines += ["", "p99 of the tcp probe per pair (pair:rpcbench_probe_duration_seconds:p99_rate1m):", "",
          "| source \\ peer | " + " | ".join(hosts) + " |", "| --- |" + " --- |" * len(hosts)]
m = matrix(p99)
lines += [f"| {s} | " + " | ".join("no ok call" if (v := m.get((s, p))) is None or v != v else f"{v * 1e6:.0f} µs" for p in hosts) + " |" for s in hosts]
lines += ["", "![p99](fleet-p99.svg) ![loss](fleet-loss.svg)", ""]
with open(f"{out}/fleet.md", "w") as f:
    f.write("\n".join(lines))
print("\n".join(lines))
sys.exit(0 if ok else 1)
PY
verdict=$?
set -e
echo "fleet: report written to $OUT/fleet.md" >&2
exit "$verdict"

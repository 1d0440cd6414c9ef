#!/bin/bash
# Loader into a 3-master Redis Cluster against one Redis: `hashgate load` with default flags on the
# same generated export, masters on this host, exact counts checked. Usage: bench/cluster-load.sh [ROWS]
# (default 10,000,000; needs redis-server and redis-cli on PATH and `npm run build` done).
set -euo pipefail
ROWS=${1:-10000000}
HERE=$(cd "$(dirname "$0")/.." && pwd)
CLI="node $HERE/dist/src/cli/main.js"
W=$(mktemp -d)
trap 'for p in 7411 7412 7413 7414; do redis-cli -p $p shutdown nosave >/dev/null 2>&1 || true; done; rm -rf "$W"' EXIT
$CLI gen-export --dir "$W/x" --files 1 --rows "$ROWS" --duplicate-rate 0.2 --json > "$W/gen.json"
for p in 7411 7412 7413; do
  mkdir -p "$W/n$p"
  (cd "$W/n$p" && redis-server --port $p --cluster-enabled yes --cluster-config-file nodes.conf --save '' --appendonly no --daemonize yes >/dev/null)
done
(cd "$W" && redis-server --port 7414 --save '' --appendonly no --daemonize yes >/dev/null)
sleep 1
redis-cli --cluster create 127.0.0.1:7411 127.0.0.1:7412 127.0.0.1:7413 --cluster-replicas 0 --cluster-yes >/dev/null
sleep 3
cpu() { local s=0; for p in "$@"; do s=$(echo "$s + $(redis-cli -p "$p" info cpu | awk -F: '/used_cpu_(user|sys):/{s+=$2} END{print s}')" | bc); done; echo "$s"; }
echo "export: $(cat "$W/gen.json")"
for target in one cluster; do
  if [ $target = one ]; then flags="--redis redis://127.0.0.1:7414"; ports="7414"; else flags="--cluster 127.0.0.1:7411,127.0.0.1:7412,127.0.0.1:7413"; ports="7411 7412 7413"; fi
  c0=$(cpu $ports); s=$(date +%s.%N)
  $CLI load "$W/x" $flags --window 2026 --checkpoint "$W/cp-$target.json" --failed-file "$W/failed-$target" --rejects-file "$W/rejects-$target" --json --quiet > "$W/$target.json"
  e=$(date +%s.%N); c1=$(cpu $ports)
  echo "$target: $(echo "$ROWS/($e-$s)" | bc) rows/s wall incl. start, Redis CPU $(echo "($c1-$c0)*1000000/$ROWS" | bc -l | cut -c1-4) us/row, $(grep -o '"newMembers":[0-9]*' "$W/$target.json")"
done

#!/usr/bin/env bash
# Stop the HBase started by start.sh: TERM by pid, wait up to HBASE_STOP_TIMEOUT (5 s), then KILL.
# A standalone master stops its embedded ZooKeeper first and then retries it for minutes, so a clean
# shutdown rarely finishes; nothing is lost because start.sh wipes the work dir anyway.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
if ! pid=$(hbase_running_pid); then
  echo "hbase: not running" >&2
  rm -f "$HBASE_PID_FILE"
  exit 0
fi
kill "$pid" 2>/dev/null || true
deadline=$(( $(date +%s) + ${HBASE_STOP_TIMEOUT:-5} ))
while kill -0 "$pid" 2>/dev/null; do
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "hbase: pid $pid still running after TERM; sending KILL" >&2
    kill -9 "$pid" 2>/dev/null || true
    sleep 0.5
    break
  fi
  sleep 0.3
done
rm -f "$HBASE_PID_FILE"
echo "hbase: stopped (pid $pid)" >&2

#!/usr/bin/env bash
# Start a real HBase 2.6 standalone (ZooKeeper + master + region server in one JVM, local files)
# on loopback and return once a put/get round trip works. Env: HBASE_ZK_PORT (21810),
# HBASE_MASTER_PORT (16100), HBASE_RS_PORT (16120), HBASE_START_TIMEOUT seconds (180),
# HBASE_STATE (.services/hbase: Maven output, classpath cache), HBASE_RUN (HBASE_STATE: work dir,
# pid, log). Prints `HBASE_ZK=127.0.0.1:<port>` on success.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
t0=$(date +%s)
timeout_s=${HBASE_START_TIMEOUT:-180}

if pid=$(hbase_running_pid); then
  echo "hbase: already running (pid $pid); stop it first with services/hbase/stop.sh" >&2
  exit 1
fi
command -v "$JAVA" >/dev/null || { echo "hbase: java not found (need JDK 17)" >&2; exit 1; }
command -v mvn >/dev/null || { echo "hbase: mvn not found" >&2; exit 1; }
for port in "$HBASE_ZK_PORT" "$HBASE_MASTER_PORT" "$HBASE_RS_PORT"; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
    echo "hbase: port $port on 127.0.0.1 is already in use; set HBASE_ZK_PORT/HBASE_MASTER_PORT/HBASE_RS_PORT" >&2
    exit 1
  fi
done

hbase_classpath
t_cp=$(date +%s)

# a fresh work dir every start: data left by an unclean stop means slow WAL recovery
rm -rf "$HBASE_WORK" && mkdir -p "$HBASE_WORK/conf" "$HBASE_RUN"
: > "$HBASE_RUN/probe.log"
sed -e "s#@WORK@#$HBASE_WORK#g" -e "s#@ZK_PORT@#$HBASE_ZK_PORT#g" \
    -e "s#@MASTER_PORT@#$HBASE_MASTER_PORT#g" -e "s#@RS_PORT@#$HBASE_RS_PORT#g" \
    "$HBASE_SVC_DIR/conf/hbase-site.xml" > "$HBASE_WORK/conf/hbase-site.xml"

# setsid: the server outlives this script and the caller's process group (npm, CI step)
setsid "$JAVA" -Xms256m -Xmx1g -XX:+UseG1GC "${HBASE_JDK_FLAGS[@]}" \
  -Dlog4j2.configurationFile="$HBASE_SVC_DIR/conf/log4j2.properties" \
  -Dhbase.log.dir="$HBASE_WORK" \
  -cp "$HBASE_WORK/conf:$HBASE_CP" org.apache.hadoop.hbase.master.HMaster start \
  > "$HBASE_LOG" 2>&1 < /dev/null &
pid=$!
echo "$pid" > "$HBASE_PID_FILE"

fail() {
  echo "hbase: $1; last lines of $HBASE_LOG:" >&2
  tail -n 40 "$HBASE_LOG" >&2 || true
  if kill -0 "$pid" 2>/dev/null; then kill "$pid" 2>/dev/null || true; sleep 2; kill -9 "$pid" 2>/dev/null || true; fi
  rm -f "$HBASE_PID_FILE"
  exit 1
}

deadline=$(( $(date +%s) + timeout_s ))
until (exec 3<>"/dev/tcp/127.0.0.1/$HBASE_ZK_PORT") 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || fail "the JVM exited during start-up"
  [ "$(date +%s)" -lt "$deadline" ] || fail "ZooKeeper did not open port $HBASE_ZK_PORT within ${timeout_s}s"
  sleep 0.5
done
# the probe's own client retries for ~15 s; loop until the master has assigned meta and the table
until out=$(hbase_ddl probe 2>>"$HBASE_RUN/probe.log"); do
  kill -0 "$pid" 2>/dev/null || fail "the JVM exited during start-up"
  [ "$(date +%s)" -lt "$deadline" ] || fail "no put/get round trip within ${timeout_s}s (probe: ${out:-no output})"
  sleep 1
done
t1=$(date +%s)
echo "hbase: ready in $((t1 - t0))s (classpath $((t_cp - t0))s), pid $pid, log $HBASE_LOG" >&2
echo "HBASE_ZK=127.0.0.1:$HBASE_ZK_PORT"

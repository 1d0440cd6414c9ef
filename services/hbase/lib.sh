# Shared by start.sh, stop.sh and ddl.sh (sourced, not run). Paths, ports and the cached classpath.
HBASE_SVC_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HBASE_SVC_DIR/../.." && pwd)
# state lives outside git (.services/ is ignored): Maven output, classpath cache, work dir, pid, log
HBASE_STATE=${HBASE_STATE:-$REPO_ROOT/.services/hbase}
# one running instance per HBASE_RUN dir (work dir, pid, log); a second instance for outage tests
# gets its own HBASE_RUN and ports but shares the Maven output and classpath cache
HBASE_RUN=${HBASE_RUN:-$HBASE_STATE}
HBASE_WORK=${HBASE_WORK:-$HBASE_RUN/work}
HBASE_PID_FILE=$HBASE_RUN/hbase.pid
HBASE_LOG=$HBASE_RUN/hbase.log
HBASE_CP_FILE=$HBASE_STATE/cp.txt
# non-default ports so a developer's own HBase/ZooKeeper (2181/16000/16020) does not clash
HBASE_ZK_PORT=${HBASE_ZK_PORT:-21810}
HBASE_MASTER_PORT=${HBASE_MASTER_PORT:-16100}
HBASE_RS_PORT=${HBASE_RS_PORT:-16120}
if [ -z "${JAVA_HOME:-}" ] && [ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/java ]; then
  JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64   # Hadoop's login code breaks on JDK 23+
fi
JAVA=${JAVA_HOME:+$JAVA_HOME/bin/}java

# the JDK 11+ list that HBase's own bin/hbase applies
HBASE_JDK_FLAGS=(-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true
  --add-modules jdk.unsupported
  --add-opens java.base/java.io=ALL-UNNAMED --add-opens java.base/java.nio=ALL-UNNAMED
  --add-opens java.base/sun.nio.ch=ALL-UNNAMED --add-opens java.base/java.lang=ALL-UNNAMED
  --add-opens java.base/jdk.internal.ref=ALL-UNNAMED --add-opens java.base/java.lang.reflect=ALL-UNNAMED
  --add-opens java.base/java.util=ALL-UNNAMED --add-opens java.base/java.util.concurrent=ALL-UNNAMED
  --add-exports java.base/jdk.internal.misc=ALL-UNNAMED --add-exports java.security.jgss/sun.security.krb5=ALL-UNNAMED
  --add-exports java.base/sun.net.dns=ALL-UNNAMED --add-exports java.base/sun.net.util=ALL-UNNAMED)

# Build HBaseDdl and resolve the classpath once; redo only when pom.xml or the Java source changes.
hbase_classpath() {
  mkdir -p "$HBASE_STATE"
  # Test files start in parallel and each may call this first: one Maven run at a time on one
  # state directory (concurrent runs on the same target/ corrupt it and cost a JVM each).
  exec {cp_lock}>"$HBASE_STATE/cp.lock"
  flock "$cp_lock"
  hbase_classpath_locked
  local rc=$?
  flock -u "$cp_lock"
  exec {cp_lock}>&-
  return $rc
}

hbase_classpath_locked() {
  local stamp
  stamp=$(cat "$HBASE_SVC_DIR/pom.xml" "$HBASE_SVC_DIR"/src/main/java/*.java | sha256sum | cut -c1-16)
  if [ ! -s "$HBASE_CP_FILE" ] || [ "$(cat "$HBASE_STATE/cp.stamp" 2>/dev/null)" != "$stamp" ] \
     || [ ! -f "$HBASE_STATE/target/classes/HBaseDdl.class" ]; then
    echo "hbase: resolving jars with Maven (first run downloads ~130 MB)..." >&2
    if ! mvn -q -B -f "$HBASE_SVC_DIR/pom.xml" package dependency:build-classpath -Dhbase.state="$HBASE_STATE" \
        -Dmdep.outputFile="$HBASE_CP_FILE" > "$HBASE_STATE/mvn.log" 2>&1; then
      echo "hbase: Maven failed; last lines of $HBASE_STATE/mvn.log:" >&2
      tail -n 30 "$HBASE_STATE/mvn.log" >&2
      return 1
    fi
    echo "$stamp" > "$HBASE_STATE/cp.stamp"
  fi
  HBASE_CP="$HBASE_STATE/target/classes:$(cat "$HBASE_CP_FILE")"
}

hbase_running_pid() {
  local pid
  pid=$(cat "$HBASE_PID_FILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# HBaseDdl with fast JVM start-up flags; talks to ZooKeeper on loopback at $HBASE_ZK_PORT
hbase_ddl() {
  HBASE_ZK_QUORUM=127.0.0.1 HBASE_ZK_PORT=$HBASE_ZK_PORT "$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    "${HBASE_JDK_FLAGS[@]}" -Dlog4j2.configurationFile="$HBASE_SVC_DIR/conf/log4j2-tool.properties" \
    -cp "$HBASE_CP" HBaseDdl "$@"
}

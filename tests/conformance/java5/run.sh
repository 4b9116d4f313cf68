#!/usr/bin/env bash
# run.sh SUBCOMMAND ARGS...  — runs Client5Probe (RocketMQ 5.3.3 client) with the classpath build.sh
# wrote to $WORK_DIR/classpath.txt (see env.sh; subcommands and PROBE_* knobs in the header of
# probe/Client5Probe.java). PROBE_JAVA_OPTS adds JVM options (e.g. -Dcom.rocketmq.heartbeat.v2=true);
# client logs go to stderr through slf4j-simple at PROBE_LOG_LEVEL (default warn).
source "$(cd "$(dirname "$0")" && pwd)/env.sh"
mkdir -p "$WORK_DIR/tmp" "$WORK_DIR/home"
exec java -Xmx256m -XX:TieredStopAtLevel=1 ${PROBE_JAVA_OPTS:-} \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=${PROBE_LOG_LEVEL:-warn} -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Djava.io.tmpdir="$WORK_DIR/tmp" -Duser.home="$WORK_DIR/home" \
    -cp "$(cat "$WORK_DIR/classpath.txt")" Client5Probe "$@"

#!/usr/bin/env bash
# run.sh SUBCOMMAND ARGS...  — runs Grpc5Probe (the RocketMQ 5.x gRPC Java client) with the
# classpath build.sh wrote to $WORK_DIR/classpath.txt (subcommands and PROBE_* knobs in the
# header of probe/Grpc5Probe.java). PROBE_JAVA_OPTS adds JVM options; client logs go to stderr
# through slf4j-simple at PROBE_LOG_LEVEL (default warn).
source "$(cd "$(dirname "$0")" && pwd)/env.sh"
mkdir -p "$WORK_DIR/tmp" "$WORK_DIR/home"
exec java -Xmx256m -XX:TieredStopAtLevel=1 ${PROBE_JAVA_OPTS:-} \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=${PROBE_LOG_LEVEL:-warn} -Dorg.slf4j.simpleLogger.showDateTime=true \
    -Djava.library.path="$WORK_DIR/jni" -Djava.io.tmpdir="$WORK_DIR/tmp" -Duser.home="$WORK_DIR/home" \
    -cp "$(cat "$WORK_DIR/classpath.txt")" ${PROBE_MAIN:-Grpc5Probe} "$@"

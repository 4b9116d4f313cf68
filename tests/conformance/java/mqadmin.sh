#!/usr/bin/env bash
# mqadmin.sh OUT_DIR ARGS...  — runs RocketMQ 4.9.8's MQAdminStartup with what build.sh made.
# Logs (tools' logback and the client's own logger) go to $MQADMIN_LOG_DIR
# (default ${TMPDIR:-/tmp}/rocketstore-mqadmin/logs). MQADMIN_TRACE=1 runs the same sub command through
# TracingMQAdmin, which prints every request and response to stderr (TRACE> / TRACE<).
set -euo pipefail
OUT_DIR=$(cd "$1" && pwd); shift
LOG_DIR=${MQADMIN_LOG_DIR:-${TMPDIR:-/tmp}/rocketstore-mqadmin/logs}
mkdir -p "$LOG_DIR"
export ROCKETMQ_HOME="$OUT_DIR/home"
MAIN=org.apache.rocketmq.tools.command.MQAdminStartup
if [ "${MQADMIN_TRACE:-0}" = 1 ]; then MAIN=org.apache.rocketmq.tools.command.TracingMQAdmin; fi
exec java ${MQADMIN_JAVA_OPTS:-} \
    -Drocketmq.home.dir="$OUT_DIR/home" \
    -Dmqadmin.log.dir="$LOG_DIR" \
    -Drocketmq.client.logUseSlf4j=false -Drocketmq.client.logRoot="$LOG_DIR" \
    -cp "$(cat "$OUT_DIR/classpath.txt")" "$MAIN" "$@"

#!/usr/bin/env bash
# exporter_probe.sh OUT_DIR NAMESRV TOPIC GROUP  — compiles admin/ExporterProbe.java against
# what build_mqadmin.sh made in OUT_DIR and runs it: the requests rocketmq-exporter and
# rocketmq-dashboard send, through 4.9.8's DefaultMQAdminExt. Exit 0 when all answered.
set -euo pipefail
OUT_DIR=$(cd "$1" && pwd); shift
HERE=$(cd "$(dirname "$0")" && pwd)
CP=$(cat "$OUT_DIR/classpath.txt")
mkdir -p "$OUT_DIR/probe-classes"
javac -nowarn -cp "$CP" -d "$OUT_DIR/probe-classes" "$HERE/admin/ExporterProbe.java"
LOG_DIR=${MQADMIN_LOG_DIR:-${TMPDIR:-/tmp}/rocketstore-mqadmin/logs}
exec java -Drocketmq.client.logUseSlf4j=false -Drocketmq.client.logRoot="$LOG_DIR" \
    -cp "$OUT_DIR/probe-classes:$CP" ExporterProbe "$@"

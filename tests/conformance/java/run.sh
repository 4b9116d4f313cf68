#!/usr/bin/env bash
# run.sh OUT_DIR SUBCOMMAND ARGS...  — runs JavaClientProbe with the classpath build.sh wrote.
set -euo pipefail
OUT_DIR=$1; shift
exec java ${PROBE_JAVA_OPTS:-} -Drocketmq.client.logUseSlf4j=false -Drocketmq.client.logRoot="${PROBE_LOG_ROOT:-${TMPDIR:-/tmp}/rocketstore-java-client/logs}" \
    -Drocketmq.client.localOffsetStoreDir="${PROBE_OFFSET_DIR:-${TMPDIR:-/tmp}/rocketstore-java-client/local-offsets}" \
    -cp "$(cat "$OUT_DIR/classpath.txt")" JavaClientProbe "$@"

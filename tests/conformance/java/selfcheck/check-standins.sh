#!/usr/bin/env bash
# selfcheck/check-standins.sh OUT_DIR — compiles and runs StandinCheck (fastjson stand-in vs. the
# JSON fastjson writes/reads for RemotingCommand headers, TopicRouteData, HeartbeatData,
# ResetOffsetBody, LockBatchResponseBody) against the classes build.sh produced.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CP=$(cat "$1/classpath.txt")
CLS=$(mktemp -d "$HERE/cls.XXXXXX")
trap 'rm -rf "$CLS"' EXIT
javac -nowarn -d "$CLS" -cp "$CP" "$HERE/StandinCheck.java"
java -Drocketmq.client.logUseSlf4j=false -Drocketmq.client.logRoot="${TMPDIR:-/tmp}/rocketstore-java-client/logs" \
    -cp "$CLS:$CP" StandinCheck

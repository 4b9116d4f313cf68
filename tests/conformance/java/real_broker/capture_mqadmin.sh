#!/usr/bin/env bash
# capture_mqadmin.sh [OUTDIR [NAME...]] — runs the lines of cmds.txt (NAME|COMMAND|ARGS; all of them,
# or only the NAMEs given) with the real 4.9.8 mqadmin (../mqadmin.sh, $MQA_OUT) against the live
# broker, adding -n 127.0.0.1:$NAMESRV_PORT; @BROKER@ in ARGS becomes 127.0.0.1:$BROKER_PORT.
# Writes OUTDIR/NAME.txt (stdout) and OUTDIR/NAME.err (stderr); OUTDIR defaults to $WORK_DIR/mqadmin.
# Note that mqadmin exits 0 even when a command fails: read the .txt. Settings: see common.sh.
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
OUTD=${1:-$RB/mqadmin}; shift || true
mkdir -p "$OUTD"
while IFS='|' read -r name cmd args; do
  [ -z "$name" ] && continue
  wanted "$name" "$@" || continue
  MQADMIN_LOG_DIR=$LOGDIR/mqadmin bash "$JAVA_DIR_HARNESS/mqadmin.sh" "$MQA_OUT" $cmd -n $NS $args > "$OUTD/$name.txt" 2> "$OUTD/$name.err" < /dev/null
  echo "$name rc=$? $(wc -l < "$OUTD/$name.txt") lines"
done < <(cmds_lines)

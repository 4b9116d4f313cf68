#!/usr/bin/env bash
# run_namesrv.sh — starts the real 4.9.8 NamesrvStartup on 127.0.0.1:$NAMESRV_PORT (39876) in the
# background: config $WORK_DIR/namesrv.conf (from namesrv.conf.in), pid in $WORK_DIR/namesrv.pid,
# stdout in $LOGDIR/namesrv.out. Stop: stop.sh namesrv. Settings: see common.sh.
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
mkdir -p "$RB/namesrv-data"
sed -e "s#@NAMESRV_PORT@#$NAMESRV_PORT#g" -e "s#@WORK_DIR@#$WORK_DIR#g" "$HERE/namesrv.conf.in" > "$RB/namesrv.conf"
nohup java "${JOPTS[@]}" -cp "$(cat "$BUILD/classpath.txt")" org.apache.rocketmq.namesrv.NamesrvStartup -c "$RB/namesrv.conf" > "$LOGDIR/namesrv.out" 2>&1 &
echo $! > "$RB/namesrv.pid"
echo "namesrv pid $(cat "$RB/namesrv.pid")"

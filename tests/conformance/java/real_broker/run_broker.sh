#!/usr/bin/env bash
# run_broker.sh [CONF] — starts the real 4.9.8 BrokerStartup in the background with CONF, or without
# it with $WORK_DIR/broker.conf written from broker.conf.in for the store $STORE_DIR
# (default $WORK_DIR/store1) and the ports NAMESRV_PORT / BROKER_PORT. Pid in $WORK_DIR/broker.pid,
# stdout appended to $LOGDIR/broker.out. Stop: stop.sh broker (SIGTERM, a clean shutdown) or
# kill -9 "$(cat $WORK_DIR/broker.pid)" for a crash. Settings: see common.sh.
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
if [ $# -ge 1 ]; then
    CONF=$1
else
    STORE_DIR=${STORE_DIR:-$RB/store1}
    mkdir -p "$STORE_DIR"
    STORE_DIR=$(cd "$STORE_DIR" && pwd)
    CONF=$RB/broker.conf
    broker_conf "$STORE_DIR" "$CONF"
fi
nohup java "${JOPTS[@]}" -cp "$(cat "$BUILD/classpath.txt")" org.apache.rocketmq.broker.BrokerStartup -c "$CONF" >> "$LOGDIR/broker.out" 2>&1 &
echo $! > "$RB/broker.pid"
echo "broker pid $(cat "$RB/broker.pid") ($CONF)"

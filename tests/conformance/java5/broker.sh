#!/usr/bin/env bash
# broker.sh start [extra serve options] | stop  — rocketstore's broker ($ROCKETSTORE serve) on
# 127.0.0.1:$BROKER_PORT (40911), name server on 127.0.0.1:$NAMESRV_PORT (40876), fresh store
# $WORK_DIR/store, log in $WORK_DIR/broker.log, pid in $WORK_DIR/broker.pid. BROKER_GLOBAL_OPTS
# goes before the sub command (e.g. --debug). Settings: see env.sh.
source "$(cd "$(dirname "$0")" && pwd)/env.sh"
W=$WORK_DIR
case "$1" in
start) shift
    [ -f "$W/broker.pid" ] && kill "$(cat "$W/broker.pid")" 2>/dev/null && sleep 1
    rm -rf "$W/store"
    "$ROCKETSTORE" ${BROKER_GLOBAL_OPTS:-} --store "$W/store" serve --listen 127.0.0.1:$BROKER_PORT \
        --namesrv-listen 127.0.0.1:$NAMESRV_PORT "$@" > "$W/broker.log" 2>&1 &
    echo $! > "$W/broker.pid"
    for port in $NAMESRV_PORT $BROKER_PORT; do
        for _ in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
    done
    echo "broker pid $(cat "$W/broker.pid")";;
stop) [ -f "$W/broker.pid" ] && kill "$(cat "$W/broker.pid")" 2>/dev/null; rm -f "$W/broker.pid";;
*) echo "usage: $0 start [serve options] | stop" >&2; exit 2;;
esac

#!/usr/bin/env bash
# broker.sh start [extra serve options] | restart [extra serve options] | topic NAME... | stop
#   start    rocketstore serve on a fresh $WORK_DIR/store: gRPC 127.0.0.1:$GRPC_PORT, remoting
#            127.0.0.1:$BROKER_PORT, name server 127.0.0.1:$NAMESRV_PORT; the consumer groups
#            named in FIFO_GROUPS (space-separated) are made FIFO first (consumeMessageOrderly in
#            config/subscriptionGroup.json, as mqadmin updateSubGroup -o true); log in
#            $WORK_DIR/broker.log, pid in broker.pid. BROKER_GLOBAL_OPTS goes before `serve`.
#   restart  the same, keeping the store
#   topic    creates topics (updateTopic through the name server: gRPC does not auto-create)
source "$(cd "$(dirname "$0")" && pwd)/env.sh"
W=$WORK_DIR
launch() {
    "$ROCKETSTORE" ${BROKER_GLOBAL_OPTS:-} --store "$W/store" serve --listen 127.0.0.1:$BROKER_PORT \
        --namesrv-listen 127.0.0.1:$NAMESRV_PORT --grpc-listen 127.0.0.1:$GRPC_PORT "$@" >> "$W/broker.log" 2>&1 &
    echo $! > "$W/broker.pid"
    for port in $NAMESRV_PORT $BROKER_PORT $GRPC_PORT; do
        for _ in $(seq 1 150); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.2; done
    done
    echo "broker pid $(cat "$W/broker.pid")"
}
stop() {
    if [ -f "$W/broker.pid" ]; then
        pid=$(cat "$W/broker.pid"); kill "$pid" 2>/dev/null
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        rm -f "$W/broker.pid"
    fi
}
case "$1" in
start) shift; stop; rm -rf "$W/store"; : > "$W/broker.log"
    if [ -n "${FIFO_GROUPS:-}" ]; then
        mkdir -p "$W/store/config"
        python3 -c '
import json, sys
table = {g: {"groupName": g, "consumeMessageOrderly": True} for g in sys.argv[2:]}
json.dump({"subscriptionGroupTable": table, "dataVersion": {"counter": 1, "timestamp": 0}}, open(sys.argv[1], "w"))
' "$W/store/config/subscriptionGroup.json" $FIFO_GROUPS
    fi
    launch "$@";;
restart) shift; stop; launch "$@";;
topic) shift
    for t in "$@"; do
        "$ROCKETSTORE" updateTopic -n 127.0.0.1:$NAMESRV_PORT -c DefaultCluster -t "$t" > /dev/null
    done;;
stop) stop;;
*) echo "usage: $0 start [serve options] | restart [serve options] | topic NAME... | stop" >&2; exit 2;;
esac

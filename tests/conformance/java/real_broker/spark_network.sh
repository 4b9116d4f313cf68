#!/usr/bin/env bash
# spark_network.sh — the Spark source's network mode (issue #35) against a REAL RocketMQ 4.9.8
# name server + broker: starts them (run_namesrv.sh, run_broker.sh) on a fresh store
# ($WORK_DIR/spark-store), runs spark_network.py's parts plain (batch reads, key lookups, a
# write consumed by the Java client, a stream with option group read back with mqadmin
# consumerProgress) and down (brokerDownWaitMs: the broker SIGKILLed and restarted mid-read),
# then restarts the broker with aclEnable=true and $BUILD/home/conf/plain_acl.yml (written
# here, removed after) for part acl; stops everything. Prints each part's `N passed, N failed`.
# Needs build_broker.sh, ../build.sh and ../build_mqadmin.sh outputs. Settings: see common.sh.
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
PY=${PY:-$REPO_ROOT/.venv/bin/python}
export PYSPARK_PYTHON=$PY NS BR WORK_DIR JC_OUT MQA_OUT HARNESS=$HERE
export STORE_DIR=$RB/spark-store
rm -rf "$STORE_DIR" "$RB"/spark-produce*.jsonl "$RB"/stream-*; mkdir -p "$STORE_DIR"
wait_for() {  # wait_for FILE TEXT COUNT: until FILE has COUNT lines with TEXT (60 s at most)
    for _ in $(seq 1 300); do
        [ "$(grep -c "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0; sleep 0.2
    done
    echo "timed out waiting for '$2' in $1" >&2; return 1
}
boots() { grep -c "boot success" "$LOGDIR/broker.out" 2>/dev/null || echo 0; }
"$HERE/run_namesrv.sh"; wait_for "$LOGDIR/namesrv.out" "boot success" 1 || exit 1
n=$(boots); "$HERE/run_broker.sh"; wait_for "$LOGDIR/broker.out" "boot success" $((n + 1)) || exit 1
status=0
"$PY" "$HERE/spark_network.py" plain || status=1
"$PY" "$HERE/spark_network.py" down || status=1
"$HERE/stop.sh" broker
cat > "$BUILD/home/conf/plain_acl.yml" <<'YML'
globalWhiteRemoteAddresses:
accounts:
- accessKey: sparkuser
  secretKey: sparksecret1
  whiteRemoteAddress:
  admin: false
  defaultTopicPerm: PUB|SUB
  defaultGroupPerm: PUB|SUB
  topicPerms:
  - SparkDeny=DENY
YML
broker_conf "$STORE_DIR" "$RB/broker-acl.conf"; echo "aclEnable=true" >> "$RB/broker-acl.conf"
n=$(boots); "$HERE/run_broker.sh" "$RB/broker-acl.conf"; wait_for "$LOGDIR/broker.out" "boot success" $((n + 1)) || exit 1
"$PY" "$HERE/spark_network.py" acl || status=1
"$HERE/stop.sh" all
rm -f "$BUILD/home/conf/plain_acl.yml"
exit $status

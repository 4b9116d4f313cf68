#!/usr/bin/env bash
# ha_cases.sh truncate|acl|crc|restart|fast — replication cases (issue #36) of a rocketstore SLAVE behind a REAL
# RocketMQ 4.9.8 master of brokerName broker-a, with the real name server (as ha_interop.sh):
#   truncate  our slave follows the Java master (300 sends), the master's clean store is copied,
#             900 more sends (1000 bytes: into a second file) reach the slave, both stop; the master comes
#             back on the early copy, so our slave holds more than its master. Checks: the slave
#             cuts back to the master's end (its WARNING line, truncated-*/ holding the cut bytes,
#             as many as it held past that end), then 200 more sends, and every CommitLog file of
#             the slave is the master's byte for byte (cmp), `rocketstore compare` exit 0.
#   acl       the Java master made the topic and group and took 50 sends and a consumer's
#             commits without ACL, then restarts with aclEnable=true and an account (no white
#             list: our slave comes from 127.0.0.1 like every client here). A fresh slave without
#             credentials copies the CommitLog (the HA port has no ACL) but none of the metadata
#             (denied); a fresh slave with innerClientAuthenticationCredentials copies the topic,
#             group and offsets too (it signs GET_ALL_*).
#   crc       our slave with haCheckBodyCrc=true (every body's CRC checked before it is
#             appended) follows the Java master through 1,505 sends (compressed ones, 1 MiB
#             files rolling): files cmp equal, no complaint in its log, `compare` exit 0.
#   restart   our slave follows while a producer sends 1,500; the master is stopped cleanly
#             and started again after 400, killed -9 and started again after 900, then 100
#             more: files cmp equal, the slave connected again after each, `compare` exit 0.
#   fast      our slave follows a Java SYNC_MASTER while one Java producer sends 6,000 of 1 KiB
#             asynchronously, 64 in flight (benchmarks/clients/java/BrokerBench.java `async`):
#             the master's 32 KiB transfers cut nearly every record and a slave that falls
#             behind appends runs of them. Checks: every send SEND_OK (our slave's reports
#             released them), CommitLog files cmp equal, the slave's consume queues cmp equal
#             to the master's and its index files hold the master's bytes (in name order: the
#             names are creation times), the same again after `rebuild` on a copy of the
#             slave's store, no ERROR line in its log, `compare` exit 0.
# Prints `PASS`/`FAIL` lines and `N passed, N failed`. Stores and logs in $WORK_DIR/hac-*.
# Writes $BUILD/home/conf/plain_acl.yml for `acl` and removes it after: use a BUILD of your own.
# Needs build_broker.sh, ../build.sh and ../build_mqadmin.sh outputs. Settings: see common.sh.
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
CASE=${1:?usage: ha_cases.sh truncate|acl|crc|restart|fast}
OUR_PORT=${OUR_PORT:-29931}
PY=${PY:-$REPO_ROOT/.venv/bin/python}
# OUR_EVENT_LOOP=asyncio|uvloop: our broker's --event-loop (unset: its default, uvloop)
LOOP_ARGS=(); [ -n "${OUR_EVENT_LOOP:-}" ] && LOOP_ARGS=(--event-loop "$OUR_EVENT_LOOP")
D=$RB/hac-$CASE${OUR_EVENT_LOOP:+-$OUR_EVENT_LOOP}
rm -rf "$D"; mkdir -p "$D"
MQA() { MQADMIN_LOG_DIR=$LOGDIR/mqadmin bash "$JAVA_DIR_HARNESS/mqadmin.sh" "$MQA_OUT" "$@"; }
P() { PROBE_LOG_ROOT=$LOGDIR/probe PROBE_OFFSET_DIR=$D/probe-offsets "$JAVA_DIR_HARNESS/run.sh" "$JC_OUT" "$@"; }
passed=0; failed=0
result() {  # result NAME OK [DETAIL]
    if [ "$2" = 0 ]; then passed=$((passed + 1)); echo "PASS $1 ${3:-}"; else failed=$((failed + 1)); echo "FAIL $1 ${3:-}"; fi
}
wait_for() {  # wait_for FILE TEXT COUNT
    for _ in $(seq 1 300); do [ "$(grep -c "$2" "$1" 2>/dev/null)" -ge "$3" ] && return 0; sleep 0.2; done
    echo "timed out waiting for '$2' in $1" >&2; return 1
}
boots() { grep -c "boot success" "$LOGDIR/broker.out" 2>/dev/null || echo 0; }
ours_conf() {  # ours_conf FILE [EXTRA LINE]
    cat > "$1" <<EOF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerRole=SLAVE
brokerId=1
haSendHeartbeatInterval=1000
mappedFileSizeCommitLog=1048576
mappedFileSizeConsumeQueue=6000
maxHashSlotNum=1000
maxIndexNum=4000
${2:-}
EOF
}
start_ours() {  # start_ours CONF STORE LOG
    "$PY" -m rocketstore.cli.main -c "$1" broker --namesrv "$NS" --store "$2" \
        --listen "127.0.0.1:$OUR_PORT" --ha-port $((OUR_PORT + 1)) "${LOOP_ARGS[@]}" > "$3" 2>&1 &
    echo $! > "$D/ours.pid"
    wait_for "$3" "Ctrl-C stops" 1
}
stop_ours() { kill -TERM "$(cat "$D/ours.pid")" 2>/dev/null; wait "$(cat "$D/ours.pid")" 2>/dev/null; }
start_java() {  # start_java CONF
    local n; n=$(boots); "$HERE/run_broker.sh" "$1" > /dev/null
    wait_for "$LOGDIR/broker.out" "boot success" $((n + 1))
}
stop_java() { "$HERE/stop.sh" broker > /dev/null; }
same_files() {  # same_files MASTER SLAVE: every master file equal in the slave, waiting up to 60 s
    local f
    for _ in $(seq 1 60); do
        local ok=0
        for f in "$1"/commitlog/*; do cmp -s "$f" "$2/commitlog/${f##*/}" || { ok=1; break; }; done
        [ $ok = 0 ] && return 0; sleep 1
    done
    return 1
}
max_offset() {  # max_offset STORE: the CommitLog end as our CLI reads it (a copy or a stopped broker)
    "$PY" -c '
import sys
from rocketstore import MessageStore
with MessageStore.open(sys.argv[1], read_only=True) as s:
    print(s.max_commit_log_offset())' "$1"
}

"$HERE/run_namesrv.sh" > /dev/null; wait_for "$LOGDIR/namesrv.out" "boot success" 1 || exit 1
JAVA=$D/java-store SLAVE=$D/ours-store
broker_conf "$JAVA" "$D/java.conf"

if [ "$CASE" = truncate ]; then
    ours_conf "$D/ours.conf"
    start_java "$D/java.conf" || exit 1
    start_ours "$D/ours.conf" "$SLAVE" "$D/ours1.log" || exit 1
    sleep 3
    MQA updateTopic -n "$NS" -b "$BR" -t HaT -r 4 -w 4 > "$D/upd-HaT.txt" 2>&1
    P produce "$NS" HaT 300 prodHa > "$D/p1.jsonl" 2> "$D/p1.err"
    same_files "$JAVA" "$SLAVE"; result "slave = master after 300 sends" $?
    stop_java; cp -a "$JAVA" "$D/java-early"
    start_java "$D/java.conf" || exit 1
    PROBE_BODY_BYTES=1000 P produce "$NS" HaT 900 prodHa > "$D/p2.jsonl" 2> "$D/p2.err"
    same_files "$JAVA" "$SLAVE"; result "slave = master after 900 more" $?
    stop_java; stop_ours
    early=$(max_offset "$D/java-early"); late=$(max_offset "$SLAVE")
    echo "   the early master ends at $early, the slave at $late ($((late - early)) bytes more)"
    rm -rf "$JAVA"; cp -a "$D/java-early" "$JAVA"
    start_java "$D/java.conf" || exit 1
    start_ours "$D/ours.conf" "$SLAVE" "$D/ours2.log" || exit 1
    for _ in $(seq 1 100); do [ -n "$(ls -d "$SLAVE"/truncated-* 2>/dev/null)" ] && break; sleep 0.3; done
    sleep 2
    grep -i "truncat\|cut\|REFUSED" "$D/ours2.log" | cut -c1-400 | sed 's/^/   /'
    kept=$(ls -d "$SLAVE"/truncated-* 2>/dev/null | head -1)
    kept_bytes=$( [ -n "$kept" ] && find "$kept" -type f ! -name truncation.json -printf '%s\n' | awk '{s += $1} END {print s + 0}')
    result "the slave kept the bytes it cut in truncated-*/" $([ -n "$kept" ] && [ "${kept_bytes:-0}" = $((late - early)) ]; echo $?) \
        "(${kept:-none}: ${kept_bytes:-0} bytes; $((late - early)) expected)"
    PROBE_BODY_BYTES=500 P produce "$NS" HaT 200 prodHa > "$D/p3.jsonl" 2> "$D/p3.err"
    same_files "$JAVA" "$SLAVE"; result "after the cut and 200 more sends, slave CommitLog files = master's" $? \
        "(master: $(ls "$JAVA/commitlog" | tr '\n' ' '); slave: $(ls "$SLAVE/commitlog" | tr '\n' ' '))"
    stop_java; stop_ours
    "$ROCKETSTORE" compare "$JAVA" "$SLAVE" > "$D/compare.txt" 2>&1; status=$?
    sed 's/^/   /' "$D/compare.txt"
    result "rocketstore compare MASTER SLAVE exits 0" $status
    ok=$(cat "$D"/p[0-9].jsonl | grep -c '"status":"SEND_OK"')
    echo "   $ok SEND_OK of 1400 sends"
elif [ "$CASE" = acl ]; then
    ours_conf "$D/ours.conf"
    start_java "$D/java.conf" || exit 1
    MQA updateTopic -n "$NS" -b "$BR" -t HaT -r 4 -w 4 > "$D/upd-HaT.txt" 2>&1
    MQA updateSubGroup -n "$NS" -b "$BR" -g HaG > "$D/upd-HaG.txt" 2>&1
    P produce "$NS" HaT 50 prodHa > "$D/p1.jsonl" 2> "$D/p1.err"
    P consume "$NS" HaT HaG 50 60 > "$D/c1.jsonl" 2> "$D/c1.err"
    stop_java
    cat > "$BUILD/home/conf/plain_acl.yml" <<'YML'
globalWhiteRemoteAddresses:
accounts:
- accessKey: haslave
  secretKey: haslavesecret
  whiteRemoteAddress:
  admin: true
YML
    echo "aclEnable=true" >> "$D/java.conf"
    start_java "$D/java.conf" || exit 1
    check_meta() {  # check_meta STORE: "topic group offsets" present (1/0 each)
        "$PY" - "$1/config" <<'EOF'
import json, os, re, sys
def load(name):
    path = os.path.join(sys.argv[1], name)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.loads(re.sub(r'([{,]\s*)(-?\d+)(\s*:)', r'\1"\2"\3', f.read()))
print(int("HaT" in load("topics.json").get("topicConfigTable", {})),
      int("HaG" in load("subscriptionGroup.json").get("subscriptionGroupTable", {})),
      int("HaT@HaG" in load("consumerOffset.json").get("offsetTable", {})))
EOF
    }
    start_ours "$D/ours.conf" "$D/unsigned-store" "$D/unsigned.log" || exit 1
    same_files "$JAVA" "$D/unsigned-store"; result "unsigned slave: CommitLog copied (the HA port has no ACL)" $?
    sleep 13  # a metadata round after the registration's
    stop_ours
    got=$(check_meta "$D/unsigned-store")
    result "unsigned slave: no topic, group or offsets copied (denied)" $([ "$got" = "0 0 0" ]; echo $?) "(topic group offsets: $got)"
    grep -i "denied\|No accessKey\|failed" "$D/unsigned.log" | head -3 | cut -c1-220 | sed 's/^/   /'
    ours_conf "$D/signed.conf" 'innerClientAuthenticationCredentials={"accessKey":"haslave","secretKey":"haslavesecret"}'
    start_ours "$D/signed.conf" "$D/signed-store" "$D/signed.log" || exit 1
    same_files "$JAVA" "$D/signed-store"; result "signed slave: CommitLog copied" $?
    sleep 13
    stop_ours
    got=$(check_meta "$D/signed-store")
    result "signed slave: topic, group and offsets copied" $([ "$got" = "1 1 1" ]; echo $?) "(topic group offsets: $got)"
    grep -i "denied\|failed" "$D/signed.log" | head -3 | cut -c1-220 | sed 's/^/   /'
    stop_java
    rm -f "$BUILD/home/conf/plain_acl.yml"
elif [ "$CASE" = crc ]; then
    ours_conf "$D/ours.conf" "haCheckBodyCrc=true"
    start_java "$D/java.conf" || exit 1
    start_ours "$D/ours.conf" "$SLAVE" "$D/ours1.log" || exit 1
    sleep 3
    MQA getBrokerConfig -b "127.0.0.1:$OUR_PORT" > "$D/config.txt" 2>&1
    grep -q "haCheckBodyCrc *= *true" "$D/config.txt"
    result "our slave runs with haCheckBodyCrc=true (its getBrokerConfig)" $?
    MQA updateTopic -n "$NS" -b "$BR" -t HaT -r 4 -w 4 > "$D/upd-HaT.txt" 2>&1
    P produce "$NS" HaT 300 prodHa > "$D/p1.jsonl" 2> "$D/p1.err"
    PROBE_BODY_BYTES=6000 P produce "$NS" HaT 5 prodHa > "$D/p2.jsonl" 2> "$D/p2.err"
    PROBE_BODY_BYTES=1000 P produce "$NS" HaT 1200 prodHa > "$D/p3.jsonl" 2> "$D/p3.err"
    same_files "$JAVA" "$SLAVE"; result "slave checking every body's CRC: CommitLog files = master's" $? \
        "(master: $(ls "$JAVA/commitlog" | tr '\n' ' '); slave: $(ls "$SLAVE/commitlog" | tr '\n' ' '))"
    # (a refused body is logged at ERROR, "...; connecting again"; the path holds "crc")
    complaints=$(grep -cE "^(ERROR|CRITICAL) |Traceback" "$D/ours1.log")
    result "no ERROR line in the slave's log (a bad CRC is one)" $([ "$complaints" = 0 ]; echo $?) "($complaints lines)"
    stop_java; stop_ours
    "$ROCKETSTORE" compare "$JAVA" "$SLAVE" > "$D/compare.txt" 2>&1; status=$?
    sed 's/^/   /' "$D/compare.txt"
    result "rocketstore compare MASTER SLAVE exits 0" $status
    ok=$(cat "$D"/p[0-9].jsonl | grep -c '"status":"SEND_OK"')
    echo "   $ok SEND_OK of 1505 sends"
elif [ "$CASE" = restart ]; then
    # The master restarted twice while our slave follows and a producer sends: a clean
    # stop (SIGTERM) and a kill -9, each started again on its store.
    ours_conf "$D/ours.conf"
    start_java "$D/java.conf" || exit 1
    start_ours "$D/ours.conf" "$SLAVE" "$D/ours1.log" || exit 1
    sleep 3
    MQA updateTopic -n "$NS" -b "$BR" -t HaT -r 4 -w 4 > "$D/upd-HaT.txt" 2>&1
    # 15 producers of 100 in turn: one that meets the master down fails fast (a send
    # refused in ms), the next one sends to the restarted master.
    for k in $(seq 1 15); do
        PROBE_BODY_BYTES=1000 P produce "$NS" HaT 100 prodHa$k >> "$D/p1.jsonl" 2>> "$D/p1.err"
    done &
    producer=$!
    sent() { cat "$D/p1.jsonl" 2>/dev/null | grep -c '"status":"SEND_OK"'; }
    for _ in $(seq 1 600); do [ "$(sent)" -ge 400 ] && break; sleep 0.2; done
    echo "   clean stop of the master after $(sent) sends"
    stop_java; start_java "$D/java.conf" || exit 1
    for _ in $(seq 1 600); do [ "$(sent)" -ge 900 ] && break; sleep 0.2; done
    echo "   kill -9 of the master after $(sent) sends"
    pid=$(cat "$RB/broker.pid"); kill -9 "$pid"
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    start_java "$D/java.conf" || exit 1
    wait "$producer"
    PROBE_BODY_BYTES=500 P produce "$NS" HaT 100 prodHa > "$D/p2.jsonl" 2> "$D/p2.err"
    same_files "$JAVA" "$SLAVE"; result "after both restarts, slave CommitLog files = master's" $? \
        "(master: $(ls "$JAVA/commitlog" | tr '\n' ' '); slave: $(ls "$SLAVE/commitlog" | tr '\n' ' '))"
    follows=$(grep -c "following master" "$D/ours1.log")
    result "the slave followed the master again after each restart" $([ "$follows" -ge 3 ]; echo $?) \
        "($follows connections)"
    # (the metadata sync logs ERROR while the master is down: only replication's count)
    complaints=$(grep -cE "^(ERROR|CRITICAL) rocketstore.broker.ha_slave|Traceback|REFUSED" "$D/ours1.log")
    result "no replication ERROR line (corruption, refused cut) in the slave's log" $([ "$complaints" = 0 ]; echo $?) "($complaints lines)"
    grep -i "replication:" "$D/ours1.log" | cut -c1-200 | sed 's/^/   /' | head -12
    stop_java; stop_ours
    "$ROCKETSTORE" compare "$JAVA" "$SLAVE" > "$D/compare.txt" 2>&1; status=$?
    sed 's/^/   /' "$D/compare.txt"
    result "rocketstore compare MASTER SLAVE exits 0" $status
    ok=$(cat "$D"/p[0-9].jsonl | grep -c '"status":"SEND_OK"')
    echo "   $ok SEND_OK of 1600 sends (the others met the master down)"
elif [ "$CASE" = fast ]; then
    # A Java SYNC_MASTER answers a send once a slave reported its end: 64 sends in flight
    # keep the master ahead of our slave, whose receives then hold several transfers.
    sed -i "s/^brokerRole=.*/brokerRole=SYNC_MASTER/" "$D/java.conf"
    ours_conf "$D/ours.conf"
    start_java "$D/java.conf" || exit 1
    start_ours "$D/ours.conf" "$SLAVE" "$D/ours1.log" || exit 1
    sleep 3
    MQA updateTopic -n "$NS" -b "$BR" -t HaT -r 4 -w 4 > "$D/upd-HaT.txt" 2>&1
    cp_client=$(cat "$JC_OUT/classpath.txt")
    mkdir -p "$D/bench-classes"
    javac -nowarn -cp "$cp_client" -d "$D/bench-classes" "$REPO_ROOT/benchmarks/clients/java/BrokerBench.java" || exit 1
    java -Xms256m -Xmx512m -Drocketmq.client.logUseSlf4j=false -Drocketmq.client.logRoot="$LOGDIR/probe" \
        -Duser.home="$D" -cp "$D/bench-classes:$cp_client" BrokerBench async "$NS" HaT 6000 1024 64 \
        > "$D/bench.jsonl" 2> "$D/bench.err"
    done_line=$(grep '"event":"done"' "$D/bench.jsonl")
    echo "   ${done_line:-no result line}"
    grep "^failure: " "$D/bench.err" | cut -c1-300 | sed 's/^/   /'
    result "every one of 6,000 async sends (64 in flight) SEND_OK from the SYNC_MASTER" \
        $(grep -q '"messages":6000,' <<< "$done_line" && grep -q '"failures":0[,}]' <<< "$done_line"; echo $?)
    same_files "$JAVA" "$SLAVE"; result "slave CommitLog files = master's" $? \
        "(master: $(ls "$JAVA/commitlog" | tr '\n' ' '); slave: $(ls "$SLAVE/commitlog" | tr '\n' ' '))"
    queue_files() { (cd "$1" && find consumequeue -type f | sort); }
    same_queues() {  # same_queues MASTER SLAVE: the same consume-queue files, each equal, waiting up to 60 s
        local f
        for _ in $(seq 1 60); do
            local ok=0
            [ "$(queue_files "$1")" = "$(queue_files "$2")" ] || ok=1
            for f in $(queue_files "$1"); do
                cmp -s "$1/$f" "$2/$f" || { ok=1; break; }
            done
            [ $ok = 0 ] && return 0; sleep 1
        done
        diff <(queue_files "$1") <(queue_files "$2") | sed 's/^/   /'
        for f in $(queue_files "$1"); do cmp "$1/$f" "$2/$f" 2>&1 | sed 's/^/   /'; done
        return 1
    }
    same_index() {  # same_index MASTER SLAVE: the index files, in name order, hold the same bytes
        local a b
        a=$(ls "$1/index" | sort); b=$(ls "$2/index" | sort)
        [ "$(wc -l <<< "$a")" = "$(wc -l <<< "$b")" ] || { echo "   index files: $(echo $a) / $(echo $b)"; return 1; }
        paste <(echo "$a") <(echo "$b") | while read -r x y; do
            cmp "$1/index/$x" "$2/index/$y" 2>&1 | sed 's/^/   /' | grep . && exit 1
            true
        done
    }
    queues=$(queue_files "$JAVA" | wc -l)
    same_queues "$JAVA" "$SLAVE"; result "the slave's consume queues = master's" $? "($queues files)"
    # (counted before the master stops: the metadata sync logs ERROR while it is down)
    complaints=$(grep -cE "^(ERROR|CRITICAL) |Traceback" "$D/ours1.log")
    result "no ERROR line in the slave's log" $([ "$complaints" = 0 ]; echo $?) "($complaints lines)"
    stop_ours; stop_java
    same_index "$JAVA" "$SLAVE"; result "the slave's index files hold the master's bytes" $? \
        "($(ls "$JAVA/index" | wc -l) files)"
    cp -a "$SLAVE" "$D/rebuilt"
    "$ROCKETSTORE" --store "$D/rebuilt" -c "$D/ours.conf" rebuild > "$D/rebuild.txt" 2>&1; status=$?
    sed 's/^/   /' "$D/rebuild.txt" | tail -3
    same_queues "$JAVA" "$D/rebuilt" && same_index "$JAVA" "$D/rebuilt"; same=$?
    result "rebuild of a copy of the slave's store: queues and index = master's" $([ $status = 0 ] && [ $same = 0 ]; echo $?)
    "$ROCKETSTORE" compare "$JAVA" "$SLAVE" > "$D/compare.txt" 2>&1; status=$?
    sed 's/^/   /' "$D/compare.txt"
    result "rocketstore compare MASTER SLAVE exits 0" $status
else
    echo "usage: ha_cases.sh truncate|acl|crc|restart|fast" >&2; exit 2
fi
"$HERE/stop.sh" namesrv > /dev/null
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]

#!/usr/bin/env bash
# ha_interop.sh DIRECTION [ROLE] — replication (issue #36) between a REAL RocketMQ 4.9.8 broker and
# rocketstore's, one master and one slave of brokerName broker-a, with the real name server:
#   DIRECTION java-master   Java master (ROLE: ASYNC_MASTER, default, or SYNC_MASTER) + our SLAVE
#             ours-master   our master (ROLE) + a Java SLAVE (slaveReadEnable=true)
# The Java broker listens on BROKER_PORT (HA on BROKER_PORT+1), ours on OUR_PORT [29931] (HA on
# OUR_PORT+1); the slave learns its master from the name server. Steps: topic HaT (4 queues) and
# group HaG made with mqadmin; 300 sends, 5 of 6000 bytes (compressed), one delay-level-1 send,
# HaG consumes HaT (committed offsets), 1200 sends of 1000 bytes (the CommitLog rolls: 1 MiB
# files); then checks (a) every CommitLog file of the slave equals the master's (cmp, waiting up
# to 60 s for the slave), (b) the slave's topics, subscription groups, consumer offsets and delay
# offsets (config/*.json) hold the master's after a metadata sync round, (c) with the master
# stopped, a Java consumer of a new group receives every HaT message from the slave.
# Prints `PASS`/`FAIL` lines and `N passed, N failed`. Stores and logs in $WORK_DIR/ha-*.
# Needs build_broker.sh, ../build.sh and ../build_mqadmin.sh outputs. Settings: see common.sh.
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
DIRECTION=${1:?usage: ha_interop.sh java-master|ours-master [ASYNC_MASTER|SYNC_MASTER]}
ROLE=${2:-ASYNC_MASTER}
OUR_PORT=${OUR_PORT:-29931}
PY=${PY:-$REPO_ROOT/.venv/bin/python}
# LATE_SLAVE=1 (java-master only): our slave starts after the first 1,506 sends, when the
# master has three CommitLog files; a 4.9.8 master starts a slave that reports offset 0 at
# its newest file, so the slave holds that file and what follows (100 more sends).
LATE=${LATE_SLAVE:-0}
# OUR_EVENT_LOOP=asyncio|uvloop: our broker's --event-loop (unset: its default, uvloop)
LOOP_ARGS=(); [ -n "${OUR_EVENT_LOOP:-}" ] && LOOP_ARGS=(--event-loop "$OUR_EVENT_LOOP")
D=$RB/ha-$DIRECTION-$ROLE$([ "$LATE" = 1 ] && echo -late)${OUR_EVENT_LOOP:+-$OUR_EVENT_LOOP}
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

# our broker's settings: the Java broker's file sizes (broker.conf.in), the same brokerName
ours_conf() {  # ours_conf ROLE ID FILE
    cat > "$3" <<EOF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerRole=$1
brokerId=$2
haListenPort=$((OUR_PORT + 1))
haSendHeartbeatInterval=1000
mappedFileSizeCommitLog=1048576
mappedFileSizeConsumeQueue=6000
maxHashSlotNum=1000
maxIndexNum=4000
EOF
}
start_ours() {  # start_ours CONF STORE
    "$PY" -m rocketstore.cli.main -c "$1" broker --namesrv "$NS" --store "$2" \
        --listen "127.0.0.1:$OUR_PORT" "${LOOP_ARGS[@]}" > "$D/ours.log" 2>&1 &
    echo $! > "$D/ours.pid"
    wait_for "$D/ours.log" "Ctrl-C stops" 1
}
stop_ours() { kill -TERM "$(cat "$D/ours.pid")" 2>/dev/null; wait "$(cat "$D/ours.pid")" 2>/dev/null; }

"$HERE/run_namesrv.sh" > /dev/null; wait_for "$LOGDIR/namesrv.out" "boot success" 1 || exit 1
broker_conf "$D/java-store" "$D/java.conf"
if [ "$DIRECTION" = java-master ]; then
    sed -i "s/^brokerRole=.*/brokerRole=$ROLE/" "$D/java.conf"
    MASTER_STORE=$D/java-store SLAVE_STORE=$D/ours-store
    n=$(boots); "$HERE/run_broker.sh" "$D/java.conf" > /dev/null
    wait_for "$LOGDIR/broker.out" "boot success" $((n + 1)) || exit 1
    ours_conf SLAVE 1 "$D/ours.conf"
    [ "$LATE" = 1 ] || start_ours "$D/ours.conf" "$SLAVE_STORE" || exit 1
    MASTER=$BR
else
    sed -i -e "s/^brokerRole=.*/brokerRole=SLAVE/" -e "s/^brokerId=.*/brokerId=1/" "$D/java.conf"
    echo "slaveReadEnable=true" >> "$D/java.conf"
    MASTER_STORE=$D/ours-store SLAVE_STORE=$D/java-store
    ours_conf "$ROLE" 0 "$D/ours.conf"; start_ours "$D/ours.conf" "$MASTER_STORE" || exit 1
    n=$(boots); "$HERE/run_broker.sh" "$D/java.conf" > /dev/null
    wait_for "$LOGDIR/broker.out" "boot success" $((n + 1)) || exit 1
    MASTER=127.0.0.1:$OUR_PORT
fi
sleep 3  # the slave registers and connects to the master's HA port
MQA updateTopic -n "$NS" -b "$MASTER" -t HaT -r 4 -w 4 > "$D/upd-HaT.txt" 2>&1
MQA updateSubGroup -n "$NS" -b "$MASTER" -g HaG > "$D/upd-HaG.txt" 2>&1
P produce "$NS" HaT 300 prodHa > "$D/p1.jsonl" 2> "$D/p1.err"
PROBE_BODY_BYTES=6000 P produce "$NS" HaT 5 prodHa > "$D/p2.jsonl" 2> "$D/p2.err"
PROBE_DELAY_LEVEL=1 P produce "$NS" HaT 1 prodHa > "$D/p3.jsonl" 2> "$D/p3.err"
sleep 3  # the delayed one is delivered
first=$(cat "$D"/p[123].jsonl | grep -c '"status":"SEND_OK"')
P consume "$NS" HaT HaG "$first" 60 > "$D/c1.jsonl" 2> "$D/c1.err"
PROBE_BODY_BYTES=1000 P produce "$NS" HaT 1200 prodHa > "$D/p4.jsonl" 2> "$D/p4.err"
if [ "$LATE" = 1 ]; then
    start_ours "$D/ours.conf" "$SLAVE_STORE" || exit 1; sleep 3
    PROBE_BODY_BYTES=1000 P produce "$NS" HaT 100 prodHa > "$D/p5.jsonl" 2> "$D/p5.err"
fi
# A send the client gave up on (a timeout on this loaded machine) is not the broker's
# answer: the checks below count the SEND_OK ones.
answered=$(cat "$D"/p[0-9].jsonl | grep -c '"status":')
ok=$(cat "$D"/p[0-9].jsonl | grep -c '"status":"SEND_OK"')
errors=$(cat "$D"/p[0-9].jsonl | grep -c '"event":"send-error"')
result "every send the $ROLE answered is SEND_OK" $([ "$ok" = "$answered" ] && [ "$ok" -ge 1500 ]; echo $?) \
    "($ok SEND_OK of $answered answered; $errors client-side send errors of 1506)"
grep -h -o '"status":"[A-Z_]*"\|"exception":"[^"]*"' "$D"/p[0-9].jsonl | sort | uniq -c | sed 's/^/   /'
got=$(grep -o '"distinct":[0-9]*' "$D/c1.jsonl" | cut -d: -f2)
result "HaG consumed the first $first from the master" $([ "${got:-0}" -ge "$first" ]; echo $?) "(${got:-0})"

# (a) CommitLog files byte for byte
same=1
for _ in $(seq 1 60); do
    same=0
    for f in "$MASTER_STORE"/commitlog/*; do
        # a late slave has the master's newest file at its start and what follows only
        [ "$LATE" = 1 ] && [ ! -f "$SLAVE_STORE/commitlog/${f##*/}" ] && continue
        cmp -s "$f" "$SLAVE_STORE/commitlog/${f##*/}" || { same=1; break; }
    done
    [ $same = 0 ] && break; sleep 1
done
files=$(ls "$MASTER_STORE/commitlog" | tr '\n' ' ')
result "slave CommitLog files = master's" $same "(master files: $files; slave: $(ls "$SLAVE_STORE/commitlog" | tr '\n' ' '))"
[ $same = 0 ] || for f in "$MASTER_STORE"/commitlog/*; do cmp "$f" "$SLAVE_STORE/commitlog/${f##*/}" 2>&1 | sed 's/^/   /'; done

# (b) metadata: wait for a sync round (10 s) after the last change, then compare
sleep 12
meta_out=$("$PY" - "$MASTER_STORE/config" "$SLAVE_STORE/config" <<'EOF'
import json, re, sys
def load(path):
    with open(path) as f:
        text = f.read()
    # fastjson writes non-string keys unquoted
    return json.loads(re.sub(r'([{,]\s*)(-?\d+)(\s*:)', r'\1"\2"\3', text))
master, slave = sys.argv[1], sys.argv[2]
failed = 0
def report(name, ok, detail=""):
    global failed
    failed += not ok
    print(("PASS " if ok else "FAIL ") + name + (" " + detail if detail else ""))
m, s = load(f"{master}/topics.json"), load(f"{slave}/topics.json")
report("slave topics = master's (names, queues, perm)", {t: (c["readQueueNums"], c["writeQueueNums"], c["perm"]) for t, c in m["topicConfigTable"].items()} == {t: (c["readQueueNums"], c["writeQueueNums"], c["perm"]) for t, c in s["topicConfigTable"].items()}, f"({sorted(set(m['topicConfigTable']) ^ set(s['topicConfigTable']))} differ)")
report("slave topics dataVersion = master's", m["dataVersion"] == s["dataVersion"], f"{m['dataVersion']} / {s['dataVersion']}")
m, s = load(f"{master}/subscriptionGroup.json"), load(f"{slave}/subscriptionGroup.json")
report("slave subscription groups = master's", set(m["subscriptionGroupTable"]) == set(s["subscriptionGroupTable"]) and "HaG" in s["subscriptionGroupTable"], f"({sorted(set(m['subscriptionGroupTable']) ^ set(s['subscriptionGroupTable']))} differ)")
m, s = load(f"{master}/consumerOffset.json"), load(f"{slave}/consumerOffset.json")
report("slave consumer offsets = master's", m["offsetTable"] == s["offsetTable"] and "HaT@HaG" in s["offsetTable"], f"{m['offsetTable'].get('HaT@HaG')} / {s['offsetTable'].get('HaT@HaG')}")
m, s = load(f"{master}/delayOffset.json"), load(f"{slave}/delayOffset.json")
report("slave delay offsets = master's", m["offsetTable"] == s["offsetTable"] and m["offsetTable"], f"{m['offsetTable']} / {s['offsetTable']}")
EOF
)
echo "$meta_out"
passed=$((passed + $(grep -c '^PASS' <<< "$meta_out"))); failed=$((failed + $(grep -c '^FAIL' <<< "$meta_out")))

# (c) the master stopped: a new group reads every HaT message from the slave
if [ "$DIRECTION" = java-master ]; then kill -TERM "$(cat "$RB/broker.pid")"; wait_pid=$(cat "$RB/broker.pid")
else stop_ours; wait_pid=""; fi
for _ in $(seq 1 150); do [ -n "$wait_pid" ] && kill -0 "$wait_pid" 2>/dev/null && sleep 0.2 || break; done
sleep 2
want=$ok
if [ "$LATE" = 1 ]; then  # the sends whose CommitLog offset (in offsetMsgId) the slave has
    first_file=$(ls "$SLAVE_STORE/commitlog" | head -1)
    want=$(cat "$D"/p[0-9].jsonl | "$PY" -c '
import json, sys
first = int(sys.argv[1])
print(sum(1 for line in sys.stdin if "SEND_OK" in line
          and int(json.loads(line)["offsetMsgId"][16:], 16) >= first))' "$((10#$first_file))")
fi
P consume "$NS" HaT HaFromSlave "$want" 90 > "$D/c2.jsonl" 2> "$D/c2.err"
got=$(grep -o '"distinct":[0-9]*' "$D/c2.jsonl" | cut -d: -f2)
result "with the master stopped, a new group got every HaT message the slave holds" $([ "${got:-0}" = "$want" ]; echo $?) "(${got:-0} of $want)"

if [ "$DIRECTION" = java-master ]; then stop_ours; else "$HERE/stop.sh" broker > /dev/null; fi
rm -f "$RB/broker.pid"
"$HERE/stop.sh" namesrv > /dev/null
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]

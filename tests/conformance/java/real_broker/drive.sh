#!/usr/bin/env bash
# drive.sh — the workload, against the running real broker (run_namesrv.sh + run_broker.sh), with the
# real 4.9.8 client (../run.sh, JavaClientProbe, built by ../build.sh into $JC_OUT) and the real
# mqadmin (../mqadmin.sh, built by ../build_mqadmin.sh into $MQA_OUT): topics TopicA (4 queues),
# TopicB (2), OrderTopic (2, order), TxTopic (2) and group GroupA; a transactional producer
# (commit / rollback / unknown, the unknown one checked back after ~60 s); plain, 6000-byte
# (compressed), batch, delay-level-2 and auto-created-topic sends; GroupA consumes TopicA, then 15
# more are sent (lag); GroupB consumes TopicB tag0 only; GroupC consumes TopicB answering
# RECONSUME_LATER once (retry topic + SCHEDULE_TOPIC_XXXX). Outputs in $WORK_DIR/drive/.
# Settings: see common.sh. Takes ~1.5 min (it waits for the transaction check).
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
MQA() { MQADMIN_LOG_DIR=${MQADMIN_LOG_DIR:-$LOGDIR/mqadmin} bash "$JAVA_DIR_HARNESS/mqadmin.sh" "$MQA_OUT" "$@"; }
P() { PROBE_LOG_ROOT=$LOGDIR/probe PROBE_OFFSET_DIR=$LOGDIR/probe-offsets "$JAVA_DIR_HARNESS/run.sh" "$JC_OUT" "$@"; }
D=$RB/drive
mkdir -p "$D"
MQA updateTopic -n $NS -b $BR -t TopicA -r 4 -w 4 > $D/upd-TopicA.txt 2>&1
MQA updateTopic -n $NS -b $BR -t TopicB -r 2 -w 2 > $D/upd-TopicB.txt 2>&1
MQA updateTopic -n $NS -c DefaultCluster -t OrderTopic -r 2 -w 2 -o true > $D/upd-OrderTopic.txt 2>&1
MQA updateTopic -n $NS -b $BR -t TxTopic -r 2 -w 2 > $D/upd-TxTopic.txt 2>&1
MQA updateSubGroup -n $NS -b $BR -g GroupA > $D/upd-GroupA.txt 2>&1
# transactional producer in the background (commit / rollback / unknown -> checked after ~60s)
P tx $NS TxTopic tx_group 80 > $D/tx.jsonl 2>$D/tx.err &
TXPID=$!
P produce $NS TopicA 60 prodA > $D/produce-A1.jsonl 2>$D/produce-A1.err
PROBE_BODY_BYTES=6000 P produce $NS TopicA 5 prodA > $D/produce-A-big.jsonl 2>$D/produce-A-big.err
P produce $NS TopicB 20 prodB > $D/produce-B.jsonl 2>$D/produce-B.err
PROBE_BATCH=1 P produce $NS TopicB 5 prodB > $D/produce-B-batch.jsonl 2>$D/produce-B-batch.err
PROBE_DELAY_LEVEL=2 P produce $NS TopicB 3 prodB > $D/produce-B-delay.jsonl 2>$D/produce-B-delay.err
P produce $NS OrderTopic 10 prodO > $D/produce-O.jsonl 2>$D/produce-O.err
P produce $NS AutoTopic 4 prodAuto > $D/produce-Auto.jsonl 2>$D/produce-Auto.err
# consume all of TopicA with GroupA, then send 15 more (lag); GroupB consumes TopicB tag0 only;
# GroupC consumes TopicB asking RECONSUME_LATER once (retry topic + schedule topic)
P consume $NS TopicA GroupA 65 40 > $D/consume-A.jsonl 2>$D/consume-A.err
P produce $NS TopicA 15 prodA > $D/produce-A2.jsonl 2>$D/produce-A2.err
P consume $NS TopicB GroupB 10 30 tag0 > $D/consume-B.jsonl 2>$D/consume-B.err
PROBE_RECONSUME_LATER=1 P consume $NS TopicB GroupC 28 60 > $D/consume-C.jsonl 2>$D/consume-C.err
wait $TXPID
sleep 8
echo drive done

#!/usr/bin/env bash
# scenarios.sh — starts a fresh rocketstore broker with the gRPC port (broker.sh: gRPC
# 127.0.0.1:$GRPC_PORT, default 48081; a broker.conf with 2 s transaction checks; FIFO group
# g_fifo and g_fifo_s) and runs every scenario with the RocketMQ 5.x gRPC Java client
# (Grpc5Probe). Outputs in $WORK_DIR/out/<name>.jsonl/.err, broker log in $WORK_DIR/broker.log.
# One PASS/FAIL line per scenario (~5 min). Needs build.sh first (same WORK_DIR). The gRPC port
# is permissive by default (plain and TLS, a self-signed certificate): PROBE_SSL=1 runs every
# probe client with TLS, and `PROBE_SSL=1 scenarios.sh --grpc-tls-mode enforcing` makes sure
# nothing goes plain (arguments go to serve). The docs' example always uses the client's
# default, TLS. Settings: see env.sh.
source "$(cd "$(dirname "$0")" && pwd)/env.sh"
cd "$WORK_DIR"
EP=127.0.0.1:$GRPC_PORT
R=$HERE/run.sh
mkdir -p out; rm -rf out/*
printf 'transactionTimeOut=2000\ntransactionCheckInterval=2000\n' > broker.conf
export BROKER_GLOBAL_OPTS="-c $WORK_DIR/broker.conf"
FIFO_GROUPS="g_fifo g_fifo_s" "$HERE/broker.sh" start "$@"
trap '"$HERE/broker.sh" stop' EXIT
"$HERE/broker.sh" topic OrderEvents TA T_ci T_push T_fifo T_timer T_timer2 T_tx T_async T_admin
res() { printf '%-58s %s\n' "$1" "$2"; }
j() { python3 -c "import json,collections
def lines(name, event=None):
    out = [json.loads(l) for l in open('out/%s.jsonl' % name) if l.startswith('{')]
    return [d for d in out if event is None or d['event'] == event]
$1"; }
run() { local name=$1 t=$2; shift 2; timeout "$t" "$@" > out/$name.jsonl 2> out/$name.err; echo $?; }

rc=$(PROBE_MAIN=DocsExample run s0_docs 60 $R $EP)
res "0 docs/broker.md's Java snippet (DocsExample)" "$(python3 - "$HERE/probe/DocsExample.java" "$REPO_ROOT/docs/broker.md" <<'PY'
import re, sys
java = open(sys.argv[1]).read()
body = java.split("// docs:begin\n")[1].split("        // docs:end")[0]
ran = "\n".join(l[8:] for l in body.splitlines()).replace("setEndpoints(endpoints)", 'setEndpoints("127.0.0.1:8081")')
docs = open(sys.argv[2]).read()
out = open("out/s0_docs.jsonl").read().split()
sent = out[1] if out[:1] == ["sent"] else None
ok = ran.strip() in docs and sent is not None and ["received", sent, "attempt", "1"] == out[2:6]
print("PASS" if ok else "FAIL", "(the snippet is %s in docs/broker.md)" % ("word for word" if ran.strip() in docs else "NOT"))
PY
)"
rc=$(run s1_produce 60 $R produce $EP TA 20)
res "1 Producer.send 20 (tags, keys, property)" "$([ $rc = 0 ] && [ $(grep -c '"sent"' out/s1_produce.jsonl) = 20 ] && echo PASS || echo FAIL rc=$rc)"
rc=$(run s2_simple 60 $R simple $EP TA g_simple 20 40)
res "2a SimpleConsumer receive+ack 20, as sent" "$(j "
sent = {d['messageId']: d for d in lines('s1_produce', 'sent')}
got = lines('s2_simple', 'recv'); bad = 0
for d in got:
    i = sent[d['messageId']]['i']
    bad += not (d['body'] == 'body-%d' % i and d['tag'] == ['tagA', 'tagB', 'tagC'][i % 3]
                and sorted(d['keys']) == ['k%d' % i, 'kk%d' % i] and d['props'].get('custom') == 'v%d' % i
                and d['deliveryAttempt'] == 1 and d['topic'] == 'TA')
n = len({d['messageId'] for d in got})
print(('PASS' if $rc == 0 and n == 20 and len(got) == 20 and bad == 0 else 'FAIL rc=$rc'), n, 'distinct,', bad, 'not as sent')")"
rc=$(run s2_simple_again 30 $R simple $EP TA g_simple 0 8)
res "2b same group again: nothing redelivered (8 s)" "$([ $rc = 0 ] && [ $(grep -c '"recv"' out/s2_simple_again.jsonl) = 0 ] && echo PASS || echo FAIL)"
rc=$(run s2_simple_tags 60 $R simple $EP TA g_tags 14 30 'tagA||tagB')
res "2c SimpleConsumer tag filter tagA||tagB: 14 of 20" "$(j "
got = lines('s2_simple_tags', 'recv')
print('PASS' if $rc == 0 and len(got) == 14 and {d['tag'] for d in got} == {'tagA', 'tagB'} else 'FAIL rc=$rc %d' % len(got))")"
run s3_ci_produce 30 $R produce $EP T_ci 1 > /dev/null
rc=$(PROBE_CHANGE_INVISIBLE_S=10 run s3_change_invisible 60 $R simple $EP T_ci g_ci 1 50)
res "3 changeInvisibleDuration(10 s): back after 10 s, attempt 2" "$(j "
got = lines('s3_change_invisible', 'recv'); ch = lines('s3_change_invisible', 'changed')
ok = $rc == 0 and len(got) == 2 and got[0]['messageId'] == got[1]['messageId'] and [d['deliveryAttempt'] for d in got] == [1, 2]
gap = (got[1]['recvAt'] - ch[0]['at']) / 1000 if ok else 0
print('PASS' if ok and 9.9 <= gap < 20 else 'FAIL rc=$rc', 'again after %.2f s' % gap, 'attempts', [d['deliveryAttempt'] for d in got])")"
run s4_push_produce 30 $R produce $EP T_push 10 > /dev/null
rc=$(PROBE_FAIL_FIRST=1 run s4_push 90 $R push $EP T_push g_push 10 70)
res "4 PushConsumer 10; FAILURE once -> redelivered, attempt 2" "$(j "
got = lines('s4_push', 'recv'); ids = collections.Counter(d['messageId'] for d in got)
again = [d for d in got if ids[d['messageId']] > 1]
ok = $rc == 0 and len(ids) == 10 and len(got) == 11 and [d['deliveryAttempt'] for d in again] == [1, 2]
print('PASS' if ok else 'FAIL rc=$rc', len(ids), 'distinct,', len(got), 'deliveries')")"
rc=$(PROBE_ASYNC=1 run s4_async 60 $R produce $EP T_async 10); rc2=$(run s4_async_consume 60 $R push $EP T_async g_async 10 50)
res "4b Producer.sendAsync 10 + PushConsumer" "$([ $rc = 0 ] && [ $rc2 = 0 ] && echo PASS || echo FAIL rc=$rc/$rc2)"
rc=$(PROBE_GROUPS=3 run s5_fifo_produce 60 $R produce $EP T_fifo 30)
rc2=$(run s5_fifo_push 90 $R push $EP T_fifo g_fifo 30 70)
rc3=$(PROBE_BATCH=1 run s5_fifo_simple 90 $R simple $EP T_fifo g_fifo_s 30 70)
for f in push simple; do
res "5 FIFO groups (3 message groups x 10), $f consumer" "$(j "
sent = {d['messageId']: d for d in lines('s5_fifo_produce', 'sent')}
got = [d for d in lines('s5_fifo_$f', 'recv')]
order = collections.defaultdict(list)
for d in got: order[d['group']].append(sent[d['messageId']]['i'])
ok = len(sent) == 30 and len(got) == 30 and all(v == sorted(v) and len(v) == 10 for v in order.values()) and len(order) == 3
ok = ok and all(d['group'] == sent[d['messageId']]['group'] for d in got)
print('PASS' if ok else 'FAIL', {g: v[:4] + ['...'] for g, v in sorted(order.items())})")"
done
( timeout 60 $R simple $EP T_timer g_timer 2 45 > out/s6_timer_consume.jsonl 2> out/s6_timer_consume.err & )
sleep 5
rc=$(PROBE_DELIVER_IN_MS=10000 run s6_timer 30 $R produce $EP T_timer 2)
sleep 16
res "6 delivery timestamp +10 s: not before it" "$(j "
sent = {d['messageId']: d for d in lines('s6_timer', 'sent')}
got = lines('s6_timer_consume', 'recv')
early = [(d['recvAt'] - sent[d['messageId']]['deliveryTimestamp']) / 1000 for d in got]
ok = $rc == 0 and len(got) == 2 and min(early) >= 0 and all(d['deliveryTimestamp'] == sent[d['messageId']]['deliveryTimestamp'] for d in got)
print('PASS' if ok else 'FAIL', 'received', ['%+.2f s' % x for x in early], 'from the delivery time')")"
rc=$(run s7_tx 60 $R tx $EP T_tx 40); rc2=$(run s7_tx_consume 40 $R simple $EP T_tx g_tx 2 25)
res "7 transactions: commit, rollback, open -> checker COMMIT" "$(j "
chk = [d['body'] for d in lines('s7_tx', 'check')]
got = sorted(d['body'] for d in lines('s7_tx_consume', 'recv'))
print('PASS' if $rc == 0 and chk == ['unknown'] and got == ['commit', 'unknown'] else 'FAIL', 'checked', chk, 'consumed', got)")"
# mqadmin's consumerStatus -s (GET_CONSUMER_RUNNING_INFO with jstack) and queryMsgById -d
# (CONSUME_MESSAGE_DIRECTLY) about a running PushConsumer, sent to the broker's remoting port:
# relayed over the client's telemetry stream, answered with its thread stack and with its
# listener's verdict on the message (CR_SUCCESS).
rc=$(run s10_admin_produce 60 $R produce $EP T_admin 1)
PROBE_LINGER_MS=0 timeout 120 $R push $EP T_admin g_admin 1000 60 > out/s10_admin_push.jsonl 2> out/s10_admin_push.err &
push_pid=$!
for _ in $(seq 120); do grep -q '"started"' out/s10_admin_push.jsonl 2>/dev/null && break; sleep 0.5; done
sleep 2  # its settings (with the group) reach the broker after start
client=$(j "print(lines('s10_admin_push', 'started')[0]['clientId'])" 2>/dev/null)
msg=$(j "print(lines('s10_admin_produce', 'sent')[0]['messageId'])")
offset_id=$("$ROCKETSTORE" --store "$WORK_DIR/store" --json queryMsgByUniqueKey -t T_admin -i "$msg" \
    | python3 -c "import json,sys; print(json.loads(sys.stdin.readline())['msgId'])")
"$REPO_ROOT/.venv/bin/python" - "127.0.0.1:$BROKER_PORT" "$client" "$offset_id" > out/s10_admin_ask.jsonl <<'PY'
import json, sys, time
from rocketstore.remoting.blocking import invoke_sync, request
address, client, offset_id = sys.argv[1:]
for code, fields in ((307, {"jstackEnable": "true"}), (309, {"msgId": offset_id}), (307, {"jstackEnable": "true", "consumerGroup": "g_other"})):
    began = time.monotonic()
    asked = {"consumerGroup": "g_admin", "clientId": client, **fields}
    answer = invoke_sync(address, request(code, asked), 20)
    print(json.dumps({"event": "answer", "code": code, "response": answer.code, "remark": answer.remark,
                      "body": answer.body.decode(errors="replace"), "seconds": round(time.monotonic() - began, 2)}))
PY
kill $push_pid 2>/dev/null; wait $push_pid 2>/dev/null
res "10 mqadmin thread stack + verify through telemetry" "$(j "
stack, verify, other = lines('s10_admin_ask', 'answer')
info = json.loads(stack['body']) if stack['response'] == 0 else {}
result = json.loads(verify['body']) if verify['response'] == 0 else {}
ok = 'Thread' in info.get('jstack', '') and result.get('consumeResult') == 'CR_SUCCESS' and other['response'] == 1
print('PASS' if ok else 'FAIL', 'jstack of %d lines in %.2f s,' % (info.get('jstack', '').count(chr(10)), stack['seconds']), 'verify', result.get('consumeResult'), result.get('remark'), 'in %.2f s,' % verify['seconds'], 'other group:', other['remark'])")"
# A delivery time that falls while the broker is down: delivered after the restart, not before it.
rc=$(PROBE_DELIVER_IN_MS=15000 run s8_timer_restart 30 $R produce $EP T_timer2 1)
"$HERE/broker.sh" restart "$@" > /dev/null
rc2=$(run s8_timer_restart_consume 60 $R simple $EP T_timer2 g_timer2 1 40)
res "8 delivery timestamp +15 s across a broker restart" "$(j "
sent = {d['messageId']: d for d in lines('s8_timer_restart', 'sent')}
got = lines('s8_timer_restart_consume', 'recv')
early = [(d['recvAt'] - sent[d['messageId']]['deliveryTimestamp']) / 1000 for d in got]
print('PASS' if $rc == 0 and $rc2 == 0 and len(got) == 1 and min(early) >= 0 else 'FAIL rc=$rc/$rc2', 'received', ['%+.2f s' % x for x in early], 'from the delivery time')")"
# The ACL: the broker restarted with --acl, one account that may publish and subscribe TA
# only, and consume as g_acl only (and an admin account, with which serve's broker signs its
# registration at its own name server: without one, serve stops).
printf '%s\n' 'accounts:' '- accessKey: rocketstoreAdmin' '  secretKey: adminSecret1' '  admin: true' \
    '- accessKey: javaProbe' '  secretKey: javaSecret1' \
    '  defaultTopicPerm: DENY' '  defaultGroupPerm: DENY' '  topicPerms:' '  - TA=PUB|SUB' \
    '  groupPerms:' '  - g_acl=SUB' > plain_acl.yml; chmod 600 plain_acl.yml
"$HERE/broker.sh" restart --acl "$WORK_DIR/plain_acl.yml" "$@" > /dev/null
export PROBE_ACCESS_KEY=javaProbe PROBE_SECRET_KEY=javaSecret1
rc=$(run s9_acl_produce 60 $R produce $EP TA 3)
rc2=$(run s9_acl_simple 60 $R simple $EP TA g_acl 3 30)
rc3=$(PROBE_SECRET_KEY=wrong run s9_acl_wrong_secret 60 $R produce $EP TA 1)
rc4=$(PROBE_ACCESS_KEY= run s9_acl_unsigned 60 $R produce $EP TA 1)
rc5=$(run s9_acl_other_topic 60 $R produce $EP T_ci 1)
rc6=$(run s9_acl_other_group 60 $R simple $EP TA g_other 1 10)
unset PROBE_ACCESS_KEY PROBE_SECRET_KEY
why() { grep -o -m1 -E 'response-code=[0-9]+\] [^,]{0,60}|UNAUTHORIZED[^,]{0,80}' out/$1.err | head -1; }
res "9 ACL: signed send 3 + receive (account's topic, group)" "$([ $rc = 0 ] && [ $rc2 = 0 ] && echo PASS || echo FAIL rc=$rc/$rc2)"
res "9 ACL: wrong secret, unsigned, other topic, other group" "$([ $rc3 != 0 ] && [ $rc4 != 0 ] && [ $rc5 != 0 ] && [ $rc6 != 0 ] && [ $(grep -c '"recv"' out/s9_acl_other_group.jsonl) = 0 ] && echo PASS refused || echo FAIL rc=$rc3/$rc4/$rc5/$rc6) ($(why s9_acl_wrong_secret); $(why s9_acl_unsigned); $(why s9_acl_other_topic); $(why s9_acl_other_group))"
grep -h -i -E 'error|traceback|not supported' broker.log | sort | uniq -c | head -20

#!/usr/bin/env bash
# scenarios.sh — starts a fresh rocketstore broker (broker.sh: 127.0.0.1:$BROKER_PORT, name server
# 127.0.0.1:$NAMESRV_PORT, default 40911/40876) and runs every scenario with the RocketMQ 5.3.3
# client (Client5Probe). Outputs in $WORK_DIR/out/<name>.jsonl/.err, broker log in
# $WORK_DIR/broker.log. Prints one PASS/FAIL line per scenario (~4 min). Needs build.sh first
# (same WORK_DIR). Settings: see env.sh.
source "$(cd "$(dirname "$0")" && pwd)/env.sh"
cd "$WORK_DIR"
NS=127.0.0.1:$NAMESRV_PORT
R=$HERE/run.sh
mkdir -p out; rm -rf out/* tmp/client5
"$HERE/broker.sh" start
trap '"$HERE/broker.sh" stop' EXIT
res() { printf '%-52s %s\n' "$1" "$2"; }
j() { python3 -c "$1" ; }
run() { local name=$1 t=$2; shift 2; timeout "$t" "$@" > out/$name.jsonl 2> out/$name.err; echo $?; }

rc=$(PROBE_BIG=4 run s1_produce 60 $R produce $NS TA 20); res "1 produce 20 sync (SEND_OK)" "$([ $rc = 0 ] && [ $(grep -c SEND_OK out/s1_produce.jsonl) = 20 ] && echo PASS || echo FAIL rc=$rc)"
rc=$(run s2_push 90 $R consume $NS TA g_push 14 60 'tagA||tagB')
chk=$(j "
import json
sent={d['msgId']:d for d in map(json.loads,open('out/s1_produce.jsonl')) if d['event']=='sent'}
bad=0;n=0
for d in map(json.loads,open('out/s2_push.jsonl')):
    if d['event']!='recv': continue
    n+=1; s=sent[d['msgId']]; i=s['i']
    ok=d['tags']==['tagA','tagB','tagC'][i%3] and d['keys']==f'k{i} kk{i}' and d['props'].get('custom')==f'v{i}' and d['offsetMsgId']==s['offsetMsgId'] and (d['queueId'],d['queueOffset'])==(s['queueId'],s['queueOffset']) and d['bodyLen']==(5000 if i==4 else len(f'body-{i}'))
    bad+= not ok
print('PASS' if n==14 and bad==0 else 'FAIL n=%d bad=%d'%(n,bad))")
res "2a push tagA||tagB: 14 msgs, keys/tags/props/body" "$chk"
rc=$(run s2_push_again 60 $R consume $NS TA g_push 0 20 'tagA||tagB'); res "2b restart same group: nothing redelivered" "$([ $rc = 0 ] && echo PASS || echo FAIL)"
rc=$(run s3_lite 60 $R lite $NS TA g_lite 20 20); res "3a lite pull subscribe+poll" "$([ $rc = 0 ] && echo PASS || echo "FAIL ($(grep -c '"code":361' out/s3_lite.jsonl) x code 361 -> $(grep -m1 -o '"respCode":[0-9]*,"remark":"[^"]*"' out/s3_lite.jsonl))")"
rc=$(PROBE_LINGER_MS=1000 run s3_assign 60 $R assign $NS TA g_assign 8 12 3); res "3b lite pull assign+seek(3)" "$([ $rc = 0 ] && echo PASS || echo "FAIL ($(grep -c '"code":361' out/s3_assign.jsonl) x code 361)")"
rc=$(PROBE_REWRITE_361=1 run s3_lite_rewritten 60 $R lite $NS TA g_lite_rw 20 20); res "3c (diagnostic) lite subscribe, 361 sent as 11" "$([ $rc = 0 ] && echo PASS || echo FAIL)"
rc=$(PROBE_REWRITE_361=1 PROBE_LINGER_MS=1000 run s3_assign_rewritten 60 $R assign $NS TA g_assign_rw 8 12 3); res "3d (diagnostic) assign+seek, 361 sent as 11" "$([ $rc = 0 ] && echo PASS || echo FAIL)"
rc=$(PROBE_ORDERLY=1 run s4_orderly 60 $R consume $NS TA g_ord 20 40); res "4a orderly" "$([ $rc = 0 ] && echo PASS || echo FAIL)"
rc=$(PROBE_BROADCAST=1 run s4_broadcast 60 $R consume $NS TA g_bc 20 40); res "4b broadcasting" "$([ $rc = 0 ] && echo PASS || echo FAIL)"
run s4_rl_produce 30 $R produce $NS TR 2 >/dev/null
rc=$(PROBE_RECONSUME_LATER=1 run s4_reconsume_later 90 $R consume $NS TR g_rl 2 60); res "4c RECONSUME_LATER once -> %RETRY% redelivery" "$([ $rc = 0 ] && grep -q '%RETRY%g_rl' out/s4_reconsume_later.jsonl && echo PASS || echo FAIL)"
for m in batch async oneway; do
  rc=$(PROBE_MODE=$m run s5_$m 60 $R produce $NS T_$m 10); rc2=$(run s5_${m}_consume 60 $R consume $NS T_$m g_$m 10 30)
  res "5 $m send 10 + consume" "$([ $rc = 0 ] && [ $rc2 = 0 ] && echo PASS || echo FAIL) $(grep -o '"distinct":[0-9]*' out/s5_${m}_consume.jsonl)"
done
rc=$(PROBE_DELAY_LEVEL=2 run s5_delay 60 $R produce $NS T_delay 3); rc2=$(run s5_delay_consume 60 $R consume $NS T_delay g_delay 3 30)
res "5 delay level 2" "$(j "
import json
ds=[(d['recvAt']-d['bornTimestamp'])/1000 for d in map(json.loads,open('out/s5_delay_consume.jsonl')) if d['event']=='recv']
print(('PASS' if len(ds)==3 and min(ds)>=4.9 else 'FAIL'), 'delivered after', ['%.2fs'%x for x in ds])")"
run s5_timer_topic 30 $R produce $NS T_timer 1 >/dev/null
( timeout 60 $R consume $NS T_timer g_timer 3 45 > out/s5_timer_consume.jsonl 2> out/s5_timer_consume.err & ); sleep 7
PROBE_DELIVER_IN_MS=20000 run s5_timer_deliverms 30 $R produce $NS T_timer 1 >/dev/null
PROBE_DELAY_SEC=20 run s5_timer_delaysec 30 $R produce $NS T_timer 1 >/dev/null
# The consumer ends once it has the 3 messages (or after its 45 s): the timer ones are due 20 s on.
for _ in $(seq 1 300); do grep -q '"event":"done"' out/s5_timer_consume.jsonl 2>/dev/null && break; sleep 0.2; done
res "5 timer setDeliverTimeMs(+20s)/setDelayTimeSec(20)" "$(j "
import json
# setDeliverTimeMs: not before TIMER_DELIVER_MS (the client's clock when it built the message;
# a send slowed by a loaded machine is born later); setDelayTimeSec: 20 s from the broker's
# arrival time, the timer's 1 s precision rounding down: not before born + 19 s.
ds=[]
for d in map(json.loads,open('out/s5_timer_consume.jsonl')):
    p=d.get('props',{})
    if d['event']=='recv' and 'TIMER_DELIVER_MS' in p: ds.append(('deliverMs', (d['recvAt']-int(p['TIMER_DELIVER_MS']))/1000, 0))
    elif d['event']=='recv' and 'TIMER_DELAY_SEC' in p: ds.append(('delaySec', (d['recvAt']-d['bornTimestamp'])/1000, 19))
sent=[d for f in ('deliverms','delaysec') for d in map(json.loads,open('out/s5_timer_%s.jsonl'%f)) if d['event'] in ('sent','send-error')]
st=', '.join(sorted(set('SEND_OK' if d['event']=='sent' else 'refused: '+d['exception'].split('DESC: ')[-1].split(' BROKER:')[0] for d in sent)))
print(('PASS' if sorted(k for k,_,_ in ds)==['delaySec','deliverMs'] and all(x>=m for _,x,m in ds) else 'FAIL'), st+', received', ['%s: %+.2fs after %s' % (k, x, 'the delivery time' if k=='deliverMs' else 'born') for k,x,_ in ds])")"
run s5_tx_topic 30 $R produce $NS T_tx 1 >/dev/null
rc=$(run s6_tx 130 $R tx $NS T_tx g_txp 110); rc2=$(run s6_tx_consume 60 $R consume $NS T_tx g_txc 3 20)
res "6 tx commit/rollback/unknown->check" "$(j "
import json
chk=[d['body'] for d in map(json.loads,open('out/s6_tx.jsonl')) if d['event']=='check']
got=sorted(d['body'] for d in map(json.loads,open('out/s6_tx_consume.jsonl')) if d['event']=='recv')
print(('PASS' if chk==['unknown'] and 'rollback' not in got and 'commit' in got and 'unknown' in got else 'FAIL'), 'checks', chk, 'consumed', got)")"
rc=$(run s7_query 60 $R query $NS TA k3); res "7 queryMessage(key)+viewMessage(offsetMsgId/msgId)" "$([ $rc = 0 ] && grep -q viewed-by-msgId out/s7_query.jsonl && echo PASS || echo FAIL)"
run s8_topic 30 $R produce $NS T_hb 8 >/dev/null
rc=$(PROBE_TRACE=1 PROBE_HB_MS=4000 PROBE_JAVA_OPTS=-Dcom.rocketmq.heartbeat.v2=true run s8_hbv2 60 $R consume $NS T_hb g_hb 3 18 tagA)
res "8a heartbeat v2 consumer" "$([ $rc = 0 ] && echo PASS || echo FAIL) (HEART_BEAT answers ext: $(grep '"code":34,' out/s8_hbv2.jsonl | grep -o '"respExt":{[^}]*}' | sort | uniq -c | tr -s ' '))"
rc=$(PROBE_CLIENT_REBALANCE=0 run s8_server_rebalance 60 $R consume $NS T_hb g_cr 8 20); res "8b setClientRebalance(false) (QUERY_ASSIGNMENT)" "$([ $rc = 0 ] && echo PASS || echo "FAIL ($(grep -c '"code":400' out/s8_server_rebalance.jsonl) x code 400 -> $(grep -m1 -o '"respCode":[0-9]*,"remark":"[^"]*"' out/s8_server_rebalance.jsonl))")"
grep -h 'not supported' broker.log | sort | uniq -c

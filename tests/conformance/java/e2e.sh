#!/usr/bin/env bash
# e2e.sh OUT_DIR [RUN_DIR]
#   Starts rocketstore (broker + embedded name server) on free 127.0.0.1 ports over a fresh store
#   in RUN_DIR (default: a new ${TMPDIR:-/tmp}/rocketstore-java-client/runs/<time>), drives it with the real RocketMQ
#   4.9.8 Java client through JavaClientProbe (built by build.sh into OUT_DIR), checks the answers,
#   stops the broker, and prints "N passed, N failed".
#   E2E_TX=0 skips the transaction scenario (which waits ~75 s for the broker's check-back).
#   ROCKETSTORE=/path/to/rocketstore overrides the broker binary.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT_DIR=$(cd "$1" && pwd)
RUN_DIR=${2:-${TMPDIR:-/tmp}/rocketstore-java-client/runs/$(date +%Y%m%d-%H%M%S)}
ROCKETSTORE=${ROCKETSTORE:-$HERE/../../../.venv/bin/rocketstore}
mkdir -p "$RUN_DIR"
RUN_DIR=$(cd "$RUN_DIR" && pwd)
export PROBE_LOG_ROOT="$RUN_DIR/client-logs"
export PROBE_OFFSET_DIR="$RUN_DIR/local-offsets"

read -r BPORT NSPORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
NS=127.0.0.1:$NSPORT

"$ROCKETSTORE" --store "$RUN_DIR/store" serve --listen 127.0.0.1:$BPORT --namesrv-listen $NS \
    --flush SYNC_FLUSH > "$RUN_DIR/broker.out" 2> "$RUN_DIR/broker.err" &
BROKER_PID=$!
stop_broker() {
    if kill -0 $BROKER_PID 2>/dev/null; then
        kill -INT $BROKER_PID
        for _ in $(seq 50); do kill -0 $BROKER_PID 2>/dev/null || break; sleep 0.2; done
        kill -0 $BROKER_PID 2>/dev/null && kill -KILL $BROKER_PID
    fi
}
trap stop_broker EXIT
for _ in $(seq 100); do
    grep -q "Ctrl-C stops" "$RUN_DIR/broker.err" 2>/dev/null && break
    sleep 0.2
done
grep -q "Ctrl-C stops" "$RUN_DIR/broker.err" || { echo "broker did not start:"; cat "$RUN_DIR/broker.err"; exit 1; }
echo "broker 127.0.0.1:$BPORT, name server $NS, run dir $RUN_DIR"

probe() { # probe NAME ARGS... -> RUN_DIR/NAME.out (events), NAME.err (stack traces)
    local name=$1; shift
    "$HERE/run.sh" "$OUT_DIR" "$@" > "$RUN_DIR/$name.out" 2> "$RUN_DIR/$name.err"
    echo $? > "$RUN_DIR/$name.rc"
}

probe produce produce $NS E2ETopic 10
probe consume consume $NS E2ETopic e2e_cg 10 60
probe reconsume consume $NS E2ETopic e2e_cg 0 8
probe tagconsume consume $NS E2ETopic e2e_cg_tag 7 60 'tag0||tag2'
probe query query $NS E2ETopic k4
if [ "${E2E_TX:-1}" != 0 ]; then
    probe tx tx $NS E2ETxTopic e2e_txg 75
    # a fresh group must see exactly the committed two (rollback never delivered): watch 15 s
    probe txall consume $NS E2ETxTopic e2e_txcg3 3 15
fi
stop_broker
trap - EXIT

python3 - "$RUN_DIR" "${E2E_TX:-1}" <<'EOF'
import json, os, sys
run, tx = sys.argv[1], sys.argv[2] != "0"
passed = failed = 0

def events(name):
    path = os.path.join(run, name + ".out")
    out = []
    if os.path.exists(path):
        for line in open(path):
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
    return out

def check(what, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print("PASS", what)
    else:
        failed += 1
        print("FAIL", what, "--", detail)

def errors(name):
    return [e for e in events(name) if e["event"].endswith("error")]

sent = [e for e in events("produce") if e["event"] == "sent"]
check("produce: 10 x SEND_OK", len(sent) == 10 and all(e["status"] == "SEND_OK" for e in sent),
      errors("produce") or sent)
recv = [e for e in events("consume") if e["event"] == "recv"]
want = {"body-%d" % i: i for i in range(10)}
check("consume: the 10 bodies, once each", sorted(e["body"] for e in recv) == sorted(want),
      errors("consume") or [e["body"] for e in recv])
bad = [e for e in recv if e["body"] in want and (
    e["tags"] != "tag%d" % (want[e["body"]] % 3) or e["keys"] != "k%d" % want[e["body"]]
    or e["props"].get("custom") != "v%d" % want[e["body"]])]
check("consume: tags, keys, user property", recv and not bad, bad)
by_id = {e["msgId"]: e for e in sent}
mism = [e for e in recv if e["msgId"] not in by_id or by_id[e["msgId"]]["queueOffset"] != e["queueOffset"]
        or by_id[e["msgId"]]["queueId"] != e["queueId"] or by_id[e["msgId"]]["offsetMsgId"] != e["offsetMsgId"]]
check("consume: msgId/offsetMsgId/queue/offset match the send results", recv and not mism, mism)
re = [e for e in events("reconsume") if e["event"] == "recv"]
check("re-consume with the same group after commit: nothing", not re and not errors("reconsume"),
      errors("reconsume") or [e["body"] for e in re])
tag = [e for e in events("tagconsume") if e["event"] == "recv"]
check("tag filter tag0||tag2: 7 messages", sorted(e["body"] for e in tag)
      == sorted("body-%d" % i for i in range(10) if i % 3 != 1), errors("tagconsume") or [e["body"] for e in tag])
q = events("query")
check("queryMessage by key k4 + viewMessage", any(e["event"] == "found" and e["body"] == "body-4" for e in q)
      and any(e["event"] == "viewed" and e["body"] == "body-4" for e in q), q)
if tx:
    t = events("tx")
    ts = [e for e in t if e["event"] == "tx-sent"]
    check("tx: 3 half messages SEND_OK", len(ts) == 3 and all(e["sendStatus"] == "SEND_OK" for e in ts),
          errors("tx") or ts)
    checks = [e for e in t if e["event"] == "check"]
    check("tx: broker checked back the UNKNOW one (and only it)",
          checks and all(e["body"] == "unknown" for e in checks), checks)
    tc = [e for e in events("txall") if e["event"] == "recv"]
    check("tx: a fresh group sees commit + checked-and-committed, not rollback",
          sorted(e["body"] for e in tc) == ["commit", "unknown"], errors("txall") or [e["body"] for e in tc])
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
EOF

#!/usr/bin/env bash
# tls_probe.sh OUT_DIR [RUN_DIR]
#   The real RocketMQ 4.9.8 Java client (JavaClientProbe, built by build.sh into OUT_DIR) over
#   TLS against `rocketstore serve --tls-cert/--tls-key`: the client's own switches
#   (-Dtls.enable=true, tls.test.mode.enable, tls.client.authServer/trustCertPath,
#   tls.client.certPath/keyPath; TlsSystemConfig) on both the name server and broker ports.
#   Enforcing: TLS produce and consume, a verifying client, a plain client refused, a client
#   trusting another CA refused. Permissive: plain and TLS clients on one port. Client
#   certificates (--tls-client-ca): a client with a signed certificate served, one without
#   refused. Certificates are made with openssl in RUN_DIR. Prints "N passed, N failed".
#   ROCKETSTORE=/path/to/rocketstore overrides the broker binary.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT_DIR=$(cd "$1" && pwd)
RUN_DIR=${2:-${TMPDIR:-/tmp}/rocketstore-java-client/tls-runs/$(date +%Y%m%d-%H%M%S)}
ROCKETSTORE=${ROCKETSTORE:-$HERE/../../../.venv/bin/rocketstore}
mkdir -p "$RUN_DIR"
RUN_DIR=$(cd "$RUN_DIR" && pwd)
export PROBE_LOG_ROOT="$RUN_DIR/client-logs"
export PROBE_OFFSET_DIR="$RUN_DIR/local-offsets"
export PROBE_SEND_TIMEOUT_MS=${PROBE_SEND_TIMEOUT_MS:-15000}
PASSED=0
FAILED=0

# a CA, a server certificate it signs (CN and SAN 127.0.0.1), a client certificate it signs
# (key in PKCS#8, which netty's keyManager reads), and a second CA that signed nothing here
certs() {
    local d=$RUN_DIR/certs
    mkdir -p "$d" && cd "$d" || exit 1
    for ca in ca otherca; do
        openssl req -x509 -newkey rsa:2048 -nodes -keyout $ca.key -out $ca.pem -days 2 \
            -subj "/CN=rocketstore-test-$ca" 2>/dev/null
    done
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > san.ext
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1 2>/dev/null
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
        -days 2 -extfile san.ext 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout client.rsa -out client.csr -subj /CN=probe 2>/dev/null
    openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem \
        -days 2 2>/dev/null
    openssl pkcs8 -topk8 -nocrypt -in client.rsa -out client.key
    cd - > /dev/null || exit 1
}
certs
C=$RUN_DIR/certs

BROKER_PID=
start() { # start NAME SERVE-OPTIONS... : a fresh store, free ports; sets NS
    local name=$1; shift
    read -r BPORT NSPORT < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
    NS=127.0.0.1:$NSPORT
    "$ROCKETSTORE" --store "$RUN_DIR/$name-store" serve --listen 127.0.0.1:$BPORT \
        --namesrv-listen $NS --tls-cert "$C/server.pem" --tls-key "$C/server.key" "$@" \
        > "$RUN_DIR/$name-broker.out" 2> "$RUN_DIR/$name-broker.err" &
    BROKER_PID=$!
    for _ in $(seq 100); do
        grep -q "Ctrl-C stops" "$RUN_DIR/$name-broker.err" 2>/dev/null && break
        sleep 0.2
    done
    grep -q "Ctrl-C stops" "$RUN_DIR/$name-broker.err" \
        || { echo "broker did not start:"; cat "$RUN_DIR/$name-broker.err"; exit 1; }
    echo "$name: broker 127.0.0.1:$BPORT, name server $NS ($*)"
}
stop_broker() {
    if [ -n "$BROKER_PID" ] && kill -0 "$BROKER_PID" 2>/dev/null; then
        kill -INT "$BROKER_PID"
        for _ in $(seq 50); do kill -0 "$BROKER_PID" 2>/dev/null || break; sleep 0.2; done
        kill -0 "$BROKER_PID" 2>/dev/null && kill -KILL "$BROKER_PID"
    fi
    BROKER_PID=
}
trap stop_broker EXIT

# The topics first, through rocketstore's own admin client over TLS (ROCKETSTORE_TLS_ENABLE):
# a first send to an unknown topic can miss its route on a loaded machine.
topics() {
    for t in "$@"; do
        ROCKETSTORE_TLS_ENABLE=true ROCKETSTORE_TLS_CA=$C/ca.pem "$ROCKETSTORE" updateTopic -n $NS -t "$t" -r 4 -w 4 \
            > /dev/null || { echo "updateTopic $t over TLS failed"; exit 1; }
    done
}

TLS="-Dtls.enable=true"
VERIFY="$TLS -Dtls.test.mode.enable=false -Dtls.client.authServer=true -Dtls.client.trustCertPath=$C/ca.pem"
probe() { # probe NAME "JAVA OPTS" ARGS... -> RUN_DIR/NAME.out (events), NAME.err
    local name=$1 opts=$2; shift 2
    PROBE_JAVA_OPTS="$opts" "$HERE/run.sh" "$OUT_DIR" "$@" > "$RUN_DIR/$name.out" 2> "$RUN_DIR/$name.err"
}
count() { grep -c "\"event\":\"$2\"" "$RUN_DIR/$1.out" 2>/dev/null; }
check() { # check WHAT OK-EXPRESSION
    if eval "$2"; then
        PASSED=$((PASSED + 1)); echo "PASS $1"
    else
        FAILED=$((FAILED + 1)); echo "FAIL $1 -- $2"
    fi
}

start enforcing --tls-mode enforcing
topics TlsTopic
probe enf-produce "$TLS" produce $NS TlsTopic 5
check "enforcing: TLS producer (test mode) 5 x SEND_OK" '[ "$(grep -c SEND_OK "$RUN_DIR/enf-produce.out")" = 5 ]'
probe enf-verify "$VERIFY" produce $NS TlsTopic 3 verifying_pg
check "enforcing: producer verifying the server against its CA 3 x SEND_OK" \
    '[ "$(grep -c SEND_OK "$RUN_DIR/enf-verify.out")" = 3 ]'
probe enf-consume "$TLS" consume $NS TlsTopic tls_cg 8 60
check "enforcing: TLS push consumer gets the 8" '[ "$(count enf-consume recv)" = 8 ]'
probe enf-plain "" produce $NS TlsTopic 1 plain_pg
check "enforcing: plain producer refused (no SEND_OK)" '[ "$(grep -c SEND_OK "$RUN_DIR/enf-plain.out")" = 0 ]'
probe enf-otherca "$TLS -Dtls.test.mode.enable=false -Dtls.client.authServer=true -Dtls.client.trustCertPath=$C/otherca.pem" \
    produce $NS TlsTopic 1 otherca_pg
check "enforcing: producer trusting another CA refuses the server" \
    '[ "$(grep -c SEND_OK "$RUN_DIR/enf-otherca.out")" = 0 ]'
stop_broker

start permissive --tls-mode permissive
topics MixTopic
probe perm-plain "" produce $NS MixTopic 4 plain_pg
probe perm-tls "$TLS" produce $NS MixTopic 4 tls_pg
check "permissive: plain producer 4 x SEND_OK" '[ "$(grep -c SEND_OK "$RUN_DIR/perm-plain.out")" = 4 ]'
check "permissive: TLS producer 4 x SEND_OK" '[ "$(grep -c SEND_OK "$RUN_DIR/perm-tls.out")" = 4 ]'
probe perm-consume "$TLS" consume $NS MixTopic mix_cg 8 60
check "permissive: TLS consumer gets all 8" '[ "$(count perm-consume recv)" = 8 ]'
stop_broker

start clientca --tls-mode enforcing --tls-client-ca "$C/ca.pem"
ROCKETSTORE_TLS_CLIENT_CERT=$C/client.pem ROCKETSTORE_TLS_CLIENT_KEY=$C/client.key topics CaTopic
probe ca-cert "$VERIFY -Dtls.client.certPath=$C/client.pem -Dtls.client.keyPath=$C/client.key" \
    produce $NS CaTopic 2 cert_pg
check "client CA: producer with a signed certificate 2 x SEND_OK" '[ "$(grep -c SEND_OK "$RUN_DIR/ca-cert.out")" = 2 ]'
probe ca-nocert "$VERIFY" produce $NS CaTopic 1 nocert_pg
check "client CA: producer without a certificate refused" '[ "$(grep -c SEND_OK "$RUN_DIR/ca-nocert.out")" = 0 ]'
stop_broker
trap - EXIT

echo "$PASSED passed, $FAILED failed (run dir $RUN_DIR)"
[ "$FAILED" = 0 ]

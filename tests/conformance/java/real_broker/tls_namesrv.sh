#!/usr/bin/env bash
# tls_namesrv.sh — the real 4.9.8 broker as a TLS client of rocketstore's name server (issue #40):
# `rocketstore namesrv --tls-mode enforcing` (a certificate made with openssl), the real broker
# started with -Dtls.enable=true (and that certificate on its own listeners) registers with it (BrokerStartup turns its name server client's
# TLS on from that property); rocketstore's admin client over TLS then finds the broker's route,
# and a Java producer with -Dtls.enable=true sends through our name server to the real broker.
# Needs build_broker.sh's and ../build.sh's output; ports NAMESRV_PORT and BROKER_PORT
# (common.sh). Prints "N passed, N failed".
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
RUN=$WORK_DIR/tls-namesrv
rm -rf "$RUN" && mkdir -p "$RUN"
PASSED=0
FAILED=0
check() { if eval "$2"; then PASSED=$((PASSED + 1)); echo "PASS $1"; else FAILED=$((FAILED + 1)); echo "FAIL $1"; fi; }

openssl req -x509 -newkey rsa:2048 -nodes -keyout "$RUN/server.key" -out "$RUN/server.pem" \
    -days 2 -subj /CN=127.0.0.1 2>/dev/null
"$ROCKETSTORE" namesrv --listen "$NS" --kv-config "$RUN/kv.json" --tls-cert "$RUN/server.pem" \
    --tls-key "$RUN/server.key" --tls-mode enforcing > "$RUN/namesrv.out" 2> "$RUN/namesrv.err" &
NSPID=$!
cleanup() {
    WORK_DIR=$WORK_DIR "$HERE/stop.sh" broker > /dev/null
    kill -INT "$NSPID" 2>/dev/null
    wait "$NSPID" 2>/dev/null
}
trap cleanup EXIT
for _ in $(seq 100); do grep -q "Ctrl-C stops" "$RUN/namesrv.err" 2>/dev/null && break; sleep 0.2; done

# The broker's own listeners get the same certificate: TlsHelper's test mode makes a
# self-signed one with JDK internals Java 17 does not open ("Failed to create SSLContext for
# server"). With test mode off its name server client trusts any server (authServer false).
TLS_OPTS="-Dtls.enable=true -Dtls.test.mode.enable=false -Dtls.server.certPath=$RUN/server.pem"
TLS_OPTS="$TLS_OPTS -Dtls.server.keyPath=$RUN/server.key"
STORE_DIR=$RUN/store EXTRA_JAVA_OPTS="$TLS_OPTS" "$HERE/run_broker.sh" > /dev/null
export ROCKETSTORE_TLS_ENABLE=true ROCKETSTORE_TLS_CA=$RUN/server.pem
for _ in $(seq 90); do
    "$ROCKETSTORE" topicRoute -n "$NS" -t TBW102 > "$RUN/route.json" 2> "$RUN/route.err" && break
    sleep 1
done
check "the real broker registered over TLS: TBW102's route names $BR" "grep -q '$BR' '$RUN/route.json'"
plain=$(ROCKETSTORE_TLS_ENABLE=false "$ROCKETSTORE" topicRoute -n "$NS" -t TBW102 2>&1 > /dev/null)
check "a plain client is refused by the enforcing name server" "[ -n \"\$plain\" ]"
PROBE_JAVA_OPTS=-Dtls.enable=true PROBE_SEND_TIMEOUT_MS=15000 PROBE_LOG_ROOT=$RUN/client-logs \
    "$JAVA_DIR_HARNESS/run.sh" "$JC_OUT" produce "$NS" TlsViaOurNamesrv 3 > "$RUN/produce.out" 2> "$RUN/produce.err"
check "a TLS Java producer sends 3 through our name server to the real broker" \
    "[ \"\$(grep -c SEND_OK '$RUN/produce.out')\" = 3 ]"
grep -q "Ctrl-C stops" "$RUN/namesrv.err" || cat "$RUN/namesrv.err"
echo "$PASSED passed, $FAILED failed (run dir $RUN)"
[ "$FAILED" = 0 ]

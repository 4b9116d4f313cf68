#!/usr/bin/env bash
# Build the RocketMQ 5.3.3 remoting Java client (client/common/remoting modules, only the classes
# reachable from the probe: javac -sourcepath) + our stand-ins + probe(s), against Debian jars and
# the OpenTelemetry 1.62.0 jars in ~/.m2 (already there for tests/golden/harness/build5.sh).
#   RMQ_GIT   git mirror of apache/rocketmq [/work/.mirror/apache+rocketmq/repo]
#   RMQ_TAG   [rocketmq-all-5.3.3]
#   M2_REPO   Maven repository holding io/opentelemetry [~/.m2/repository]
#   WORK_DIR  output: src/, classes/, classpath.txt, javac.log (see env.sh) [/tmp/rocketstore-java5]
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/env.sh"
RMQ_GIT=${RMQ_GIT:-/work/.mirror/apache+rocketmq/repo}
TAG=${RMQ_TAG:-rocketmq-all-5.3.3}
J=/usr/share/java
M=${M2_REPO:-$HOME/.m2/repository}
O=$M/io/opentelemetry
CP=""
for jar in netty-buffer netty-common netty-transport netty-handler netty-handler-proxy \
    netty-codec netty-codec-haproxy netty-codec-http netty-codec-socks netty-resolver netty-transport-native-epoll \
    netty-transport-native-unix-common commons-validator lz4-java commons-lang3 guava \
    commons-collections3 jsr305 commons-codec commons-beanutils commons-digester commons-logging \
    zstd-jni slf4j-api slf4j-simple; do
    CP="$CP:$J/$jar.jar"
done
CP=${CP#:}
for otel in api context common sdk-common sdk-metrics; do
    f=$(ls $O/opentelemetry-$otel/1.62.0/opentelemetry-$otel-1.62.0.jar)
    CP="$CP:$f"
done
W=$WORK_DIR
rm -rf "$W/src" "$W/classes"; mkdir -p "$W/src" "$W/classes"
git --git-dir="$RMQ_GIT" archive "$TAG" client common remoting | tar -x -C "$W/src"
S=$W/src
# Our stand-ins: this folder's (fastjson's JSONField with 5.x's attributes, BatchAck's bit-set
# codec) first, then the 4.9.8 harness's fastjson, the RocketMQ sources, and last the
# golden 5.x harness's (the shaded slf4j logger and fastjson2's JSONField, which no
# RocketMQ source holds).
REPO_TESTS=$(cd "$HERE/.." && pwd)/..
SP="$HERE/standins:$REPO_TESTS/conformance/java/standins"
SP="$SP:$S/client/src/main/java:$S/common/src/main/java:$S/remoting/src/main/java"
SP="$SP:$REPO_TESTS/golden/harness/standins-5"
javac -nowarn -encoding UTF-8 -parameters -g -proc:none -XDsuppressNotes \
    -d "$W/classes" -cp "$CP" -sourcepath "$SP" "$HERE"/probe/*.java 2> "$W/javac.log" || {
    grep -E 'error:' "$W/javac.log" | sort | uniq -c | sort -rn | head -50 >&2; exit 1; }
for m in client common remoting; do
    [ -d "$S/$m/src/main/resources" ] && cp -r "$S/$m/src/main/resources/." "$W/classes/" || true
done
echo "$W/classes:$CP" > "$W/classpath.txt"
echo "built $(find "$W/classes" -name '*.class' | wc -l) classes in $W" >&2

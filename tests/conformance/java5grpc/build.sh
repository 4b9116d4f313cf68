#!/usr/bin/env bash
# Build the RocketMQ 5.x gRPC Java client (rocketmq-clients: java/client-apis + java/client,
# only the classes the probe reaches: javac -sourcepath) + its protocol classes (protoc and the
# grpc-java plugin over rocketmq-apis' .proto files, at the commit rocketmq-clients pins as its
# `protos` submodule) + our stand-ins + the probe, against Debian's jars (grpc-java 1.41,
# protobuf 3.21, netty 4.1 with netty-tcnative for TLS, guava, slf4j) and the OpenTelemetry
# 1.62.0 jars in ~/.m2.
# The client imports grpc-netty-shaded (io.grpc.netty.shaded.io.grpc.netty / .io.netty), which
# Debian does not ship: the extracted copy is rewritten to the unshaded packages (the shaded jar
# is that code relocated).
#   CLIENTS_GIT  git mirror of apache/rocketmq-clients [/work/.mirror/apache+rocketmq-clients/repo]
#   CLIENTS_REF  [HEAD]
#   APIS_GIT     git mirror of apache/rocketmq-apis [/work/.mirror/apache+rocketmq-apis/repo]
#   APIS_REF     [the `protos` submodule commit of CLIENTS_REF]
#   M2_REPO      Maven repository holding io/opentelemetry [~/.m2/repository]
#   WORK_DIR     output (see env.sh) [/tmp/rocketstore-java5grpc]
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/env.sh"
CLIENTS_GIT=${CLIENTS_GIT:-/work/.mirror/apache+rocketmq-clients/repo}
CLIENTS_REF=${CLIENTS_REF:-HEAD}
APIS_GIT=${APIS_GIT:-/work/.mirror/apache+rocketmq-apis/repo}
APIS_REF=${APIS_REF:-$(git --git-dir="$CLIENTS_GIT" ls-tree "$CLIENTS_REF" protos | awk '{print $3}')}
J=/usr/share/java
M=${M2_REPO:-$HOME/.m2/repository}
CP=""
for jar in grpc-api grpc-context grpc-core grpc-netty grpc-protobuf grpc-protobuf-lite grpc-stub \
    protobuf protobuf-util perfmark-api gson guava error_prone_annotations jsr305 \
    geronimo-annotation-1.3-spec netty-buffer netty-common netty-transport netty-handler \
    netty-handler-proxy netty-codec netty-codec-http netty-codec-http2 netty-codec-socks \
    netty-resolver netty-transport-native-unix-common netty-tcnative commons-lang3 lz4-java zstd-jni \
    slf4j-api slf4j-simple; do
    [ -f "$J/$jar.jar" ] || { echo "missing $J/$jar.jar (apt-get install the Debian package)" >&2; exit 1; }
    CP="$CP:$J/$jar.jar"
done
CP=${CP#:}
for otel in api context common sdk sdk-common sdk-metrics sdk-trace sdk-logs; do
    CP="$CP:$M/io/opentelemetry/opentelemetry-$otel/1.62.0/opentelemetry-$otel-1.62.0.jar"
done
W=$WORK_DIR
rm -rf "$W/src" "$W/proto" "$W/gen" "$W/classes"; mkdir -p "$W/src" "$W/proto" "$W/gen" "$W/classes"
git --git-dir="$CLIENTS_GIT" archive "$CLIENTS_REF" java/pom.xml java/client-apis/src/main java/client/src/main | tar -x -C "$W/src"
git --git-dir="$APIS_GIT" archive "$APIS_REF" apache | tar -x -C "$W/proto"
{ echo "rocketmq-clients $(git --git-dir="$CLIENTS_GIT" rev-parse "$CLIENTS_REF")";
  echo "rocketmq-apis $(git --git-dir="$APIS_GIT" rev-parse "$APIS_REF")"; } > "$W/versions.txt"
find "$W/src" -name '*.java' -print0 | xargs -0 sed -i \
    -e 's/io\.grpc\.netty\.shaded\.io\.grpc\.netty/io.grpc.netty/g' \
    -e 's/io\.grpc\.netty\.shaded\.io\.netty/io.netty/g'
protoc -I "$W/proto" --java_out="$W/gen" \
    --plugin=protoc-gen-grpc-java=/usr/bin/grpc_java_plugin --grpc-java_out="$W/gen" \
    "$W"/proto/apache/rocketmq/v2/*.proto
S=$W/src/java
# The client's entry point is found through ServiceLoader, so javac is given it by name.
SP="$HERE/standins:$S/client-apis/src/main/java:$S/client/src/main/java:$W/gen"
javac -nowarn -encoding UTF-8 -parameters -g -proc:none -XDsuppressNotes \
    -d "$W/classes" -cp "$CP" -sourcepath "$SP" "$HERE"/probe/*.java \
    "$S/client/src/main/java/org/apache/rocketmq/client/java/impl/ClientServiceProviderImpl.java" 2> "$W/javac.log" || {
    grep -E 'error:' "$W/javac.log" | sort | uniq -c | sort -rn | head -50 >&2; exit 1; }
# The ClientServiceProvider the client loads (META-INF/services); not logback.xml: slf4j-simple
# logs. The metadata file Maven filters: the client version it sends in x-mq-client-version.
cp -r "$S/client/src/main/resources/META-INF" "$W/classes/"
VERSION=$(sed -n '/<artifactId>rocketmq-client-java-parent/,/<\/version>/s/.*<version>\(.*\)<\/version>.*/\1/p' "$S/pom.xml")
sed "s/\${project.version}/$VERSION/" "$S/client/src/main/resources-filtered/rocketmq.metadata.properties" \
    > "$W/classes/rocketmq.metadata.properties"
# TLS: Debian's netty 4.1.48 has no ALPN in its JDK provider ("JDK provider does not support
# ALPN protocol"), so grpc-netty needs the OpenSSL one: libnetty-tcnative-jni's library,
# copied under the name netty looks for (a symlink is refused: the library checks its own path).
mkdir -p "$W/jni"
cp /usr/lib/x86_64-linux-gnu/jni/libnetty-tcnative.so "$W/jni/libnetty_tcnative.so"
echo "$W/classes:$CP" > "$W/classpath.txt"
echo "built $(find "$W/classes" -name '*.class' | wc -l) classes in $W ($(tr '\n' ' ' < "$W/versions.txt"))" >&2

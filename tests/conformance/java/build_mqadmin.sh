#!/usr/bin/env bash
# Builds Apache RocketMQ 4.9.8's mqadmin (tools module, MQAdminStartup) from a git mirror of
# apache/rocketmq, with the modules it needs (client, common, remoting, logging, srvutil, acl,
# tools) plus our fastjson stand-in (tests/conformance/java/standins), using only
# Debian's jars in /usr/share/java.
#
#   build_mqadmin.sh RMQ_GIT OUT_DIR
#     OUT_DIR gets src/, classes/, classpath.txt, and home/ (a ROCKETMQ_HOME holding
#     conf/logback_tools.xml; its log paths point at ${mqadmin.log.dir}, set by mqadmin.sh).
#
# Extra Debian packages over the client harness:
#   libcommons-cli-java (srvutil/ServerUtil, every sub command), libyaml-snake-java (acl:
#   AclUtils reads plain_acl.yml / tools.yml), libcommons-codec-java (acl: AclSigner, base64 +
#   HmacSHA1), liblogback-java (tools: MQAdminStartup.initLogback casts slf4j's factory to a
#   logback LoggerContext). slf4j-nop must NOT be on the classpath (it would compete with
#   logback-classic as slf4j binding and break that cast).
set -euo pipefail

if [ $# -ne 2 ]; then
    echo "usage: $0 RMQ_GIT OUT_DIR" >&2
    exit 2
fi
RMQ_GIT=$1
OUT_DIR=$2
TAG=${RMQ_TAG:-rocketmq-all-4.9.8}
HERE=$(cd "$(dirname "$0")" && pwd)
JAVA_DIR=/usr/share/java
MODULES=(client common remoting logging srvutil acl tools)

JARS=(
    netty-common netty-buffer netty-transport netty-codec netty-handler netty-resolver
    netty-transport-native-epoll netty-transport-native-unix-common
    commons-lang3 commons-collections3 commons-validator
    lz4-java zstd-jni
    slf4j-api logback-classic logback-core
    commons-cli snakeyaml commons-codec
    commons-beanutils commons-digester commons-logging
)
CP_JARS=""
for j in "${JARS[@]}"; do
    f="$JAVA_DIR/$j.jar"
    if [ ! -f "$f" ]; then
        echo "missing $f; install: apt-get install libnetty-java libcommons-lang3-java" \
            "libcommons-collections3-java libcommons-validator-java liblz4-java libzstd-jni-java" \
            "libzstd-jni1 libslf4j-java liblogback-java libcommons-cli-java libyaml-snake-java" \
            "libcommons-codec-java" >&2
        exit 1
    fi
    CP_JARS="$CP_JARS:$f"
done
CP_JARS=${CP_JARS#:}

mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
rm -rf "$OUT_DIR/src" "$OUT_DIR/classes" "$OUT_DIR/home"
mkdir -p "$OUT_DIR/src" "$OUT_DIR/classes" "$OUT_DIR/home/conf"

git -C "$RMQ_GIT" archive "$TAG" "${MODULES[@]}" distribution/conf | tar -x -C "$OUT_DIR/src"

# Patched: acl/common/AclUtils.getYaml() uses snakeyaml 2.0's TagInspector
# (LoaderOptions.setTagInspector), which Debian's snakeyaml 1.33 lacks: drop the three lines
# (import, the lambda, the setter); the Yaml is then built as 1.33 would, new
# Yaml(new Constructor(loaderOptions)). Only reached when ROCKETMQ_HOME/conf/tools.yml exists.
ACLU="$OUT_DIR/src/acl/src/main/java/org/apache/rocketmq/acl/common/AclUtils.java"
sed -i -e '/import org.yaml.snakeyaml.inspector.TagInspector;/d' \
       -e '/TagInspector tagInspector = /d' -e '/loaderOptions.setTagInspector(tagInspector);/d' "$ACLU"
if grep -q TagInspector "$ACLU"; then echo "AclUtils patch did not apply" >&2; exit 1; fi

# Left out: client/trace/hook/*OpenTracingHookImpl.java (io.opentracing not packaged; opt-in
# hooks nothing else refers to). Everything of srvutil, acl and tools compiles as is.
for m in "${MODULES[@]}"; do
    find "$OUT_DIR/src/$m/src/main/java" -name '*.java' ! -name '*OpenTracingHookImpl.java'
done > "$OUT_DIR/sources.txt"
find "$HERE/standins" -name '*.java' >> "$OUT_DIR/sources.txt"
# ours: MQAdminStartup's dispatch with a request/response tracing RPCHook (mqadmin.sh, MQADMIN_TRACE=1)
echo "$HERE/trace/TracingMQAdmin.java" >> "$OUT_DIR/sources.txt"

for m in "${MODULES[@]}"; do
    if [ -d "$OUT_DIR/src/$m/src/main/resources" ]; then
        cp -r "$OUT_DIR/src/$m/src/main/resources/." "$OUT_DIR/classes/"
    fi
done

echo "compiling $(wc -l < "$OUT_DIR/sources.txt") source files" >&2
javac -nowarn -encoding UTF-8 -parameters -g -proc:none -XDsuppressNotes \
    -cp "$CP_JARS" -d "$OUT_DIR/classes" @"$OUT_DIR/sources.txt" 2> "$OUT_DIR/javac.log" || {
    cat "$OUT_DIR/javac.log" >&2
    exit 1
}
if [ -s "$OUT_DIR/javac.log" ]; then echo "javac messages: $OUT_DIR/javac.log" >&2; fi

# ROCKETMQ_HOME for mqadmin: the distribution's logback_tools.xml with its log directory made
# configurable; conf/tools.yml is deliberately absent (AclUtils then returns no RPC hook).
sed 's#\${user.home}/logs/rocketmqlogs#${mqadmin.log.dir}#g' \
    "$OUT_DIR/src/distribution/conf/logback_tools.xml" > "$OUT_DIR/home/conf/logback_tools.xml"

echo "$OUT_DIR/classes:$CP_JARS" > "$OUT_DIR/classpath.txt"
echo "built: $OUT_DIR/classes ; classpath in $OUT_DIR/classpath.txt ; home $OUT_DIR/home" >&2

#!/usr/bin/env bash
# Builds a real Apache RocketMQ 4.9.8 name server + broker (NamesrvStartup, BrokerStartup) from the
# git mirror, against Debian jars, with:
#   * the REAL fastjson 1.2.69 (github alibaba/fastjson tag 1.2.69; RocketMQ pins 1.2.69_noneautotype,
#     same serializer) compiled from source, minus support/{spring,jaxrs,retrofit,hsf} and with
#     two never-reached classes stood in (support/moneta/MonetaCodec, support/springfox/SwaggerJsonSerializer);
#   * the REAL DLedger 0.3.1.2 (openmessaging/dledger) compiled in (BrokerController refers to it);
#   * client/trace/hook/*OpenTracingHookImpl.java left out (io.opentracing not packaged);
#   * acl AclUtils patched for snakeyaml 1.33 (as tests/conformance/java/build_mqadmin.sh does).
# Debian packages: libnetty-java libcommons-lang3-java libcommons-validator-java liblz4-java
#   libzstd-jni-java libslf4j-java liblogback-java libcommons-cli-java libyaml-snake-java
#   libcommons-codec-java libguava-java libjna-java libjoda-time-java
#
#   build_broker.sh [OUT]      OUT defaults to $BUILD, i.e. $WORK_DIR/build (see common.sh)
# Git mirrors (bare repositories), from the environment:
#   RMQ_GIT  apache/rocketmq, tag rocketmq-all-4.9.8    [/work/.mirror/apache+rocketmq/repo]
#   DL_GIT   openmessaging/dledger, tag dledger-all-0.3.1.2 [/work/.mirror/openmessaging+dledger/repo]
#   FJ_GIT   alibaba/fastjson, tag 1.2.69              [/work/.mirror/alibaba+fastjson/repo]
# Output: $OUT/classes, $OUT/classpath.txt, $OUT/home/conf/logback_{namesrv,broker}.xml
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
OUT=${1:-$BUILD}
RMQ_GIT=${RMQ_GIT:-/work/.mirror/apache+rocketmq/repo}
DL_GIT=${DL_GIT:-/work/.mirror/openmessaging+dledger/repo}
FJ_GIT=${FJ_GIT:-/work/.mirror/alibaba+fastjson/repo}
J=/usr/share/java
JARS=(netty-common netty-buffer netty-transport netty-codec netty-handler netty-resolver
      netty-transport-native-epoll netty-transport-native-unix-common
      commons-lang3 commons-collections3 commons-validator commons-beanutils commons-digester commons-logging
      lz4-java zstd-jni slf4j-api logback-classic logback-core commons-cli snakeyaml commons-codec
      guava jna joda-time)
CP_JARS=""
for j in "${JARS[@]}"; do [ -f "$J/$j.jar" ] || { echo "missing $J/$j.jar" >&2; exit 1; }; CP_JARS="$CP_JARS:$J/$j.jar"; done
CP_JARS=${CP_JARS#:}
rm -rf "$OUT"; mkdir -p "$OUT/src" "$OUT/classes" "$OUT/fj-classes" "$OUT/home/conf"
OUT=$(cd "$OUT" && pwd)

# --- fastjson 1.2.69 ---
mkdir -p "$OUT/src/fastjson"
git --git-dir="$FJ_GIT" archive 1.2.69 src/main/java src/main/resources | tar -x -C "$OUT/src/fastjson"
find "$OUT/src/fastjson/src/main/java" -name '*.java' | grep -v -E 'support/(moneta|jaxrs|retrofit|springfox|spring|hsf)/' > "$OUT/fj-sources.txt"
find "$HERE/fastjson-standins" -name '*.java' >> "$OUT/fj-sources.txt"
javac -nowarn -encoding UTF-8 -g -proc:none -XDsuppressNotes -cp "$J/guava.jar:$J/joda-time.jar" \
    -d "$OUT/fj-classes" @"$OUT/fj-sources.txt"
cp -r "$OUT/src/fastjson/src/main/resources/." "$OUT/fj-classes/"

# --- RocketMQ 4.9.8 + DLedger 0.3.1.2 ---
MODULES=(broker namesrv store filter srvutil acl client common remoting logging tools)
git --git-dir="$RMQ_GIT" archive rocketmq-all-4.9.8 "${MODULES[@]}" distribution/conf | tar -x -C "$OUT/src"
git --git-dir="$DL_GIT" archive dledger-all-0.3.1.2 dledger/src/main/java | tar -x -C "$OUT/src"
ACLU="$OUT/src/acl/src/main/java/org/apache/rocketmq/acl/common/AclUtils.java"
sed -i -e '/import org.yaml.snakeyaml.inspector.TagInspector;/d' \
       -e '/TagInspector tagInspector = /d' -e '/loaderOptions.setTagInspector(tagInspector);/d' "$ACLU"
{ for m in "${MODULES[@]}"; do find "$OUT/src/$m/src/main/java" -name '*.java' ! -name '*OpenTracingHookImpl.java'; done
  find "$OUT/src/dledger/src/main/java" -name '*.java'; } > "$OUT/sources.txt"
for m in "${MODULES[@]}"; do
    [ -d "$OUT/src/$m/src/main/resources" ] && cp -r "$OUT/src/$m/src/main/resources/." "$OUT/classes/"
done
echo "compiling $(wc -l < "$OUT/sources.txt") source files" >&2
javac -nowarn -encoding UTF-8 -parameters -g -proc:none -XDsuppressNotes \
    --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
    -cp "$OUT/fj-classes:$CP_JARS" -d "$OUT/classes" @"$OUT/sources.txt" 2> "$OUT/javac.log" || { cat "$OUT/javac.log" >&2; exit 1; }

# ROCKETMQ_HOME: the distribution's logback configs, logs under ${rmq.log.dir}
for f in logback_namesrv.xml logback_broker.xml logback_tools.xml; do
    sed 's#\${user.home}/logs/rocketmqlogs#${rmq.log.dir}#g' "$OUT/src/distribution/conf/$f" > "$OUT/home/conf/$f"
done
echo "$OUT/classes:$OUT/fj-classes:$CP_JARS" > "$OUT/classpath.txt"
echo "built $OUT" >&2

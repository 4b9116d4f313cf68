#!/usr/bin/env bash
# Builds the Apache RocketMQ 4.9.8 Java client (client, common, remoting, logging modules) from a
# git mirror of apache/rocketmq, plus our stand-ins (fastjson) and JavaClientProbe, using only
# Debian's jars in /usr/share/java.
#
#   build.sh RMQ_GIT OUT_DIR
#     RMQ_GIT  a (bare) clone of apache/rocketmq holding tag rocketmq-all-4.9.8
#     OUT_DIR  gets src/ (extracted sources), classes/, classpath.txt (the java -cp string)
#
# Run the probe:  java -cp "$(cat OUT_DIR/classpath.txt)" JavaClientProbe produce 127.0.0.1:9876 T 10
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

# Debian jars the four modules need (netty-all in Debian is an empty aggregate: list the parts).
JARS=(
    netty-common netty-buffer netty-transport netty-codec netty-handler netty-resolver
    netty-transport-native-epoll netty-transport-native-unix-common
    commons-lang3 commons-collections3 commons-validator
    lz4-java      # Debian liblz4-java: common/compression/Lz4Compressor
    zstd-jni      # Debian libzstd-jni-java + libzstd-jni1 (native): common/compression/ZstdCompressor
    slf4j-api     # Debian libslf4j-java: logging/Slf4jLoggerFactory (unused with logUseSlf4j=false)
    slf4j-nop     # Debian libslf4j-java: silences slf4j if anything reaches it
    # runtime dependencies of commons-validator (loaded lazily, harmless to list)
    commons-beanutils commons-digester commons-logging
)
CP_JARS=""
for j in "${JARS[@]}"; do
    f="$JAVA_DIR/$j.jar"
    if [ ! -f "$f" ]; then
        echo "missing $f; install it: apt-get install libnetty-java libcommons-lang3-java" \
            "libcommons-collections3-java libcommons-validator-java liblz4-java libzstd-jni-java" \
            "libzstd-jni1 libslf4j-java" >&2
        exit 1
    fi
    CP_JARS="$CP_JARS:$f"
done
CP_JARS=${CP_JARS#:}

mkdir -p "$OUT_DIR"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
rm -rf "$OUT_DIR/src" "$OUT_DIR/classes"
mkdir -p "$OUT_DIR/src" "$OUT_DIR/classes"

git -C "$RMQ_GIT" archive "$TAG" client common remoting logging | tar -x -C "$OUT_DIR/src"

# Sources left out:
#  * client/trace/hook/*OpenTracingHookImpl.java: need io.opentracing, which is not on this
#    machine; nothing else in the client refers to them (they are opt-in hooks).
find "$OUT_DIR/src"/{client,common,remoting,logging}/src/main/java -name '*.java' \
    ! -name '*OpenTracingHookImpl.java' > "$OUT_DIR/sources.txt"
find "$HERE/standins" -name '*.java' >> "$OUT_DIR/sources.txt"
echo "$HERE/JavaClientProbe.java" >> "$OUT_DIR/sources.txt"

# Resources of the modules (none expected in 4.9.8, copied if present).
for m in client common remoting logging; do
    if [ -d "$OUT_DIR/src/$m/src/main/resources" ]; then
        cp -r "$OUT_DIR/src/$m/src/main/resources/." "$OUT_DIR/classes/"
    fi
done

echo "compiling $(wc -l < "$OUT_DIR/sources.txt") source files" >&2
# -parameters lets the fastjson stand-in bind beans that only have constructors with arguments.
javac -nowarn -encoding UTF-8 -parameters -g -proc:none \
    -XDsuppressNotes \
    -cp "$CP_JARS" -d "$OUT_DIR/classes" @"$OUT_DIR/sources.txt" 2> "$OUT_DIR/javac.log" || {
    cat "$OUT_DIR/javac.log" >&2
    exit 1
}
if [ -s "$OUT_DIR/javac.log" ]; then echo "javac messages: $OUT_DIR/javac.log" >&2; fi

echo "$OUT_DIR/classes:$CP_JARS" > "$OUT_DIR/classpath.txt"
echo "built: $OUT_DIR/classes ; classpath in $OUT_DIR/classpath.txt" >&2

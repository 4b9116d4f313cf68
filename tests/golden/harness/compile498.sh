# Sourced by build.sh and build_store.sh: RocketMQ 4.9.8's store sources, the classpath, the
# compiled harness and the JVM options to run it. Arguments and needs: build.sh's header.
# Sets OUT (the corpus directory), RUN_CP, JOPTS and ST (the scratch stores directory).

GIT_DIR_RMQ=$1
SCRATCH=$2
STANDINS=$3
OUT=$(cd "$HERE/.." && pwd)/rocketmq-4.9.8
J=/usr/share/java
M=${M2_REPO:-$HOME/.m2/repository}

mkdir -p "$SCRATCH/src" "$SCRATCH/classes" "$SCRATCH/stores" "$OUT"
git --git-dir="$GIT_DIR_RMQ" archive rocketmq-all-4.9.8 store common logging remoting \
    | tar -x -C "$SCRATCH/src"

CP="$J/netty-buffer.jar:$J/netty-common.jar:$J/netty-transport.jar:$J/netty-handler.jar"
CP="$CP:$J/netty-codec.jar:$J/netty-resolver.jar:$J/commons-validator.jar:$J/lz4-java.jar"
CP="$CP:$J/commons-lang3.jar:$M/com/github/luben/zstd-jni/1.5.5-11/zstd-jni-1.5.5-11.jar"
CP="$CP:$M/net/java/dev/jna/jna/5.13.0/jna-5.13.0.jar"
CP="$CP:$M/org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar"
S=$SCRATCH/src
# The stand-ins come first on the source path so they shadow RocketMQ's DLedger class;
# javac compiles only what the harness reaches from there.
SP="$STANDINS:$S/store/src/main/java:$S/common/src/main/java:$S/logging/src/main/java"
SP="$SP:$S/remoting/src/main/java"
javac -nowarn -encoding UTF-8 --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
    -d "$SCRATCH/classes" -cp "$CP" -sourcepath "$SP" "$HERE/GoldenHarness.java"

# Java 17 closes the JDK internals RocketMQ 4.9.8 uses to unmap files.
JOPTS=(--add-exports java.base/sun.nio.ch=ALL-UNNAMED
       --add-exports java.base/jdk.internal.ref=ALL-UNNAMED
       --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
       --add-opens java.base/java.nio=ALL-UNNAMED
       --add-opens java.base/sun.nio.ch=ALL-UNNAMED
       --add-opens java.base/java.lang=ALL-UNNAMED)
RUN_CP="$SCRATCH/classes:$CP"
ST=$SCRATCH/stores

# Sourced by build.sh and build_store.sh: RocketMQ 4.9.8's store sources, the classpath, the
# compiled harness and the JVM options to run it. Arguments and needs: build.sh's header.
# Sets OUT (the corpus directory), RUN_CP, JOPTS and ST (the scratch stores directory).
# With DLEDGER_GIT_DIR set (a clone of github.com/openmessaging/dledger with the tag
# dledger-all-0.3.1.2), DLedger is compiled in instead of the stand-ins' DLedger classes.

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
CLASSES=$SCRATCH/classes
SOURCES_IN=$STANDINS
SP_DLEDGER=
if [ -n "${DLEDGER_GIT_DIR:-}" ]; then
    # build_store.sh's DLedger modes: the real DLedger (0.3.1.2, the version RocketMQ
    # 4.9.8's pom names; module dledger) and RocketMQ's own DLedgerCommitLog are compiled
    # in, from a copy of the stand-ins without their DLedger pair (fastjson stays a stand-in),
    # into classes of their own.
    CLASSES=$SCRATCH/classes-dledger
    SOURCES_IN=$SCRATCH/standins-dledger
    rm -rf "$CLASSES" "$SOURCES_IN" "$SCRATCH/dledger-src"
    mkdir -p "$CLASSES" "$SCRATCH/dledger-src"
    cp -r "$STANDINS" "$SOURCES_IN"
    rm -f "$SOURCES_IN/io/openmessaging/storage/dledger/entry/DLedgerEntry.java" \
        "$SOURCES_IN/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java"
    git --git-dir="$DLEDGER_GIT_DIR" archive dledger-all-0.3.1.2 dledger/src/main/java \
        | tar -x -C "$SCRATCH/dledger-src"
    SP_DLEDGER=":$SCRATCH/dledger-src/dledger/src/main/java"
    # DLedger's RPC service is RocketMQ's NettyRemotingServer, which names netty's epoll
    # classes (Debian libnetty-java too; epoll stays off, the default).
    CP="$CP:$J/netty-transport-native-epoll.jar:$J/netty-transport-native-unix-common.jar"
fi
# The stand-ins come first on the source path so they shadow RocketMQ's DLedger class;
# javac compiles only what the harness reaches from there.
SP="$SOURCES_IN:$HERE:$S/store/src/main/java:$S/common/src/main/java:$S/logging/src/main/java"
SP="$SP:$S/remoting/src/main/java$SP_DLEDGER"
javac -nowarn -encoding UTF-8 --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
    -d "$CLASSES" -cp "$CP" -sourcepath "$SP" "$HERE/GoldenHarness.java"

# Java 17 closes the JDK internals RocketMQ 4.9.8 uses to unmap files.
JOPTS=(--add-exports java.base/sun.nio.ch=ALL-UNNAMED
       --add-exports java.base/jdk.internal.ref=ALL-UNNAMED
       --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
       --add-opens java.base/java.nio=ALL-UNNAMED
       --add-opens java.base/sun.nio.ch=ALL-UNNAMED
       --add-opens java.base/java.lang=ALL-UNNAMED)
RUN_CP="$CLASSES:$CP"
ST=$SCRATCH/stores

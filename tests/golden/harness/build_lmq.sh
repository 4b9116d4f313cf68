#!/usr/bin/env bash
# Rebuild the LMQ store of the golden corpus (tests/golden/rocketmq-4.9.8/lmq.{tar.gz,json})
# with RocketMQ 4.9.8's own store, enableLmq=true and enableMultiDispatch=true. Not run by
# CI. Separate from build.sh so that it leaves basic/crashed/recovered alone; same inputs,
# same compilation, same packing. Nothing of RocketMQ and none of the stand-ins is committed.
#
# Usage: tests/golden/harness/build_lmq.sh ROCKETMQ_GIT_DIR SCRATCH_DIR STANDINS_DIR
#   (the arguments and dependencies are build.sh's; see its header and tests/golden/README.md)
set -euo pipefail

GIT_DIR_RMQ=$1
SCRATCH=$2
STANDINS=$3
HERE=$(cd "$(dirname "$0")" && pwd)
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
SP="$STANDINS:$S/store/src/main/java:$S/common/src/main/java:$S/logging/src/main/java"
SP="$SP:$S/remoting/src/main/java"
javac -nowarn -encoding UTF-8 --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
    -d "$SCRATCH/classes" -cp "$CP" -sourcepath "$SP" "$HERE/GoldenHarness.java"

JOPTS=(--add-exports java.base/sun.nio.ch=ALL-UNNAMED
       --add-exports java.base/jdk.internal.ref=ALL-UNNAMED
       --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
       --add-opens java.base/java.nio=ALL-UNNAMED
       --add-opens java.base/sun.nio.ch=ALL-UNNAMED
       --add-opens java.base/java.lang=ALL-UNNAMED)
RUN_CP="$SCRATCH/classes:$CP"
ST=$SCRATCH/stores
rm -rf "${ST:?}/lmq" "$ST/lmq.json"

# lmq: the INNER_MULTI_DISPATCH workload, read back (every consume queue, LMQs included),
# then a normal shutdown. The harness fails if the CommitLog holds anything it did not put
# (the DELAY=2 message must not be delivered before the shutdown: keep the run short).
java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness lmq "$ST/lmq" "$ST/lmq.json"

# config/delayOffset.json comes from the fastjson stand-in, not from fastjson: not kept.
rm -rf "${ST:?}/lmq/config"
tar --sort=name --owner=0 --group=0 --numeric-owner --mode='u=rwX,go=rX' \
    --mtime='2024-01-01 00:00:00' -C "$ST" -cf - lmq | gzip -n -9 > "$OUT/lmq.tar.gz"
cp "$ST/lmq.json" "$OUT/lmq.json"
ls -l "$OUT/lmq.tar.gz" "$OUT/lmq.json"

#!/usr/bin/env bash
# Rebuild the RocketMQ 5.x golden corpus (tests/golden/rocketmq-5.3.3/) with RocketMQ's own
# store. Not run by CI. Nothing of RocketMQ (sources, classes, jars) is committed: it is built
# in a scratch directory outside the repository. The stand-ins in standins-5/ are ours.
#
# Usage: [ROCKETSTORE_PYTHON=.venv/bin/python] [ROCKETMQ_TAG=rocketmq-all-5.3.3] \
#        tests/golden/harness/build5.sh ROCKETMQ_GIT_DIR SCRATCH_DIR
#   ROCKETMQ_GIT_DIR  a clone (bare is fine) of github.com/apache/rocketmq with the tag
#   SCRATCH_DIR       an empty directory outside the repository
# Needs: JDK 17; Debian packages libnetty-java libcommons-validator-java liblz4-java
# libcommons-lang3-java libguava-java libconversant-disruptor-java libcommons-collections3-java
# libjsr305-java libslf4j-java; in ~/.m2: jna 5.13.0, zstd-jni 1.5.5-11, slf4j-api 1.7.36,
# commons-io 2.11.0, commons-codec 1.16.0, opentelemetry api/context/common/sdk-common/
# sdk-metrics 1.62.0 (the store's metrics types; nothing is exported).
set -euo pipefail

GIT_DIR_RMQ=$1
SCRATCH=$2
TAG=${ROCKETMQ_TAG:-rocketmq-all-5.3.3}
VERSION=${TAG#rocketmq-all-}
HERE=$(cd "$(dirname "$0")" && pwd)
STANDINS=$HERE/standins-5
OUT=$(cd "$HERE/.." && pwd)/rocketmq-$VERSION
J=/usr/share/java
M=${M2_REPO:-$HOME/.m2/repository}

mkdir -p "$SCRATCH/src" "$SCRATCH/classes" "$SCRATCH/stores" "$OUT"
rm -rf "${SCRATCH:?}/src/"* "${SCRATCH:?}/classes/"*
git --git-dir="$GIT_DIR_RMQ" archive "$TAG" store common remoting | tar -x -C "$SCRATCH/src"

# shellcheck source=classpath5.sh
source "$HERE/classpath5.sh"
S=$SCRATCH/src
# The stand-ins come first on the source path so they shadow RocketMQ's RocksDB and DLedger
# classes; javac compiles only what the harness reaches from there.
SP="$STANDINS:$HERE:$S/store/src/main/java:$S/common/src/main/java:$S/remoting/src/main/java"
javac -nowarn -encoding UTF-8 --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
    -d "$SCRATCH/classes" -cp "$CP" -sourcepath "$SP" "$HERE/GoldenHarness5.java"

RUN_CP="$SCRATCH/classes:$CP:$J/slf4j-simple.jar"
ST=$SCRATCH/stores
rm -rf "${ST:?}"/*

# 1. basic: the full workload, then a normal shutdown (checkpoint written, abort removed).
java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness5 normal "$ST/basic" "$ST/basic.json"

# 2. crashed: a shorter workload, then a real kill -9 of the JVM (abort file left behind).
java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness5 crash "$ST/crashed" "$ST/crashed.json" \
    > "$ST/crashed.log" 2>&1 &
PID=$!
for _ in $(seq 1 600); do
    grep -q READY "$ST/crashed.log" && break
    sleep 0.1
done
grep -q READY "$ST/crashed.log" || { cat "$ST/crashed.log"; kill -9 "$PID"; exit 1; }
kill -9 "$PID"
wait "$PID" || true
test -e "$ST/crashed/abort" || { echo "crashed store has no abort file" >&2; exit 1; }

# 3. recovered: a copy of the crashed store reopened by RocketMQ (abnormal recovery), read
#    back and shut down normally.
cp -a "$ST/crashed" "$ST/recovered"
java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness5 recover "$ST/recovered" "$ST/recovered.json"

# 4. propcrc: a small store written with enabledAppendPropCRC=true, normal shutdown.
java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness5 propcrc "$ST/propcrc" "$ST/propcrc.json"

for name in basic crashed recovered propcrc; do
    # compaction/position-checkpoint is written at shutdown through the fastjson stand-in, not
    # fastjson, and its directory exists only to hold it: not kept.
    rm -rf "${ST:?}/$name/compaction"
    # Fixed owner, mode and mtime so that a rebuild changes the tarball only when bytes do.
    tar --sort=name --owner=0 --group=0 --numeric-owner --mode='u=rwX,go=rX' \
        --mtime='2024-01-01 00:00:00' -C "$ST" -cf - "$name" | gzip -n -9 > "$OUT/$name.tar.gz"
    cp "$ST/$name.json" "$OUT/$name.json"
done
ls -l "$OUT"

# 5. the other way round (only with ROCKETSTORE_PYTHON, e.g. .venv/bin/python): rocketstore
#    writes the 4.9.8 corpus's basic workload (rewrite_basic.py; rocketstore writes the 4.9
#    form: it refuses topics past 127 characters, so this corpus's workload is not for it),
#    RocketMQ 5.x opens that store and lists every queue; the listing must be the one RocketMQ
#    5.x gives for RocketMQ 4.9.8's own basic store (checked, nothing is kept).
if [ -n "${ROCKETSTORE_PYTHON:-}" ]; then
    "$ROCKETSTORE_PYTHON" "$HERE/rewrite_basic.py" "$ST/by-rocketstore"
    mkdir -p "$ST/listing"
    tar -xzf "$HERE/../rocketmq-4.9.8/basic.tar.gz" -C "$ST/listing"
    java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness5 list "$ST/by-rocketstore" "$ST/ours.txt"
    java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness5 list "$ST/listing/basic" "$ST/theirs.txt"
    diff "$ST/ours.txt" "$ST/theirs.txt"
    echo "RocketMQ $VERSION reads the rocketstore-written store as RocketMQ 4.9.8's own" \
        "($(wc -l < "$ST/ours.txt") lines)"
fi

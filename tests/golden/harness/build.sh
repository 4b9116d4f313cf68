#!/usr/bin/env bash
# Rebuild the golden corpus (tests/golden/rocketmq-4.9.8/) with RocketMQ 4.9.8's own store.
# Not run by CI. Nothing of RocketMQ (sources, classes, jars) and none of the stand-ins
# below is committed: everything is built in a scratch directory outside the repository.
#
# Usage: [ROCKETSTORE_PYTHON=.venv/bin/python] \
#        tests/golden/harness/build.sh ROCKETMQ_GIT_DIR SCRATCH_DIR STANDINS_DIR
#   ROCKETMQ_GIT_DIR  a clone (bare is fine) of github.com/apache/rocketmq with the tag
#                     rocketmq-all-4.9.8
#   SCRATCH_DIR       an empty directory outside the repository
#   STANDINS_DIR      Java sources standing in for what the store references but never uses
#                     in this configuration (tests/golden/README.md lists them):
#                     com.alibaba.fastjson.{JSON,serializer.SerializerFeature,annotation.JSONField},
#                     io.openmessaging.storage.dledger.entry.DLedgerEntry and
#                     org.apache.rocketmq.store.dledger.DLedgerCommitLog.
# Needs: JDK 17; Debian packages libnetty-java libcommons-validator-java liblz4-java
# libcommons-lang3-java; in ~/.m2: jna 5.13.0, zstd-jni 1.5.5-11, slf4j-api 1.7.36.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=compile498.sh
source "$HERE/compile498.sh"
rm -rf "$ST"/*

# 1. basic: the full workload, then a normal shutdown (checkpoint written, abort removed).
java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness normal "$ST/basic" "$ST/basic.json"

# 2. crashed: a shorter workload, then a real kill -9 of the JVM (abort file left behind).
java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness crash "$ST/crashed" "$ST/crashed.json" \
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
#    back and shut down normally: what rocketstore's recovery of `crashed` must reproduce.
cp -a "$ST/crashed" "$ST/recovered"
java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness recover "$ST/recovered" "$ST/recovered.json"

for name in basic crashed recovered; do
    # config/delayOffset.json comes from the fastjson stand-in, not from fastjson: not kept.
    rm -rf "${ST:?}/$name/config"
    # Fixed owner, mode and mtime so that a rebuild changes the tarball only when bytes do.
    tar --sort=name --owner=0 --group=0 --numeric-owner --mode='u=rwX,go=rX' \
        --mtime='2024-01-01 00:00:00' -C "$ST" -cf - "$name" | gzip -n -9 > "$OUT/$name.tar.gz"
    cp "$ST/$name.json" "$OUT/$name.json"
done
ls -l "$OUT"

# 4. the other way round (only with ROCKETSTORE_PYTHON, e.g. .venv/bin/python): rocketstore
#    writes the basic workload, RocketMQ opens it and lists every queue; the listing must be
#    the one RocketMQ gives for its own store (checked once per rebuild, nothing is kept).
#    It runs after the copy above: rewrite_basic.py reads the manifest from the corpus.
if [ -n "${ROCKETSTORE_PYTHON:-}" ]; then
    "$ROCKETSTORE_PYTHON" "$HERE/rewrite_basic.py" "$ST/by-rocketstore"
    cp -a "$ST/basic" "$ST/basic-for-listing"
    java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness list "$ST/by-rocketstore" "$ST/ours.txt"
    java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness list "$ST/basic-for-listing" "$ST/theirs.txt"
    diff "$ST/ours.txt" "$ST/theirs.txt"
    echo "RocketMQ reads the rocketstore-written store as its own ($(wc -l < "$ST/ours.txt") lines)"
fi


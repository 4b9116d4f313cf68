#!/usr/bin/env bash
# Rebuild one of the 5.3.3 golden stores written by a mode of its own
# (tests/golden/rocketmq-5.3.3/MODE.{tar.gz,json}), leaving the others (build5.sh's) alone.
# Not run by CI; nothing of RocketMQ or DLedger is committed (the stand-ins in standins-5/
# are ours).
#   dledger    the 5.x basic workload with a DLedger CommitLog (enableDLegerCommitLog=true, a
#              one-member group "golden", member n0 on a free port of 127.0.0.1): RocketMQ
#              5.3.3's own DLedgerCommitLog and the real DLedger 0.3.1.2 (the version 5.3.3's
#              pom names; module dledger) are compiled in from DLEDGER_GIT_DIR, instead of
#              the stand-ins' DLedgerCommitLog and DLedgerEntry. The harness waits for n0 to
#              become leader, puts, reads every DLedger entry back and fails if the entries
#              are not exactly the records it put.
#   DLedger's index file is 160 MiB and sparse: the tarball stores it with --sparse (GNU
#   sparse format 1.0, which Python's tarfile extracts); the script checks that tarfile
#   (filter="data") gives back every file with the same SHA-256.
#
# Usage: tests/golden/harness/build5_store.sh dledger ROCKETMQ_GIT_DIR SCRATCH_DIR DLEDGER_GIT_DIR
#   ROCKETMQ_GIT_DIR  a clone (bare is fine) of github.com/apache/rocketmq with the tag
#                     (ROCKETMQ_TAG, default rocketmq-all-5.3.3)
#   SCRATCH_DIR       a directory outside the repository
#   DLEDGER_GIT_DIR   a clone (bare is fine) of github.com/openmessaging/dledger with the tag
#                     dledger-all-0.3.1.2
#   Needs build5.sh's dependencies (see its header), and python3 (3.11 or later).
set -euo pipefail

USAGE="usage: $0 dledger ROCKETMQ_GIT_DIR SCRATCH_DIR DLEDGER_GIT_DIR"
[ $# -eq 4 ] || { echo "$USAGE" >&2; exit 2; }
MODE=$1
case "$MODE" in
    dledger) ;;
    *) echo "$USAGE" >&2; exit 2 ;;
esac
GIT_DIR_RMQ=$2
SCRATCH=$3
DLEDGER_GIT_DIR=$4
TAG=${ROCKETMQ_TAG:-rocketmq-all-5.3.3}
DLEDGER_TAG=dledger-all-0.3.1.2
VERSION=${TAG#rocketmq-all-}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(cd "$HERE/.." && pwd)/rocketmq-$VERSION
J=/usr/share/java
M=${M2_REPO:-$HOME/.m2/repository}

# Sources: RocketMQ's store, common and remoting; DLedger's module dledger; the stand-ins
# without their DLedger pair (RocketMQ's DLedgerCommitLog and DLedger's DLedgerEntry are the
# real ones here).
S=$SCRATCH/src
CLASSES=$SCRATCH/classes-dledger
STANDINS=$SCRATCH/standins-dledger
rm -rf "$S" "$CLASSES" "$STANDINS" "$SCRATCH/dledger-src"
mkdir -p "$S" "$CLASSES" "$SCRATCH/dledger-src" "$SCRATCH/stores" "$OUT"
git --git-dir="$GIT_DIR_RMQ" archive "$TAG" store common remoting | tar -x -C "$S"
git --git-dir="$DLEDGER_GIT_DIR" archive "$DLEDGER_TAG" dledger/src/main/java \
    | tar -x -C "$SCRATCH/dledger-src"
cp -r "$HERE/standins-5" "$STANDINS"
rm -f "$STANDINS/io/openmessaging/storage/dledger/entry/DLedgerEntry.java" \
    "$STANDINS/org/apache/rocketmq/store/dledger/DLedgerCommitLog.java"

# build5.sh's classpath (DLedger's RPC service is RocketMQ's NettyRemotingServer, whose
# netty classes, epoll's included, are already there).
# shellcheck source=classpath5.sh
source "$HERE/classpath5.sh"
SP="$STANDINS:$HERE:$S/store/src/main/java:$S/common/src/main/java:$S/remoting/src/main/java"
SP="$SP:$SCRATCH/dledger-src/dledger/src/main/java"
javac -nowarn -encoding UTF-8 --add-exports java.base/sun.nio.ch=ALL-UNNAMED \
    -d "$CLASSES" -cp "$CP" -sourcepath "$SP" "$HERE/GoldenHarness5.java"

# tls.server.mode=disabled: DLedger's RPC server (RocketMQ's NettyRemotingServer) would build
# a self-signed TLS context (permissive by default) for a port nothing connects to.
JOPTS+=(-Dtls.server.mode=disabled)
RUN_CP="$CLASSES:$CP:$J/slf4j-simple.jar"
ST=$SCRATCH/stores
rm -rf "${ST:?}/$MODE" "$ST/$MODE.json"

java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness5 "$MODE" "$ST/$MODE" "$ST/$MODE.json"

# compaction/position-checkpoint comes from the fastjson stand-in, not from fastjson: not kept.
rm -rf "${ST:?}/$MODE/compaction"
# --sparse --sparse-version=1.0: DLedger's index file (160 MiB, all but a few KiB holes)
# stays small, in a form Python's tarfile extracts (holes written as zeros).
tar --sort=name --owner=0 --group=0 --numeric-owner --mode='u=rwX,go=rX' \
    --sparse --sparse-version=1.0 --mtime='2024-01-01 00:00:00' \
    -C "$ST" -cf - "$MODE" | gzip -n -9 > "$OUT/$MODE.tar.gz"
cp "$ST/$MODE.json" "$OUT/$MODE.json"

# Python's tarfile must give back every file RocketMQ wrote, byte for byte.
rm -rf "$SCRATCH/extracted"
mkdir -p "$SCRATCH/extracted"
python3 - "$OUT/$MODE.tar.gz" "$SCRATCH/extracted" "$ST" "$MODE" <<'EOF'
import hashlib, os, sys, tarfile

tarball, into, stores, mode = sys.argv[1:]
with tarfile.open(tarball) as tar:
    tar.extractall(into, filter="data")


def digests(root):
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            out[os.path.relpath(p, root)] = h.hexdigest()
    return out


ours, theirs = digests(os.path.join(into, mode)), digests(os.path.join(stores, mode))
if ours != theirs:
    sys.exit(f"tarfile extraction differs: {sorted(set(ours.items()) ^ set(theirs.items()))}")
print(f"tarfile extracts all {len(ours)} files with RocketMQ's SHA-256")
EOF
ls -l "$OUT/$MODE.tar.gz" "$OUT/$MODE.json"

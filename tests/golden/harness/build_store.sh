#!/usr/bin/env bash
# Rebuild one of the 4.9.8 golden stores written by a mode of its own
# (tests/golden/rocketmq-4.9.8/MODE.{tar.gz,json}), leaving the others alone. Not run by
# CI; nothing of RocketMQ and none of the stand-ins is committed.
#   lmq        the INNER_MULTI_DISPATCH workload with enableLmq=true and
#              enableMultiDispatch=true, read back (every consume queue, LMQs included),
#              then a normal shutdown. The harness fails if the CommitLog holds anything it
#              did not put (the DELAY=2 message must not come due first: keep the run short).
#   cqext      the basic workload with enableConsumeQueueExt=true (and a filter bitmap for
#              TopicA's messages): tagsCode fields hold ConsumeQueueExt addresses.
#   multipath  the basic workload with storePathCommitLog=<root>/commitlog/b,<root>/commitlog/a
#              (RocketMQ's MultiPathMappedFileQueue spreads the CommitLog over the two).
#   dledger    the basic workload with a DLedger CommitLog (enableDLegerCommitLog=true, a
#              one-member group "golden", member n0 on a free port of 127.0.0.1): RocketMQ's
#              own DLedgerCommitLog and the real DLedger 0.3.1.2 are compiled in (from
#              DLEDGER_GIT_DIR, instead of the stand-ins' DLedger classes). The harness waits
#              for n0 to become leader, puts, reads every DLedger entry back and fails if the
#              entries are not exactly the records it put.
#   dledgermixed  rounds 0-59 of the basic workload with a plain CommitLog, a normal
#              shutdown, then the same directory reopened with DLedger (RocketMQ's "mixed"
#              recovery: a BLANK ends the old CommitLog, DLedger starts after its last file)
#              and the rest of the workload.
#   DLedger's index files are 160 MiB and sparse: the tarball stores them with --sparse
#   (GNU sparse format 1.0, which Python's tarfile extracts).
#
# Usage: tests/golden/harness/build_store.sh lmq|cqext|multipath ROCKETMQ_GIT_DIR SCRATCH_DIR STANDINS_DIR
#        tests/golden/harness/build_store.sh dledger|dledgermixed ROCKETMQ_GIT_DIR SCRATCH_DIR STANDINS_DIR DLEDGER_GIT_DIR
#   (the other arguments and the dependencies are build.sh's; see its header and
#   tests/golden/README.md; DLEDGER_GIT_DIR: a clone, bare is fine, of
#   github.com/openmessaging/dledger with the tag dledger-all-0.3.1.2)
set -euo pipefail

MODE=$1
shift
USAGE="usage: $0 lmq|cqext|multipath ROCKETMQ_GIT_DIR SCRATCH_DIR STANDINS_DIR
       $0 dledger|dledgermixed ROCKETMQ_GIT_DIR SCRATCH_DIR STANDINS_DIR DLEDGER_GIT_DIR"
case "$MODE" in
    lmq|cqext|multipath) [ $# -eq 3 ] || { echo "$USAGE" >&2; exit 2; }; DLEDGER_GIT_DIR= ;;
    dledger|dledgermixed) [ $# -eq 4 ] || { echo "$USAGE" >&2; exit 2; }; DLEDGER_GIT_DIR=$4 ;;
    *) echo "$USAGE" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=compile498.sh
source "$HERE/compile498.sh"
rm -rf "${ST:?}/$MODE" "$ST/$MODE.json"

java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness "$MODE" "$ST/$MODE" "$ST/$MODE.json"

# config/delayOffset.json comes from the fastjson stand-in, not from fastjson: not kept.
rm -rf "${ST:?}/$MODE/config"
# --sparse --sparse-version=1.0: DLedger's index files (160 MiB, all but a few KiB holes)
# stay small, in a form Python's tarfile extracts (holes written as zeros).
SPARSE=()
[ -n "$DLEDGER_GIT_DIR" ] && SPARSE=(--sparse --sparse-version=1.0)
tar --sort=name --owner=0 --group=0 --numeric-owner --mode='u=rwX,go=rX' "${SPARSE[@]}" \
    --mtime='2024-01-01 00:00:00' -C "$ST" -cf - "$MODE" | gzip -n -9 > "$OUT/$MODE.tar.gz"
cp "$ST/$MODE.json" "$OUT/$MODE.json"
ls -l "$OUT/$MODE.tar.gz" "$OUT/$MODE.json"

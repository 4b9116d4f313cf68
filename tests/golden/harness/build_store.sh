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
#
# Usage: tests/golden/harness/build_store.sh lmq|cqext|multipath ROCKETMQ_GIT_DIR SCRATCH_DIR STANDINS_DIR
#   (the other arguments and the dependencies are build.sh's; see its header and
#   tests/golden/README.md)
set -euo pipefail

MODE=$1
shift
case "$MODE" in
    lmq|cqext|multipath) ;;
    *) echo "usage: $0 lmq|cqext|multipath ROCKETMQ_GIT_DIR SCRATCH_DIR STANDINS_DIR" >&2; exit 2 ;;
esac
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=compile498.sh
source "$HERE/compile498.sh"
rm -rf "${ST:?}/$MODE" "$ST/$MODE.json"

java "${JOPTS[@]}" -cp "$RUN_CP" GoldenHarness "$MODE" "$ST/$MODE" "$ST/$MODE.json"

# config/delayOffset.json comes from the fastjson stand-in, not from fastjson: not kept.
rm -rf "${ST:?}/$MODE/config"
tar --sort=name --owner=0 --group=0 --numeric-owner --mode='u=rwX,go=rX' \
    --mtime='2024-01-01 00:00:00' -C "$ST" -cf - "$MODE" | gzip -n -9 > "$OUT/$MODE.tar.gz"
cp "$ST/$MODE.json" "$OUT/$MODE.json"
ls -l "$OUT/$MODE.tar.gz" "$OUT/$MODE.json"

#!/usr/bin/env bash
# Rebuild the LMQ store of the golden corpus (tests/golden/rocketmq-4.9.8/lmq.{tar.gz,json})
# with RocketMQ 4.9.8's own store, enableLmq=true and enableMultiDispatch=true. Not run by
# CI. Separate from build.sh so that it leaves basic/crashed/recovered alone; same inputs,
# same compilation, same packing. Nothing of RocketMQ and none of the stand-ins is committed.
#
# Usage: tests/golden/harness/build_lmq.sh ROCKETMQ_GIT_DIR SCRATCH_DIR STANDINS_DIR
#   (the arguments and dependencies are build.sh's; see its header and tests/golden/README.md)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=compile498.sh
source "$HERE/compile498.sh"
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

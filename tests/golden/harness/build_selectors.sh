#!/usr/bin/env bash
# Rebuild tests/golden/selectors/expected-<version>.txt: RocketMQ's own filter classes judge
# the selector corpus (corpus.txt, written by selector_corpus.py). Not run by CI. Nothing of
# RocketMQ (sources, classes) is committed: it is compiled in a scratch directory outside
# the repository.
#
# Usage: tests/golden/harness/build_selectors.sh ROCKETMQ_GIT_DIR SCRATCH_DIR [TAG...]
#   ROCKETMQ_GIT_DIR  a clone (bare is fine) of github.com/apache/rocketmq with the tags
#   SCRATCH_DIR       an empty directory outside the repository
#   TAG               default: rocketmq-all-4.9.8 rocketmq-all-5.3.3
# Needs: JDK 17 and Debian's libguava-java (the parser's cache).
set -euo pipefail

GIT_DIR_RMQ=$1
SCRATCH=$2
shift 2
TAGS=("$@")
[ ${#TAGS[@]} -gt 0 ] || TAGS=(rocketmq-all-4.9.8 rocketmq-all-5.3.3)
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=$(cd "$HERE/.." && pwd)/selectors
GUAVA=/usr/share/java/guava.jar

for tag in "${TAGS[@]}"; do
    version=${tag#rocketmq-all-}
    work=$SCRATCH/$version
    rm -rf "$work" && mkdir -p "$work/src" "$work/classes"
    git --git-dir="$GIT_DIR_RMQ" archive "$tag" filter/src/main/java | tar -x -C "$work/src"
    javac -nowarn -encoding UTF-8 -d "$work/classes" -cp "$GUAVA" \
        -sourcepath "$work/src/filter/src/main/java" "$HERE/SelectorHarness.java"
    java -cp "$work/classes:$GUAVA" SelectorHarness "$OUT/corpus.txt" "$OUT/expected-$version.txt"
    echo "wrote $OUT/expected-$version.txt"
done

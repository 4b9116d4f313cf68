# Sourced by the scripts of this folder: settings, all overridable from the environment.
#   WORK_DIR      where everything is written: src/ (extracted from the mirror), classes/,
#                 classpath.txt, javac.log, out/ (scenario outputs), store/, broker.log,
#                 broker.pid, tmp/ (java.io.tmpdir, local offsets), home/ (user.home)
#                 [/tmp/rocketstore-java5]
#   ROCKETSTORE   the rocketstore CLI that broker.sh runs [<repo>/.venv/bin/rocketstore]
#   BROKER_PORT   rocketstore's broker port [40911]
#   NAMESRV_PORT  rocketstore's name server port [40876]
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../../.." && pwd)
WORK_DIR=${WORK_DIR:-/tmp/rocketstore-java5}
mkdir -p "$WORK_DIR"
WORK_DIR=$(cd "$WORK_DIR" && pwd)
export WORK_DIR
ROCKETSTORE=${ROCKETSTORE:-$REPO_ROOT/.venv/bin/rocketstore}
BROKER_PORT=${BROKER_PORT:-40911}
NAMESRV_PORT=${NAMESRV_PORT:-40876}
export ROCKETSTORE BROKER_PORT NAMESRV_PORT

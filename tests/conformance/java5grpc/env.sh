# Sourced by the scripts of this folder: settings, all overridable from the environment.
#   WORK_DIR      where everything is written: src/ (extracted from the mirrors, shaded
#                 imports rewritten), gen/ (protoc's output), classes/, classpath.txt,
#                 javac.log, out/ (scenario outputs), store/, broker.log, broker.pid
#                 [/tmp/rocketstore-java5grpc]
#   ROCKETSTORE   the rocketstore CLI that broker.sh runs [<repo>/.venv/bin/rocketstore]
#   GRPC_PORT     rocketstore's gRPC port [48081]
#   BROKER_PORT   rocketstore's remoting port (topics are made through it) [48911]
#   NAMESRV_PORT  rocketstore's name server port [48876]
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../../.." && pwd)
WORK_DIR=${WORK_DIR:-/tmp/rocketstore-java5grpc}
mkdir -p "$WORK_DIR"
WORK_DIR=$(cd "$WORK_DIR" && pwd)
export WORK_DIR
ROCKETSTORE=${ROCKETSTORE:-$REPO_ROOT/.venv/bin/rocketstore}
GRPC_PORT=${GRPC_PORT:-48081}
BROKER_PORT=${BROKER_PORT:-48911}
NAMESRV_PORT=${NAMESRV_PORT:-48876}
export ROCKETSTORE GRPC_PORT BROKER_PORT NAMESRV_PORT

# Sourced by the scripts of this folder: settings, all overridable from the environment.
#   WORK_DIR      where everything this harness writes goes (build, logs, stores, captures)
#                 [/tmp/rocketstore-real-broker]
#   BUILD         build_broker.sh's output [$WORK_DIR/build]
#   LOGDIR        broker, name server, probe and mqadmin logs [$WORK_DIR/logs]
#   NAMESRV_PORT  the real name server's port [39876]
#   BROKER_PORT   the real broker's listenPort [30911]; it also listens on BROKER_PORT-2 (VIP
#                 channel) and BROKER_PORT+1 (HA)
#   ROCKETSTORE   our CLI [<repo>/.venv/bin/rocketstore, found from this folder]
#   JC_OUT        ../build.sh's output (4.9.8 client + JavaClientProbe) [$WORK_DIR/jc]
#   MQA_OUT       ../build_mqadmin.sh's output (the real 4.9.8 mqadmin) [$WORK_DIR/mqa]
#   CMDS          the NAME|COMMAND|ARGS list capture_mqadmin.sh and run_ours.sh run [$HERE/cmds.txt]
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
JAVA_DIR_HARNESS=$(cd "$HERE/.." && pwd)
REPO_ROOT=$(cd "$HERE/../../../.." && pwd)
WORK_DIR=${WORK_DIR:-/tmp/rocketstore-real-broker}
mkdir -p "$WORK_DIR"
WORK_DIR=$(cd "$WORK_DIR" && pwd)
RB=$WORK_DIR
BUILD=${BUILD:-$WORK_DIR/build}
LOGDIR=${LOGDIR:-$WORK_DIR/logs}
NAMESRV_PORT=${NAMESRV_PORT:-39876}
BROKER_PORT=${BROKER_PORT:-30911}
NS=127.0.0.1:$NAMESRV_PORT
BR=127.0.0.1:$BROKER_PORT
ROCKETSTORE=${ROCKETSTORE:-$REPO_ROOT/.venv/bin/rocketstore}
JC_OUT=${JC_OUT:-$WORK_DIR/jc}
MQA_OUT=${MQA_OUT:-$WORK_DIR/mqa}
CMDS=${CMDS:-$HERE/cmds.txt}
export ROCKETMQ_HOME=$BUILD/home
mkdir -p "$LOGDIR"
JOPTS=(-server -Xms256m -Xmx512m -Xmn128m -XX:MaxDirectMemorySize=256m
       -XX:+UseG1GC -XX:-OmitStackTraceInFastThrow
       --add-exports java.base/sun.nio.ch=ALL-UNNAMED
       --add-exports java.base/jdk.internal.ref=ALL-UNNAMED
       --add-opens java.base/jdk.internal.ref=ALL-UNNAMED
       --add-opens java.base/java.nio=ALL-UNNAMED
       --add-opens java.base/sun.nio.ch=ALL-UNNAMED
       --add-opens java.base/java.lang=ALL-UNNAMED
       -Drmq.log.dir="$LOGDIR" -Duser.home="$WORK_DIR/home-user"
       # a shared machine's disk is often over 85-90 % used by others' tests: without these
       # the broker deletes CommitLog files at once and refuses puts (CleanCommitLogService)
       -Drocketmq.broker.diskSpaceWarningLevelRatio=0.99
       -Drocketmq.broker.diskSpaceCleanForciblyRatio=0.98
       -Drocketmq.client.logUseSlf4j=false -Drocketmq.client.logRoot="$LOGDIR")
# EXTRA_JAVA_OPTS: more JVM options for the broker and name server (tls_namesrv.sh: -Dtls.enable=true)
read -r -a EXTRA_JOPTS <<< "${EXTRA_JAVA_OPTS:-}"
JOPTS+=("${EXTRA_JOPTS[@]}")

# broker_conf STORE_DIR OUT_FILE: broker.conf.in with the store directory and ports filled in
broker_conf() {
    sed -e "s#@STORE_DIR@#$1#g" -e "s#@NAMESRV_PORT@#$NAMESRV_PORT#g" -e "s#@BROKER_PORT@#$BROKER_PORT#g" \
        "$HERE/broker.conf.in" > "$2"
}

# cmds_lines: cmds.txt with @BROKER@ replaced by the broker's address, blank and # lines dropped
cmds_lines() {
    sed -e "s#@BROKER@#$BR#g" -e '/^[[:space:]]*#/d' "$CMDS"
}

# wanted NAME [NAMES...]: true when no NAMES were given or NAME is one of them
wanted() {
    local n=$1; shift
    [ $# -eq 0 ] && return 0
    local w; for w in "$@"; do [ "$w" = "$n" ] && return 0; done
    return 1
}

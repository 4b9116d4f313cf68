#!/usr/bin/env bash
# stop.sh [broker|namesrv|all] — SIGTERM to the process run_broker.sh / run_namesrv.sh started
# (pid files in $WORK_DIR), then waits up to 30 s for it to exit (the broker flushes and removes
# its abort file on a clean shutdown). Default: all (broker first).
set -uo pipefail
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
stop_one() {
    local f=$RB/$1.pid pid
    [ -f "$f" ] || { echo "$1: no pid file"; return 0; }
    pid=$(cat "$f")
    if kill -TERM "$pid" 2>/dev/null; then
        for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then echo "$1 pid $pid still running after 30 s"; return 1; fi
        echo "$1 pid $pid stopped"
    else
        echo "$1 pid $pid was not running"
    fi
    rm -f "$f"
}
case "${1:-all}" in
broker|namesrv) stop_one "$1";;
all) stop_one broker; stop_one namesrv;;
*) echo "usage: $0 [broker|namesrv|all]" >&2; exit 2;;
esac

#!/usr/bin/env bash
# run_ours.sh SRC_STORE OUTDIR [NAME...] — copies SRC_STORE to OUTDIR/store (OUTDIR is emptied first),
# writes OUTDIR/broker.conf (broker.conf.in pointing at that copy) and runs the lines of cmds.txt
# (all, or only the NAMEs given) with our offline CLI ($ROCKETSTORE --store OUTDIR/store
# -c OUTDIR/broker.conf COMMAND ARGS): OUTDIR/NAME.txt and NAME.err, to compare with
# capture_mqadmin.sh's files. Settings: see common.sh.
source "$(cd "$(dirname "$0")" && pwd)/common.sh"
[ $# -ge 2 ] || { echo "usage: $0 SRC_STORE OUTDIR [NAME...]" >&2; exit 2; }
SRC=$1; OUTD=$(realpath -m "$2"); shift 2
rm -rf "$OUTD"; mkdir -p "$OUTD"; cp -a "$SRC" "$OUTD/store"
broker_conf "$OUTD/store" "$OUTD/broker.conf"
while IFS='|' read -r name cmd args; do
  [ -z "$name" ] && continue
  wanted "$name" "$@" || continue
  [ "$cmd" = DecodeMessageId ] && cmd=decodeMessageId
  "$ROCKETSTORE" --store "$OUTD/store" -c "$OUTD/broker.conf" $cmd $args > "$OUTD/$name.txt" 2> "$OUTD/$name.err" < /dev/null
  echo "$name rc=$? $(wc -l < "$OUTD/$name.txt") lines"
done < <(cmds_lines)

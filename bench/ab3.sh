#!/usr/bin/env bash
# A/B of two revisions on a three-node cluster of separate processes (one
# `narad nats`, three `narad serve`), the figures issue 15's closing note
# asks for, interleaved round by round as bench/ab.sh does.
#
#   bash bench/ab3.sh [BASE_REV] [NEW_REV] [MODE]    # defaults: HEAD~1 HEAD load
#   ROUNDS=1 bash bench/ab3.sh HEAD HEAD restart      # the harness against itself
#
# Modes (each run starts a fresh cluster in the temporary directory):
#   load     TOPICS topics of PARTITIONS partitions, one bench/load a topic
#            at once (-server listing the three nodes), COUNT records in all.
#            Per side: produce msg/s and consume+ack msg/s while producing
#            (both summed over the load processes) and their ratio; full
#            flow msg/s (every ack over the wall time from the first produce
#            of any process to the last ack of any); end-to-end p50/p99 of
#            the deliveries made while producing (the worst load process's);
#            history ok/lost/duplicates; VmRSS per node idle (topics made,
#            before the load) and peak under load (sampled every 200 ms),
#            the highest node's.
#   restart  RESTART_TOPICS topics making RESTART_PARTITIONS partitions
#            (600) over the nodes, RESTART_RECORDS records into each topic
#            (bench/load), VmRSS of each node idle at that size, then SIGTERM
#            (RESTART_SIG=KILL: SIGKILL) node RESTART_NODE (2), wait for it
#            to exit, start it again and time to its /readyz 200 (polled
#            every 20 ms). A SIGTERM hands the node's partitions off first
#            (rule B8), so the restarted node may own fewer than before; a
#            SIGKILL restarts it with its share.
#   kill     TOPICS loads of KILL_COUNT records in all (30000: about 10 s
#   term     at 3,000 msg/s; raise it on a faster machine), SIGKILL (or SIGTERM, waiting for the exit) node
#            RESTART_NODE KILL_AFTER seconds (3) into the load, start it
#            again at once, let the consumers drain: records acknowledged
#            (202), lost, duplicate deliveries and duplicate records (second
#            copies at another offset), failed attempts, restart to ready.
#   pause    as kill, but SIGSTOP the node and SIGCONT it PAUSE_FOR seconds
#            (40, past the dead timeout of 30 s) later: a paused owner.
#
# Env: ROUNDS (3), COUNT (20000 records in all, split over the topics),
# TOPICS (3), PARTITIONS (6), SIZE (1024 bytes a body), PRODUCERS and
# CONSUMERS (8 each, per load process), DRAIN (60s: -drain of each load),
# PAUSE_FOR (40), RESTART_TOPICS (6), RESTART_PARTITIONS (600), RESTART_RECORDS (200 a
# topic), RESTART_NODE (2), RESTART_SIG (TERM), KILL_COUNT (30000), KILL_AFTER (3 s), LOAD_REV
# (new: the new rev's bench/load drives both sides, so that the client is
# the same and reports the same fields; own: each side its own),
# AB_DIR (/tmp/ab), KEEP_BIN (0).
#
# Each rev is checked out with `git worktree add --detach` into the
# temporary directory (NEW_REV may name a directory holding a checkout,
# built as it is) and its own ./cmd/narad built. A round runs both sides,
# base first in odd rounds and new first in even ones. Ports are below 32768,
# picked per run: NATS on B, HTTP on B+1..B+3, Raft on B+11..B+13. Security
# is on as in deploy/local-cluster.sh (admin seeded by NARAD_ADMIN_PASSWORD,
# nodes on the node.nk credentials `narad nats` writes, the loads as admin).
#
# A record acknowledged (202) and never delivered, or a failed history
# check, is reported loudly at once, the rounds go on, and the script exits
# 3 at the end; a node that does not get ready or dies unasked stops it with
# exit status 1. Per-run JSON, RSS samples and logs stay in the temporary
# directory, whose path is printed, and so does the data of a run whose
# history failed; worktrees, other data and (unless KEEP_BIN=1) binaries
# are removed on exit.
set -euo pipefail

BASE_REV=${1:-HEAD~1}
NEW_REV=${2:-HEAD}
MODE=${3:-load}
ROUNDS=${ROUNDS:-3}
COUNT=${COUNT:-20000}
TOPICS=${TOPICS:-3}
PARTITIONS=${PARTITIONS:-6}
SIZE=${SIZE:-1024}
P=${PRODUCERS:-8}
C=${CONSUMERS:-8}
DRAIN=${DRAIN:-60s}
RESTART_TOPICS=${RESTART_TOPICS:-6}
RESTART_PARTITIONS=${RESTART_PARTITIONS:-600}
RESTART_RECORDS=${RESTART_RECORDS:-200}
RESTART_NODE=${RESTART_NODE:-2}
RESTART_SIG=${RESTART_SIG:-TERM}
KILL_COUNT=${KILL_COUNT:-30000}
KILL_AFTER=${KILL_AFTER:-3}
PAUSE_FOR=${PAUSE_FOR:-40}
LOAD_REV=${LOAD_REV:-new}
AB_DIR=${AB_DIR:-/tmp/ab}

case $MODE in load | restart | kill | term | pause) ;; *) echo "ab3: MODE is load, restart, kill, term or pause, not $MODE" >&2; exit 2 ;; esac
case $LOAD_REV in new | own) ;; *) echo "ab3: LOAD_REV is new or own, not $LOAD_REV" >&2; exit 2 ;; esac
case $RESTART_SIG in TERM | KILL) ;; *) echo "ab3: RESTART_SIG is TERM or KILL" >&2; exit 2 ;; esac
case $RESTART_NODE in 2 | 3) ;; *) echo "ab3: RESTART_NODE is 2 or 3 (node 1 creates the topics and reads the watermarks)" >&2; exit 2 ;; esac
if (( RESTART_PARTITIONS % RESTART_TOPICS )) || (( RESTART_PARTITIONS / RESTART_TOPICS > 108 )); then
  echo "ab3: RESTART_PARTITIONS must split evenly over RESTART_TOPICS, at most 108 a topic" >&2; exit 2
fi
for tool in git go curl jq awk; do
  command -v "$tool" >/dev/null || { echo "ab3: needs $tool" >&2; exit 2; }
done
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
mkdir -p "$AB_DIR"
tmp=$(mktemp -d "$AB_DIR/ab3.XXXXXX")
worktrees=()
spid= # the RSS sampler
cdir= # the running cluster's data
keep_cdir=0 # its history failed: stop_all keeps it

# stop_all: every process of the running cluster, at once, then NATS.
stop_all() {
  local f p pids=()
  [ -n "$spid" ] && { kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; spid=; }
  [ -n "$cdir" ] || return 0
  for f in "$cdir"/n?.pid "$cdir"/load*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f"); rm -f "$f"
    kill -TERM "$p" 2>/dev/null && pids+=("$p")
  done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  if [ -f "$cdir/nats.pid" ]; then
    p=$(cat "$cdir/nats.pid"); rm -f "$cdir/nats.pid"
    kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true
  fi
  if [ "$keep_cdir" = 1 ]; then
    echo "ab3: kept $cdir (the data of the run whose history failed; its logs are $out.*.log)" >&2
    keep_cdir=0
  else
    rm -rf "$cdir"
  fi
  cdir=
}
cleanup() {
  stop_all
  remove_worktrees
  [ "${KEEP_BIN:-0}" = 1 ] || rm -rf "$tmp/bin-base" "$tmp/bin-new"
}
trap cleanup EXIT

# checkout, remove_worktrees
. "$(dirname "${BASH_SOURCE[0]}")/worktrees.sh"
build() {
  local side=$1 v=src_$1
  (cd "${!v}" && go build -o "$tmp/bin-$side/narad" ./cmd/narad)
  if [ "$LOAD_REV" = own ] || [ "$side" = new ]; then
    (cd "${!v}" && go build -o "$tmp/bin-$side/load" ./bench/load)
  fi
}
checkout base "$BASE_REV"
checkout new "$NEW_REV"
echo "ab3: $MODE, base $label_base, new $label_new; results in $tmp" >&2
build base
build new
[ "$LOAD_REV" = new ] && cp "$tmp/bin-new/load" "$tmp/bin-base/load"

flags() { "$1" -h 2>&1 | awk '$1 ~ /^-[a-z]/ { print substr($1, 2) }' | sort -u; }
for side in base new; do
  flags "$tmp/bin-$side/load" >"$tmp/flags-$side"
  for f in server topic producers consumers count size json drain user password; do
    grep -qx "$f" "$tmp/flags-$side" || { echo "ab3: $side's bench/load has no -$f" >&2; exit 2; }
  done
done

. "$(dirname "${BASH_SOURCE[0]}")/ports.sh"
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# start_node I: node nI of the cluster in $cdir, its pid in $cdir/nI.pid.
start_node() {
  local i=$1
  # Both sides' Raft over mutual TLS when both take --raft-tls-*, on
  # certificates the new side's binary makes (ports.sh), made here rather
  # than in the background command, where the nodes would race to make
  # them.
  local tls
  tls=$(raft_tls_args "$bin/narad" "$cdir/raft-tls" "$tmp/bin-new/narad")
  # shellcheck disable=SC2086 # the flags split on purpose
  NARAD_ADMIN_PASSWORD=$pw "$bin/narad" serve --id "n$i" --data "$cdir/n$i" --http "127.0.0.1:$((base + i))" \
    --raft "127.0.0.1:$((base + 10 + i))" --nats "nats://127.0.0.1:$base" --nats-creds "$cdir/nats/node.nk" \
    $tls \
    --peers "$peers" --log-level warn >>"$out.n$i.log" 2>&1 &
  echo $! >"$cdir/n$i.pid"
}
npid() { cat "$cdir/n$1.pid"; }
# wait_ready I POLL: waits (60 s at most) for nI's /readyz 200, polling every
# POLL seconds; exit 1 when it does not come or the node exits.
wait_ready() {
  local i=$1 poll=$2 deadline=$(( $(now_ms) + 60000 ))
  while [ "$(code "$(url "$i")/readyz")" != 200 ]; do
    if ! kill -0 "$(npid "$i")" 2>/dev/null; then
      echo "ab3: $side node n$i exited before it was ready ($tag); the tail of $out.n$i.log:" >&2
      tail -n 20 "$out.n$i.log" >&2; exit 1
    fi
    if (( $(now_ms) > deadline )); then
      echo "ab3: $side node n$i not ready after 60 s ($tag); the tail of $out.n$i.log:" >&2
      tail -n 20 "$out.n$i.log" >&2; exit 1
    fi
    sleep "$poll"
  done
}
# start_cluster: NATS, three nodes, every /readyz 200 and admin able to log in.
start_cluster() {
  base=$(free_base)
  [ -n "$base" ] || exit 2
  cdir=$tmp/data-$tag-$side
  mkdir -p "$cdir"
  pw=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  peers="n1=127.0.0.1:$((base + 11)),n2=127.0.0.1:$((base + 12)),n3=127.0.0.1:$((base + 13))"
  servers="$(url 1),$(url 2),$(url 3)"
  "$bin/narad" nats --listen "127.0.0.1:$base" --data "$cdir/nats" >>"$out.nats.log" 2>&1 &
  echo $! >"$cdir/nats.pid"
  for _ in $(seq 1 300); do [ -s "$cdir/nats/node.nk" ] && break; sleep 0.1; done
  [ -s "$cdir/nats/node.nk" ] || { echo "ab3: narad nats wrote no credentials; see $out.nats.log" >&2; exit 1; }
  for i in 1 2 3; do start_node "$i"; done
  for i in 1 2 3; do wait_ready "$i" 0.1; done
  for _ in $(seq 1 300); do
    [ "$(code -u "admin:$pw" "$(url 1)/v1/users")" = 200 ] && return
    sleep 0.1
  done
  echo "ab3: admin cannot log in after 30 s ($side, $tag)" >&2; exit 1
}
# create_topic NAME PARTITIONS, on node 1 (a 503 while placement settles is
# asked again).
create_topic() {
  local c
  for _ in $(seq 1 100); do
    c=$(code -u "admin:$pw" -H 'Content-Type: application/json' -d "{\"name\":\"$1\",\"partitions\":$2}" "$(url 1)/v1/topics")
    [ "$c" = 201 ] && return
    [ "$c" = 503 ] || [ "$c" = 000 ] || { echo "ab3: create topic $1 answered $c ($side, $tag)" >&2; exit 1; }
    sleep 0.1
  done
  echo "ab3: create topic $1: still 503 after 100 tries" >&2; exit 1
}
# start_loads PREFIX NTOPICS TOTAL P C: one bench/load a topic, in
# parallel, TOTAL records split over them, JSON in $out.PREFIXk.json, pids in
# $cdir/loadk.pid; wait_loads NTOPICS sets load_rc (the first non-zero exit).
start_loads() {
  local k
  for k in $(seq 1 "$2"); do
    "$bin/load" -server "$servers" -topic "$1$k" -producers "$4" -consumers "$5" \
      -count $(( $3 / $2 + (k <= $3 % $2 ? 1 : 0) )) -size "$SIZE" \
      -drain "$DRAIN" -json -user admin -password "$pw" >"$out.$1$k.json" 2>"$out.$1$k.load.log" &
    echo $! >"$cdir/load$k.pid"
  done
}
wait_loads() {
  local k p rc
  load_rc=0
  for k in $(seq 1 "$1"); do
    p=$(cat "$cdir/load$k.pid"); rm -f "$cdir/load$k.pid"
    rc=0; wait "$p" || rc=$?
    [ "$load_rc" = 0 ] && load_rc=$rc
  done
}
# sampler FILE: "node KiB" of every node every 200 ms, until killed.
sampler() {
  local i p v
  while :; do
    for i in 1 2 3; do
      p=$(cat "$cdir/n$i.pid" 2>/dev/null) || continue
      v=$(rss_kib "$p") && [ -n "$v" ] && echo "$i $v"
    done
    sleep 0.2
  done >"$1"
}
# check_history PREFIX NTOPICS: every load's JSON is there; a loss or a
# failed history is shouted and remembered (exit 3 at the end).
lost_any=0
check_history() {
  local k f lost ok
  for k in $(seq 1 "$2"); do
    f=$out.$1$k.json
    if ! jq -e . "$f" >/dev/null 2>&1; then
      echo "ab3: $side load $1$k ($tag) exited $load_rc without a JSON summary; see $out.$1$k.load.log" >&2; exit 1
    fi
    lost=$(jq -r '.history.lost' "$f"); ok=$(jq -r '.history.ok' "$f")
    if [ "$lost" != 0 ] || [ "$ok" != true ]; then
      lost_any=1
      keep_cdir=1
      local lv=label_$side
      echo >&2
      echo "!!!!!!!! ab3: LOST RECORDS / HISTORY FAILED: $side (${!lv}), $tag, topic $1$k: history.ok=$ok lost=$lost" >&2
      jq -c '.history' "$f" >&2
      echo "!!!!!!!! see $f and $out.$1$k.load.log" >&2
      echo >&2
    fi
  done
}
# alive: every node still runs (none died unasked).
check_alive() {
  local i
  for i in 1 2 3; do
    kill -0 "$(npid "$i")" 2>/dev/null && continue
    echo "ab3: $side node n$i died during the run ($tag); the tail of $out.n$i.log:" >&2
    tail -n 20 "$out.n$i.log" >&2; exit 1
  done
}
idle_rss() { local i; for i in 1 2 3; do rss_kib "$(npid "$i")"; done | sort -n | tr '\n' ' '; }

run_load() {
  start_cluster
  local k
  for k in $(seq 1 "$TOPICS"); do create_topic "t$k" "$PARTITIONS"; done
  sleep 2 # the partitions open; then the nodes are idle
  local idle
  idle=$(idle_rss)
  sampler "$out.rss" & spid=$!
  start_loads t "$TOPICS" "$COUNT" "$P" "$C"
  wait_loads "$TOPICS"
  kill "$spid"; wait "$spid" 2>/dev/null || true; spid=
  check_history t "$TOPICS"
  check_alive
  stop_all
  [ "$load_rc" = 0 ] || [ "$lost_any" = 1 ] || { echo "ab3: a $side load ($tag) exited $load_rc; see $out.t*.load.log" >&2; exit 1; }
  local peak
  peak=$(awk '$2 > m { m = $2 } END { print m + 0 }' "$out.rss")
  case $tag in warmup*) return ;; esac
  jq -rs --arg tag "$tag" --arg side "$side" --arg idle "$idle" --arg peak "$peak" '
    def sum(f): map(f // 0) | add;
    def r(n): if . == null then null else (. * pow(10; n) | round) / pow(10; n) end;
    def mx(f): if any(.[]; f == null) then null else map(f) | max end;
    (sum(.produce_msgs_per_sec)) as $pr | (mx(.consume_ack_msgs_per_sec)) as $has |
    (if $has == null then null else sum(.consume_ack_msgs_per_sec) end) as $ca |
    (if any(.[]; .first_produce_unix_ns == null) then null
     else (map(.last_ack_unix_ns) | max) - (map(.first_produce_unix_ns | select(. > 0)) | min) end) as $span |
    [$tag, $side, sum(.produced), ($pr | r(0)), ($ca | r(0)), (if $ca == null or $pr == 0 then null else $ca / $pr end | r(3)),
     (if $span == null or $span <= 0 then null else sum(.acked) / ($span / 1e9) end | r(0)),
     (mx(.end_to_end_latency_while_producing.p50_ms) | r(1)), (mx(.end_to_end_latency_while_producing.p99_ms) | r(1)),
     all(.[]; .history.ok), sum(.history.lost), sum(.history.duplicates), sum(.history.duplicate_records),
     (($idle | split(" ") | map(select(. != "") | tonumber) | max) / 1024 | r(1)), (($peak | tonumber) / 1024 | r(1)),
     sum(.produce_failed_attempts)] | map(if . == null then "" else . end) | @tsv' "$out".t*.json >>"$tmp/rows"
}

run_restart() {
  start_cluster
  local k each=$((RESTART_PARTITIONS / RESTART_TOPICS))
  for k in $(seq 1 "$RESTART_TOPICS"); do create_topic "r$k" "$each"; done
  start_loads r "$RESTART_TOPICS" $((RESTART_RECORDS * RESTART_TOPICS)) 2 2
  wait_loads "$RESTART_TOPICS"
  check_history r "$RESTART_TOPICS"
  [ "$load_rc" = 0 ] || [ "$lost_any" = 1 ] || { echo "ab3: a $side load ($tag) exited $load_rc; see $out.r*.load.log" >&2; exit 1; }
  sleep 2
  local idle
  idle=$(idle_rss)
  local p t0 t1 t2
  p=$(npid "$RESTART_NODE")
  t0=$(now_ms)
  kill "-$RESTART_SIG" "$p"
  wait "$p" 2>/dev/null || [ "$RESTART_SIG" != TERM ] || echo "ab3: note: $side n$RESTART_NODE exited non-zero on SIGTERM ($tag)" >&2
  t1=$(now_ms)
  start_node "$RESTART_NODE"
  wait_ready "$RESTART_NODE" 0.02
  t2=$(now_ms)
  local after
  after=$(rss_kib "$(npid "$RESTART_NODE")")
  check_alive
  stop_all
  case $tag in warmup*) return ;; esac
  printf '%s\t%s\t%d\t%d\t%s\t%s\t%s\n' "$tag" "$side" $((t2 - t1)) $((t1 - t0)) \
    "$(awk '{ printf "%.1f", $1 / 1024 }' <<<"$idle")" "$(awk '{ printf "%.1f", $NF / 1024 }' <<<"$idle")" \
    "$(awk -v k="$after" 'BEGIN { printf "%.1f", k / 1024 }')" >>"$tmp/rows"
}

run_kill() {
  local sig=$1
  start_cluster
  local k
  for k in $(seq 1 "$TOPICS"); do create_topic "k$k" "$PARTITIONS"; done
  sleep 1
  start_loads k "$TOPICS" "$KILL_COUNT" "$P" "$C"
  sleep "$KILL_AFTER"
  local p t1 t2
  for k in $(seq 1 "$TOPICS"); do
    kill -0 "$(cat "$cdir/load$k.pid")" 2>/dev/null && continue
    echo "ab3: WARNING: load k$k had ended before the SIG$sig ($side, $tag): not under load; raise KILL_COUNT" >&2
  done
  p=$(npid "$RESTART_NODE")
  if [ "$sig" = STOP ]; then
    # Paused, not dead to the OS: its peers mark it dead after the dead
    # timeout while the commits sent to it wait in its sockets.
    kill -STOP "$p"
    sleep "$PAUSE_FOR"
    t1=$(now_ms)
    kill -CONT "$p"
    wait_ready "$RESTART_NODE" 0.02
    t2=$(now_ms)
  else
    kill "-$sig" "$p"
    wait "$p" 2>/dev/null || true
    t1=$(now_ms)
    start_node "$RESTART_NODE"
    wait_ready "$RESTART_NODE" 0.02
    t2=$(now_ms)
  fi
  wait_loads "$TOPICS"
  check_history k "$TOPICS"
  check_alive
  stop_all
  [ "$load_rc" = 0 ] || [ "$lost_any" = 1 ] || { echo "ab3: a $side load ($tag) exited $load_rc; see $out.k*.load.log" >&2; exit 1; }
  case $tag in warmup*) return ;; esac
  jq -rs --arg tag "$tag" --arg side "$side" --arg ready "$((t2 - t1))" '
    def sum(f): map(f // 0) | add;
    [$tag, $side, sum(.history.produced), sum(.history.maybe_produced), sum(.history.lost), sum(.history.duplicates),
     sum(.history.duplicate_records), sum(.produce_failed_attempts), sum(.consume_errors), sum(.acks_refused),
     ($ready | tonumber), all(.[]; .history.ok)] | @tsv' "$out".k*.json >>"$tmp/rows"
}

run() {
  side=$1 tag=$2
  bin=$tmp/bin-$side
  out=$tmp/$tag-$side
  case $MODE in
    load) run_load ;;
    restart) run_restart ;;
    kill) run_kill KILL ;;
    term) run_kill TERM ;;
    pause) run_kill STOP ;;
  esac
}
: >"$tmp/rows"
for r in $(seq 1 "$ROUNDS"); do
  echo "ab3: round $r/$ROUNDS" >&2
  if (( r % 2 )); then run base "round$r"; run new "round$r"; else run new "round$r"; run base "round$r"; fi
done

# stat SIDE COLUMN: median (an even count averages the middle two), min, max.
stat() {
  awk -F'\t' -v s="$1" -v c="$2" '$2 == s && $c != "" { print $c }' "$tmp/rows" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR == 0) { print "- - -"; exit } m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%s %s %s\n", m, v[1], v[NR] }'
}
# medians SPEC...: one line a "name:column:format" of the medians per side
# and new/base.
medians() {
  local spec name col fmt bm blo bhi nm nlo nhi
  printf "%-16s %12s %22s %12s %22s %9s\n" "median" "base" "(min..max)" "new" "(min..max)" "new/base"
  for spec in "$@"; do
    IFS=: read -r name col fmt <<<"$spec"
    read -r bm blo bhi <<<"$(stat base "$col")"
    read -r nm nlo nhi <<<"$(stat new "$col")"
    awk -v name="$name" -v fmt="$fmt" -v bm="$bm" -v blo="$blo" -v bhi="$bhi" -v nm="$nm" -v nlo="$nlo" -v nhi="$nhi" 'BEGIN {
      f = "%12" substr(fmt, 2)
      if (bm == "-" || nm == "-") { printf "%-16s %12s %22s %12s %22s %9s\n", name, bm, "", nm, "", "-"; exit }
      r = sprintf(fmt "..", blo) sprintf(fmt, bhi); s = sprintf(fmt "..", nlo) sprintf(fmt, nhi)
      printf "%-16s " f " %22s " f " %22s %9s\n", name, bm, "(" r ")", nm, "(" s ")", (bm > 0 ? sprintf("%.3f", nm / bm) : "-")
    }'
  done
}
# table HEADER FORMAT: the rows, "-" for an empty field.
table() {
  awk -F'\t' -v h="$1" 'BEGIN { print h } { for (i = 1; i <= NF; i++) if ($i == "") $i = "-"; print }' OFS='\t' "$tmp/rows" | column -t -s $'\t'
}

echo "base: $label_base"
echo "new:  $label_new"
case $MODE in
  load)
    echo "3 nodes, $TOPICS topics x $PARTITIONS partitions, one bench/load a topic ($P producers, $C consumers each), $COUNT x $SIZE B in all"
    echo
    table $'round\trev\tproduced\tprod/s\tcack/s\tcack/prod\tflow/s\te2e_p50_ms\te2e_p99_ms\tok\tlost\tdups\tdup_recs\trss_idle_MB\trss_peak_MB\tfailed'
    echo
    medians "produce/s:4:%.0f" "consume+ack/s:5:%.0f" "cack/produce:6:%.3f" "full flow/s:7:%.0f" \
      "e2e p50 ms:8:%.1f" "e2e p99 ms:9:%.1f" "duplicates:12:%.0f" "rss idle MB:14:%.1f" "rss peak MB:15:%.1f"
    echo
    echo "produce/s and consume+ack/s (acks while producing over the produce time) are summed over the loads;"
    echo "full flow is every ack over first produce to last ack; e2e is of the deliveries made while producing,"
    echo "the worst load's; rss the highest node's VmRSS: idle with the topics made, peak under the load."
    ;;
  restart)
    echo "3 nodes, $RESTART_TOPICS topics making $RESTART_PARTITIONS partitions, $RESTART_RECORDS records a topic; SIG$RESTART_SIG n$RESTART_NODE and start it again"
    echo
    table $'round\trev\tready_ms\tstop_ms\trss_min_MB\trss_max_MB\trss_restarted_MB'
    echo
    medians "restart->ready ms:3:%.0f" "SIG$RESTART_SIG->exit ms:4:%.0f" "rss 600p min MB:5:%.1f" "rss 600p max MB:6:%.1f"
    echo
    echo "ready_ms: from the restarted process's start to its /readyz 200 (polled every 20 ms); rss: VmRSS of"
    echo "the nodes idle at $RESTART_PARTITIONS partitions before the restart (lowest and highest node), and of the restarted one once ready."
    ;;
  kill | term | pause)
    case $MODE in
      kill) what="SIGKILL n$RESTART_NODE ${KILL_AFTER}s into the load, restarted at once" ;;
      term) what="SIGTERM n$RESTART_NODE ${KILL_AFTER}s into the load, restarted at once" ;;
      pause) what="SIGSTOP n$RESTART_NODE ${KILL_AFTER}s into the load, SIGCONT ${PAUSE_FOR}s later" ;;
    esac
    echo "3 nodes, $TOPICS topics x $PARTITIONS partitions, $KILL_COUNT x $SIZE B in all; $what"
    echo
    table $'round\trev\tacknowledged\tmaybe\tlost\tdup_deliveries\tdup_records\tproduce_failed\tconsume_errors\tacks_refused\tready_ms\tok'
    echo
    medians "acknowledged:3:%.0f" "lost:5:%.0f" "dup deliveries:6:%.0f" "dup records:7:%.0f" "produce failed:8:%.0f" "restart->ready ms:11:%.0f"
    echo
    echo "acknowledged: records answered 202; maybe: every attempt failed (may be stored); dup deliveries: deliveries"
    echo "beyond the first per record (redeliveries included); dup records: second copies at another offset."
    ;;
esac
echo "Runs: $tmp"
if [ "$lost_any" = 1 ]; then
  echo
  echo "!!!!!!!! ab3: A RECORD ACKNOWLEDGED BY THE BROKER WAS LOST (or a history check failed); see above and $tmp"
  exit 3
fi

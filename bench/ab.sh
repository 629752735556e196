#!/usr/bin/env bash
# A/B of the produce path: one node under bench/load, a base revision against
# a new one, interleaved round by round so that the noise of the machine
# (other builds, tests, CPU frequency) falls on both alike.
#
#   bash bench/ab.sh [BASE_REV] [NEW_REV]     # defaults: 6e6c791 HEAD
#   ROUNDS=5 PRODUCERS=16 CONSUMERS=16 COUNT=30000 bash bench/ab.sh 6e6c791 HEAD
#
# Env: ROUNDS (3), PRODUCERS (16), CONSUMERS (16), COUNT (30000), SIZE (1024
# bytes a body), WARMUP (0: runs of each rev before the measured rounds,
# thrown away), AB_DIR (/tmp/ab: where the temporary directory goes),
# KEEP_BIN (0; 1 keeps the built binaries in the temporary directory).
#
# Each rev is checked out with `git worktree add --detach` into a temporary
# directory (never from the working tree, which may hold someone's
# uncommitted edits; NEW_REV may instead name a directory holding a checkout,
# which is then built as it is), and its own ./cmd/narad and ./bench/load are
# built, so that each side speaks its own wire types. The load tools' flags
# are checked to be compatible first.
#
# A round runs each side once, base first in odd rounds and new first in
# even ones (warm-ups alike), so that a drift over the whole run (the machine
# warming up or settling, a page cache filling) does not land on one side
# only: `narad dev --fresh` on a port of its own, /metrics scraped, the load
# (-create -json), /metrics scraped again, SIGTERM and wait. A node that
# never gets ready, or dies during the load, stops the run with exit status
# 1 (after the history check, so a loss is still reported).
#
# It reports from the load's JSON produce p50/p99 (produce_latency),
# produce_msgs_per_sec and the history check, and from the two scrapes the
# node process's Go heap allocations (count and bytes) divided by the
# records produced ("-" when none was). Those allocations are the whole
# process over the run: the produce path, but also the consume/ack traffic
# of the same run, the topic creation, the embedded NATS server and the
# metastore.
# Two more figures help read those: the node's CPU time per record (utime +
# stime from /proc/PID/stat, less sensitive to other load on the machine
# than latency is) and the end-to-end p50, which shows whether the consumers
# kept up (then they make many small long-polls, each with its own
# allocations) or lagged (fewer, fuller ones): allocs/record moves with it.
#
# /metrics does not expose the Go runtime's series (the handler calls
# metrics.WritePrometheus(w, false)), so narad is built with a `go build
# -overlay` that adds one file to package main, registering
# metrics.WriteGoMetrics as a metrics writer; the handler then serves
# go_memstats_mallocs_total and go_memstats_alloc_bytes_total (named
# narad_go_... by revisions before issue 31).
# Both revs get the same file; no file of any checkout is written. It reads
# runtime.MemStats only when /metrics is scraped (twice a run).
#
# A record lost (history.lost > 0, or history.ok false) stops the run with
# exit status 3, and keeps that run's node data beside its log (the path is
# printed). Per-run JSON, scrapes and node logs stay in the temporary
# directory, whose path is printed; worktrees, other data and (unless
# KEEP_BIN=1) the binaries are removed on exit.
set -euo pipefail

BASE_REV=${1:-6e6c791}
NEW_REV=${2:-HEAD}
ROUNDS=${ROUNDS:-3}
P=${PRODUCERS:-16}
C=${CONSUMERS:-16}
N=${COUNT:-30000}
SIZE=${SIZE:-1024}
WARMUP=${WARMUP:-0}
AB_DIR=${AB_DIR:-/tmp/ab}

for tool in git go curl jq awk; do
  command -v "$tool" >/dev/null || { echo "ab: needs $tool" >&2; exit 2; }
done
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
mkdir -p "$AB_DIR"
tmp=$(mktemp -d "$AB_DIR/ab.XXXXXX")
worktrees=()
pid=

cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  remove_worktrees
  rm -rf "$tmp/data"
  [ "${KEEP_BIN:-0}" = 1 ] || rm -rf "$tmp/bin-base" "$tmp/bin-new"
}
trap cleanup EXIT

# checkout, remove_worktrees
. "$(dirname "${BASH_SOURCE[0]}")/worktrees.sh"

# build SIDE: narad (with the Go-metrics overlay) and load into $tmp/bin-SIDE.
cat >"$tmp/gometrics.go" <<'EOF'
package main

// Added by bench/ab.sh at build time (go build -overlay): serve the Go
// runtime's memstats on /metrics.

import (
	"io"

	"github.com/VictoriaMetrics/metrics"
)

func init() { metrics.RegisterMetricsWriter(func(w io.Writer) { metrics.WriteGoMetrics(w) }) }
EOF
build() {
  local side=$1 src bin extra
  local v=src_$side
  src=${!v}
  bin=$tmp/bin-$side
  extra=$src/cmd/narad/zz_ab_gometrics.go
  [ -e "$extra" ] && { echo "ab: $extra exists; the overlay would replace it" >&2; exit 2; }
  jq -n --arg file "$extra" --arg with "$tmp/gometrics.go" '{Replace: {($file): $with}}' >"$tmp/overlay-$side.json"
  (cd "$src" && go build -overlay "$tmp/overlay-$side.json" -o "$bin/narad" ./cmd/narad && go build -o "$bin/load" ./bench/load)
}

checkout base "$BASE_REV"
checkout new "$NEW_REV"
echo "ab: base $label_base, new $label_new; results in $tmp" >&2
build base
build new

# The load tools' flags: each must have the ones used here.
flags() { "$1" -h 2>&1 | awk '$1 ~ /^-[a-z]/ { print substr($1, 2) }' | sort -u; }
flags "$tmp/bin-base/load" >"$tmp/flags-base"
flags "$tmp/bin-new/load" >"$tmp/flags-new"
for f in server create producers consumers count size json; do
  for side in base new; do
    grep -qx "$f" "$tmp/flags-$side" || { echo "ab: $side's bench/load has no -$f" >&2; exit 2; }
  done
done
if ! cmp -s "$tmp/flags-base" "$tmp/flags-new"; then
  echo "ab: note: the load tools' flag sets differ (unused here):" >&2
  diff "$tmp/flags-base" "$tmp/flags-new" >&2 || true
fi

# free_port: an HTTP port below 32768 whose Raft port (+10000, see narad dev)
# is free too.
free_port() {
  local p
  for _ in $(seq 1 100); do
    p=$((12000 + RANDOM % 10000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && ! (exec 3<>"/dev/tcp/127.0.0.1/$((p + 10000))") 2>/dev/null; then
      echo "$p"; return
    fi
  done
  echo "ab: no free port" >&2; exit 2
}

# metric FILE NAME: the value of NAME (with or without the narad_ prefix).
metric() {
  # The name as older revisions wrote it (narad_go_...) or as newer ones do
  # (go_..., with a node label).
  awk -v n="$2" '{ name = $1; sub(/\{.*/, "", name) } (name == n || name == "narad_" n) { print $2; found = 1; exit } END { if (!found) exit 1 }' "$1" ||
    { echo "ab: $2 not in $1" >&2; exit 2; }
}

# cpu_ticks PID: utime + stime of PID, in clock ticks.
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
hz=$(getconf CLK_TCK)

# run SIDE TAG: one node, one load; appends a row to $tmp/rows.
run() {
  local side=$1 tag=$2 bin out port rc
  bin=$tmp/bin-$side
  out=$tmp/$tag-$side
  port=$(free_port)
  rm -rf "$tmp/data"
  NARAD_NATS_PORT=0 "$bin/narad" dev --fresh --data "$tmp/data" --http-base "127.0.0.1:$port" --log-level warn >/dev/null 2>"$out.node.log" &
  pid=$!
  local ready=0
  for _ in $(seq 1 300); do
    if curl -sf -o /dev/null "http://127.0.0.1:$port/readyz"; then ready=1; break; fi
    kill -0 "$pid" 2>/dev/null || { echo "ab: $side node exited; see $out.node.log" >&2; pid=; exit 1; }
    sleep 0.1
  done
  if [ "$ready" != 1 ]; then
    echo "ab: $side node not ready after 30 s ($tag); the tail of $out.node.log:" >&2
    tail -n 20 "$out.node.log" >&2 || true
    exit 1 # cleanup stops the node
  fi
  curl -sf "http://127.0.0.1:$port/metrics" >"$out.metrics-before"
  local cpu0 cpu1
  cpu0=$(cpu_ticks "$pid")
  rc=0
  "$bin/load" -server "http://127.0.0.1:$port" -create -producers "$P" -consumers "$C" -count "$N" -size "$SIZE" -json \
    >"$out.json" 2>"$out.load.log" || rc=$?
  curl -sf "http://127.0.0.1:$port/metrics" >"$out.metrics-after" || true
  # The node may have died during the load: then there is no CPU to read
  # and nothing to stop, but the load's JSON and history still get checked.
  local alive=0 nrc=0
  cpu1=
  if kill -0 "$pid" 2>/dev/null; then
    alive=1
    cpu1=$(cpu_ticks "$pid" 2>/dev/null) || cpu1=
    kill -TERM "$pid" 2>/dev/null || true
  fi
  wait "$pid" || nrc=$?
  pid=
  if [ "$alive" = 1 ] && [ "$nrc" != 0 ]; then
    echo "ab: note: $side node exited $nrc on SIGTERM ($tag)" >&2
  fi
  if ! jq -e . "$out.json" >/dev/null 2>&1; then
    mv "$tmp/data" "$out.data"
    echo "ab: $side load ($tag) exited $rc without a JSON summary; see $out.load.log, the node's data kept in $out.data" >&2; exit 1
  fi
  local lost ok
  lost=$(jq -r '.history.lost' "$out.json")
  ok=$(jq -r '.history.ok' "$out.json")
  if [ "$lost" != 0 ] || [ "$ok" != true ]; then
    mv "$tmp/data" "$out.data"
    echo >&2
    local lv=label_$side
    echo "!!!!!!!! ab: LOST RECORDS / HISTORY FAILED: $side (${!lv}), $tag: history.ok=$ok lost=$lost" >&2
    jq -c '.history' "$out.json" >&2
    echo "!!!!!!!! see $out.json and $out.load.log; the node's data kept in $out.data, its log in $out.node.log" >&2
    exit 3
  fi
  rm -rf "$tmp/data"
  if [ "$alive" != 1 ] || [ -z "$cpu1" ]; then
    echo "ab: $side node died during the load ($tag, exit $nrc); the tail of $out.node.log:" >&2
    tail -n 20 "$out.node.log" >&2 || true
    exit 1
  fi
  [ "$rc" = 0 ] || { echo "ab: $side load ($tag) exited $rc; see $out.load.log" >&2; exit 1; }
  local m0 m1 b0 b1
  m0=$(metric "$out.metrics-before" go_memstats_mallocs_total)
  m1=$(metric "$out.metrics-after" go_memstats_mallocs_total)
  b0=$(metric "$out.metrics-before" go_memstats_alloc_bytes_total)
  b1=$(metric "$out.metrics-after" go_memstats_alloc_bytes_total)
  case $tag in warmup*) return ;; esac
  # Per-record figures of a run that produced nothing are empty ("-").
  jq -r --arg tag "$tag" --arg side "$side" --arg m0 "$m0" --arg m1 "$m1" --arg b0 "$b0" --arg b1 "$b1" \
    --arg cpu "$(( (cpu1 - cpu0) ))" --arg hz "$hz" '
    def per(x): if .produced > 0 then x / .produced else null end;
    [$tag, $side, .produced, .produce_latency.p50_ms, .produce_latency.p99_ms, .produce_msgs_per_sec,
     per(($m1 | tonumber) - ($m0 | tonumber)), per(($b1 | tonumber) - ($b0 | tonumber)),
     .produce_failed_attempts, .history.ok, .history.lost,
     per(($cpu | tonumber) / ($hz | tonumber) * 1e6), .end_to_end_latency.p50_ms] | @tsv' "$out.json" >>"$tmp/rows"
}

# pair N TAG: both sides, base first when N is odd and new first when even.
pair() {
  if (( $1 % 2 )); then run base "$2"; run new "$2"; else run new "$2"; run base "$2"; fi
}
for w in $(seq 1 "$WARMUP"); do
  echo "ab: warm-up $w/$WARMUP" >&2
  pair "$w" "warmup$w"
done
for r in $(seq 1 "$ROUNDS"); do
  echo "ab: round $r/$ROUNDS" >&2
  pair "$r" "round$r"
done

echo "base: $label_base"
echo "new:  $label_new"
echo "one node (narad dev), $P producers, $C consumers, $N x $SIZE B; allocs and bytes are the node process's"
echo "Go heap allocations over the whole run (produce + consume/ack + topic create) per produced record"
echo
awk -F'\t' '
  BEGIN { printf "%-8s %-4s %8s %8s %8s %8s %11s %10s %7s %5s %4s %9s %10s\n", "round", "rev", "produced", "p50_ms", "p99_ms", "msgs/s", "allocs/rec", "bytes/rec", "retries", "ok", "lost", "cpu_us/rec", "e2e_p50_ms" }
  function f(v, spec) { return v == "" ? sprintf("%" (spec + 0) "s", "-") : sprintf("%" spec "f", v) }
  { printf "%-8s %-4s %8d %8.3f %8.3f %8.0f %s %s %7d %5s %4d %s %10.1f\n", $1, $2, $3, $4, $5, $6, f($7, "11.1"), f($8, "10.0"), $9, $10, $11, f($12, "10.1"), $13 }
' "$tmp/rows"
echo

# median SIDE COLUMN (ties of an even count average the middle two), and
# min/max for the spread.
stat() {
  awk -F'\t' -v s="$1" -v c="$2" '$2 == s && $c != "" { print $c }' "$tmp/rows" | sort -g |
    awk '{ v[NR] = $1 } END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%s %s %s\n", m, v[1], v[NR] }'
}
printf "%-12s %14s %24s %14s %24s %9s\n" "median" "base" "(min..max)" "new" "(min..max)" "new/base"
for spec in "p50_ms:4:%.3f" "p99_ms:5:%.3f" "msgs/s:6:%.0f" "allocs/rec:7:%.1f" "bytes/rec:8:%.0f" "cpu_us/rec:12:%.1f" "e2e_p50_ms:13:%.1f"; do
  IFS=: read -r name col fmt <<<"$spec"
  read -r bm blo bhi <<<"$(stat base "$col")"
  read -r nm nlo nhi <<<"$(stat new "$col")"
  awk -v name="$name" -v fmt="$fmt" -v bm="$bm" -v blo="$blo" -v bhi="$bhi" -v nm="$nm" -v nlo="$nlo" -v nhi="$nhi" 'BEGIN {
    f = "%14" substr(fmt, 2)
    r = sprintf(fmt "..", blo) sprintf(fmt, bhi); s = sprintf(fmt "..", nlo) sprintf(fmt, nhi)
    printf "%-12s " f " %24s " f " %24s %9.3f\n", name, bm, "(" r ")", nm, "(" s ")", (bm > 0 ? nm / bm : 0)
  }'
done
echo
echo "lower is better for all but msgs/s; cpu_us/rec is the node's CPU time a record, e2e_p50_ms the"
echo "consumers' lag (context for allocs/rec, not a goal). Runs: $tmp"

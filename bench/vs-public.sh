#!/usr/bin/env bash
# This project against the public Narad, three secured processes each on
# this machine, alternating round by round: issue 28's table. Not run by CI
# (it needs the public Narad's binaries, built from its source).
#
#   git clone https://github.com/DebanganThakuria/narad pub && cd pub && git checkout v2.0.2
#   go build -o /tmp/pub-narad ./cmd/narad && go build -o /tmp/pub-driver ./tests/integration
#   PUBLIC_NARAD=/tmp/pub-narad PUBLIC_DRIVER=/tmp/pub-driver bash bench/vs-public.sh
#
# Each round runs both sides (the public Narad first in odd rounds, this
# project first in even ones), each on a fresh cluster:
#   driver  the public Narad's own driver, load mode: DRIVER_TOPICS (10)
#           topics of 6 partitions, DRIVER_MESSAGES (8000), 32 producers and
#           32 consumers. Its lines are timestamped here: produce msg/s is
#           the messages over the time from its "producing messages" line
#           to its "consuming messages" line; consume msg/s from there to
#           its PASS line (consume, ack, drain check and topic deletes).
#           cpu_us_per_rec is every broker process's CPU (user + system:
#           the three nodes, and narad nats on this side) between those two
#           lines, over DRIVER_MESSAGES.
#   load    bench/load of this checkout on a topic of LOAD_PARTITIONS (12),
#           8 producers and 8 consumers at once, LOAD_COUNT (8000) x 1 KiB,
#           -server listing the three nodes: produce msg/s, consume+ack msg/s
#           while producing, end-to-end p50/p99 while producing, history.
#   batch   (this project only) bench/load again, its producers sending
#           LOAD_BATCH (100) records a request through the batch route,
#           LOAD_BATCH_COUNT (80000) in all: its produce rate against the
#           one-record run's, and its history.
#   rss     the highest VmHWM of the three nodes after both.
#   kill    SIGKILL of node 2 and its start at once: exec to /readyz 200
#           (polled every 20 ms).
# It prints one row per round and side, then each figure's ratio this /
# public (medians over the rounds).
#
# Env: PROFILE_SECONDS (unset: no profiles) takes a CPU profile of every node
# of both sides over that many seconds from the driver's producing line
# (raise DRIVER_MESSAGES so the produce phase outlasts it); ROUNDS (3), OUR_NARAD (a narad binary; built from this checkout when
# unset), AB_DIR (the temporary directory's parent, /tmp). Ports are below
# 32768. A lost record in either side's history is shouted and the script
# exits 3 at the end; the temporary directory (logs, JSON) is printed and
# kept.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PUBLIC_NARAD:?PUBLIC_NARAD: the public Narad binary (go build ./cmd/narad at v2.0.2)}"
: "${PUBLIC_DRIVER:?PUBLIC_DRIVER: its driver (go build ./tests/integration at v2.0.2)}"
ROUNDS=${ROUNDS:-3}
DRIVER_TOPICS=${DRIVER_TOPICS:-10}
DRIVER_MESSAGES=${DRIVER_MESSAGES:-8000}
LOAD_PARTITIONS=${LOAD_PARTITIONS:-12}
LOAD_COUNT=${LOAD_COUNT:-8000}
LOAD_BATCH=${LOAD_BATCH:-100}
LOAD_BATCH_COUNT=${LOAD_BATCH_COUNT:-80000}
for t in jq curl awk; do command -v "$t" >/dev/null || { echo "vs-public: needs $t" >&2; exit 2; }; done

tmp=$(mktemp -d "${AB_DIR:-/tmp}/vs-public.XXXXXX")
echo "vs-public: logs and summaries in $tmp" >&2
pids=()
cleanup() {
  local p
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
if [ -z "${OUR_NARAD:-}" ]; then
  go build -o "$tmp/narad" ./cmd/narad
  OUR_NARAD=$tmp/narad
fi
go build -o "$tmp/load" ./bench/load

. bench/ports.sh # from the repository root, where the cd above went
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }

# start_node I: node I of this run's side; its pid in node_pid[I].
declare -A node_pid
start_node() {
  launch_node "$1"
  node_pid[$1]=$!
  pids+=("$!")
}
# wait_ready I: nI's /readyz 200 within 60 s, polled every 20 ms.
wait_ready() {
  local i=$1 deadline=$(( $(now_ms) + 60000 ))
  while [ "$(code "$(url "$i")/readyz")" != 200 ]; do
    kill -0 "${node_pid[$i]}" 2>/dev/null || { echo "vs-public: $side n$i exited; see $out.n$i.log" >&2; exit 1; }
    (( $(now_ms) < deadline )) || { echo "vs-public: $side n$i not ready after 60 s; see $out.n$i.log" >&2; exit 1; }
    sleep 0.02
  done
}
start_cluster() {
  base=$(free_base)
  cdir=$tmp/data-$round-$side
  out=$tmp/$round-$side
  mkdir -p "$cdir"
  pw=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
  nats_pid=""
  if [ "$side" = ours ]; then
    launch_nats
    nats_pid=$!
    pids+=("$!")
  fi
  servers="$(url 1),$(url 2),$(url 3)"
  local i
  for i in 1 2 3; do start_node "$i"; done
  for i in 1 2 3; do wait_ready "$i"; done
  for _ in $(seq 1 300); do
    [ "$(code -u "admin:$pw" "$(url 1)/v1/users")" = 200 ] && return
    sleep 0.1
  done
  echo "vs-public: admin cannot log in after 30 s ($side)" >&2; exit 1
}
stop_cluster() {
  local i
  for i in 1 2 3; do kill "${node_pid[$i]}" 2>/dev/null || true; done
  for i in 1 2 3; do wait "${node_pid[$i]}" 2>/dev/null || true; done
  if [ "$side" = ours ]; then kill "$nats_pid" 2>/dev/null || true; wait "$nats_pid" 2>/dev/null || true; fi
}

# broker_ticks: the CPU time (user + system, clock ticks) every broker
# process of the side has used so far: the three nodes, and narad nats on
# ours. Read at the driver's phase lines, so the produce phase's CPU is the
# difference between two readings.
broker_ticks() {
  local p t=0 f
  for p in "${node_pid[1]}" "${node_pid[2]}" "${node_pid[3]}" ${nats_pid:+"$nats_pid"}; do
    f=$(cut -d')' -f2- "/proc/$p/stat" 2>/dev/null) || continue
    t=$(( t + $(echo "$f" | awk '{ print $12 + $13 }') ))
  done
  echo "$t"
}
clk_tck=$(getconf CLK_TCK)
# profile_nodes: with PROFILE_SECONDS set, a CPU profile of each node over
# that many seconds from now, into $out.nI.cpu.pprof, in the background.
# Our nodes then also sample blocking and mutex events (--pprof), so the
# rates of a profiled round are not the ones to compare.
profile_nodes() {
  [ -n "${PROFILE_SECONDS:-}" ] || return 0
  local i
  for i in 1 2 3; do
    curl -s -o "$out.n$i.cpu.pprof" "$(pprof_url "$i")/profile?seconds=$PROFILE_SECONDS" &
  done
}

# run_driver: the public driver, each line stamped with milliseconds; the
# brokers' CPU read as it prints its producing and consuming lines.
run_driver() {
  "$PUBLIC_DRIVER" --mode load --nodes "$servers" --topics "$DRIVER_TOPICS" --messages "$DRIVER_MESSAGES" \
    --partitions 6 --produce-concurrency 32 --consume-concurrency 32 --username admin --password "$pw" 2>&1 |
    while IFS= read -r line; do
      case $line in
        *"producing messages"*) broker_ticks >"$out.cpu.produce"; profile_nodes ;;
        *"consuming messages"*) broker_ticks >"$out.cpu.consume" ;;
      esac
      echo "$(now_ms) $line"
    done >"$out.driver.log" || true
  drv_cpu_us=""
  if [ -s "$out.cpu.produce" ] && [ -s "$out.cpu.consume" ]; then
    drv_cpu_us=$(awk -v a="$(cat "$out.cpu.produce")" -v b="$(cat "$out.cpu.consume")" -v hz="$clk_tck" \
      -v n="$DRIVER_MESSAGES" 'BEGIN { printf "%.0f", (b - a) / hz * 1e6 / n }')
  fi
  local p c e
  p=$(awk '/producing messages/ { print $1; exit }' "$out.driver.log")
  c=$(awk '/consuming messages/ { print $1; exit }' "$out.driver.log")
  e=$(awk '/ PASS / { print $1; exit }' "$out.driver.log")
  # A driver that fails while consuming still measured its produce phase.
  drv_produce=""; drv_consume=""
  if [ -n "$p" ] && [ -n "$c" ]; then
    drv_produce=$(awk -v n="$DRIVER_MESSAGES" -v a="$p" -v b="$c" 'BEGIN { printf "%.0f", n / ((b - a) / 1000) }')
  fi
  if [ -n "$c" ] && [ -n "$e" ]; then
    drv_consume=$(awk -v n="$DRIVER_MESSAGES" -v a="$c" -v b="$e" 'BEGIN { printf "%.0f", n / ((b - a) / 1000) }')
  else
    driver_failed="$driver_failed $side/$round"
    echo "vs-public: the driver did not pass on $side (round $round): $(tail -n 1 "$out.driver.log")" >&2
  fi
}

lost_any=0
driver_failed=""
run_load() {
  "$tmp/load" -server "$servers" -topic "vs$round" -create -partitions "$LOAD_PARTITIONS" -producers 8 -consumers 8 \
    -count "$LOAD_COUNT" -size 1024 -drain 60s -json -user admin -password "$pw" >"$out.load.json" 2>"$out.load.log" || true
  if ! jq -e . "$out.load.json" >/dev/null 2>&1; then
    echo "vs-public: bench/load gave no summary on $side (round $round); see $out.load.log" >&2
    load_row="					"
    return
  fi
  local lost ok
  lost=$(jq -r '.history.lost' "$out.load.json"); ok=$(jq -r '.history.ok' "$out.load.json")
  if [ "$lost" != 0 ] || [ "$ok" != true ]; then
    lost_any=1
    echo "!!!!!!!! vs-public: LOST RECORDS / HISTORY FAILED on $side, round $round: $(jq -c .history "$out.load.json")" >&2
  fi
  load_row=$(jq -r '[(.produce_msgs_per_sec | round), ((.consume_ack_msgs_per_sec // 0) | round),
    ((.end_to_end_latency_while_producing.p50_ms // 0) * 10 | round / 10),
    ((.end_to_end_latency_while_producing.p99_ms // 0) * 10 | round / 10),
    .history.ok, .history.lost] | @tsv' "$out.load.json")
}

# run_load_batch (this project only: the public Narad has no batch route):
# bench/load again on the same cluster, its producers sending LOAD_BATCH
# records a request through the batch route, LOAD_BATCH_COUNT in all; the
# produce rate and history go to batches.
run_load_batch() {
  "$tmp/load" -server "$servers" -topic "vs${round}b" -create -partitions "$LOAD_PARTITIONS" -producers 8 -consumers 8 \
    -batch "$LOAD_BATCH" -count "$LOAD_BATCH_COUNT" -size 1024 -drain 120s -json -user admin -password "$pw" >"$out.loadb.json" 2>"$out.loadb.log" || true
  if ! jq -e . "$out.loadb.json" >/dev/null 2>&1; then
    echo "vs-public: bench/load -batch gave no summary (round $round); see $out.loadb.log" >&2
    return
  fi
  if [ "$(jq -r '.history.lost' "$out.loadb.json")" != 0 ] || [ "$(jq -r '.history.ok' "$out.loadb.json")" != true ]; then
    lost_any=1
    echo "!!!!!!!! vs-public: LOST RECORDS / HISTORY FAILED with batches, round $round: $(jq -c .history "$out.loadb.json")" >&2
  fi
  printf '%s\t%s\t%s\t%s\n' "$round" "$(jq -r '.produce_msgs_per_sec | round' "$out.load.json" 2>/dev/null)" \
    "$(jq -r '.produce_msgs_per_sec | round' "$out.loadb.json")" "$(jq -r '.history.ok' "$out.loadb.json")" >>"$tmp/batches"
}

run_kill() {
  local t0
  kill -9 "${node_pid[2]}"; wait "${node_pid[2]}" 2>/dev/null || true
  t0=$(now_ms)
  start_node 2
  wait_ready 2
  kill_s=$(awk -v ms=$(( $(now_ms) - t0 )) 'BEGIN { printf "%.2f", ms / 1000 }')
}

rows=$tmp/rows
printf 'round\tside\tdriver_produce\tdriver_consume\tcpu_us_per_rec\tload_produce\tload_ack\tp50_ms\tp99_ms\thistory_ok\tlost\tpeak_rss_mb\tkill_to_ready_s\n' >"$rows"
for round in $(seq 1 "$ROUNDS"); do
  order="public ours"
  (( round % 2 == 0 )) && order="ours public"
  for side in $order; do
    echo "vs-public: round $round, $side" >&2
    start_cluster
    run_driver
    run_load
    peak=0
    for i in 1 2 3; do v=$(hwm_kib "${node_pid[$i]}"); [ -n "$v" ] && (( v > peak )) && peak=$v; done
    # After the peak RSS is read: the same runs on both sides before it.
    if [ "$side" = ours ]; then run_load_batch; fi
    run_kill
    stop_cluster
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$side" "$drv_produce" "$drv_consume" "$drv_cpu_us" "$load_row" \
      "$(awk -v k="$peak" 'BEGIN { printf "%.0f", k / 1024 }')" "$kill_s" >>"$rows"
  done
done
column -t -s $'\t' "$rows"
echo
# Medians per side, then this / public.
awk -F'\t' 'NR > 1 { for (c = 3; c <= 13; c++) if (c != 10 && $c != "") v[$2, c] = v[$2, c] " " $c }
  function median(s,   a, n, i, j, t) { n = split(s, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n == 0 ? "" : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) }
  END { split("driver_produce driver_consume cpu_us_per_rec load_produce load_ack p50_ms p99_ms - lost peak_rss_mb kill_to_ready_s", name, " ")
    printf "%-16s %10s %10s %8s\n", "median", "public", "ours", "ours/pub"
    for (c = 3; c <= 13; c++) { if (c == 10) continue; p = median(v["public", c]); o = median(v["ours", c])
      printf "%-16s %10s %10s %8s\n", name[c - 2], p, o, (p + 0 > 0 ? sprintf("%.2f", o / p) : "-") } }' "$rows"
if [ -s "$tmp/batches" ]; then
  echo
  echo "bench/load on this project, producers sending $LOAD_BATCH records a request against one:"
  printf 'round\tsingle_msgs_s\tbatch_msgs_s\thistory_ok\n' | cat - "$tmp/batches" | column -t -s $'\t'
  awk -F'\t' '{ s = s " " $2; b = b " " $3 }
    function median(x,   a, n, i, j, t) { n = split(x, a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
    END { ms = median(s); mb = median(b); printf "median batch/single: %.1f\n", (ms > 0 ? mb / ms : 0) }' "$tmp/batches"
fi
[ -z "$driver_failed" ] || echo "vs-public: the public driver failed its own checks on:$driver_failed (its produce rate still counts)" >&2
echo "vs-public: logs and summaries kept in $tmp" >&2
[ "$lost_any" = 0 ] || exit 3

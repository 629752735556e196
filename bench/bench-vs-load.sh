#!/usr/bin/env bash
# `narad bench` against bench/load: the same settings against the same
# running cluster, alternating, ROUNDS runs of each, then each figure's
# median per tool and the ratio of the two (bench/ratio). The two should
# agree within the noise of the machine: they measure by the same package
# (cmd/narad/measure) and run the same kind of workers.
#
#   bash bench/bench-vs-load.sh                  # narad dev, 1 node
#   NODES=3 bash bench/bench-vs-load.sh          # narad dev --nodes 3, workers over the 3
#   SERVER=http://127.0.0.1:7942 bash bench/bench-vs-load.sh   # a cluster already running
#
# Env: ROUNDS (3), PRODUCERS (8), CONSUMERS (8), COUNT (20000), SIZE (1024
# bytes a record), RATE (0: as fast as possible; records a second over all
# producers), BATCH (1: records a produce request; more uses the batch
# route), PARTITIONS (12), NODES (1), SERVER (unset: start narad dev;
# else a comma-separated list of a running cluster's nodes, on loopback:
# bench/load targets nothing else; NARAD_USER and NARAD_PASSWORD go to
# both tools).
#
# Round i runs load then bench when i is odd, bench then load when even, so
# that a drift over the whole run lands on both. Each run produces to a
# topic of its own that it creates (load -create, bench --create), and
# consumes and acks every record. Per-run JSON and the node's log stay in
# the temporary directory, whose path is printed.
#
# The ratio lines read "bench/load"... as bench/ratio prints them: each
# figure is turned into ns/op (ns a record for a rate, ns for a latency), so
# a ratio above 1 means narad bench measured more throughput, or less
# latency, than bench/load.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
P=${PRODUCERS:-8}
C=${CONSUMERS:-8}
N=${COUNT:-20000}
SIZE=${SIZE:-1024}
RATE=${RATE:-0}
BATCH=${BATCH:-1}
PARTS=${PARTITIONS:-12}
NODES=${NODES:-1}
tmp=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  echo "bench-vs-load: runs' JSON and logs in $tmp" >&2
}
trap cleanup EXIT
go build -o "$tmp/narad" ./cmd/narad
go build -o "$tmp/load" ./bench/load
go build -o "$tmp/ratio" ./bench/ratio

urls=${SERVER:-}
if [ -z "$urls" ]; then
  # Raft takes the HTTP port + 10000, so the base stays below 45000.
  port=$((20000 + RANDOM % 20000))
  NARAD_NATS_PORT=0 "$tmp/narad" dev --fresh --nodes "$NODES" --data "$tmp/data" --http-base "127.0.0.1:$port" \
    --log-level warn >/dev/null 2>"$tmp/dev.log" &
  pid=$!
  for i in $(seq 0 $((NODES - 1))); do
    urls="${urls:+$urls,}http://127.0.0.1:$((port + i))"
  done
  for try in $(seq 1 600); do
    kill -0 "$pid" 2>/dev/null || { echo "narad dev exited before it was ready:" >&2; cat "$tmp/dev.log" >&2; exit 1; }
    ready=0
    for u in ${urls//,/ }; do
      curl -fs -o /dev/null --max-time 1 "$u/readyz" && ready=$((ready + 1))
    done
    [ "$ready" = "$NODES" ] && break
    [ "$try" = 600 ] && { echo "narad dev: not every node ready within 60s" >&2; exit 1; }
    sleep 0.1
  done
fi

run_load() {
  "$tmp/load" -server "$urls" -topic "vs-load-$1" -create -partitions "$PARTS" -producers "$P" -consumers "$C" \
    -count "$N" -size "$SIZE" -rate "$RATE" -batch "$BATCH" -json >"$tmp/load-$1.json" 2>"$tmp/load-$1.txt"
}
run_bench() {
  "$tmp/narad" bench --server "$urls" --topic "vs-bench-$1" --create --partitions "$PARTS" --concurrency "$P" \
    --consume --consumers "$C" --count "$N" --size "$SIZE" --rate "$RATE" --batch "$BATCH" --json >"$tmp/bench-$1.json" 2>"$tmp/bench-$1.txt"
}
for i in $(seq 1 "$ROUNDS"); do
  if [ $((i % 2)) = 1 ]; then order="load bench"; else order="bench load"; fi
  for tool in $order; do
    echo "round $i: $tool" >&2
    "run_$tool" "$i" || { echo "$tool failed in round $i; see $tmp/$tool-$i.txt" >&2; exit 1; }
  done
done

# field FILE KEY: a number from a one-line JSON summary; a nested one is
# OBJECT.KEY.
field() {
  local obj=${2%.*} key=${2#*.}
  if [ "$obj" = "$2" ]; then
    grep -o "\"$key\":[0-9.e+-]*" "$1" | head -1 | cut -d: -f2
  else
    grep -o "\"$obj\":{[^}]*}" "$1" | head -1 | grep -o "\"$key\":[0-9.e+-]*" | cut -d: -f2
  fi
}
# The same figure under each tool's name.
figures="ProduceRate:produce_msgs_per_sec:produce_records_per_sec
FlowRate:flow_msgs_per_sec:consume_records_per_sec
ProduceP50:produce_latency.p50_ms:produce_latency.p50_ms
ProduceP95:produce_latency.p95_ms:produce_latency.p95_ms
ProduceP99:produce_latency.p99_ms:produce_latency.p99_ms
AckP50:ack_latency.p50_ms:ack_latency.p50_ms
EndToEndP50:end_to_end_latency.p50_ms:end_to_end_latency.p50_ms"

printf '\n%d producers, %d consumers, %d x %d bytes, rate %s, batch %s, %d partitions, %s\n' "$P" "$C" "$N" "$SIZE" "$RATE" "$BATCH" "$PARTS" "$urls"
printf '%-6s %-5s %10s %10s %9s %9s %9s %9s %9s\n' round tool "produce/s" "flow/s" "p50 ms" "p95 ms" "p99 ms" "ack p50" "e2e p50"
lines=$tmp/ratio.in
: >"$lines"
for i in $(seq 1 "$ROUNDS"); do
  for tool in load bench; do
    f=$tmp/$tool-$i.json
    vals=()
    while IFS=: read -r name loadKey benchKey; do
      key=$loadKey
      [ "$tool" = bench ] && key=$benchKey
      v=$(field "$f" "$key")
      vals+=("${v:-0}")
      # Rates become ns a record, latencies ns: bench/ratio's ns/op.
      case $name in
      *Rate) awk -v v="${v:-0}" -v n="$name" -v t="$tool" 'BEGIN { if (v > 0) printf "Benchmark%s/%s 1 %.0f ns/op\n", n, t, 1e9 / v }' >>"$lines" ;;
      *) awk -v v="${v:-0}" -v n="$name" -v t="$tool" 'BEGIN { printf "Benchmark%s/%s 1 %.0f ns/op\n", n, t, v * 1e6 }' >>"$lines" ;;
      esac
    done <<<"$figures"
    printf '%-6s %-5s %10.0f %10.0f %9.2f %9.2f %9.2f %9.2f %9.2f\n' "$i" "$tool" "${vals[@]}"
  done
done
echo
echo "medians, and bench against load (above 1: bench measured more throughput or less latency):"
"$tmp/ratio" -base load <"$lines"

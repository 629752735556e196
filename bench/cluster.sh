#!/usr/bin/env bash
# The load run against one node and against three, in the same run, side by
# side: produce to all nodes and consume from all of them.
#
#   bash bench/cluster.sh         # 16 producers, 16 consumers, 30,000 x 1 KiB
#   PRODUCERS=16 CONSUMERS=16 COUNT=10000 bash bench/cluster.sh
#
# Both clusters are `narad dev --fresh` (all nodes and an embedded NATS in
# one process, on this machine's cores). The three-node run lists the three
# nodes' URLs in -server, so producer i and consumer i use node i mod 3; the
# topic has PARTITIONS partitions (default 12), which placement spreads
# evenly over the members, so every node owns some and most produces and
# acks cross NATS to another node.
set -euo pipefail
cd "$(dirname "$0")/.."
P=${PRODUCERS:-16}
C=${CONSUMERS:-16}
N=${COUNT:-30000}
PARTS=${PARTITIONS:-12}
tmp=$(mktemp -d)
pid=
keep=0 # a failed load (its history check included) keeps the data and logs
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null
  if [ "$keep" = 1 ]; then echo "cluster: kept $tmp (each run's data in one/ and three/, logs one.log and three.log, summaries *.json)" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
go build -o "$tmp/narad" ./cmd/narad
go build -o "$tmp/load" ./bench/load

# start NODES NAME: runs `narad dev` with NODES nodes on a random base port
# and waits until every node answers /readyz with 200 (the metastore has
# elected its leaders and every node registered), setting pid and urls.
start() {
  local nodes=$1 name=$2 port i ready
  # Raft takes the HTTP port + 10000, so the base stays below 45000.
  port=$((20000 + RANDOM % 20000))
  NARAD_NATS_PORT=0 "$tmp/narad" dev --fresh --nodes "$nodes" --data "$tmp/$name" --http-base "127.0.0.1:$port" \
    --log-level warn >/dev/null 2>"$tmp/$name.log" &
  pid=$!
  urls=
  for i in $(seq 0 $((nodes - 1))); do
    urls="${urls:+$urls,}http://127.0.0.1:$((port + i))"
  done
  for _ in $(seq 1 600); do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "narad dev --nodes $nodes exited before it was ready:" >&2
      cat "$tmp/$name.log" >&2
      exit 1
    fi
    ready=0
    for i in $(seq 0 $((nodes - 1))); do
      if curl -fs -o /dev/null --max-time 1 "http://127.0.0.1:$((port + i))/readyz"; then
        ready=$((ready + 1))
      fi
    done
    [ "$ready" = "$nodes" ] && return 0
    sleep 0.1
  done
  echo "narad dev --nodes $nodes: not every node ready within 60s" >&2
  cat "$tmp/$name.log" >&2
  exit 1
}

stop() {
  kill -TERM "$pid"; wait "$pid" || true; pid=
}

# load NAME LABEL: the load run against $urls; its JSON summary goes to
# $tmp/NAME.json, the partitions' owners to $tmp/NAME.owners. A failed
# run (history check included) is reported in the table, not fatal here.
status=0
load() {
  local name=$1 label=$2
  echo "== $label: -server $urls" >&2
  if ! "$tmp/load" -server "$urls" -create -partitions "$PARTS" -producers "$P" -consumers "$C" \
    -count "$N" -size 1024 -json >"$tmp/$name.json"; then
    echo "load against $label failed" >&2
    status=1
    keep=1
  fi
  curl -fs "${urls%%,*}/v1/topics/load" | grep -o '"owner_node":"[^"]*"' | cut -d'"' -f4 |
    sort | uniq -c | awk '{ printf "%s%s=%s", sep, $2, $1; sep = " " } END { print "" }' >"$tmp/$name.owners" || true
}

start 1 one
load one "1 node"
stop
start 3 three
load three "3 nodes"
stop

# field FILE KEY: a number from the one-line JSON summary; nested objects
# are named by their key (field f produce_latency.p50_ms).
field() {
  local obj=${2%.*} key=${2#*.}
  if [ "$obj" = "$2" ]; then
    grep -o "\"$key\":[0-9.e+-]*" "$1" | head -1 | cut -d: -f2
  else
    grep -o "\"$obj\":{[^}]*}" "$1" | grep -o "\"$key\":[0-9.e+-]*" | cut -d: -f2
  fi
}
row() {
  local label=$1 key=$2 fmt=$3 a b
  a=$(field "$tmp/one.json" "$key"); b=$(field "$tmp/three.json" "$key")
  awk -v l="$label" -v a="${a:-0}" -v b="${b:-0}" -v f="$fmt" 'BEGIN {
    printf "%-24s " f " " f "   %6s\n", l, a, b, (a > 0 ? sprintf("%.2f", b / a) : "-")
  }'
}
verdict() {
  if grep -q '"history":{"ok":true' "$1"; then echo OK; else
    echo "FAILED ($(grep -o '"lost":[0-9]*' "$1" | head -1), $(grep -o '"phantoms":[0-9]*' "$1"), $(grep -o '"offset_conflicts":[0-9]*' "$1"), $(grep -o '"beyond_watermark":[0-9]*' "$1"))"
  fi
}

printf '\n%d producers, %d consumers, %d x 1 KiB, %d partitions; narad dev in one process\n' "$P" "$C" "$N" "$PARTS"
printf '%-24s %10s %10s   %6s\n' "" "1 node" "3 nodes" "3/1"
row "produce (msgs/s)" produce_msgs_per_sec "%10.0f"
row "full flow (msgs/s)" flow_msgs_per_sec "%10.0f"
row "produce p50 (ms)" produce_latency.p50_ms "%10.2f"
row "produce p99 (ms)" produce_latency.p99_ms "%10.2f"
row "end-to-end p50 (ms)" end_to_end_latency.p50_ms "%10.2f"
row "end-to-end p99 (ms)" end_to_end_latency.p99_ms "%10.2f"
row "produce failed attempts" produce_failed_attempts "%10.0f"
row "acks refused" acks_refused "%10.0f"
printf '%-24s %s | %s\n' "partitions per node" "$(cat "$tmp/one.owners")" "$(cat "$tmp/three.owners")"
printf '%-24s %s | %s\n' "history" "$(verdict "$tmp/one.json")" "$(verdict "$tmp/three.json")"
owners=$(wc -w <"$tmp/three.owners")
if [ "$owners" != 3 ]; then
  echo "warning: the 3-node topic's partitions are on $owners node(s), not 3" >&2
  status=1
fi
exit "$status"

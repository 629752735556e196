#!/usr/bin/env bash
# One node under load, against the storage engine's raw append at the same
# batch size, measured in the same run.
#
#   bash bench/node.sh            # 16 producers, 16 consumers, 30,000 x 1 KiB
#   PRODUCERS=16 CONSUMERS=16 COUNT=50000 bash bench/node.sh
#
# The produce path's group commit takes what the producers have in flight,
# so with P producers its batch is about P records: the baseline is the raw
# append benchmark at batch=P (one of 1, 16, 256).
set -euo pipefail
cd "$(dirname "$0")/.."
P=${PRODUCERS:-16}
C=${CONSUMERS:-16}
N=${COUNT:-30000}
case "$P" in 1|16|256) ;; *) echo "PRODUCERS must be 1, 16 or 256 (a batch size the raw benchmark has)" >&2; exit 2 ;; esac
tmp=$(mktemp -d)
pid=
keep=0 # a failed load (its history check included) keeps the data and logs
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null
  if [ "$keep" = 1 ]; then echo "node: kept $tmp (the node's data in data/, its log node.log, the load's summary load.json)" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
go build -o "$tmp/narad" ./cmd/narad
go build -o "$tmp/load" ./bench/load
port=$((20000 + RANDOM % 20000))
"$tmp/narad" dev --fresh --data "$tmp/data" --http-base "127.0.0.1:$port" --log-level warn >/dev/null 2>"$tmp/node.log" &
pid=$!
for _ in $(seq 1 200); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  sleep 0.1
done
rc=0
"$tmp/load" -server "http://127.0.0.1:$port" -create -producers "$P" -consumers "$C" -count "$N" -size 1024 -json >"$tmp/load.json" || rc=$?
kill -TERM "$pid"; wait "$pid" || true; pid=
if [ "$rc" != 0 ]; then
  echo "node: the load exited $rc (a failed history check exits 1)" >&2
  keep=1
  exit "$rc"
fi
go test ./storage -run '^$' -bench "^BenchmarkAppend\$/^batch=$P\$/^raw\$" -benchtime 300x >"$tmp/raw.txt"
produce=$(grep -o '"produce_msgs_per_sec":[0-9.]*' "$tmp/load.json" | cut -d: -f2)
flow=$(grep -o '"flow_msgs_per_sec":[0-9.]*' "$tmp/load.json" | cut -d: -f2)
nsop=$(awk '/batch=/ && /ns\/op/ { for (i=1;i<=NF;i++) if ($(i+1)=="ns/op") print $i }' "$tmp/raw.txt" | head -1)
awk -v p="$produce" -v f="$flow" -v ns="$nsop" -v b="$P" -v c="$C" 'BEGIN {
  raw = b * 1e9 / ns
  printf "one node, %d producers, %d consumers, 1 KiB bodies\n", b, c
  printf "produce:               %8.0f msgs/s\n", p
  printf "full flow (ack):       %8.0f msgs/s\n", f
  printf "raw append, batch=%-3d  %8.0f records/s (write + fsync per batch, no broker)\n", b, raw
  printf "produce / raw append:  %8.2f\n", p / raw
}'

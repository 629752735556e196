#!/usr/bin/env bash
# The public Narad's chaos driver (tests/integration --mode chaos) against
# three secured processes of this project, while one node at a time is
# stopped and started again: issue 30's check that a retried ack is not
# lost. Not run by CI (it needs the public driver, built from its source).
#
#   git clone https://github.com/DebanganThakuria/narad pub && cd pub && git checkout v2.0.2
#   go build -o /tmp/pub-driver ./tests/integration    # and ./cmd/narad for SIDES=public
#   PUBLIC_DRIVER=/tmp/pub-driver bash bench/chaos-public.sh
#
# Each run starts a fresh cluster and the driver (3 topics x 6 partitions,
# MESSAGES (2400), 12 producers, 12 consumers, 3 s visibility, a 4 minute
# limit) while a restarter waits 2 s, then in a loop picks a node at
# random, sends it SIGNAL (KILL or TERM), keeps it down 1 s, starts it,
# waits for its /readyz and pauses 1-3 s. The schedule's seed is printed
# (RANDOM is seeded with it), so SEED=... replays a run's choices.
#
# Env: RUNS (5), SIGNAL (KILL; NONE throws no fault, the baseline), SIDES ("ours"; "ours public" also runs the
# public Narad, PUBLIC_NARAD its binary, alternating which goes first),
# OUR_NARAD (built from this checkout when unset), MESSAGES (2400), SEED.
# It prints one line per run and side (PASS or the driver's last line, and
# the acks answered from the owners' memory of acked handles: the retries
# that would have been 410 before issue 30, and the leases brought back by
# restarted owners, each summed over each node's lives) and
# exits 1 if any run of ours failed; the temporary directory is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${PUBLIC_DRIVER:?PUBLIC_DRIVER: the public driver (go build ./tests/integration at v2.0.2)}"
RUNS=${RUNS:-5}
SIGNAL=${SIGNAL:-KILL}
SIDES=${SIDES:-ours}
MESSAGES=${MESSAGES:-2400}
case "$SIGNAL" in KILL | TERM | NONE) ;; *) echo "chaos-public: SIGNAL must be KILL, TERM or NONE, got $SIGNAL" >&2; exit 2 ;; esac
for s in $SIDES; do
  case "$s" in ours) ;; public) : "${PUBLIC_NARAD:?PUBLIC_NARAD: the public Narad binary, for SIDES=public}" ;;
  *) echo "chaos-public: SIDES holds ours and public, got $s" >&2; exit 2 ;; esac
done
command -v curl >/dev/null || { echo "chaos-public: needs curl" >&2; exit 2; }

tmp=$(mktemp -d "${AB_DIR:-/tmp}/chaos-public.XXXXXX")
echo "chaos-public: logs in $tmp" >&2
pids=()
restarter=""
cleanup() {
  local p
  [ -n "$restarter" ] && kill "$restarter" 2>/dev/null || true
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  # The nodes are disowned (so a kill is not reported as the shell's job):
  # their pids are in the pid files.
  for p in "$tmp"/data-*/pid.*; do [ -f "$p" ] && kill -9 "$(cat "$p")" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT
if [ -z "${OUR_NARAD:-}" ]; then
  go build -o "$tmp/narad" ./cmd/narad
  OUR_NARAD=$tmp/narad
fi
. bench/ports.sh

# start_node I: node I of this run's side; its pid in $cdir/pid.I.
start_node() {
  launch_node "$1"
  echo $! >"$cdir/pid.$1"
  disown $!
}
wait_ready() {
  local i=$1 deadline=$(( $(now_ms) + 60000 ))
  while [ "$(code "$(url "$i")/readyz")" != 200 ]; do
    (( $(now_ms) < deadline )) || { echo "chaos-public: $side n$i not ready after 60 s" >&2; return 1; }
    sleep 0.05
  done
}
# repeated I: node I's count of acks answered from its memory of acked
# handles (narad_acks_repeated_total), of leases its partitions brought
# back at open (narad_leases_restored_total) and of records sent again
# that its partitions had committed (narad_commit_records_already_committed_total);
# 0 0 0 for the public Narad.
repeated() {
  curl -s --max-time 2 "$(url "$1")/metrics" 2>/dev/null |
    awk '/^narad_acks_repeated_total/ { a = $2 } /^narad_leases_restored_total/ { l = $2 }
      /^narad_commit_records_already_committed_total/ { c = $2 } END { print a + 0, l + 0, c + 0 }'
}
# restarts: the fault schedule, in a subshell of its own; it logs each
# stop and start with the time since the driver started, and each node's
# repeated acks just before its counter dies with it.
restarts() {
  RANDOM=$seed
  local t0 i p pause
  t0=$(now_ms)
  sleep 2
  if [ "$SIGNAL" = NONE ]; then
    # The baseline: no fault. Short sleeps, so none outlives the kill of
    # this subshell holding the caller's output open.
    : >"$out.schedule"
    while true; do sleep 1; done
  fi
  while true; do
    i=$(( RANDOM % 3 + 1 )); pause=$(( 1 + RANDOM % 3 ))
    p=$(cat "$cdir/pid.$i")
    echo "repeated n$i $(repeated "$i")" >>"$out.repeated"
    echo "$(( $(now_ms) - t0 )) ms: SIG$SIGNAL n$i" >>"$out.schedule"
    kill -"$SIGNAL" "$p" 2>/dev/null || true
    while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
    sleep 1
    start_node "$i"
    wait_ready "$i" || true
    echo "$(( $(now_ms) - t0 )) ms: n$i ready" >>"$out.schedule"
    sleep "$pause"
  done
}

failed=0
for run in $(seq 1 "$RUNS"); do
  order=$SIDES
  (( run % 2 == 0 )) && order=$(echo "$SIDES" | awk '{ for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "") }')
  for side in $order; do
    seed=${SEED:-$(( (RANDOM << 15) | RANDOM ))}
    base=$(free_base)
    cdir=$tmp/data-$run-$side
    out=$tmp/$run-$side
    mkdir -p "$cdir"
    pw=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
    if [ "$side" = ours ]; then
      launch_nats
      pids+=("$!")
    fi
    for i in 1 2 3; do start_node "$i"; done
    for i in 1 2 3; do wait_ready "$i"; done
    for _ in $(seq 1 300); do [ "$(code -u "admin:$pw" "$(url 1)/v1/users")" = 200 ] && break; sleep 0.1; done
    restarts &
    restarter=$!
    t0=$(now_ms)
    "$PUBLIC_DRIVER" --mode chaos --nodes "$(url 1),$(url 2),$(url 3)" --username admin --password "$pw" \
      --run-id "chaos-$run-$side-$seed" --topics 3 --messages "$MESSAGES" --partitions 6 \
      --produce-concurrency 12 --consume-concurrency 12 --visibility-timeout 3s --timeout 4m --cleanup=false \
      >"$out.driver.log" 2>&1 || true
    secs=$(awk -v ms=$(( $(now_ms) - t0 )) 'BEGIN { printf "%.1f", ms / 1000 }')
    kill "$restarter" 2>/dev/null || true; wait "$restarter" 2>/dev/null || true; restarter=""
    for i in 1 2 3; do echo "repeated n$i $(repeated "$i")" >>"$out.repeated"; done
    acks_repeated=$(awk '{ n += $3 } END { print n + 0 }' "$out.repeated")
    leases_restored=$(awk '{ n += $4 } END { print n + 0 }' "$out.repeated")
    already=$(awk '{ n += $5 } END { print n + 0 }' "$out.repeated")
    faults=$(grep -c "SIG" "$out.schedule" 2>/dev/null) || true; faults=${faults:-0}
    for i in 1 2 3; do kill -9 "$(cat "$cdir/pid.$i")" 2>/dev/null || true; done
    [ "$side" = ours ] && kill -9 "${pids[-1]}" 2>/dev/null || true
    wait 2>/dev/null || true
    if grep -q "^PASS chaos" "$out.driver.log"; then
      echo "run $run $side SIG$SIGNAL seed $seed faults $faults ${secs}s acks-repeated $acks_repeated leases-restored $leases_restored already-committed $already: $(grep '^PASS chaos' "$out.driver.log")"
    else
      echo "run $run $side SIG$SIGNAL seed $seed faults $faults ${secs}s acks-repeated $acks_repeated leases-restored $leases_restored already-committed $already: FAIL $(tail -n 1 "$out.driver.log")"
      [ "$side" = ours ] && failed=1
    fi
  done
done
exit "$failed"

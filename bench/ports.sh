# Sourced by bench/ab3.sh and bench/vs-public.sh: the ports and probes of a
# three-node cluster on this machine. A cluster takes a base port B: NATS
# (or nothing) on B, HTTP on B+1..B+3, Raft on B+11..B+13, all below 32768
# (the kernel hands out 32768-60999 to outgoing connections). The caller
# sets base before url.

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# free_base: a base port B with B..B+3 and B+11..B+13 free.
free_base() {
  local b o ok
  for _ in $(seq 1 100); do
    b=$((12000 + RANDOM % 20000))
    ok=1
    for o in 0 1 2 3 11 12 13; do port_free $((b + o)) || { ok=0; break; }; done
    [ "$ok" = 1 ] && { echo "$b"; return; }
  done
  echo "$(basename "$0" .sh): no free ports" >&2; exit 2
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
url() { echo "http://127.0.0.1:$((base + $1))"; }
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$@" || true; }

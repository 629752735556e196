# Sourced by bench/ab3.sh, bench/vs-public.sh and bench/chaos-public.sh: the ports and probes of a
# three-node cluster on this machine. A cluster takes a base port B: NATS
# (or nothing) on B, HTTP on B+1..B+3, Raft on B+11..B+13, profiles (when
# PROFILE_SECONDS is set) on B+21..B+23, all below 32768
# (the kernel hands out 32768-60999 to outgoing connections). The caller
# sets base before url.

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# free_base: a base port B with B..B+3, B+11..B+13 and B+21..B+23 free.
free_base() {
  local b o ok
  for _ in $(seq 1 100); do
    b=$((12000 + RANDOM % 20000))
    ok=1
    for o in 0 1 2 3 11 12 13 21 22 23; do port_free $((b + o)) || { ok=0; break; }; done
    [ "$ok" = 1 ] && { echo "$b"; return; }
  done
  echo "$(basename "$0" .sh): no free ports" >&2; exit 2
}
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
url() { echo "http://127.0.0.1:$((base + $1))"; }
code() { curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$@" || true; }

# raft_tls_args NODE_BIN DIR [CERT_BIN]: the --raft-tls-* flags of a node
# NODE_BIN runs, on a CA and a loopback certificate made once in DIR by
# CERT_BIN (or NODE_BIN), so that Raft runs over mutual TLS as production's
# does, whatever the revision: nothing when NODE_BIN predates --raft-tls-*,
# or when neither binary has `narad cert` (a revision that old runs Raft
# over plain TCP without being asked).
raft_tls_args() {
  local node=$1 dir=$2 maker=${3:-$1} help
  # Read whole, not piped into grep -q: grep's early exit kills the help
  # with SIGPIPE, which pipefail turns into "no --raft-tls-*" at random.
  help=$("$node" serve --help 2>&1 || true)
  [[ $help == *-raft-tls-ca* ]] || return 0
  "$maker" cert --help >/dev/null 2>&1 || maker=$node
  "$maker" cert --help >/dev/null 2>&1 || return 0
  if [ ! -f "$dir/node.crt" ]; then
    "$maker" cert create-ca --dir "$dir" >/dev/null
    "$maker" cert create-node --dir "$dir" 127.0.0.1 localhost >/dev/null
  fi
  echo "--raft-tls-ca $dir/ca.crt --raft-tls-cert $dir/node.crt --raft-tls-key $dir/node.key"
}

# The two sides of a run beside the public Narad (vs-public.sh,
# chaos-public.sh). The caller sets side (ours or public), base, cdir (the
# cluster's data directory), out (its log prefix), pw (the admin password)
# and OUR_NARAD or PUBLIC_NARAD.
# side_peers: the three nodes' peer list in the side's own syntax.
side_peers() {
  if [ "$side" = public ]; then
    echo "narad-1@127.0.0.1:$((base + 11)),narad-2@127.0.0.1:$((base + 12)),narad-3@127.0.0.1:$((base + 13))"
  else
    echo "n1=127.0.0.1:$((base + 11)),n2=127.0.0.1:$((base + 12)),n3=127.0.0.1:$((base + 13))"
  fi
}
# launch_nats: this project's NATS server on base, in the background,
# returning once it wrote the nodes' credentials; the caller reads $!.
launch_nats() {
  "$OUR_NARAD" nats --listen "127.0.0.1:$base" --data "$cdir/nats" >>"$out.nats.log" 2>&1 &
  for _ in $(seq 1 300); do [ -s "$cdir/nats/node.nk" ] && break; sleep 0.1; done
}
# pprof_url I: node I's profiling endpoint (only with PROFILE_SECONDS).
pprof_url() { echo "http://127.0.0.1:$((base + 20 + $1))/debug/pprof"; }
# launch_node I: node I of the side, secured, in the background; the
# caller reads $!. With PROFILE_SECONDS set each node serves its profiles
# on pprof_url I.
launch_node() {
  local i=$1 peers prof=""
  peers=$(side_peers)
  [ -n "${PROFILE_SECONDS:-}" ] && prof="127.0.0.1:$((base + 20 + i))"
  if [ "$side" = public ]; then
    NARAD_HTTP_PPROF_ADDR=$prof NARAD_HTTP_ADDR="127.0.0.1:$((base + i))" NARAD_CLUSTER_ADDR="127.0.0.1:$((base + 10 + i))" \
      NARAD_NODE_ID="narad-$i" NARAD_CLUSTER_PEERS="$peers" NARAD_DATA_DIR="$cdir/n$i" \
      NARAD_SECURITY_ENABLED=true NARAD_CLUSTER_SECRET="$pw-cluster" NARAD_ADMIN_PASSWORD="$pw" \
      NARAD_LOG_LEVEL=warn "$PUBLIC_NARAD" serve >>"$out.n$i.log" 2>&1 &
  else
    # Made here, not in the background command: the nodes start one
    # right after the other, and each would make the certificates at once.
    local tls
    tls=$(raft_tls_args "$OUR_NARAD" "$cdir/raft-tls")
    # shellcheck disable=SC2086 # the flags split on purpose
    NARAD_ADMIN_PASSWORD=$pw "$OUR_NARAD" serve --id "n$i" --data "$cdir/n$i" --http "127.0.0.1:$((base + i))" \
      --raft "127.0.0.1:$((base + 10 + i))" --nats "nats://127.0.0.1:$base" --nats-creds "$cdir/nats/node.nk" \
      $tls \
      --peers "$peers" --log-level warn ${prof:+--pprof "$prof"} >>"$out.n$i.log" 2>&1 &
  fi
}

#!/usr/bin/env bash
# A local multi-process cluster: one NATS server and three narad nodes, each
# its own process, with logs and data under .cluster/ (or $CLUSTER_DIR).
#
#   deploy/local-cluster.sh up | down | status | add | kill <node> | restart <node>
#
# Node i serves HTTP on 127.0.0.1:794(1+i) and Raft on 127.0.0.1:795(1+i),
# NATS listens on 4222 (NARAD_LOCAL_HTTP_BASE, NARAD_LOCAL_RAFT_BASE and
# NARAD_LOCAL_NATS_PORT move them: node i takes base+i; NARAD_LOCAL_BIN runs
# a binary already built instead of building one); n1..n3 are the initial
# voters, `add` starts n4, which joins as a non-voter
# with a replica id the cluster hands it (kept in its data dir). An n4 that
# left (decommissioned: it exits by itself) is started afresh by `add`.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${CLUSTER_DIR:-.cluster}
http_base=${NARAD_LOCAL_HTTP_BASE:-7941}
raft_base=${NARAD_LOCAL_RAFT_BASE:-7951}
nats_port=${NARAD_LOCAL_NATS_PORT:-4222}
nats_url=nats://127.0.0.1:$nats_port
peers=n1=127.0.0.1:$((raft_base + 1)),n2=127.0.0.1:$((raft_base + 2)),n3=127.0.0.1:$((raft_base + 3))
bin=${NARAD_LOCAL_BIN:-$dir/narad}
# narad nats writes the NATS credentials here at its first start.
creds=$dir/nats
# The nodes run secured (HTTP Basic, users and grants): the root user admin
# is seeded with this password at the cluster's first start, made once.
admin_password_file=$dir/admin.password
# Raft between the nodes runs over mutual TLS: the cluster's CA (made once)
# and each node's certificate, made at its first start.
certs=$dir/certs

build() {
  mkdir -p "$dir"
  if [ -z "${NARAD_LOCAL_BIN:-}" ]; then go build -o "$bin" ./cmd/narad; fi
}

admin_password() {
  if [ ! -s "$admin_password_file" ]; then
    (umask 077 && od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$admin_password_file")
  fi
  cat "$admin_password_file"
}

# raft_certs <id>: the CA, once, and node <id>'s certificate for its Raft
# host, once; a CA is never made again over the one the nodes trust.
raft_certs() {
  [ -f "$certs/ca.crt" ] || "$bin" cert create-ca --dir "$certs" >/dev/null
  [ -f "$certs/$1.crt" ] || "$bin" cert create-node --dir "$certs" --name "$1" 127.0.0.1 localhost >/dev/null
}

start_node() {
  local id=$1 i=${1#n} how password
  raft_certs "$id"
  if [ "$i" -le 3 ]; then how=(--peers "$peers"); else how=(--join); fi
  # Read here, not in the background command: there the expansion runs in
  # the job's own subshell, the nodes started at once race to create the
  # file, and each may seed a password of its own.
  password=$(admin_password)
  NARAD_ADMIN_PASSWORD=$password "$bin" serve --id "$id" --data "$dir/$id" \
    --http "127.0.0.1:$((http_base + i))" --raft "127.0.0.1:$((raft_base + i))" \
    --nats "$nats_url" --nats-creds "$creds/node.nk" "${how[@]}" \
    --raft-tls-ca "$certs/ca.crt" --raft-tls-cert "$certs/$id.crt" --raft-tls-key "$certs/$id.key" \
    >>"$dir/$id.log" 2>&1 &
  echo $! >"$dir/$id.pid"
}

stop_pid() { # stop_pid <file> <signal>
  [ -f "$1" ] || return 0
  kill "-$2" "$(cat "$1")" 2>/dev/null || true
  rm -f "$1"
}

case "${1:-}" in
  up)
    build
    "$bin" nats --listen "127.0.0.1:$nats_port" --data "$creds" >>"$dir/nats.log" 2>&1 &
    echo $! >"$dir/nats.pid"
    for _ in $(seq 1 300); do
      [ -f "$creds/viewer.nk" ] && break
      sleep 0.1
    done
    for id in n1 n2 n3; do start_node "$id"; done
    for i in 1 2 3; do
      for _ in $(seq 1 300); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$((http_base + i))") 2>/dev/null; then break; fi
        sleep 0.1
      done
    done
    # The metadata leader seeds admin in the background after its
    # election: wait until admin can log in (CONTRACT.md §2.1).
    pw=$(admin_password)
    for _ in $(seq 1 300); do
      code=$(curl -s -o /dev/null -w '%{http_code}' -u "admin:$pw" http://127.0.0.1:$((http_base + 1))/v1/users || true)
      [ "$code" = 200 ] && break
      sleep 0.1
    done
    echo "cluster up: http://127.0.0.1:$((http_base + 1)) .. $((http_base + 3)), NATS $nats_url, logs in $dir/"
    echo "secured: log in as admin with the password in $admin_password_file:"
    echo "  export NARAD_USER=admin NARAD_PASSWORD=\$(cat $admin_password_file)"
    echo "  curl -u \"admin:\$NARAD_PASSWORD\" http://127.0.0.1:$((http_base + 1))/v1/users"
    echo "NATS admin: $bin cluster members --nats $nats_url --nats-creds $creds/admin.nk"
    echo "Raft: mutual TLS, the CA and each node's certificate in $certs/"
    ;;
  add)
    if [ -f "$dir/n4.pid" ] && kill -0 "$(cat "$dir/n4.pid")" 2>/dev/null; then
      echo "n4 is running" >&2
      exit 1
    fi
    # Its removed replica id can never rejoin: a node that left needs a new
    # data dir, and gets a new id. Its log is kept aside, and only a left
    # recorded since its data dir was made counts.
    if [ -d "$dir/n4" ] && grep -q "left the cluster" "$dir/n4.log" 2>/dev/null; then
      rm -rf "$dir/n4"
      mv "$dir/n4.log" "$dir/n4.log.old"
      echo "n4 had left the cluster: starting it with a fresh data dir"
    fi
    start_node n4
    ;;
  down)
    # Every node stops at once: each hands off only to a node that is not
    # leaving, so none waits for its hand-off timeout (rule B11). The nodes
    # still drain their WALs over NATS, which stops once they exited.
    pids=()
    for id in n1 n2 n3 n4; do
      [ -f "$dir/$id.pid" ] && pids+=("$(cat "$dir/$id.pid")")
      stop_pid "$dir/$id.pid" TERM
    done
    for _ in $(seq 1 600); do
      alive=0
      for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ "$alive" = 0 ] && break
      sleep 0.1
    done
    stop_pid "$dir/nats.pid" TERM
    ;;
  kill)
    stop_pid "$dir/${2:?which node}.pid" KILL
    ;;
  restart)
    # A graceful restart: the node hands its partitions off on SIGTERM
    # (rule B8), so every partition stays writable; wait for it to exit.
    pid=$(cat "$dir/${2:?which node}.pid" 2>/dev/null || true)
    stop_pid "$dir/$2.pid" TERM
    for _ in $(seq 1 600); do
      [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    start_node "$2"
    ;;
  status)
    "$bin" cluster members --nats "$nats_url" --nats-creds "$creds/viewer.nk"
    "$bin" cluster status --nats "$nats_url" --nats-creds "$creds/viewer.nk"
    ;;
  *)
    echo "usage: $0 up | down | status | add | kill <node> | restart <node>" >&2
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Runs single-node VictoriaMetrics scraping the local cluster
# (deploy/victoriametrics/scrape.yml) with Narad's dashboards in its UI
# (deploy/vmui, vmui's -vmui.customDashboardsPath), data in .obs/.
# The first run builds VictoriaMetrics from the Go module proxy (about 15 s).
#   bash deploy/obs.sh up | down
set -euo pipefail
cd "$(dirname "$0")/.."
VM_VERSION=v1.151.0
ADDR=${OBS_ADDR:-127.0.0.1:8428}
mkdir -p .obs
case "${1:-up}" in
up)
  if [ ! -x .obs/victoria-metrics ]; then
    echo "building VictoriaMetrics $VM_VERSION (about 15 s the first time)..."
    GOBIN="$PWD/.obs" go install "github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@$VM_VERSION"
  fi
  .obs/victoria-metrics -httpListenAddr="$ADDR" -storageDataPath=.obs/data \
    -promscrape.config=deploy/victoriametrics/scrape.yml \
    -vmui.customDashboardsPath=deploy/vmui -search.latencyOffset=5s >.obs/victoria-metrics.log 2>&1 &
  echo $! >.obs/victoria-metrics.pid
  for _ in $(seq 1 50); do
    curl -sf "http://$ADDR/health" >/dev/null && break
    sleep 0.2
  done
  echo "VictoriaMetrics UI: http://$ADDR/vmui/  (Dashboards tab: Narad client path, moves, cluster, storage)"
  ;;
down)
  if [ -f .obs/victoria-metrics.pid ]; then
    pid=$(cat .obs/victoria-metrics.pid)
    kill "$pid" 2>/dev/null || true
    # Wait for it to let go of its data directory's lock.
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  rm -f .obs/victoria-metrics.pid
  ;;
*)
  echo "usage: $0 up|down" >&2
  exit 2
  ;;
esac

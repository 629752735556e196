#!/usr/bin/env bash
# The syncs of a batch install, measured (issue 46): storage's
# BenchmarkInstallSyncs, one syncfs a step (LogConfig.InstallSyncs =
# InstallSyncFS) against an fsync of each file and directory
# (InstallSyncPerFile), for copies of one record and of 1 MiB, with and
# without a writer dirtying pages on the same file system (the other nodes
# of a shared disk). Members run alternately, syncfs first in odd rounds and
# per-file first in even ones, after a warm-up round that is thrown away;
# it prints each member's median µs per partition, its spread (min..max)
# and per-file's time over syncfs's.
#
#   bash bench/syncs/run.sh                  # on the file system of TMPDIR
#   OWN_FS=1 bash bench/syncs/run.sh         # also on an ext4 of its own (root)
#
# Env: ROUNDS (3 measured), BATCHES (5 batches of 64 copies a run),
# NARAD_SYNCS_DIRTY_MIBPS (32: the writer's rate), OWN_FS (0; 1 makes a
# 2 GiB ext4 image under WORK, mounts it with -o loop, runs the cases there
# too, and unmounts and removes it at the end), WORK (a temporary directory
# under TMPDIR; what is left there at the end is results.txt, each run's
# figure).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-3}
BATCHES=${BATCHES:-5}
WORK=${WORK:-$(mktemp -d)}
mkdir -p "$WORK"
OUT="$WORK/results.txt"
: >"$OUT"
go test -c -o "$WORK/storage.test" ./storage

MNT=""
cleanup() {
	rm -rf "$WORK/shared" "$WORK/storage.test"
	if [ -n "$MNT" ]; then
		umount "$MNT" || true
		rmdir "$MNT" || true
		rm -f "$WORK/ext4.img"
	fi
}
trap cleanup EXIT

places=("shared:$WORK/shared")
mkdir -p "$WORK/shared"
if [ "${OWN_FS:-0}" = 1 ]; then
	truncate -s 2G "$WORK/ext4.img"
	mkfs.ext4 -q -F "$WORK/ext4.img"
	MNT="$WORK/mnt"
	mkdir -p "$MNT"
	mount -o loop "$WORK/ext4.img" "$MNT"
	places+=("own-ext4:$MNT")
fi

run() { # place dir size writer strategy round
	local line
	line=$(NARAD_SYNCS_DIR="$2" "$WORK/storage.test" -test.run '^$' -test.benchtime "${BATCHES}x" \
		-test.bench "^BenchmarkInstallSyncs\$/^size=$3\$/^writer=$4\$/^$5\$" | grep '^BenchmarkInstallSyncs' || true)
	if [ -z "$line" ]; then
		echo "no result for $1 $3 $4 $5" >&2
		exit 1
	fi
	local us
	us=$(awk '{for (i = 2; i <= NF; i++) if ($i == "µs/partition") print $(i-1)}' <<<"$line")
	echo "$1 $3 $4 $5 $6 $us" | tee -a "$OUT"
}

for round in $(seq 0 "$ROUNDS"); do
	order="syncfs per-file"
	if [ $((round % 2)) = 0 ]; then order="per-file syncfs"; fi
	for p in "${places[@]}"; do
		for size in 1rec 1MiB; do
			for writer in off on; do
				for s in $order; do
					run "${p%%:*}" "${p#*:}" "$size" "$writer" "$s" "$round"
				done
			done
		done
	done
done

echo
echo "median µs/partition (min..max) over rounds 1..$ROUNDS (round 0 is the warm-up), per-file/syncfs"
awk '$5 > 0 { k = $1" "$2" "$3; v[k" "$4] = v[k" "$4]" "$6; keys[k] = 1 }
function stats(list,    a, n, i, j, t) {
	n = split(list, a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	med = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	lo = a[1]; hi = a[n]
}
END {
	printf "%-10s %-5s %-7s %22s %22s %8s\n", "fs", "size", "writer", "syncfs", "per-file", "ratio"
	for (k in keys) {
		stats(v[k" syncfs"]); m1 = med; s1 = sprintf("%.0f (%.0f..%.0f)", med, lo, hi)
		stats(v[k" per-file"]); m2 = med; s2 = sprintf("%.0f (%.0f..%.0f)", med, lo, hi)
		split(k, f, " ")
		printf "%-10s %-5s %-7s %22s %22s %8.2f\n", f[1], f[2], f[3], s1, s2, m2 / m1
	}
}' "$OUT" | sort

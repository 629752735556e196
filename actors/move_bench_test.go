package actors

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/storage"
)

// BenchmarkRebalanceOntoAFourthNode: three nodes own 600 small partitions
// (one record each); a fourth joins, and the planner moves 150 onto it
// with MaxInFlightMoves 8 and 64, at the seed's 1 s ticks. It reports
// moves/s. One op is one whole rebalance; setup is not timed.
//
//	go test ./actors -run '^$' -bench RebalanceOntoAFourthNode -benchtime 1x
func BenchmarkRebalanceOntoAFourthNode(b *testing.B) {
	for _, inFlight := range []int{8, 64} {
		b.Run(fmt.Sprintf("inflight=%d", inFlight), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				c := newTestCluster(b, 3, func(_ int, cfg *Config) {
					cfg.MaxInFlightMoves = inFlight
					cfg.TopicMaxPartitions = 600
				})
				c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"r","partitions":600}`))
				for p := range 600 {
					c.node(p%3).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/r/produce?partition=%d", p), []byte(`"x"`))
				}
				b.StartTimer()
				start := time.Now()
				c.join()
				waitLong(b, "n4 owning 150 partitions, no move in flight", func() bool {
					per, moving := c.owned(0, "r")
					return per["n4"] == 150 && moving == 0
				})
				b.ReportMetric(150/time.Since(start).Seconds(), "moves/s")
				b.StopTimer()
				c.stopAll()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkMoveOfALargePartitionUnderLoad moves one partition of
// NARAD_BENCH_MOVE_MIB MiB (default 1024) while producers write to it,
// and copies the same segment files the raw way (io.Copy and one fsync per
// file) in the same run. It reports the move's copy MiB/s, the raw MiB/s
// and their ratio, the freeze (the time consumes of the partition pause)
// and produce latency p50/p99 during the move.
//
//	go test ./actors -run '^$' -bench MoveOfALargePartition -benchtime 1x
func BenchmarkMoveOfALargePartitionUnderLoad(b *testing.B) {
	mib := int64(1024)
	if v, err := strconv.ParseInt(os.Getenv("NARAD_BENCH_MOVE_MIB"), 10, 64); err == nil && v > 0 {
		mib = v
	}
	for range b.N {
		b.StopTimer()
		c := newTestCluster(b, 3, func(_ int, cfg *Config) { cfg.Rebalance = false })
		c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"big","partitions":3}`))
		owner := 0
		fmt.Sscanf(c.assignmentOf(0, "big", 0).Owner, "n%d", &owner)
		owner--
		dest := (owner + 1) % 3
		// Fill the partition on the owner's disk directly, with the node
		// down: producing a GiB over HTTP would take minutes here.
		c.kill(owner)
		dir := storage.PartitionPath(c.node(owner).cfg.DataDir, "big", 0)
		fillPartition(b, dir, c.node(owner).cfg.Log, mib<<20)
		c.restart(owner)

		var produced atomic.Int64
		var lats []time.Duration
		var mu sync.Mutex
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for k := range 4 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					t0 := time.Now()
					code, _, err := c.node((owner+k)%3).attempt("POST", "/v1/topics/big/produce?partition=0", []byte(`"load"`))
					if err == nil && code == http.StatusAccepted {
						produced.Add(1)
						mu.Lock()
						lats = append(lats, time.Since(t0))
						mu.Unlock()
					}
				}
			})
		}
		b.StartTimer()
		start := time.Now()
		c.planMove("big", 0, dest)
		waitLong(b, "the destination owning the partition", func() bool {
			a := c.assignmentOf(dest, "big", 0)
			return a.Owner == fmt.Sprintf("n%d", dest+1) && a.Target == ""
		})
		took := time.Since(start)
		b.StopTimer()
		close(stop)
		wg.Wait()

		raw := rawCopySeconds(b, dir)
		moveMiBs := float64(mib) / took.Seconds()
		rawMiBs := float64(mib) / raw.Seconds()
		b.ReportMetric(moveMiBs, "move-MiB/s")
		b.ReportMetric(rawMiBs, "raw-MiB/s")
		b.ReportMetric(moveMiBs/rawMiBs, "move/raw")
		slices.Sort(lats)
		if n := len(lats); n > 0 {
			b.ReportMetric(float64(lats[n/2].Microseconds())/1000, "produce-p50-ms")
			b.ReportMetric(float64(lats[n*99/100].Microseconds())/1000, "produce-p99-ms")
		}
		b.ReportMetric(c.node(dest).n.metrics.lastFreeze.Get()*1000, "freeze-ms")
		c.stopAll()
		b.StartTimer()
	}
}

// fillPartition appends records of 1 KiB to the log at dir until it holds
// about size bytes.
func fillPartition(b *testing.B, dir string, cfg storage.LogConfig, size int64) {
	l, err := storage.OpenLog(dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	body := make([]byte, 1024)
	batch := make([]storage.Entry, 256)
	for i := range batch {
		batch[i] = storage.Entry{Body: body}
	}
	for written := int64(0); written < size; written += int64(len(batch) * len(body)) {
		if _, err := l.Append(time.Now(), batch); err != nil {
			b.Fatal(err)
		}
	}
}

// rawCopySeconds copies the segment files of dir with io.Copy and one
// fsync per file: what the disk does for the same bytes.
func rawCopySeconds(b *testing.B, dir string) time.Duration {
	ents, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	start := time.Now()
	for _, e := range ents {
		if filepath.Ext(e.Name()) != ".log" {
			continue
		}
		src, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(out, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			b.Fatal(err)
		}
		if err := dst.Sync(); err != nil {
			b.Fatal(err)
		}
		src.Close()
		dst.Close()
	}
	return time.Since(start)
}

// waitLong is waitFor for a benchmark's main wait, which may take minutes
// on a slow machine (a liveness bound, not a measure).
func waitLong(b *testing.B, what string, cond func() bool) {
	b.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			b.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

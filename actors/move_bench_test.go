package actors

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
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
// NARAD_BENCH_MOVE_MIB MiB (default 1024) while producers write to it and
// consumers pull and ack from it, and copies the same segment files the
// raw way (io.Copy and one fsync per file) just before the move (the
// source's) and just after it (the destination's), in the same run. It reports:
//
//   - move-MiB/s (planned to flipped, as the destination sees it), raw-MiB/s
//     (the mean of the two raw copies) and move/raw;
//
//   - freeze-ms, the freeze as a client sees it: the longest time no
//     consume of the partition was answered a record, and freeze-p50-ms,
//     freeze-p99-ms, the latency of the consumes that overlapped that gap; worker-freeze-ms, the destination's own
//     measure (freezing to flipped);
//
//   - produce-p50-ms, produce-p99-ms over the whole move; cores, the CPU
//     the process used during the move.
//
//     go test ./actors -run '^$' -bench MoveOfALargePartition -benchtime 1x
func BenchmarkMoveOfALargePartitionUnderLoad(b *testing.B) {
	mib := int64(1024)
	if v, err := strconv.ParseInt(os.Getenv("NARAD_BENCH_MOVE_MIB"), 10, 64); err == nil && v > 0 {
		mib = v
	}
	for range b.N {
		b.StopTimer()
		c := newTestCluster(b, 3, func(_ int, cfg *Config) { cfg.Controller.Rebalance = false })
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
		rawBefore := rawCopySeconds(b, dir)

		calls := &clientCalls{}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for k := range 4 {
			wg.Go(func() { produceLoad(c.node((owner+k)%3), calls, stop) })
		}
		for k := range 2 {
			wg.Go(func() { consumeLoad(c.node((owner+k)%3), calls, stop) })
		}
		b.StartTimer()
		var ru0, ru1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		start := time.Now()
		c.planMove("big", 0, dest)
		waitLong(b, "the destination owning the partition", func() bool {
			a := c.assignmentOf(dest, "big", 0)
			return a.Owner == fmt.Sprintf("n%d", dest+1) && a.Target == ""
		})
		took := time.Since(start)
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		b.StopTimer()
		// The worker hears its flip's answer after the replica applied it.
		waitLong(b, "the worker's freeze figure", func() bool { return c.node(dest).n.metrics.lastFreeze.Get() > 0 })
		// The consumers go on until the new owner answers them, so the
		// gap the flip left is closed.
		waitLong(b, "a consume answered by the new owner", func() bool { return calls.deliveredSince(start.Add(took)) })
		close(stop)
		wg.Wait()

		// After the flip the source's copy is the sweep's to remove: the
		// raw copy reads the destination's, the same segments.
		raw := (rawBefore + rawCopySeconds(b, storage.PartitionPath(c.node(dest).cfg.DataDir, "big", 0))) / 2
		moveMiBs := float64(mib) / took.Seconds()
		rawMiBs := float64(mib) / raw.Seconds()
		b.ReportMetric(moveMiBs, "move-MiB/s")
		b.ReportMetric(rawMiBs, "raw-MiB/s")
		b.ReportMetric(moveMiBs/rawMiBs, "move/raw")
		cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
		b.ReportMetric(cpu.Seconds()/took.Seconds(), "cores")
		produce, gap, during := calls.figures(start)
		if n := len(produce); n > 0 {
			b.ReportMetric(ms(produce[n/2]), "produce-p50-ms")
			b.ReportMetric(ms(produce[n*99/100]), "produce-p99-ms")
		}
		b.ReportMetric(ms(gap), "freeze-ms")
		if n := len(during); n > 0 {
			b.ReportMetric(ms(during[n/2]), "freeze-p50-ms")
			b.ReportMetric(ms(during[n*99/100]), "freeze-p99-ms")
		}
		b.ReportMetric(c.node(dest).n.metrics.lastFreeze.Get()*1000, "worker-freeze-ms")
		c.stopAll()
		b.StartTimer()
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// clientCall is one produce or consume call as its client saw it.
type clientCall struct {
	start, end time.Time
	produce    bool
	// delivered: a consume answered with a record.
	delivered bool
}

type clientCalls struct {
	mu    sync.Mutex
	calls []clientCall
}

func (cc *clientCalls) add(c clientCall) {
	cc.mu.Lock()
	cc.calls = append(cc.calls, c)
	cc.mu.Unlock()
}

func (cc *clientCalls) deliveredSince(t time.Time) bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	for _, c := range slices.Backward(cc.calls) {
		if c.delivered && c.end.After(t) {
			return true
		}
	}
	return false
}

// figures are the latencies of the produces that started at or after
// start, sorted; the longest gap between two consumes answered with a
// record after start; and the latencies of the consumes that overlapped
// that gap, sorted (a produce is answered from the WAL, frozen or not).
func (cc *clientCalls) figures(start time.Time) (produce []time.Duration, gap time.Duration, during []time.Duration) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	var answered []time.Time
	for _, c := range cc.calls {
		if c.start.Before(start) {
			continue
		}
		if c.produce {
			produce = append(produce, c.end.Sub(c.start))
		}
		if c.delivered {
			answered = append(answered, c.end)
		}
	}
	slices.SortFunc(answered, func(a, b time.Time) int { return a.Compare(b) })
	var from, to time.Time
	for i := 1; i < len(answered); i++ {
		if d := answered[i].Sub(answered[i-1]); d > gap {
			gap, from, to = d, answered[i-1], answered[i]
		}
	}
	for _, c := range cc.calls {
		if !c.produce && c.start.Before(to) && c.end.After(from) {
			during = append(during, c.end.Sub(c.start))
		}
	}
	slices.Sort(produce)
	slices.Sort(during)
	return produce, gap, during
}

// produceLoad produces small records to partition 0 through tn until stop.
func produceLoad(tn *testNode, calls *clientCalls, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		t0 := time.Now()
		code, _, err := tn.attempt("POST", "/v1/topics/big/produce?partition=0", []byte(`"load"`))
		if err == nil && code == http.StatusAccepted {
			calls.add(clientCall{start: t0, end: time.Now(), produce: true})
		}
	}
}

// consumeLoad pulls records of partition 0 through tn and acks each until
// stop; a consume's latency counts from its request to its ack's answer.
func consumeLoad(tn *testNode, calls *clientCalls, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		t0 := time.Now()
		code, body, err := tn.attempt("GET", "/v1/topics/big/consume?partition=0&wait=1s", nil)
		if err != nil || code != http.StatusOK {
			calls.add(clientCall{start: t0, end: time.Now()})
			continue
		}
		var d struct {
			ReceiptHandle string `json:"receipt_handle"`
		}
		if json.Unmarshal(body, &d) != nil {
			continue
		}
		tn.attempt("POST", "/v1/topics/big/ack?receipt_handle="+url.QueryEscape(d.ReceiptHandle), nil)
		calls.add(clientCall{start: t0, end: time.Now(), delivered: true})
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
	testnet.Eventually(b, 10*time.Minute, what, cond)
}

//go:build linux

package storage

// The write pass: one small record committed to each of many partition
// logs at once, each commit as the partition actor makes it (write, sync,
// publish: one sync per commit),
// until every log's HWM moved. "alone" is the baseline: each log's own
// fsync (Log.Sync); "lane" sends every sync through one SyncLane at its
// defaults (syncfs for a batch of SyncFSMinRequests, else the per-file
// round); "lane-syncfs" syncfs for every batch; "lane-perfile" the
// fdatasync round for every batch. Run:
//
//	go test ./storage -run '^$' -bench 'WritePass' -benchtime 1x -count 3 | go run ./bench/ratio -base alone
//
// 30,000 logs need 30,000 descriptors; the pass uses as many as the
// process's RLIMIT_NOFILE leaves room for (19,488 of 30,000 on a 20,000
// limit) and says so in its name.

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// writePassWorkers bounds the commits in flight, as the node's partitions
// do (each has one sync goroutine, and all may be syncing at once); enough
// that the lane sees large batches and the baseline's fsyncs run as
// concurrently as the kernel lets them.
const writePassWorkers = 4096

func BenchmarkWritePass(b *testing.B) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	lim.Cur = lim.Max // Go raises it at start; make sure
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	big := min(30000, int(lim.Cur)-512)
	for _, n := range []int{12, 100, 300, 1000, big} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			logs := make([]*Log, n)
			for i := range logs {
				l, err := OpenLog(filepath.Join(dir, strconv.Itoa(i)), DefaultLogConfig())
				if err != nil {
					b.Fatal(err)
				}
				logs[i] = l
			}
			defer func() {
				for _, l := range logs {
					l.Close()
				}
			}()
			b.Run("alone", func(b *testing.B) {
				writePass(b, logs, func(l *Log) error { return l.Sync() })
			})
			for _, c := range []struct {
				name string
				edit func(*SyncLaneConfig)
			}{
				{"lane", func(*SyncLaneConfig) {}},
				{"lane-syncfs", func(c *SyncLaneConfig) { c.SyncFSMinRequests = 1 }},
				{"lane-perfile", func(c *SyncLaneConfig) { c.PerFileSync = true }},
			} {
				b.Run(c.name, func(b *testing.B) {
					cfg := DefaultSyncLaneConfig()
					c.edit(&cfg)
					lane, err := OpenSyncLane(dir, cfg)
					if err != nil {
						b.Fatal(err)
					}
					defer lane.Close()
					writePass(b, logs, func(l *Log) error { return lane.Sync(context.Background(), l) })
					st := lane.Stats()
					b.ReportMetric(float64(st.Requests)/float64(max(st.Batches, 1)), "requests/sync")
				})
			}
		})
	}
}

func writePass(b *testing.B, logs []*Log, syncLog func(*Log) error) {
	entries := []Entry{{Key: []byte("key"), Body: []byte("a small record of some forty bytes......")}}
	for b.Loop() {
		work := make(chan *Log)
		errs := make(chan error, writePassWorkers)
		var wg sync.WaitGroup
		for range min(writePassWorkers, len(logs)) {
			wg.Go(func() {
				for l := range work {
					if err := commitOne(l, entries, syncLog); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		for _, l := range logs {
			work <- l
		}
		close(work)
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
}

// commitOne is one idle partition's commit: the record frames and their
// commit frame, a sync, the read-back that moves the HWM.
func commitOne(l *Log, entries []Entry, syncLog func(*Log) error) error {
	now := time.Now()
	hwm := l.HWM()
	batch, err := l.Write(now, entries)
	if err != nil {
		return err
	}
	if err := syncLog(l); err != nil {
		return l.Abort(err)
	}
	if err := l.Publish(batch); err != nil {
		return err
	}
	if got := l.HWM(); got != hwm+1 {
		return fmt.Errorf("HWM %d after the commit, want %d", got, hwm+1)
	}
	return nil
}

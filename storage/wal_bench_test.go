package storage

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkWALAppend measures acknowledged appends of 1 KiB bodies from 1,
// 16 and 256 concurrent producers, and how many fsyncs each record cost:
// group commit should push that well below 1 as producers grow.
func BenchmarkWALAppend(b *testing.B) {
	for _, producers := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("producers=%d", producers), func(b *testing.B) {
			w, err := OpenWAL(b.TempDir(), DefaultWALConfig())
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			rec := WALRecord{Topic: "bench", Partition: -1, Body: make([]byte, 1024)}
			ctx := context.Background()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.SetBytes(int64(len(rec.Body)))
			b.ResetTimer()
			syncsBefore := w.syncs.Load()
			for range producers {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						if _, err := w.Append(ctx, rec); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(w.syncs.Load()-syncsBefore)/float64(b.N), "fsyncs/record")
		})
	}
}

// BenchmarkWALPositionOnCommit measures the produce path (acknowledged
// appends of 1 KiB bodies from 16 producers) while a committer marks every
// record committed as a dispatcher would, a little out of order: "tick" is
// the old behaviour, the position written only by a Compact once a second;
// "commit" writes it after marks as well (PositionOnCommit) as soon as the
// last write finished, "commit-10ms" at most every 10 ms (the default
// PositionSaveInterval). Read the ratios with bench/ratio -base mode=tick;
// positions/record is how many position writes the marks cost.
func BenchmarkWALPositionOnCommit(b *testing.B) {
	for _, mode := range []string{"tick", "commit", "commit-10ms"} {
		b.Run("mode="+mode, func(b *testing.B) {
			cfg := DefaultWALConfig()
			cfg.PositionOnCommit = mode != "tick"
			cfg.PositionSaveInterval = 0
			if mode == "commit-10ms" {
				cfg.PositionSaveInterval = 10 * time.Millisecond
			}
			w, err := OpenWAL(b.TempDir(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			rec := WALRecord{Topic: "bench", Partition: -1, Body: make([]byte, 1024)}
			ctx := context.Background()
			acked := make(chan uint64, 1024)
			stop := make(chan struct{})
			var committer sync.WaitGroup
			committer.Go(func() {
				compact := time.NewTicker(time.Second)
				defer compact.Stop()
				var held []uint64 // every other seq waits for the next one: out of order
				for {
					select {
					case <-stop:
						return
					case <-compact.C:
						if err := w.Compact(); err != nil {
							b.Error(err)
						}
					case seq := <-acked:
						held = append(held, seq)
						if len(held) < 2 {
							continue
						}
						for i := len(held) - 1; i >= 0; i-- {
							if err := w.MarkCommitted(held[i]); err != nil {
								b.Error(err)
							}
						}
						held = held[:0]
					}
				}
			})
			var next atomic.Int64
			var wg sync.WaitGroup
			b.SetBytes(int64(len(rec.Body)))
			b.ResetTimer()
			writesBefore, syncsBefore := w.positions.Load(), w.syncs.Load()
			for range 16 {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						seq, err := w.Append(ctx, rec)
						if err != nil {
							b.Error(err)
							return
						}
						acked <- seq
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			close(stop)
			committer.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			b.ReportMetric(float64(w.positions.Load()-writesBefore)/float64(b.N), "positions/record")
			b.ReportMetric(float64(w.syncs.Load()-syncsBefore)/float64(b.N), "fsyncs/record")
		})
	}
}

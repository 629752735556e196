package storage

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
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

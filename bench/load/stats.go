package main

import (
	"math"
	"slices"
	"time"
)

// percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest value that at least p percent of the values do not
// exceed. It returns 0 for no values. Nearest rank never invents a value
// that was not measured, which matters for p99 of small samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// latencies summarizes one set of measurements.
type latencies struct {
	Count int     `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// summarizeLatencies merges per-worker samples (each worker keeps its own
// slice, so that measuring takes no lock) and sorts them once.
func summarizeLatencies(perWorker [][]time.Duration) latencies {
	all := slices.Concat(perWorker...)
	slices.Sort(all)
	l := latencies{Count: len(all)}
	if len(all) == 0 {
		return l
	}
	l.P50Ms = ms(percentile(all, 50))
	l.P99Ms = ms(percentile(all, 99))
	l.MaxMs = ms(all[len(all)-1])
	return l
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// rate returns events per second over d, or 0 when d is not positive (a run
// that did nothing has no rate rather than an infinite one).
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// mibPerSecond returns bytes per second over d in MiB (2^20 bytes).
func mibPerSecond(bytes int64, d time.Duration) float64 {
	return rate(bytes, d) / (1 << 20)
}

// raiseTo raises v to x; the compare-and-swap loop ends because every
// failed swap means another worker raised the value, and it can only rise.
func raiseTo(v interface {
	Load() int64
	CompareAndSwap(old, new int64) bool
}, x int64) {
	for {
		cur := v.Load()
		if x <= cur || v.CompareAndSwap(cur, x) {
			return
		}
	}
}

// Package measure is what the load driver (bench/load) and `narad bench`
// measure by, so that the two report the same numbers for the same run:
// nearest-rank latency percentiles, rates over a span of wall time, the
// pace of a run held to a rate, and the record body that carries its id
// and send time to the consumer. It holds definitions, not a driver: each
// tool keeps its own workers (the load driver checks a history on top).
//
// Where to start: Summarize in measure.go, Pacer in pace.go, MakeBody in
// body.go. Everything here is pure but Pacer.Wait and IsTerminal.
package measure

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of
// sorted: the smallest value that at least p percent of the values do not
// exceed. It returns 0 for no values. Nearest rank never invents a value
// that was not measured, which matters for the p99 of small samples.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// Latencies summarizes one set of measurements, in milliseconds.
type Latencies struct {
	Count int     `json:"count"`
	P50Ms float64 `json:"p50_ms"`
	P95Ms float64 `json:"p95_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// Summarize merges per-worker samples (each worker keeps its own slice, so
// that measuring takes no lock) and sorts them once.
func Summarize(perWorker [][]time.Duration) Latencies {
	all := slices.Concat(perWorker...)
	slices.Sort(all)
	l := Latencies{Count: len(all)}
	if len(all) == 0 {
		return l
	}
	l.P50Ms = Ms(Percentile(all, 50))
	l.P95Ms = Ms(Percentile(all, 95))
	l.P99Ms = Ms(Percentile(all, 99))
	l.MaxMs = Ms(all[len(all)-1])
	return l
}

// Ms is d in (fractional) milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// FmtMs prints a millisecond figure as a duration rounded to 10 µs.
func FmtMs(ms float64) string {
	return time.Duration(ms * float64(time.Millisecond)).Round(10 * time.Microsecond).String()
}

// Rate returns events per second over d, or 0 when d is not positive (a
// run that did nothing has no rate rather than an infinite one).
func Rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// MiBPerSecond returns bytes per second over d in MiB (2^20 bytes).
func MiBPerSecond(bytes int64, d time.Duration) float64 {
	return Rate(bytes, d) / (1 << 20)
}

// Span is the wall time from firstUnixNs to lastUnixNs: the window both
// tools divide by (first produce's start to last 202, or to last ack).
// 0 when either end is missing or they are out of order.
func Span(firstUnixNs, lastUnixNs int64) time.Duration {
	if firstUnixNs == 0 || lastUnixNs < firstUnixNs {
		return 0
	}
	return time.Duration(lastUnixNs - firstUnixNs)
}

// RaiseTo raises v to x; the compare-and-swap loop ends because every
// failed swap means another worker raised the value, and it only rises.
func RaiseTo(v interface {
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

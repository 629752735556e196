package main

import (
	"math"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ms(7), 50, 7 * time.Millisecond},
		{"one value p99", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 of 1..100", ms(hundred...), 100, 100 * time.Millisecond},
		{"p50 of four", ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{"p99 of four is the max", ms(1, 2, 3, 4), 99, 4 * time.Millisecond},
		{"tiny p is the min", ms(1, 2, 3, 4), 0.1, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("%s: got %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestSummarizeLatenciesMergesWorkers(t *testing.T) {
	got := summarizeLatencies([][]time.Duration{
		{3 * time.Millisecond, 1 * time.Millisecond},
		nil,
		{2 * time.Millisecond, 4 * time.Millisecond},
	})
	want := latencies{Count: 4, P50Ms: 2, P99Ms: 4, MaxMs: 4}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if got := summarizeLatencies(nil); got != (latencies{}) {
		t.Errorf("got %+v for no samples, want zeros", got)
	}
}

func TestRates(t *testing.T) {
	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"1000 in 2s", rate(1000, 2*time.Second), 500},
		{"in 250ms", rate(10, 250*time.Millisecond), 40},
		{"no time", rate(10, 0), 0},
		{"negative time", rate(10, -time.Second), 0},
		{"MiB/s", mibPerSecond(3<<20, 2*time.Second), 1.5},
	}
	for _, tt := range tests {
		if math.Abs(tt.got-tt.want) > 1e-9 {
			t.Errorf("%s: got %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestRaiseTo(t *testing.T) {
	var v atomic.Int64
	raiseTo(&v, 5)
	raiseTo(&v, 3)
	if got := v.Load(); got != 5 {
		t.Errorf("got %d, want 5", got)
	}
}

func TestBackoffIsCapped(t *testing.T) {
	if got := backoff(1); got != 50*time.Millisecond {
		t.Errorf("got %s, want 50ms", got)
	}
	if got := backoff(100); got != time.Second {
		t.Errorf("got %s, want 1s", got)
	}
}

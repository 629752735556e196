package main

import (
	"strings"
	"testing"
)

func TestParsePhasesSumsEachPhaseOverNodes(t *testing.T) {
	text := `narad_move_phase_seconds_bucket{node="n1",phase="finalize",vmrange="1.0e-1...1.2e-1"} 3
narad_move_phase_seconds_sum{node="n1",phase="finalize"} 0.5
narad_move_phase_seconds_count{node="n1",phase="finalize"} 4
narad_move_freeze_seconds_sum{node="n1"} 2
narad_move_freeze_seconds_count{node="n1"} 4
narad_moves_done_total{node="n1"} 4
`
	got := phaseTimes{}
	for range 2 {
		if err := parsePhases(strings.NewReader(text), got); err != nil {
			t.Fatal(err)
		}
	}
	if e := got["finalize"]; e.count != 8 || e.sum != 1 {
		t.Fatalf("finalize: got %d moves, %.2f s; want 8 and 1.00", e.count, e.sum)
	}
	if e := got["frozen (prepare to flip)"]; e.count != 8 || e.sum != 4 {
		t.Fatalf("frozen: got %d moves, %.2f s; want 8 and 4.00", e.count, e.sum)
	}
	if len(got) != 2 {
		t.Fatalf("phases: got %v, want finalize and frozen only", got)
	}
	if s := got.String(); !strings.Contains(s, "finalize") || !strings.Contains(s, "125.0 ms") {
		t.Fatalf("table: got %q, want finalize with a mean of 125.0 ms", s)
	}
}

// The frozen window's p50 and p99 come from the freeze histogram's buckets
// summed over the nodes, interpolated within the bucket the rank falls in.
func TestQuantileInterpolatesTheBucketsOfEveryNode(t *testing.T) {
	node := func(n string) string {
		return `narad_move_freeze_seconds_bucket{node="` + n + `",le="0.01"} 10
narad_move_freeze_seconds_bucket{node="` + n + `",le="0.02"} 40
narad_move_freeze_seconds_bucket{node="` + n + `",le="0.04"} 48
narad_move_freeze_seconds_bucket{node="` + n + `",le="+Inf"} 50
narad_move_freeze_seconds_count{node="` + n + `"} 50
`
	}
	got := phaseTimes{}
	for _, n := range []string{"n1", "n2"} {
		if err := parsePhases(strings.NewReader(node(n)), got); err != nil {
			t.Fatal(err)
		}
	}
	const frozen = "frozen (prepare to flip)"
	for _, c := range []struct{ q, want float64 }{{0.5, 0.015}, {0.1, 0.005}, {0.9, 0.0325}, {0.99, 0.04}} {
		v, ok := got.quantile(frozen, c.q)
		if !ok || v < c.want-1e-9 || v > c.want+1e-9 {
			t.Errorf("q %.2f: got %.4f (%v), want %.4f", c.q, v, ok, c.want)
		}
	}
	if _, ok := got.quantile("finalize", 0.5); ok {
		t.Error("a phase without samples: got a quantile, want none")
	}
}

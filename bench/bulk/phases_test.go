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

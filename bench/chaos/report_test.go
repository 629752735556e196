package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"strings"
	"testing"
	"time"
)

func TestADuplicateCountsAgainstTheLastFaultBeforeIt(t *testing.T) {
	thrown := []ran{{Fault: Fault{Kind: Kill}, Fired: 10 * time.Second}, {Fault: Fault{Kind: Stop}, Fired: 20 * time.Second},
		{Fault: Fault{Kind: Kill}, Fired: 30 * time.Second}}
	dups := []time.Duration{time.Second, 10 * time.Second, 15 * time.Second, 25 * time.Second, 31 * time.Second, 90 * time.Second}
	got := attribute(dups, thrown)
	want := map[string]int{beforeFaults: 1, "kill": 4, "stop": 1}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestALostRecordFailsTheRunLoudly(t *testing.T) {
	for _, c := range []struct {
		name    string
		s       summary
		ok      bool
		verdict string
	}{
		{"clean, with duplicates", summary{Duplicates: 7}, true, "OK"},
		{"lost", summary{Lost: 2, LostIDs: []string{"p0-0000001", "p1-0000009"}}, false, "LOST: 2 records"},
		{"phantom", summary{Phantoms: 1}, false, "FAILED"},
		{"offset conflict", summary{OffsetConflicts: 1}, false, "FAILED"},
		{"past a high watermark", summary{BeyondWatermark: 1}, false, "FAILED"},
		{"a node not back", summary{Failure: "n2 after kill: node lost"}, false, "FAILED"},
	} {
		if got := c.s.OK(); got != c.ok {
			t.Errorf("%s: OK got %v, want %v", c.name, got, c.ok)
		}
		if got := c.s.String(); !strings.Contains(got, "verdict: ") || !strings.Contains(got, c.verdict) {
			t.Errorf("%s: got\n%s\nwant a verdict line with %q", c.name, got, c.verdict)
		}
	}
	lost := summary{Lost: 1}
	if got := lost.String(); !strings.Contains(got, "!!! LOST") {
		t.Errorf("got\n%s\nwant !!! LOST", got)
	}
}

func TestTheJSONSummaryCarriesTheSeedAndTheVerdict(t *testing.T) {
	s := summary{Seed: 42, Lost: 1, Schedule: []Fault{{At: time.Second, Kind: Term, Node: 1, Hold: time.Second}},
		Ran: []ran{{Fault: Fault{At: time.Second, Kind: Term, Node: 1}, Fired: 2 * time.Second}}}
	var b bytes.Buffer
	if err := s.writeJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Seed     uint64 `json:"seed"`
		Lost     int    `json:"lost"`
		Verdict  string `json:"verdict"`
		OK       bool   `json:"ok"`
		Schedule []struct {
			Kind string `json:"kind"`
		} `json:"schedule"`
		Ran []struct {
			Kind  string `json:"kind"`
			Fired int64  `json:"fired_ns"`
		} `json:"ran"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v in\n%s", err, b.String())
	}
	if got.Seed != 42 || got.Lost != 1 || got.OK || !strings.HasPrefix(got.Verdict, "LOST") {
		t.Errorf("got seed %d, lost %d, ok %v, verdict %q, want 42, 1, false, LOST...", got.Seed, got.Lost, got.OK, got.Verdict)
	}
	if len(got.Ran) != 1 || got.Ran[0].Kind != "term" || got.Ran[0].Fired != int64(2*time.Second) || len(got.Schedule) != 1 {
		t.Errorf("got schedule %v, ran %v, want one term fired at 2 s", got.Schedule, got.Ran)
	}
}

func TestABadFlagIsASetupFailure(t *testing.T) {
	for _, args := range [][]string{{"-nodes", "2"}, {"-faults", "kill,nap"}, {"-gap", "5s-2s"}, {"-heartbeat", "2s"}, {"-duration", "0s"}, {"extra"},
		{"-faults", "natskill"}, {"-faults", "kill,natskill", "-nats", "1"}, {"-nats", "2"}, {"-faults", "decommission"}, {"-faults", "decommission", "-nodes", "3"}} {
		if got := cli(args, io.Discard, io.Discard); got != exitSetup {
			t.Errorf("%v: got exit %d, want %d", args, got, exitSetup)
		}
	}
}

// The drain goes on while records are delivered and gives up only once
// none was for its idle bound: a backlog that drains slowly is not a loss.
func TestWatchDrainWaitsWhileTheBacklogShrinks(t *testing.T) {
	quiet := func(string, ...any) {}
	t0 := time.Unix(1000, 0)
	// ticks feeds watchDrain one poll a minute, far past its idle bound of
	// a second: only progress keeps it going.
	ticks := func(n int) <-chan time.Time {
		c := make(chan time.Time, n)
		for i := range n {
			c <- t0.Add(time.Duration(i) * time.Minute)
		}
		return c
	}
	left := 5
	shrink := func() int { left--; return left }
	watchDrain(context.Background(), nil, ticks(100), shrink, time.Second, quiet)
	if left != 0 {
		t.Errorf("backlog when a shrinking drain ended: got %d, want 0", left)
	}
	polls := 0
	stuck := func() int { polls++; return 3 }
	watchDrain(context.Background(), nil, ticks(100), stuck, 3*time.Minute, quiet)
	if polls != 4 {
		t.Errorf("polls of a stuck drain with an idle bound of 3 polls: got %d, want 4", polls)
	}
}

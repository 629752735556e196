package main

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// plan is the default run's plan: 60 s of every kind on three nodes.
func plan() Plan {
	return Plan{Duration: 60 * time.Second, GapMin: 2 * time.Second, GapMax: 5 * time.Second,
		Nodes: 3, Kinds: kinds, DeadTimeout: 3 * time.Second, Heartbeat: 500 * time.Millisecond}
}

func TestASeedReplaysItsScheduleAndAnotherSeedDiffers(t *testing.T) {
	for _, c := range []struct {
		name   string
		a, b   uint64
		change func(*Plan)
		same   bool
	}{
		{"same seed", 7, 7, nil, true},
		{"same large seed", 1 << 63, 1 << 63, nil, true},
		{"seeds 7 and 8", 7, 8, nil, false},
		{"seeds 1 and 2", 1, 2, nil, false},
		{"same seed, a longer run keeps the start", 7, 7, func(p *Plan) { p.Duration *= 2 }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := plan()
			a := Schedule(c.a, p)
			if c.change != nil {
				c.change(&p)
			}
			b := Schedule(c.b, p)
			if len(a) == 0 {
				t.Fatalf("seed %d: got no fault in %v, want some", c.a, p.Duration)
			}
			if got := slices.Equal(a, b); got != c.same {
				t.Errorf("equal: got %v, want %v\n%v\n%v", got, c.same, a, b)
			}
			if c.change != nil && !slices.Equal(a, b[:len(a)]) {
				t.Errorf("a longer run: got %v first, want %v", b[:len(a)], a)
			}
		})
	}
}

func TestEveryKindAskedForAppears(t *testing.T) {
	for _, ks := range [][]Kind{kinds, {Kill}, {Term, Stop}, {Stop, Kill}} {
		for seed := range uint64(50) {
			p := plan()
			p.Kinds = ks
			s := Schedule(seed, p)
			if len(s) < len(ks) {
				t.Fatalf("kinds %v, seed %d: got %d faults in %v, want at least %d", ks, seed, len(s), p.Duration, len(ks))
			}
			for _, k := range ks {
				if !slices.ContainsFunc(s, func(f Fault) bool { return f.Kind == k }) {
					t.Errorf("kinds %v, seed %d: got no %s in %v", ks, seed, k, s)
				}
			}
			for _, f := range s {
				if !slices.Contains(ks, f.Kind) {
					t.Errorf("kinds %v, seed %d: got a %s, want none", ks, seed, f.Kind)
				}
			}
		}
	}
}

func TestAScheduleKeepsItsBounds(t *testing.T) {
	p := plan()
	for seed := range uint64(50) {
		var prev time.Duration
		for i, f := range Schedule(seed, p) {
			if f.At >= p.Duration || f.At <= prev {
				t.Errorf("seed %d, fault %d: got at %v after %v, want after it and before %v", seed, i, f.At, prev, p.Duration)
			}
			if f.Gap < p.GapMin || f.Gap > p.GapMax {
				t.Errorf("seed %d, fault %d: got gap %v, want within %v..%v", seed, i, f.Gap, p.GapMin, p.GapMax)
			}
			if f.Node < 0 || f.Node >= p.Nodes {
				t.Errorf("seed %d, fault %d: got node %d, want 0..%d", seed, i, f.Node, p.Nodes-1)
			}
			if f.Kind == Stop && f.Hold <= p.DeadTimeout+p.Heartbeat {
				t.Errorf("seed %d, fault %d: got a stop held %v, want past %v", seed, i, f.Hold, p.DeadTimeout+p.Heartbeat)
			}
			prev = f.At
		}
	}
}

func TestFaultsAndGapsParse(t *testing.T) {
	if got, err := parseKinds("stop, kill"); err != nil || !slices.Equal(got, []Kind{Stop, Kill}) {
		t.Errorf("stop, kill: got %v, %v, want [stop kill]", got, err)
	}
	for _, bad := range []string{"", "kill,nap", "kill,kill"} {
		if _, err := parseKinds(bad); !errors.Is(err, errConfig) {
			t.Errorf("-faults %q: got %v, want errConfig", bad, err)
		}
	}
	for _, c := range []struct {
		in     string
		lo, hi time.Duration
	}{{"3s", 3 * time.Second, 3 * time.Second}, {"2s-5s", 2 * time.Second, 5 * time.Second}, {"500ms - 1s", 500 * time.Millisecond, time.Second}} {
		lo, hi, err := parseGap(c.in)
		if err != nil || lo != c.lo || hi != c.hi {
			t.Errorf("-gap %q: got %v, %v, %v, want %v, %v", c.in, lo, hi, err, c.lo, c.hi)
		}
	}
	for _, bad := range []string{"", "0s", "5s-2s", "2s-", "x"} {
		if _, _, err := parseGap(bad); !errors.Is(err, errConfig) {
			t.Errorf("-gap %q: got %v, want errConfig", bad, err)
		}
	}
}

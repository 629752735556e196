package main

import (
	"errors"
	"io"
	"slices"
	"testing"
	"time"
)

// plan is a run's plan of 60 s of every kind on three nodes and three NATS
// servers.
func plan() Plan {
	return Plan{Duration: 60 * time.Second, GapMin: 2 * time.Second, GapMax: 5 * time.Second,
		Nodes: 3, NATS: 3, Visibility: 5 * time.Second, Kinds: kinds, DeadTimeout: 3 * time.Second, Heartbeat: 500 * time.Millisecond}
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
			// Every kind's planned time fits twice.
			p.Duration = 3 * time.Minute
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
			leader := f.Kind == Leader || f.Kind == LeaderPause
			if leader && f.Node != -1 {
				t.Errorf("seed %d, fault %d: got a leader at node %d, want -1 (resolved by the run)", seed, i, f.Node)
			}
			if f.Kind == NATSKill && (f.Node < 0 || f.Node >= p.NATS) {
				t.Errorf("seed %d, fault %d: got NATS server %d, want 0..%d", seed, i, f.Node, p.NATS-1)
			}
			if !leader && f.Kind != NATSKill && (f.Node < 0 || f.Node >= p.Nodes) {
				t.Errorf("seed %d, fault %d: got node %d, want 0..%d", seed, i, f.Node, p.Nodes-1)
			}
			if held := []Kind{Stop, Cut, RaftCut, RaftCutOneWay, LeaderPause}; slices.Contains(held, f.Kind) && f.Hold <= p.DeadTimeout+p.Heartbeat {
				t.Errorf("seed %d, fault %d: got a %s held %v, want past %v", seed, i, f.Kind, f.Hold, p.DeadTimeout+p.Heartbeat)
			}
			switch f.Kind {
			case Disk:
				if f.Op != failFsync && f.Op != failWrite {
					t.Errorf("seed %d, fault %d: got a disk fault of %q, want fsync or write", seed, i, f.Op)
				}
			case Clock:
				step := time.Duration(max(f.StepMs, -f.StepMs)) * time.Millisecond
				if step < p.Visibility || step > 3*p.Visibility {
					t.Errorf("seed %d, fault %d: got a clock step of %d ms, want %v..%v either way", seed, i, f.StepMs, p.Visibility, 3*p.Visibility)
				}
			}
			prev = f.At
		}
	}
}

func TestAClockStepsBothWaysAndADiskFailsBothOps(t *testing.T) {
	p := plan()
	p.Kinds = []Kind{Disk, Clock}
	p.Duration = 10 * time.Minute
	seen := map[string]bool{}
	for seed := range uint64(20) {
		for _, f := range Schedule(seed, p) {
			switch {
			case f.Kind == Disk:
				seen[f.Op] = true
			case f.StepMs > 0:
				seen["forward"] = true
			case f.StepMs < 0:
				seen["back"] = true
			}
		}
	}
	for _, want := range []string{failFsync, failWrite, "forward", "back"} {
		if !seen[want] {
			t.Errorf("got no %s in 20 seeds of disk and clock, want some", want)
		}
	}
}

func TestTheDefaultFaultsAreEveryKindTheFlagsAllow(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []Kind
	}{
		{nil, []Kind{Kill, Term, Stop, Cut, Leader, Disk, Clock, LeaderPause}},
		{[]string{"-nats", "3"}, []Kind{Kill, Term, Stop, Cut, Leader, NATSKill, Disk, Clock, LeaderPause}},
		{[]string{"-nodes", "4"}, []Kind{Kill, Term, Stop, Cut, Leader, Decommission, Disk, Clock, LeaderPause}},
		{[]string{"-netns"}, []Kind{Kill, Term, Stop, Cut, Leader, Disk, Clock, RaftCut, RaftCutOneWay, LeaderPause}},
		{[]string{"-loop-disks"}, []Kind{Kill, Term, Stop, Cut, Leader, Disk, Clock, LeaderPause, DiskFull}},
		{[]string{"-nodes", "4", "-nats", "3", "-netns", "-loop-disks"}, kinds},
		{[]string{"-faults", "stop,kill"}, []Kind{Stop, Kill}},
	} {
		cfg, err := parseFlags(c.args, io.Discard)
		if err != nil || !slices.Equal(cfg.kinds, c.want) {
			t.Errorf("%v: got %v, %v, want %v", c.args, cfg.kinds, err, c.want)
		}
	}
}

func TestOverlapPairsEachImpairingFaultWithAnotherOnItsNode(t *testing.T) {
	p := plan()
	p.Duration = 10 * time.Minute
	alone := Schedule(1, p)
	p.Overlap = true
	for seed := range uint64(20) {
		paired := 0
		for i, f := range Schedule(seed, p) {
			switch {
			case !impairs(f.Kind) && f.With != "":
				t.Errorf("seed %d, fault %d: got a %s with %s, want a %s alone", seed, i, f.Kind, f.With, f.Kind)
			case impairs(f.Kind) && (!impairs(f.With) || f.With == f.Kind):
				t.Errorf("seed %d, fault %d: got a %s with %q, want another kind that impairs", seed, i, f.Kind, f.With)
			case f.With == RaftCut && f.Kind == RaftCutOneWay, f.With == RaftCutOneWay && f.Kind == RaftCut:
				t.Errorf("seed %d, fault %d: got %s with %s, want never two Raft cuts", seed, i, f.Kind, f.With)
			case f.With != "":
				paired++
			}
		}
		if paired == 0 {
			t.Errorf("seed %d: got no fault paired in 10 minutes, want some", seed)
		}
	}
	for i, f := range alone {
		if f.With != "" {
			t.Errorf("without -overlap, fault %d: got a %s with %s, want it alone", i, f.Kind, f.With)
		}
	}
}

func TestADiskFullNeedsLoopDisks(t *testing.T) {
	if _, err := parseFlags([]string{"-faults", "diskfull"}, io.Discard); !errors.Is(err, errConfig) {
		t.Errorf("-faults diskfull without -loop-disks: got %v, want errConfig", err)
	}
	if _, err := parseFlags([]string{"-faults", "diskfull", "-loop-disks"}, io.Discard); err != nil {
		t.Errorf("-faults diskfull -loop-disks: got %v, want nil", err)
	}
}

func TestARaftCutNeedsTheNodesInNamespaces(t *testing.T) {
	for _, k := range []string{"raftcut", "raftcut1"} {
		if _, err := parseFlags([]string{"-faults", k}, io.Discard); !errors.Is(err, errConfig) {
			t.Errorf("-faults %s without -netns: got %v, want errConfig", k, err)
		}
		if _, err := parseFlags([]string{"-faults", k, "-netns"}, io.Discard); err != nil {
			t.Errorf("-faults %s -netns: got %v, want nil", k, err)
		}
	}
}

func TestFaultsAndGapsParse(t *testing.T) {
	if got, err := parseKinds("cut,leader,natskill,decommission,disk,clock"); err != nil || len(got) != 6 {
		t.Errorf("every new kind: got %v, %v, want the six", got, err)
	}
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

// Seed 7's schedule of the first slice's kinds, as that slice drew it: the
// kinds added since draw nothing in a schedule without them, so an old
// seed replays what it did.
func TestAnOldSeedReplaysTheFirstSlicesSchedule(t *testing.T) {
	p := plan()
	p.Kinds = []Kind{Kill, Term, Stop}
	want := []Fault{
		{At: 2344419836, Gap: 2344419836, Kind: Term, Node: 2, Hold: 799 * time.Millisecond},
		{At: 10533225720, Gap: 3389805884, Kind: Kill, Node: 1, Hold: 3323 * time.Millisecond},
		{At: 18014793744, Gap: 2158568024, Kind: Stop, Node: 0, Hold: 6303 * time.Millisecond},
		{At: 28815363759, Gap: 3497570015, Kind: Term, Node: 2, Hold: 1802 * time.Millisecond},
		{At: 39080962239, Gap: 4463598480, Kind: Kill, Node: 2, Hold: 1400 * time.Millisecond},
		{At: 47402681534, Gap: 4921719295, Kind: Stop, Node: 0, Hold: 6273 * time.Millisecond},
		{At: 59402709017, Gap: 4727027483, Kind: Kill, Node: 0, Hold: 3190 * time.Millisecond},
	}
	if got := Schedule(7, p); !slices.Equal(got, want) {
		t.Errorf("seed 7:\ngot  %v\nwant %v", got, want)
	}
}

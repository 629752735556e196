package sim

import (
	"slices"
	"strings"
	"testing"
)

// seedsPerRun is what `go test` runs; `task sim` runs many more.
const seedsPerRun = 300

// Every invariant holds on the real code, for a few hundred worlds.
func TestSeedsHoldEveryInvariant(t *testing.T) {
	n := uint64(seedsPerRun)
	if testing.Short() {
		n = 200 // fewer reach no force-promote
	}
	var tot Stats
	for seed := uint64(1); seed <= n; seed++ {
		r := Run(Config{Seed: seed})
		if r.Err != nil {
			t.Fatalf("%v\nreplay: go run ./cmd/narad-sim -seed %d -trace", r.Err, seed)
		}
		tot.add(r.Stats)
	}
	// The worlds must reach the paths the invariants guard, or the run
	// proves nothing.
	for _, c := range []struct {
		what string
		got  int
	}{
		{"flips", tot.Flips}, {"force-promotes", tot.Promotes}, {"dead targets cleared", tot.TargetsCleared},
		{"re-freezes", tot.Refreezes}, {"flips with an unknown outcome", tot.UnknownFlips}, {"fences refused", tot.FencesRefused},
		{"crashes", tot.Crashes}, {"cut-offs", tot.CutOffs}, {"leader changes", tot.LeaderChanges}, {"commits refused", tot.CommitsRefused},
		{"prepares held by the pacing (rule B5)", tot.Held}, {"flip batches", tot.FlipBatches},
		{"move groups of more than one request", tot.SharedGroups},
		{"copies staged before their freeze", tot.Staged}, {"installs of a staged copy that only renamed it", tot.StagedInstalls},
		{"workers that found their move's install at the path", tot.InstallsFound},
	} {
		if c.got == 0 {
			t.Errorf("%d seeds reached no %s: the faults miss that path", n, c.what)
		}
	}
	// Flips that share an entry need two moves to one node ending within
	// a window: a few in every few hundred seeds.
	if !testing.Short() && tot.SharedFlips == 0 {
		t.Errorf("%d seeds shared no flip entry: the batched flips are not exercised", n)
	}
	t.Logf("%d seeds: %+v", n, tot)
}

// The same seed gives the same trace, traced or not; another seed another.
func TestDeterminism(t *testing.T) {
	for _, seed := range []uint64{7, 66, 127} {
		a, b := Run(Config{Seed: seed}), Run(Config{Seed: seed})
		var trace strings.Builder
		c := Run(Config{Seed: seed, Trace: &trace})
		if a.Hash != b.Hash || a.Hash != c.Hash || a.Steps != c.Steps {
			t.Fatalf("seed %d: trace hashes %016x, %016x and %016x (traced), steps %d and %d: want one run", seed, a.Hash, b.Hash, c.Hash, a.Steps, c.Steps)
		}
		if lines := strings.Count(trace.String(), "\n"); lines < 100 {
			t.Errorf("seed %d: got a trace of %d lines, want one line per noted step", seed, lines)
		}
	}
	if Run(Config{Seed: 7}).Hash == Run(Config{Seed: 8}).Hash {
		t.Fatal("seeds 7 and 8 gave the same trace hash")
	}
}

// Each defect, injected, is found from a kept seed, and the same seed is
// clean without it. The seeds depend on the simulator's draws: a change to
// the simulator moves them, so each is searched for from the kept seed on,
// up to searchSeeds further; past that, find it again with
// `go run ./cmd/narad-sim -seeds 50000 [-aim] -break NAME` and keep the new
// seed here.
func TestBreaksAreFound(t *testing.T) {
	const searchSeeds = 200
	for _, tc := range []struct {
		name   string
		seed   uint64
		aim    bool
		breaks Breaks
		// fanout runs the worlds with a child link (Config.Fanout).
		fanout bool
		// kinds are the violations the defect shows as: one must be found.
		kinds []string
	}{
		// The F3 fix reverted: a batch in flight through the freeze
		// becomes visible after the report, and the flip is at an HWM the
		// source has already passed.
		{"F3", 92, false, Breaks{F3: true}, false, []string{"'s hwm is", "lost on handover", "two committers"}},
		// The P4 fix reverted: a listing whose chunk reads failed does not
		// count, and the promote is below an HWM the source reported.
		{"P4", 212, false, Breaks{P4: true}, false, []string{"(rule P4)"}},
		// rule T1: a dead destination's target cleared at once.
		{"T1", 2, false, Breaks{T1: true}, false, []string{"(rule T1)"}},
		// rule F2: reported with leases out before the drain deadline.
		{"F2", 3, false, Breaks{F2: true}, false, []string{"(rule F2)"}},
		// rule F7 on the worker: the re-arm timer never armed.
		{"F7", 8, false, Breaks{F7: true}, false, []string{"rule F7"}},
		// Found by the simulator, fixed since (rule P2): a destination cut
		// off with a stale replica promoted a source that had been back in
		// between, on its own clock and its replica's old verdict.
		{"P2", 1313, false, Breaks{P2: true}, false, []string{"(rule P2)"}},
		// Found by the simulator, fixed since: a flip proposal delayed
		// past an abort and a re-plan to the same target committed for
		// the new move after the old worker released the freeze.
		// Since the freeze is two actors, the new move's prepare often
		// closes the gate again before the stale flip commits, and the
		// flip shows as one at an HWM the source has passed meanwhile.
		{"ABA", 42, true, Breaks{ABA: true}, false, []string{"freeze does not hold", "'s hwm is"}},
		// Found by the simulator, fixed since: a source cut off right
		// after the fence took commits once its freeze lapsed, past the
		// HWM of a flip its replica had not applied.
		{"Confirm", 216, true, Breaks{Confirm: true}, false, []string{"two committers", "lost on handover"}},
		// Found by the simulator, fixed since: the source crashed after
		// the fence and was back a moment later, its freeze gone, as the
		// flip committed (freeze.Reopen).
		{"Reopen", 3, true, Breaks{Reopen: true}, false, []string{"freeze does not hold", "two committers", "lost on handover"}},
		// Breaks.Holder (found by the simulator at seed 6176 before issue
		// 46, fixed since: the prepare of a move aborted while its
		// destination was cut off took over the freeze of the move that
		// had fenced and proposed its flip, then released it) is no longer
		// reached: no seed of 1..40,000, nor of 1..20,000 aimed, breaks
		// with it since moves stage before they freeze and fence straight
		// after the prepare. freeze's TestRuleF9APrepareOfAnotherDestinationNeverTakesAReportedFreezeOver
		// proves the rule; `task sim` can still be pointed at the break.
		// Issue 26, found by the bulk hand-off run, then here once the
		// simulator's installs waited for their batch as a bulk move's
		// do: a retry scheduled by a pass that failed while the source was
		// dead fired after the force-promote had asked for its install,
		// and asked for a second one of the same copy.
		{"Stale", 815, false, Breaks{Stale: true}, false, []string{"second install"}},
		// Issue 46: a copy staged before its freeze, then given the final
		// tail under it, installed as staged: the flip hands the partition
		// to a copy without the tail.
		{"Stage", 2, false, Breaks{Stage: true}, false, []string{"not in it"}},
		// The freeze's two mailboxes: a gate that lapses on a clock of its
		// own opens a TTL after its Close, under a freeze the freeze actor
		// renewed for a fenced flip.
		{"GateClock", 319, false, Breaks{GateClock: true}, false, []string{"freeze does not hold"}},
		// rule F9, broken in the production code this time: the mover's
		// effect code (mover.Effects, which the simulator runs as the
		// node does) takes the fence as accepted as soon as it is sent
		// (mover.Knobs.TrustFence), and installs and flips without the
		// source's word that its freeze still holds at the copy's HWM.
		{"F9_FenceUnanswered", 188, false, Breaks{F9: true}, false, []string{"freeze does not hold", "'s hwm is", "lost on handover", "two committers"}},
		// rules K8 and K6: the listing reads the fan-out cursor after the
		// HWM and the destination installs it unlowered, so the cursor
		// can name offsets the copy does not hold.
		{"K8_K6_CursorAfterHWM", 4, false, Breaks{CursorAfterHWM: true}, true, []string{"(rule K8)", "(rule K6)", "not fanned out"}},
		// rule K8: the destination anchors at the tail instead of the
		// shipped sidecar, skipping what the source had not fanned out.
		{"K8_CursorAtTail", 65, false, Breaks{CursorAtTail: true}, true, []string{"gap:", "not fanned out"}},
		// rule K9: a partition whose cursor file a crash tore resumes at
		// the tail, not the oldest offset, skipping what it had not
		// fanned out.
		{"K9_MissingCursorAtTail", 1614, false, Breaks{MissingCursorAtTail: true}, true, []string{"gap:", "not fanned out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := tc.seed; seed < tc.seed+searchSeeds; seed++ {
				r := Run(Config{Seed: seed, Aim: tc.aim, Breaks: tc.breaks, Fanout: tc.fanout})
				if r.Err == nil {
					continue
				}
				if !slices.ContainsFunc(tc.kinds, func(k string) bool { return strings.Contains(r.Err.Error(), k) }) {
					t.Fatalf("seed %d with break %s: got %v, want a violation containing one of %q", seed, tc.name, r.Err, tc.kinds)
				}
				if r := Run(Config{Seed: seed, Aim: tc.aim, Fanout: tc.fanout}); r.Err != nil {
					t.Fatalf("seed %d without the break: %v", seed, r.Err)
				}
				if seed != tc.seed {
					t.Logf("break %s found at seed %d, not at the kept seed %d: keep the new one", tc.name, seed, tc.seed)
				}
				return
			}
			t.Fatalf("break %s: no violation in seeds %d..%d (aim %v), want one of %q", tc.name, tc.seed, tc.seed+searchSeeds-1, tc.aim, tc.kinds)
		})
	}
}

// The aimed faults keep every invariant too.
func TestAimedSeedsHoldEveryInvariant(t *testing.T) {
	n := uint64(200)
	if testing.Short() {
		n = 30
	}
	for seed := uint64(1); seed <= n; seed++ {
		if r := Run(Config{Seed: seed, Aim: true}); r.Err != nil {
			t.Fatalf("%v\nreplay: go run ./cmd/narad-sim -seed %d -aim -trace", r.Err, seed)
		}
	}
}

func BenchmarkSeed(b *testing.B) {
	for i := range b.N {
		if r := Run(Config{Seed: uint64(i + 1)}); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

// Rules K8, K6 and K9 with every partition fanned out to a child: the
// cursor sidecars move with the partitions, and no committed record is
// skipped, at any step or once settled.
func TestFanoutSeedsHoldEveryInvariantK8K6K9(t *testing.T) {
	n := uint64(150)
	if testing.Short() {
		n = 40
	}
	var tot Stats
	for seed := uint64(1); seed <= n; seed++ {
		r := Run(Config{Seed: seed, Fanout: true})
		if r.Err != nil {
			t.Fatalf("%v\nreplay: sim.Run(sim.Config{Seed: %d, Fanout: true, Trace: os.Stdout})", r.Err, seed)
		}
		tot.add(r.Stats)
	}
	for _, c := range []struct {
		what string
		got  int
	}{
		{"fan-out copies", tot.FanoutCopies}, {"cursor sidecars installed", tot.CursorsInstalled},
		{"torn cursor files (rule K9's path)", tot.CursorsTorn},
		{"flips", tot.Flips}, {"crashes", tot.Crashes},
	} {
		if c.got == 0 {
			t.Errorf("%d fan-out seeds reached no %s: the faults miss that path", n, c.what)
		}
	}
	t.Logf("%d fan-out seeds: %+v", n, tot)
	if a, b := Run(Config{Seed: 7, Fanout: true}), Run(Config{Seed: 7, Fanout: true}); a.Hash != b.Hash {
		t.Errorf("seed 7 with fan-out: got trace hashes %016x and %016x, want one run", a.Hash, b.Hash)
	}
}

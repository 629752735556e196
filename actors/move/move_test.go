package move

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

var errNet = errors.New("no answer")

// run feeds events to a fresh move (or s) and returns the state and the
// effects of the last event.
type script struct {
	t   *testing.T
	c   Config
	s   State
	now time.Duration
	fx  []any
}

func newScript(t *testing.T) *script {
	return &script{t: t, c: DefaultConfig(), s: New()}
}

func (sc *script) at(now time.Duration) *script { sc.now = now; return sc }

func (sc *script) feed(ev any) *script {
	sc.t.Helper()
	sc.s, sc.fx = Step(sc.c, sc.s, sc.now, ev)
	return sc
}

// wantPhase fails unless the move is in phase p.
func (sc *script) wantPhase(p Phase) *script {
	sc.t.Helper()
	if sc.s.Phase != p {
		sc.t.Fatalf("phase: got %s, want %s (state %+v)", sc.s.Phase, p, sc.s)
	}
	return sc
}

// wantFx fails unless the last effects are exactly want, Log lines
// compared by level only.
func (sc *script) wantFx(want ...any) *script {
	sc.t.Helper()
	norm := func(fx []any) []any {
		out := make([]any, len(fx))
		for i, f := range fx {
			if l, ok := f.(Log); ok {
				f = Log{Level: l.Level}
			}
			out[i] = f
		}
		return out
	}
	if !reflect.DeepEqual(norm(sc.fx), norm(want)) {
		sc.t.Fatalf("effects: got %#v, want %#v", sc.fx, want)
	}
	return sc
}

func (sc *script) wantLog(level, substr string) *script {
	sc.t.Helper()
	for _, f := range sc.fx {
		if l, ok := f.(Log); ok && l.Level == level && strings.Contains(l.Msg, substr) {
			return sc
		}
	}
	sc.t.Fatalf("effects %#v: want a %s log containing %q", sc.fx, level, substr)
	return sc
}

const mib = 1 << 20

// toFinalize runs a move through one converging pass and the freeze.
func toFinalize(t *testing.T) *script {
	return newScript(t).feed(Start{}).wantFx(Fetch{}).
		feed(PassDone{Copied: 3 * mib, HWM: 100, CopiedTo: 100}).wantPhase(Freezing).wantFx(PrepareHandoff{}).
		feed(Frozen{Token: "tok", HWM: 104}).wantPhase(Finalize)
}

// toFlipping runs a move up to its flip proposal.
func toFlipping(t *testing.T) *script {
	return toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104, CopiedTo: 104}).
		feed(PassDone{Copied: 0, HWM: 104, CopiedTo: 104}).wantPhase(Verifying).
		feed(Verified{OK: true}).wantPhase(Fencing).
		feed(Fenced{}).wantPhase(Installing).
		feed(Installed{}).wantPhase(Flipping).wantFx(ProposeFlip{})
}

func TestRuleC1CatchUpCopiesWhileTheSourceServes(t *testing.T) {
	// Passes go on without any freeze while each copies more than 4 MiB
	// and keeps shrinking.
	sc := newScript(t).feed(Start{}).wantPhase(CatchUp).wantFx(Fetch{})
	for i, copied := range []int64{900 * mib, 300 * mib, 90 * mib, 20 * mib} {
		sc.feed(PassDone{Copied: copied, HWM: int64(1000 + i), CopiedTo: int64(990 + i)}).wantPhase(CatchUp).wantFx(Fetch{})
	}
}

func TestRuleC2CatchUpStopsOnceAPassCopies4MiBOrLess(t *testing.T) {
	newScript(t).feed(Start{}).
		feed(PassDone{Copied: 100 * mib, HWM: 10}).wantPhase(CatchUp).
		feed(PassDone{Copied: 4 * mib, HWM: 12}).wantPhase(Freezing).wantFx(PrepareHandoff{})
}

func TestRuleC3CatchUpFreezesAnywayAfter20PassesOr3WithoutProgress(t *testing.T) {
	t.Run("20 passes", func(t *testing.T) {
		sc := newScript(t).feed(Start{})
		copied := int64(2000 * mib)
		for range 19 {
			copied -= mib // shrinking, never small enough
			sc.feed(PassDone{Copied: copied}).wantPhase(CatchUp)
		}
		sc.feed(PassDone{Copied: copied - mib}).wantPhase(Freezing).wantLog("warn", "did not converge")
		if !sc.s.NonConverged || sc.s.Pass != 20 {
			t.Fatalf("got non-converged %v after %d passes, want true after 20", sc.s.NonConverged, sc.s.Pass)
		}
	})
	t.Run("3 passes without progress", func(t *testing.T) {
		newScript(t).feed(Start{}).
			feed(PassDone{Copied: 50 * mib}).wantPhase(CatchUp).
			feed(PassDone{Copied: 50 * mib}).wantPhase(CatchUp).
			feed(PassDone{Copied: 60 * mib}).wantPhase(CatchUp).
			feed(PassDone{Copied: 70 * mib}).wantPhase(Freezing).wantLog("warn", "did not converge")
	})
	t.Run("progress resets the count", func(t *testing.T) {
		newScript(t).feed(Start{}).
			feed(PassDone{Copied: 50 * mib}).
			feed(PassDone{Copied: 60 * mib}).
			feed(PassDone{Copied: 70 * mib}).
			feed(PassDone{Copied: 40 * mib}).wantPhase(CatchUp).
			feed(PassDone{Copied: 45 * mib}).wantPhase(CatchUp)
	})
}

func TestRuleP1AFailedPassKeepsTheSessionAndRetries(t *testing.T) {
	newScript(t).feed(Start{}).
		feed(PassDone{Copied: 100 * mib, HWM: 7, CopiedTo: 5}).
		feed(PassDone{Err: errNet}).wantPhase(CatchUp).wantFx(ScheduleRetry{After: time.Second}).
		feed(Retry{}).wantFx(Fetch{}).
		feed(PassDone{Copied: mib, HWM: 9, CopiedTo: 9}).wantPhase(Freezing)
}

func TestRuleF5AndF7TheFreezeTokenIsReArmedEveryQuarterTTL(t *testing.T) {
	sc := toFinalize(t).wantFx(Fetch{Final: true}, ScheduleRearm{After: 7500 * time.Millisecond})
	if sc.s.Token != "tok" || !sc.s.Fenceable || !sc.s.Frozen {
		t.Fatalf("after the freeze: got %+v, want token tok, fenceable, frozen", sc.s)
	}
	// The timer is independent of passes: it fires mid-pass and re-arms.
	sc.feed(RearmDue{}).wantPhase(Finalize).wantFx(Rearm{Token: "tok"}, ScheduleRearm{After: 7500 * time.Millisecond})
	sc.feed(Rearmed{}).wantPhase(Finalize).wantFx()
}

func TestRuleF8FinalizeStopsAfterTwoQuietPassesWithTheSameHWM(t *testing.T) {
	toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).wantPhase(Finalize).wantFx(Fetch{Final: true}).
		// Quiet again but the HWM moved: not final yet.
		feed(PassDone{Copied: 0, HWM: 105}).wantPhase(Finalize).wantFx(Fetch{Final: true}).
		feed(PassDone{Copied: 300, HWM: 105}).wantPhase(Finalize).
		feed(PassDone{Copied: 0, HWM: 105}).wantPhase(Finalize).
		feed(PassDone{Copied: 0, HWM: 105}).wantPhase(Verifying).wantFx(Verify{HWM: 105})
}

func TestRuleF9TheFenceComesRightBeforeTheInstall(t *testing.T) {
	toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: true}).wantPhase(Fencing).wantFx(Fence{Token: "tok", HWM: 104}).
		feed(Fenced{}).wantPhase(Installing).wantFx(Install{HWM: 104})
}

func TestRuleF10ARefusedFenceFreezesAgainAndDrainsAgain(t *testing.T) {
	sc := toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: true}).
		feed(Fenced{Refused: true}).wantPhase(Freezing).wantFx(PrepareHandoff{})
	sc.feed(Frozen{Token: "tok2", HWM: 110}).wantPhase(Finalize).
		feed(PassDone{Copied: 600, HWM: 110}).
		feed(PassDone{Copied: 0, HWM: 110}).
		feed(PassDone{Copied: 0, HWM: 110}).wantPhase(Verifying).
		feed(Verified{OK: true}).wantFx(Fence{Token: "tok2", HWM: 110})
}

func TestRuleF10ALapsedReArmDuringFinalizeFreezesAgain(t *testing.T) {
	toFinalize(t).feed(Rearmed{Lapsed: true}).wantPhase(Freezing).wantFx(PrepareHandoff{})
}

func TestRuleF11ASourceWithoutTokensIsNotFencedAndWarns(t *testing.T) {
	newScript(t).feed(Start{}).
		feed(PassDone{Copied: mib, HWM: 5}).
		feed(Frozen{HWM: 5}).wantPhase(Finalize).wantFx(Fetch{Final: true}).
		feed(RearmDue{}).wantFx().
		feed(PassDone{Copied: 0, HWM: 5}).
		feed(PassDone{Copied: 0, HWM: 5}).wantPhase(Verifying).
		feed(Verified{OK: true}).wantPhase(Installing).wantLog("warn", "no freeze token")
}

func TestRuleV3AFailedVerifyRecopiesFromScratchOnce(t *testing.T) {
	sc := toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: false}).wantPhase(CatchUp).wantFx(DiscardCopy{}, Fetch{})
	if sc.s.Pass != 0 || sc.s.CopiedTo != 0 || sc.s.Frozen {
		t.Fatalf("after a failed verify: got %+v, want a fresh copy (pass 0, nothing copied, not frozen)", sc.s)
	}
}

func TestRuleV4ASecondFailedVerifyBlocksWithoutFreezingAgain(t *testing.T) {
	sc := toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: false}).
		feed(PassDone{Copied: mib, HWM: 104, CopiedTo: 104}).
		feed(Frozen{Token: "t2", HWM: 104}).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: false}).wantPhase(Blocked).wantLog("error", "cannot be verified")
	if sc.s.BlockedReason != ReasonCopyUnverifiable {
		t.Fatalf("blocked reason: got %q, want %q", sc.s.BlockedReason, ReasonCopyUnverifiable)
	}
	// Nothing moves it any more: no freeze, no fetch.
	for _, ev := range []any{Retry{}, RearmDue{}, Start{}, SourceSeen{Dead: true, StampAge: time.Hour}} {
		if _, fx := Step(sc.c, sc.s, sc.now, ev); len(fx) != 0 {
			t.Fatalf("%T on a blocked move: got effects %#v, want none", ev, fx)
		}
	}
}

func TestRuleO3AFlipThatCommitsEndsTheMove(t *testing.T) {
	toFlipping(t).feed(FlipAnswered{Code: FlipOK}).wantPhase(Done).wantFx()
}

func TestRuleX6AFlipRefusedByTheLeaderEndsAndRemovesTheCopy(t *testing.T) {
	for _, code := range []FlipCode{FlipRefused, FlipNotFound} {
		toFlipping(t).feed(FlipAnswered{Code: code}).wantPhase(Ended).wantFx(RenameBack{}, RemoveStaging{})
	}
}

func TestRuleX1AnUnknownFlipKeepsTheInstallAndAsksTheLeader(t *testing.T) {
	sc := toFlipping(t).at(time.Minute).feed(FlipAnswered{Err: errNet}).wantPhase(Resolving).wantFx(ReadLeader{})
	if !sc.s.Installed || !sc.s.Unknown || sc.s.FirstUnknown != time.Minute {
		t.Fatalf("after an unknown flip: got %+v, want installed, unknown since 1m", sc.s)
	}
}

func TestRuleX3TheLeaderSaysItCommitted(t *testing.T) {
	toFlipping(t).feed(FlipAnswered{Err: errNet}).
		feed(LeaderRead{Found: true, Owner: Self}).wantPhase(Done).wantFx()
}

func TestRuleX3StillProposableIsProposedAgainUnderTheFence(t *testing.T) {
	toFlipping(t).at(time.Minute).feed(FlipAnswered{Err: errNet}).
		at(time.Minute + time.Second).
		feed(LeaderRead{StartedAt: time.Minute + time.Second, Found: true, Owner: Source, Target: Self}).
		wantPhase(Fencing).wantFx(Fence{Token: "tok", HWM: 104}).
		feed(Fenced{}).wantPhase(Flipping).wantFx(ProposeFlip{}).
		feed(FlipAnswered{Code: FlipOK}).wantPhase(Done)
}

func TestRuleX3NoReProposalPastTwoMinutes(t *testing.T) {
	// Past 2 minutes the move stops proposing and lets the freeze lapse;
	// this read started long after the unknown proposal, so it also
	// settles that nothing committed, and the move resumes (rule X7).
	sc := toFlipping(t).at(0).feed(FlipAnswered{Err: errNet}).
		at(2*time.Minute).
		feed(LeaderRead{StartedAt: 2 * time.Minute, Found: true, Owner: Source, Target: Self}).
		wantPhase(CatchUp).wantFx(RenameBack{}, Fetch{})
	if sc.s.Frozen {
		t.Fatal("past 2 minutes: got the freeze kept, want it let lapse")
	}
}

func TestRuleX5TheCopyLeavesThePathOnlyAfterASettledLeaderRead(t *testing.T) {
	// Unknown at 10s; a read started at 20s is too early to prove
	// anything; one started at 25s (15 s after) counts.
	toFlipping(t).at(10*time.Second).feed(FlipAnswered{Err: errNet}).
		at(20*time.Second).
		feed(LeaderRead{StartedAt: 20 * time.Second, Found: true, Owner: "n7", Target: ""}).
		wantPhase(Resolving).wantFx(ScheduleRetry{After: time.Second}).
		feed(Retry{}).wantFx(ReadLeader{}).
		at(25*time.Second).
		feed(LeaderRead{StartedAt: 25 * time.Second, Found: true, Owner: "n7", Target: ""}).
		wantPhase(Ended).wantFx(RenameBack{}, RemoveStaging{})
}

func TestRuleX5ARefusedReProposalStillWaitsForTheEarlierUnknownOne(t *testing.T) {
	// The first proposal's outcome is unknown; a later one is refused. The
	// first may still have committed, so the leader decides.
	toFlipping(t).at(time.Second).feed(FlipAnswered{Err: errNet}).
		feed(LeaderRead{StartedAt: time.Second, Found: true, Owner: Source, Target: Self}).
		feed(Fenced{}).
		feed(FlipAnswered{Code: FlipRefused}).wantPhase(Resolving).wantFx(ReadLeader{})
}

func TestRuleX7NoLongerProposableResumesFromTheStagedCopy(t *testing.T) {
	// The fence after the unknown flip finds the freeze gone: no flip, and
	// once a settled read confirms nothing committed, the copy comes off
	// the path and the same move copies again (fetching what it lacks).
	sc := toFlipping(t).at(0).feed(FlipAnswered{Err: errNet}).
		feed(LeaderRead{StartedAt: 0, Found: true, Owner: Source, Target: Self}).wantPhase(Fencing).
		feed(Fenced{Refused: true}).wantPhase(Resolving).wantFx(ReadLeader{}).
		at(time.Second).
		feed(LeaderRead{StartedAt: time.Second, Found: true, Owner: Source, Target: Self}).
		wantFx(ScheduleRetry{After: time.Second}).
		at(16*time.Second).
		feed(LeaderRead{StartedAt: 16 * time.Second, Found: true, Owner: Source, Target: Self}).
		wantPhase(CatchUp).wantFx(RenameBack{}, Fetch{})
	if sc.s.Installed || sc.s.CopiedTo != 104 {
		t.Fatalf("resumed: got %+v, want not installed, the staged copy kept (next offset 104)", sc.s)
	}
}

func TestRuleX8AnAnswerThatIsNotALeaderReadNeverUndoesAFlip(t *testing.T) {
	toFlipping(t).at(0).feed(FlipAnswered{Err: errNet}).
		at(time.Hour).
		feed(LeaderRead{StartedAt: time.Hour, Found: true, Owner: "n7", NotLeaderRead: true}).
		wantPhase(Resolving).wantFx(ScheduleRetry{After: time.Second}).
		feed(LeaderRead{StartedAt: time.Hour, Err: errNet}).
		wantPhase(Resolving).wantFx(ScheduleRetry{After: time.Second}).
		// ...but it may confirm one.
		feed(LeaderRead{StartedAt: time.Hour, Found: true, Owner: Self, NotLeaderRead: true}).wantPhase(Done)
}

func TestRuleF9ALapseDuringTheInstallIsFencedAgainBeforeTheFlip(t *testing.T) {
	toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: true}).
		feed(Fenced{}).wantPhase(Installing).
		feed(Rearmed{Lapsed: true}).
		feed(Installed{}).wantPhase(Fencing).wantFx(Fence{Token: "tok", HWM: 104}).
		feed(Fenced{Refused: true}).wantPhase(Resolving)
}

// sourceDead runs a move with a copy at copiedTo of a source at hwm, then
// the source dies at 0 and is seen dead at each of the times.
func sourceDead(t *testing.T, copiedTo, hwm int64) *script {
	return newScript(t).feed(Start{}).
		feed(PassDone{Copied: 500 * mib, HWM: hwm, CopiedTo: copiedTo}).wantPhase(CatchUp).
		at(0).feed(SourceSeen{Dead: true, StampAge: 5 * time.Minute})
}

func TestRuleP2PromoteOnlyAfterTwoMinutesByBothClocks(t *testing.T) {
	// The leader's stamp is old at once (a leaderless period); the
	// worker's own clock still has to run 2 minutes.
	sc := sourceDead(t, 100, 100).wantPhase(CatchUp).wantFx().
		at(119 * time.Second).feed(SourceSeen{Dead: true, StampAge: 5 * time.Minute}).wantPhase(CatchUp).wantFx()
	// Alive again restarts the worker's clock.
	sc.at(119 * time.Second).feed(SourceSeen{Dead: false}).
		at(130 * time.Second).feed(SourceSeen{Dead: true, StampAge: 5 * time.Minute}).
		at(249 * time.Second).feed(SourceSeen{Dead: true, StampAge: 5 * time.Minute}).wantPhase(CatchUp).
		at(250 * time.Second).feed(SourceSeen{Dead: true, StampAge: 5 * time.Minute}).wantPhase(Verifying)
	// The worker's clock alone is not enough either.
	sourceDead(t, 100, 100).at(10 * time.Minute).feed(SourceSeen{Dead: true, StampAge: time.Minute}).wantPhase(CatchUp)
}

func TestRuleP3NoPromoteWithoutEverReachingTheSource(t *testing.T) {
	newScript(t).feed(Start{}).
		feed(PassDone{Err: errNet}).
		at(0).feed(SourceSeen{Dead: true, StampAge: time.Hour}).
		at(time.Hour).feed(SourceSeen{Dead: true, StampAge: time.Hour}).wantPhase(CatchUp).wantFx()
}

func TestRuleP4ACopyBehindTheLastHWMWaitsAndSaysSoOncePerDeath(t *testing.T) {
	sc := sourceDead(t, 90, 100).
		at(3*time.Minute).feed(SourceSeen{Dead: true, StampAge: 5 * time.Minute}).wantPhase(CatchUp).
		wantLog("error", "cannot force-promote")
	if fmt.Sprint(sc.fx[1]) != fmt.Sprint(Block{Reason: ReasonSourceDeadCopyBehind}) {
		t.Fatalf("effects: got %#v, want the move counted as %s", sc.fx, ReasonSourceDeadCopyBehind)
	}
	sc.at(4 * time.Minute).feed(SourceSeen{Dead: true, StampAge: 6 * time.Minute}).wantFx()
	// The source returns: unblocked; dies again: said again.
	sc.feed(SourceSeen{Dead: false}).wantFx(Unblock{Reason: ReasonSourceDeadCopyBehind}).
		at(5*time.Minute).feed(SourceSeen{Dead: true, StampAge: 3 * time.Minute}).
		at(8*time.Minute).feed(SourceSeen{Dead: true, StampAge: 6 * time.Minute}).wantLog("error", "cannot force-promote")
}

func TestRuleP5APromoteSkipsTheFreezeAndInstallsAtTheKnownHWM(t *testing.T) {
	sourceDead(t, 100, 100).
		at(2*time.Minute).feed(SourceSeen{Dead: true, StampAge: 5 * time.Minute}).
		wantPhase(Verifying).wantLog("warn", "force-promoting").
		feed(Verified{OK: true}).wantPhase(Installing).wantFx(Install{HWM: 100, Force: true}).
		feed(Installed{}).wantPhase(Flipping).wantFx(ProposeFlip{}).
		feed(FlipAnswered{Code: FlipOK}).wantPhase(Done)
}

func TestEventsOutOfPhaseAreIgnored(t *testing.T) {
	sc := newScript(t).feed(Start{})
	before := sc.s
	for _, ev := range []any{Frozen{Token: "x"}, Fenced{}, Verified{OK: true}, Installed{}, FlipAnswered{}, LeaderRead{Found: true, Owner: Self}, RearmDue{}} {
		if s, fx := Step(sc.c, sc.s, 0, ev); !reflect.DeepEqual(s, before) || len(fx) != 0 {
			t.Fatalf("%T during catch-up: got %+v and %#v, want nothing to change", ev, s, fx)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"CatchUpStopBytes": func(c *Config) { c.CatchUpStopBytes = -1 },
		"MaxCatchUpPasses": func(c *Config) { c.MaxCatchUpPasses = 0 },
		"FreezeTTL":        func(c *Config) { c.FreezeTTL = time.Millisecond },
		"RetryAfter":       func(c *Config) { c.RetryAfter = 0 },
	} {
		c := DefaultConfig()
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s out of range: got nil, want an error", name)
		}
	}
}

// BenchmarkStepAWholeMove runs a move from start to flip: the cost of the
// decisions alone, against which the worker's I/O is measured.
func BenchmarkStepAWholeMove(b *testing.B) {
	c := DefaultConfig()
	events := []any{Start{}, PassDone{Copied: 100 * mib, HWM: 90, CopiedTo: 90}, PassDone{Copied: mib, HWM: 100, CopiedTo: 100},
		Frozen{Token: "t", HWM: 101}, PassDone{Copied: 10, HWM: 101, CopiedTo: 101}, PassDone{HWM: 101, CopiedTo: 101},
		PassDone{HWM: 101, CopiedTo: 101}, Verified{OK: true}, Fenced{}, Installed{}, FlipAnswered{Code: FlipOK}}
	for b.Loop() {
		s := New()
		for _, ev := range events {
			s, _ = Step(c, s, 0, ev)
		}
		if s.Phase != Done {
			b.Fatalf("got phase %s, want done", s.Phase)
		}
	}
}

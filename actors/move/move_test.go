package move

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
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
	sc.s, sc.fx = Step(sc.c, sc.s, sc.now, current(sc.s, ev))
	return sc
}

// current gives an outcome that names no attempt the current one, and a
// re-arm event that names no token the freeze held: the answer to what the
// move asked last, as a worker that runs one request at a time delivers
// it. A test that feeds a stale answer names its attempt or token.
func current(s State, ev any) any {
	switch e := ev.(type) {
	case PassDone:
		if e.Attempt == 0 {
			e.Attempt = s.Attempt
		}
		return e
	case Frozen:
		if e.Attempt == 0 {
			e.Attempt = s.Attempt
		}
		return e
	case Fenced:
		if e.Attempt == 0 {
			e.Attempt = s.Attempt
		}
		return e
	case Verified:
		if e.Attempt == 0 {
			e.Attempt = s.Attempt
		}
		return e
	case Staged:
		if e.Attempt == 0 {
			e.Attempt = s.Attempt
		}
		return e
	case Installed:
		if e.Attempt == 0 {
			e.Attempt = s.Attempt
		}
		return e
	case FlipAnswered:
		if e.Attempt == 0 {
			e.Attempt = s.Attempt
		}
		return e
	case LeaderRead:
		if e.Attempt == 0 {
			e.Attempt = s.Attempt
		}
		return e
	case Retry:
		if e.Attempt == 0 {
			e.Attempt = s.Attempt
		}
		return e
	case RearmDue:
		if e.Token == "" {
			e.Token = s.Token
		}
		return e
	case Rearmed:
		if e.Token == "" {
			e.Token = s.Token
		}
		return e
	}
	return ev
}

// unstamped is an effect without the attempt or token Step stamps on it,
// for comparing effects by what they ask.
func unstamped(f any) any {
	switch e := f.(type) {
	case Log:
		return Log{Level: e.Level}
	case Fetch:
		e.Attempt = 0
		return e
	case PrepareHandoff:
		return PrepareHandoff{}
	case Fence:
		e.Attempt = 0
		return e
	case Verify:
		e.Attempt = 0
		return e
	case Install:
		e.Attempt = 0
		return e
	case Stage:
		e.Attempt = 0
		return e
	case ProposeFlip:
		return ProposeFlip{}
	case ReadLeader:
		return ReadLeader{}
	case ScheduleRetry:
		e.Attempt = 0
		return e
	case ScheduleRearm:
		e.Token = ""
		return e
	}
	return f
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
// compared by level only and requests without the attempt and token Step
// stamps on them (a test that checks them reads sc.fx).
func (sc *script) wantFx(want ...any) *script {
	sc.t.Helper()
	norm := func(fx []any) []any {
		out := make([]any, len(fx))
		for i, f := range fx {
			out[i] = unstamped(f)
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
		feed(PassDone{Copied: 3 * mib, HWM: 100, CopiedTo: 100}).wantPhase(Staging).wantFx(Stage{HWM: 100}).
		// issue 46: the staged copy goes to the path before the freeze.
		feed(Staged{OK: true}).wantPhase(Placing).wantFx(Install{HWM: 100}).feed(Installed{}).wantPhase(Freezing).wantFx(PrepareHandoff{}).
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
		feed(PassDone{Copied: 4 * mib, HWM: 12}).wantPhase(Staging).feed(Staged{OK: true}).wantPhase(Placing).feed(Installed{}).wantPhase(Freezing).wantFx(PrepareHandoff{})
}

func TestRuleC3CatchUpFreezesAnywayAfter20PassesOr3WithoutProgress(t *testing.T) {
	t.Run("20 passes", func(t *testing.T) {
		sc := newScript(t).feed(Start{})
		copied := int64(2000 * mib)
		for range 19 {
			copied -= mib // shrinking, never small enough
			sc.feed(PassDone{Copied: copied}).wantPhase(CatchUp)
		}
		sc.feed(PassDone{Copied: copied - mib}).wantPhase(Staging).wantLog("warn", "did not converge").feed(Staged{OK: true}).wantPhase(Placing).feed(Installed{}).wantPhase(Freezing)
		if !sc.s.NonConverged || sc.s.Pass != 20 {
			t.Fatalf("got non-converged %v after %d passes, want true after 20", sc.s.NonConverged, sc.s.Pass)
		}
	})
	t.Run("3 passes without progress", func(t *testing.T) {
		newScript(t).feed(Start{}).
			feed(PassDone{Copied: 50 * mib}).wantPhase(CatchUp).
			feed(PassDone{Copied: 50 * mib}).wantPhase(CatchUp).
			feed(PassDone{Copied: 60 * mib}).wantPhase(CatchUp).
			feed(PassDone{Copied: 70 * mib}).wantPhase(Staging).wantLog("warn", "did not converge").feed(Staged{OK: true}).wantPhase(Placing).feed(Installed{}).wantPhase(Freezing)
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
		feed(PassDone{Copied: mib, HWM: 9, CopiedTo: 9}).wantPhase(Staging).feed(Staged{OK: true}).wantPhase(Placing).feed(Installed{}).wantPhase(Freezing)
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
	// The prepare's listing is the first pass; quiet, the fence is the
	// second: it is accepted only while the source's HWM is the copy's,
	// and nothing comes between it and the install.
	toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).wantPhase(Verifying).wantFx(Verify{HWM: 104}).
		feed(Verified{OK: true}).wantPhase(Fencing).wantFx(Fence{Token: "tok", HWM: 104}).
		feed(Fenced{}).wantPhase(Installing).wantFx(Install{HWM: 104})
	// A pass that copied a tail is not quiet: another listing follows.
	toFinalize(t).
		feed(PassDone{Copied: 300, HWM: 105}).wantPhase(Finalize).wantFx(Fetch{Final: true}).
		feed(PassDone{Copied: 0, HWM: 105}).wantPhase(Verifying).wantFx(Verify{HWM: 105})
	// A fence that finds another HWM is refused: it is no quiet pass, and
	// the move freezes and drains again (rule F10).
	toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: true}).
		feed(Fenced{Refused: true}).wantPhase(Freezing).wantFx(PrepareHandoff{})
	// Without a fence (a source without tokens, rule F11), two listings:
	// quiet again but the HWM moved is not final yet.
	newScript(t).feed(Start{}).
		feed(PassDone{Copied: mib, HWM: 5, CopiedTo: 5}).
		feed(Staged{OK: true}).feed(Installed{}).
		feed(Frozen{HWM: 5}).
		feed(PassDone{Copied: 0, HWM: 5}).wantPhase(Finalize).wantFx(Fetch{Final: true}).
		feed(PassDone{Copied: 0, HWM: 6}).wantPhase(Finalize).wantFx(Fetch{Final: true}).
		feed(PassDone{Copied: 0, HWM: 6}).wantPhase(Verifying).wantFx(Verify{HWM: 6})
}

func TestRuleF9TheFenceComesRightBeforeTheInstall(t *testing.T) {
	toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: true}).wantPhase(Fencing).wantFx(Fence{Token: "tok", HWM: 104}).
		feed(Fenced{}).wantPhase(Installing).wantFx(Install{HWM: 104})
}

func TestRuleF10ARefusedFenceFreezesAgainAndDrainsAgain(t *testing.T) {
	sc := toFinalize(t).
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
		feed(Staged{OK: true}).feed(Installed{}).
		feed(Frozen{HWM: 5}).wantPhase(Finalize).wantFx(Fetch{Final: true}).
		feed(RearmDue{}).wantFx().
		feed(PassDone{Copied: 0, HWM: 5}).
		feed(PassDone{Copied: 0, HWM: 5}).wantPhase(Verifying).
		feed(Verified{OK: true}).wantPhase(Installing).wantLog("warn", "no freeze token")
}

// rule V4: a worker that starts again (a restart, or a respawn after its
// supervisor gave up) with the two failed verifies its runner carried
// blocks at once: the source is never frozen again for this move. One
// failure carried still copies, and blocks at the next.
func TestRuleV4TheVerifyCountOutlivesTheWorker(t *testing.T) {
	s := New()
	s.VerifyFailures = 2
	s, fx := Step(DefaultConfig(), s, 0, Start{})
	if s.Phase != Blocked || s.BlockedReason != ReasonCopyUnverifiable {
		t.Fatalf("start with 2 failed verifies: got phase %s (%q), want blocked as copy unverifiable", s.Phase, s.BlockedReason)
	}
	for _, f := range fx {
		switch f.(type) {
		case Fetch, PrepareHandoff:
			t.Fatalf("start with 2 failed verifies: got effect %#v, want no copy and no freeze", f)
		}
	}
	s = New()
	s.VerifyFailures = 1
	if s, _ = Step(DefaultConfig(), s, 0, Start{}); s.Phase != CatchUp {
		t.Fatalf("start with 1 failed verify: got phase %s, want catch-up", s.Phase)
	}
}

func TestRuleV3AFailedVerifyRecopiesFromScratchOnce(t *testing.T) {
	sc := toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: false}).wantPhase(CatchUp).wantFx(DiscardCopy{}, Fetch{})
	if sc.s.Pass != 0 || sc.s.CopiedTo != 0 || sc.s.Frozen {
		t.Fatalf("after a failed verify: got %+v, want a fresh copy (pass 0, nothing copied, not frozen)", sc.s)
	}
}

func TestRuleV4ASecondFailedVerifyBlocksWithoutFreezingAgain(t *testing.T) {
	sc := toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: false}).
		feed(PassDone{Copied: mib, HWM: 104, CopiedTo: 104}).
		feed(Staged{OK: true}).feed(Installed{}).
		feed(Frozen{Token: "t2", HWM: 104}).
		feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: false}).wantPhase(Blocked).wantLog("error", "cannot be verified")
	if sc.s.BlockedReason != ReasonCopyUnverifiable {
		t.Fatalf("blocked reason: got %q, want %q", sc.s.BlockedReason, ReasonCopyUnverifiable)
	}
	// Nothing moves it any more: no freeze, no fetch.
	for _, ev := range []any{Retry{}, RearmDue{}, Start{}, SourceSeen{Dead: true, Leader: true, StampAge: time.Hour}} {
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
		feed(Fenced{SentAt: time.Minute + time.Second}).wantPhase(Flipping).wantFx(ProposeFlip{}).
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
		feed(Verified{OK: true}).
		feed(Fenced{}).wantPhase(Installing).
		feed(Rearmed{Lapsed: true}).
		feed(Installed{}).wantPhase(Fencing).wantFx(Fence{Token: "tok", HWM: 104}).
		feed(Fenced{Refused: true}).wantPhase(Resolving)
}

// rule F7: only a renewal the source answered counts: the handoff, a
// re-arm or a fence answered OK moves RenewedAt to when it was sent (never
// back); a re-arm without an answer, or refused, does not.
func TestRuleF7OnlyAnAnsweredReArmRenewsTheFreeze(t *testing.T) {
	sc := newScript(t).feed(Start{}).
		feed(PassDone{Copied: mib, HWM: 100, CopiedTo: 100}).
		feed(Staged{OK: true}).feed(Installed{}).
		at(2 * time.Second).feed(Frozen{Token: "tok", HWM: 100, SentAt: time.Second})
	if sc.s.RenewedAt != time.Second {
		t.Fatalf("after the handoff sent at 1s: got renewed at %s, want 1s", sc.s.RenewedAt)
	}
	for _, step := range []struct {
		ev   any
		want time.Duration
	}{
		{Rearmed{SentAt: 9 * time.Second}, 9 * time.Second},
		{Rearmed{SentAt: 17 * time.Second, Err: errNet}, 9 * time.Second},
		{Rearmed{SentAt: 5 * time.Second}, 9 * time.Second}, // a late answer to an older one
		{Rearmed{SentAt: 24 * time.Second}, 24 * time.Second},
	} {
		sc.feed(step.ev)
		if sc.s.RenewedAt != step.want || !sc.s.Frozen {
			t.Fatalf("after %+v: got renewed at %s (frozen %v), want %s, frozen", step.ev, sc.s.RenewedAt, sc.s.Frozen, step.want)
		}
	}
	if sc.feed(Rearmed{SentAt: 30 * time.Second, Lapsed: true}); sc.s.RenewedAt != 24*time.Second {
		t.Fatalf("after a refused re-arm: got renewed at %s, want 24s", sc.s.RenewedAt)
	}
}

// rules F7, F9: no install and no flip on a freeze that may have lapsed.
// The source's freeze holds at least FreezeTTL past the send of the last
// renewal it answered; an install decided on a fence, and every flip
// proposal, needs a quarter of the TTL to spare (now < renewed + 22.5s
// with the default 30s), else the fence goes first. A force-promote has no
// freeze (P5) and a source without tokens no fence (F11).
func TestRuleF9NoInstallOrFlipOnAFreezeThatMayHaveLapsed(t *testing.T) {
	const margin = 22500 * time.Millisecond // FreezeTTL - FreezeTTL/4
	// verified runs a move to the fence before its install, the freeze
	// armed by a handoff sent at 0.
	verified := func(t *testing.T) *script {
		return toFinalize(t).
			feed(PassDone{Copied: 0, HWM: 104, CopiedTo: 104}).
			feed(Verified{OK: true}).wantPhase(Fencing)
	}
	// installing runs a move to its install, fenced at 0.
	installing := func(t *testing.T) *script {
		return verified(t).feed(Fenced{}).wantPhase(Installing)
	}
	fence := Fence{Token: "tok", HWM: 104}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"a fence answered in time installs", func(t *testing.T) {
			verified(t).at(time.Second + margin - 1).feed(Fenced{SentAt: time.Second}).wantPhase(Installing).wantFx(Install{HWM: 104})
		}},
		{"a fence answered too late is sent again before the install", func(t *testing.T) {
			verified(t).at(time.Second + margin).feed(Fenced{SentAt: time.Second}).wantPhase(Fencing).wantFx(fence).
				at(24 * time.Second).feed(Fenced{SentAt: 23500 * time.Millisecond}).wantPhase(Installing).wantFx(Install{HWM: 104})
		}},
		{"re-arms without an answer: fenced again before the first flip", func(t *testing.T) {
			installing(t).
				at(7500 * time.Millisecond).feed(Rearmed{SentAt: 7500 * time.Millisecond, Err: errNet}).
				at(15 * time.Second).feed(Rearmed{SentAt: 15 * time.Second, Err: errNet}).
				at(margin).feed(Installed{}).wantPhase(Fencing).wantFx(fence).
				// The source was cut off past the TTL: its freeze lapsed.
				feed(Fenced{Refused: true, SentAt: margin}).wantPhase(Resolving).wantFx(ReadLeader{})
		}},
		{"re-arms without an answer, then the fence renews: flipped", func(t *testing.T) {
			installing(t).
				at(15 * time.Second).feed(Rearmed{SentAt: 15 * time.Second, Err: errNet}).
				at(25 * time.Second).feed(Installed{}).wantPhase(Fencing).wantFx(fence).
				at(26 * time.Second).feed(Fenced{SentAt: 25 * time.Second}).wantPhase(Flipping).wantFx(ProposeFlip{})
		}},
		{"answered re-arms keep it fresh: flipped at once", func(t *testing.T) {
			installing(t).
				feed(Rearmed{SentAt: 7500 * time.Millisecond}).
				feed(Rearmed{SentAt: 15 * time.Second}).
				at(15*time.Second + margin - 1).feed(Installed{}).wantPhase(Flipping).wantFx(ProposeFlip{})
		}},
		{"a re-proposal answered too late is fenced again", func(t *testing.T) {
			toFlipping(t).at(time.Minute).feed(FlipAnswered{Err: errNet}).
				feed(LeaderRead{StartedAt: time.Minute, Found: true, Owner: Source, Target: Self}).wantPhase(Fencing).wantFx(fence).
				at(time.Minute + margin).feed(Fenced{SentAt: time.Minute}).wantPhase(Fencing).wantFx(fence).
				feed(Fenced{SentAt: time.Minute + margin}).wantPhase(Flipping).wantFx(ProposeFlip{})
		}},
		{"not for a force-promote", func(t *testing.T) {
			// Frozen with a token at 0, then the source dies.
			toFinalize(t).
				feed(PassDone{Copied: 40, HWM: 104, CopiedTo: 104}).lost().
				at(0).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).
				at(2 * time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).wantPhase(Verifying).
				feed(Verified{OK: true}).wantFx(Install{HWM: 104, Force: true}).
				at(time.Hour).feed(Installed{}).wantPhase(Flipping).wantFx(ProposeFlip{})
		}},
		{"not for a source without tokens", func(t *testing.T) {
			newScript(t).feed(Start{}).
				feed(PassDone{Copied: mib, HWM: 5, CopiedTo: 5}).
				feed(Staged{OK: true}).feed(Installed{}).
				feed(Frozen{HWM: 5}).
				feed(PassDone{Copied: 0, HWM: 5, CopiedTo: 5}).
				feed(PassDone{Copied: 0, HWM: 5, CopiedTo: 5}).
				feed(Verified{OK: true}).wantPhase(Installing).
				at(time.Hour).feed(Installed{}).wantPhase(Flipping).wantFx(ProposeFlip{})
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}

// sourceDead runs a move with a copy at copiedTo of a source at hwm, then
// the source dies at 0 (the next pass finds it gone) and is seen dead at
// each of the times.
func sourceDead(t *testing.T, copiedTo, hwm int64) *script {
	return newScript(t).feed(Start{}).
		feed(PassDone{Copied: 500 * mib, HWM: hwm, CopiedTo: copiedTo}).wantPhase(CatchUp).
		feed(PassDone{Err: errNet}).
		at(0).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute})
}

// lost fails the request a script left on its way to the source: the
// source died (rules P2, P4: no promote while a listing or a prepare may
// still bring an HWM back).
func (sc *script) lost() *script {
	if !sc.s.Asking {
		return sc
	}
	if sc.s.Phase == Freezing {
		return sc.feed(Frozen{Err: errNet})
	}
	return sc.feed(PassDone{Err: errNet})
}

func TestRuleP2PromoteOnlyAfterTwoMinutesByBothClocks(t *testing.T) {
	// The leader's stamp is old at once (a leaderless period); the
	// worker's own clock still has to run 2 minutes.
	sc := sourceDead(t, 100, 100).wantPhase(CatchUp).wantFx().
		at(119 * time.Second).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).wantPhase(CatchUp).wantFx()
	// Alive again restarts the worker's clock.
	sc.at(119 * time.Second).feed(SourceSeen{Dead: false}).
		at(130 * time.Second).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).
		at(249 * time.Second).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).wantPhase(CatchUp).
		at(250 * time.Second).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).wantPhase(Verifying)
	// The worker's clock alone is not enough either.
	sourceDead(t, 100, 100).at(10 * time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: time.Minute}).wantPhase(CatchUp)
}

// rule P2: the leader's stamp counts from exactly ForcePromoteAfter: a
// stamp that old, with the worker's own clock as far, promotes; a stamp a
// moment younger does not.
func TestRuleP2TheLeadersStampCountsFromExactlyForcePromoteAfter(t *testing.T) {
	sourceDead(t, 100, 100).
		at(10*time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 2*time.Minute - 1}).wantPhase(CatchUp).
		feed(SourceSeen{Dead: true, Leader: true, StampAge: 2 * time.Minute}).wantPhase(Verifying).wantFx(Log{Level: "warn"}, Verify{HWM: 100})
}

// rule P2: the gate runs while the move copies or asks for the freeze;
// while a verify, an install or a flip is in flight it waits, so no second
// verify is started under one already running and an install is never
// promoted under itself.
func TestRuleP2ThePromoteGateRunsOnlyBeforeTheDrainEnds(t *testing.T) {
	dead := func(sc *script) *script {
		return sc.at(0).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).
			at(3 * time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute})
	}
	t.Run("asking for the freeze", func(t *testing.T) {
		sc := newScript(t).feed(Start{}).feed(PassDone{Copied: mib, HWM: 100, CopiedTo: 100}).wantPhase(Staging).feed(Staged{OK: true}).wantPhase(Placing).feed(Installed{}).wantPhase(Freezing).lost()
		dead(sc).wantPhase(Verifying).wantFx(Log{Level: "warn"}, Verify{HWM: 100})
	})
	for _, phase := range []Phase{Verifying, Installing, Flipping} {
		t.Run("while "+phase.String(), func(t *testing.T) {
			sc := toFinalize(t).
				feed(PassDone{Copied: 4, HWM: 104, CopiedTo: 104}).
				feed(PassDone{Copied: 0, HWM: 104, CopiedTo: 104}).
				feed(PassDone{Copied: 0, HWM: 104, CopiedTo: 104}).wantPhase(Verifying)
			for _, ev := range []any{Verified{OK: true}, Fenced{}, Installed{}} {
				if sc.s.Phase == phase {
					break
				}
				sc.feed(ev)
			}
			dead(sc.wantPhase(phase)).wantPhase(phase).wantFx()
		})
	}
}

func TestRuleP3NoPromoteWithoutEverReachingTheSource(t *testing.T) {
	newScript(t).feed(Start{}).
		feed(PassDone{Err: errNet}).
		at(0).feed(SourceSeen{Dead: true, Leader: true, StampAge: time.Hour}).
		at(time.Hour).feed(SourceSeen{Dead: true, Leader: true, StampAge: time.Hour}).wantPhase(CatchUp).wantFx()
}

func TestRuleP4ACopyBehindTheLastHWMWaitsAndSaysSoOncePerDeath(t *testing.T) {
	sc := sourceDead(t, 90, 100).
		at(3*time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).wantPhase(CatchUp).
		wantLog("error", "cannot force-promote")
	if fmt.Sprint(sc.fx[1]) != fmt.Sprint(Block{Reason: ReasonSourceDeadCopyBehind}) {
		t.Fatalf("effects: got %#v, want the move counted as %s", sc.fx, ReasonSourceDeadCopyBehind)
	}
	sc.at(4 * time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 6 * time.Minute}).wantFx()
	// The source returns: unblocked; dies again: said again.
	sc.feed(SourceSeen{Dead: false}).wantFx(Unblock{Reason: ReasonSourceDeadCopyBehind}).
		at(5*time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 3 * time.Minute}).
		at(8*time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 6 * time.Minute}).wantLog("error", "cannot force-promote")
}

// rule P4: the HWM the copy must reach before a force-promote is the
// highest any listing reported: a pass whose chunks failed still counts,
// and so does PrepareHandoff's answer; a later, lower one never lowers it.
func TestRuleP4TheCopyMustReachTheHighestHWMAnyListingReported(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []any
		// promoteAt is the HWM of the promote; 0: none, the move waits and
		// says so with copiedTo and knownHWM.
		promoteAt, copiedTo, knownHWM int64
	}{
		{name: "a listing whose chunks failed",
			events:   []any{PassDone{Copied: 500 * mib, HWM: 100, CopiedTo: 100}, PassDone{Listed: true, HWM: 150, Err: errNet}},
			copiedTo: 100, knownHWM: 150},
		{name: "a failed pass without a listing",
			events:    []any{PassDone{Copied: 500 * mib, HWM: 100, CopiedTo: 100}, PassDone{Err: errNet}},
			promoteAt: 100},
		{name: "a later listing below an earlier one",
			events:   []any{PassDone{Copied: 500 * mib, HWM: 150, CopiedTo: 150}, PassDone{Copied: 400 * mib, HWM: 120, CopiedTo: 120}},
			copiedTo: 120, knownHWM: 150},
		{name: "PrepareHandoff's answer",
			events:   []any{PassDone{Copied: mib, HWM: 100, CopiedTo: 100}, Staged{OK: true}, Installed{}, Frozen{Token: "tok", HWM: 104}},
			copiedTo: 100, knownHWM: 104},
		{name: "PrepareHandoff's answer below the last listing",
			events:    []any{PassDone{Copied: mib, HWM: 100, CopiedTo: 100}, Staged{OK: true}, Installed{}, Frozen{Token: "tok", HWM: 90}},
			promoteAt: 100},
		{name: "a first listing whose chunks failed",
			events:   []any{PassDone{Listed: true, HWM: 50, Err: errNet}},
			copiedTo: 0, knownHWM: 50},
		{name: "a failed listing caught up by a later pass",
			events: []any{PassDone{Copied: 500 * mib, HWM: 100, CopiedTo: 100}, PassDone{Listed: true, HWM: 150, Err: errNet},
				PassDone{Copied: 400 * mib, HWM: 150, CopiedTo: 150}},
			promoteAt: 150},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newScript(t).feed(Start{})
			for _, ev := range tc.events {
				sc.feed(ev)
			}
			sc.lost().at(0).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).
				at(3 * time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute})
			if tc.promoteAt > 0 {
				sc.wantPhase(Verifying).wantFx(Log{Level: "warn"}, Verify{HWM: tc.promoteAt})
				return
			}
			if sc.s.Promote || sc.s.Phase == Verifying {
				t.Fatalf("got a promote (state %+v), want the move waiting", sc.s)
			}
			sc.wantFx(Log{Level: "error"}, Block{Reason: ReasonSourceDeadCopyBehind}).
				wantLog("error", fmt.Sprintf("copy next offset %d, source high watermark %d", tc.copiedTo, tc.knownHWM))
		})
	}
}

// rule P4, the scenario of issue 9: a listing at H1 completes, a later one
// at H2 > H1 arrives but its chunks fail, and the source dies. The copy at
// H1 is never promoted: the move waits, says so once at error with both
// offsets, and is counted blocked until the source returns.
func TestRuleP4AListingWhoseChunksFailedBlocksThePromoteUntilTheSourceReturns(t *testing.T) {
	const h1, h2 = 100, 160
	sc := newScript(t).feed(Start{}).
		feed(PassDone{Copied: 500 * mib, HWM: h1, CopiedTo: h1}).wantPhase(CatchUp).
		feed(PassDone{Listed: true, HWM: h2, Err: errNet}).wantPhase(CatchUp).wantFx(ScheduleRetry{After: time.Second}).
		at(0).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).wantFx().
		at(2*time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).wantPhase(CatchUp).
		wantFx(Log{Level: "error"}, Block{Reason: ReasonSourceDeadCopyBehind}).
		wantLog("error", fmt.Sprintf("copy next offset %d, source high watermark %d", h1, h2))
	// Still dead, still failing: nothing more is said or done.
	sc.feed(Retry{}).wantFx(Fetch{}).
		feed(PassDone{Err: errNet}).
		at(3 * time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 6 * time.Minute}).wantPhase(CatchUp).wantFx()
	if sc.s.Promote || sc.s.KnownHWM != h2 || sc.s.CopiedTo != h1 {
		t.Fatalf("while the source is dead: got %+v, want no promote, known HWM %d, copy at %d", sc.s, h2, h1)
	}
	// The source returns: unblocked, and the copy catches up.
	sc.feed(SourceSeen{Dead: false}).wantFx(Unblock{Reason: ReasonSourceDeadCopyBehind}).
		feed(Retry{}).wantFx(Fetch{}).
		feed(PassDone{Copied: 2 * mib, HWM: h2, CopiedTo: h2}).wantPhase(Staging).feed(Staged{OK: true}).wantPhase(Placing).feed(Installed{}).wantPhase(Freezing)
}

// rule P4: whatever path leads to an install, none is emitted below the
// highest HWM a listing reported. Under a freeze that held, that means the
// source's HWM went backwards: it lost records it had made visible, so the
// move blocks and says so at error instead.
func TestRuleP4NoInstallBelowTheHighestListedHWM(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T) *script
		// wantFx are the effects that come instead of the install.
		wantFx []any
	}{
		{name: "after a fence", run: func(t *testing.T) *script {
			// The handoff reported 104; the drain under the freeze lists 102.
			return toFinalize(t).
				feed(PassDone{Copied: 0, HWM: 102, CopiedTo: 102}).wantFx(Verify{HWM: 102}).
				feed(Verified{OK: true}).wantFx(Fence{Token: "tok", HWM: 102}).
				feed(Fenced{})
		}, wantFx: []any{Log{Level: "error"}, Block{Reason: ReasonSourceHWMRegressed}}},
		{name: "from a source without tokens", run: func(t *testing.T) *script {
			return newScript(t).feed(Start{}).
				feed(PassDone{Copied: mib, HWM: 7, CopiedTo: 7}).
				feed(Staged{OK: true}).feed(Installed{}).
				feed(Frozen{HWM: 7}).
				feed(PassDone{Copied: 0, HWM: 5, CopiedTo: 5}).
				feed(PassDone{Copied: 0, HWM: 5, CopiedTo: 5}).
				feed(Verified{OK: true})
		}, wantFx: []any{Log{Level: "warn"}, Log{Level: "error"}, Block{Reason: ReasonSourceHWMRegressed}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := tc.run(t).wantPhase(Blocked).wantFx(tc.wantFx...).wantLog("error", "went back from")
			if sc.s.BlockedReason != ReasonSourceHWMRegressed || sc.s.Frozen {
				t.Fatalf("blocked: got reason %q, frozen %v, want %q, not frozen", sc.s.BlockedReason, sc.s.Frozen, ReasonSourceHWMRegressed)
			}
			for _, ev := range []any{Retry{}, RearmDue{}, Fenced{}, Verified{OK: true}, SourceSeen{Dead: true, Leader: true, StampAge: time.Hour}} {
				if _, fx := Step(sc.c, sc.s, sc.now, ev); len(fx) != 0 {
					t.Fatalf("%T on a blocked move: got effects %#v, want none", ev, fx)
				}
			}
		})
	}
	// At the highest listed HWM, the install goes ahead.
	toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104, CopiedTo: 104}).
		feed(Verified{OK: true}).
		feed(Fenced{}).wantPhase(Installing).wantFx(Install{HWM: 104})
}

func TestRuleP5APromoteSkipsTheFreezeAndInstallsAtTheKnownHWM(t *testing.T) {
	sourceDead(t, 100, 100).
		at(2*time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).
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

// The phase names are the words of the moves listing (GET
// /v1/cluster/moves?detail=1, narad cluster moves --detail).
func TestPhaseNamesAreTheListingsWords(t *testing.T) {
	for p, want := range map[Phase]string{CatchUp: "catch_up", Finalize: "finalize", Resolving: "resolving", Blocked: "blocked", Staging: "staging", Placing: "placing", Blocked + 1: "phase(13)"} {
		if got := p.String(); got != want {
			t.Errorf("phase %d: got %q, want %q", int(p), got, want)
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

// rules X6, X9: a move that ends without its flip removes its staging
// copy unless it may hold the only copy of its records.
func TestEndCopyRulesX6X9(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    CopyEnd
		want CopyFate
	}{
		// rule X6
		{"refused, owner alive", CopyEnd{HoldsRecords: true}, RemoveCopy},
		{"refused, this node owns it by then, install taken off", CopyEnd{OwnsIt: true, TookInstallOff: true, PathHoldsSourceInstall: true, HoldsRecords: true}, SetAsideCopy},
		{"refused, this node owns it, no source install at the path", CopyEnd{OwnsIt: true, HoldsRecords: true}, SetAsideCopy},
		{"refused, this node owns it through an earlier attempt's install", CopyEnd{OwnsIt: true, PathHoldsSourceInstall: true, HoldsRecords: true}, RemoveCopy},
		{"this node owns it, the copy is empty", CopyEnd{OwnsIt: true, TookInstallOff: true, HoldsRecords: false}, RemoveCopy},
		// rule X9
		{"ended, owner dead, copy holds records", CopyEnd{OwnerDeadOrGone: true, HoldsRecords: true}, SetAsideCopy},
		{"ended, owner dead, copy empty", CopyEnd{OwnerDeadOrGone: true}, RemoveCopy},
		{"ended, owner alive", CopyEnd{HoldsRecords: true, PathHoldsSourceInstall: true}, RemoveCopy},
	} {
		if got, why := EndCopy(tc.c); got != tc.want {
			t.Errorf("%s: EndCopy(%+v) = %v (%s), want %v", tc.name, tc.c, got, why, tc.want)
		}
	}
}

func BenchmarkEndCopy(b *testing.B) {
	c := CopyEnd{OwnsIt: true, PathHoldsSourceInstall: true, HoldsRecords: true}
	for b.Loop() {
		EndCopy(c)
	}
}

// asked is the attempt of the main line's request among the last
// effects; 0 when there is none.
func (sc *script) asked() uint64 {
	for _, f := range sc.fx {
		if a, ok := requestAttempt(f); ok {
			return a
		}
	}
	return 0
}

// requestAttempt is the attempt a main-line request carries.
func requestAttempt(f any) (uint64, bool) {
	switch e := f.(type) {
	case Fetch:
		return e.Attempt, true
	case PrepareHandoff:
		return e.Attempt, true
	case Fence:
		return e.Attempt, true
	case Verify:
		return e.Attempt, true
	case Install:
		return e.Attempt, true
	case ProposeFlip:
		return e.Attempt, true
	case ReadLeader:
		return e.Attempt, true
	}
	return 0, false
}

// issue 26: the order of events a worker saw when its source restarted
// under a move in the bulk hand-off run (its freeze gone, a pass of the
// old freeze still out, a pass of the new one failing). Acting on the old
// pass's answer counted it as a pass under the new freeze and put a third
// pass beside the second; the second's retry then fired after the move
// had reached its install and asked for a second install of the same
// copy, which, in the same batch, set the first one's copy aside at the
// path while the first reported success: the move flipped to an empty
// partition. Only the current request's answer or retry is acted on.
func TestAnAnswerOrRetryTheMoveMovedOnFromIsIgnored(t *testing.T) {
	sc := toFinalize(t)
	first := sc.asked()
	sc.feed(PassDone{Err: errNet, Attempt: first}).wantFx(ScheduleRetry{After: sc.c.RetryAfter})
	sc.feed(Retry{Attempt: first}).wantFx(Fetch{Final: true})
	old := sc.asked() // a pass under the first freeze
	sc.feed(Rearmed{Lapsed: true}).wantPhase(Freezing)
	sc.feed(Frozen{Token: "tok2", HWM: 104, Attempt: sc.asked()}).wantPhase(Finalize)
	under := sc.asked() // the first pass under the new freeze
	sc.feed(PassDone{Copied: 0, HWM: 104, CopiedTo: 104, Attempt: old}).wantFx()
	if sc.s.QuietPasses != 0 {
		t.Fatalf("quiet passes after a pass of the lapsed freeze answered: got %d, want 0", sc.s.QuietPasses)
	}
	sc.feed(PassDone{Err: errNet, Attempt: under}).wantFx(ScheduleRetry{After: sc.c.RetryAfter})
	sc.feed(Retry{Attempt: old}).wantFx() // no retry of the old pass either
	sc.feed(Retry{Attempt: under}).wantFx(Fetch{Final: true})
	sc.feed(PassDone{Copied: 0, HWM: 104, CopiedTo: 104}).
		feed(PassDone{Copied: 0, HWM: 104, CopiedTo: 104}).wantPhase(Verifying).
		feed(Verified{OK: true}).wantPhase(Fencing).
		feed(Fenced{}).wantPhase(Installing).wantFx(Install{HWM: 104})
	install := sc.asked()
	// Everything earlier that can still arrive while the install is out.
	for a := uint64(1); a < install; a++ {
		for _, ev := range []any{Retry{Attempt: a}, PassDone{Copied: 0, HWM: 104, CopiedTo: 104, Attempt: a},
			Frozen{Token: "tok3", HWM: 104, Attempt: a}, Fenced{Attempt: a}, Verified{OK: true, Attempt: a}} {
			sc.feed(ev).wantPhase(Installing).wantFx()
		}
	}
	sc.feed(Installed{Attempt: install}).wantPhase(Flipping).wantFx(ProposeFlip{})
}

// A re-arm timer belongs to its freeze: a freeze armed again (rule F10)
// starts its own, and the lapsed freeze's timer, still running, neither
// re-arms nor doubles the re-arms.
func TestARearmTimerOfAnEarlierFreezeIsIgnored(t *testing.T) {
	sc := toFinalize(t).feed(Rearmed{Lapsed: true}).wantPhase(Freezing)
	sc.feed(Frozen{Token: "tok2", HWM: 104}).wantFx(Fetch{Final: true}, ScheduleRearm{After: sc.c.FreezeTTL / 4})
	if r := sc.fx[1].(ScheduleRearm); r.Token != "tok2" {
		t.Fatalf("re-arm timer of the new freeze: got token %q, want tok2", r.Token)
	}
	sc.feed(RearmDue{Token: "tok"}).wantFx()
	sc.feed(Rearmed{Token: "tok", Lapsed: true}).wantPhase(Finalize).wantFx()
	sc.feed(RearmDue{}).wantFx(Rearm{Token: "tok2"}, ScheduleRearm{After: sc.c.FreezeTTL / 4})
}

// TestRandomSchedulesNeverRunTwoInstallsOrCountAnOldFreezesPass delivers
// the answers of every request a move makes, and its timers, in random
// orders, with failures, lapsed freezes and answers that arrive after the
// move moved on, as a worker's goroutines and timers can. Whatever the
// order: no second install of the copy is ever asked while one is out
// (two in one batch set each other's copy aside, issue 26), and the quiet
// passes that end Finalize were asked under the freeze then held (F8).
func TestRandomSchedulesNeverRunTwoInstallsOrCountAnOldFreezesPass(t *testing.T) {
	for seed := uint64(1); seed <= 3000; seed++ {
		randomSchedule(t, seed)
	}
}

// pendingRequest is a request or timer the random executor has yet to
// answer; token is the freeze held when a pass was asked.
type pendingRequest struct {
	fx    any
	token string
}

func randomSchedule(t *testing.T, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 26))
	c := DefaultConfig()
	s, fx := Step(c, New(), 0, Start{})
	var pending []pendingRequest
	add := func(s State, fx []any) {
		for _, f := range fx {
			switch f.(type) {
			case Fetch, PrepareHandoff, Fence, Verify, Install, ProposeFlip, ReadLeader, ScheduleRetry, ScheduleRearm, Rearm:
				pending = append(pending, pendingRequest{fx: f, token: s.Token})
			}
		}
	}
	add(s, fx)
	const hwm = 50
	tokens := 0
	var lastPassToken string
	now := time.Duration(0)
	for step := 0; step < 400 && len(pending) > 0 && s.Phase != Done && s.Phase != Ended && s.Phase != Blocked; step++ {
		i := rng.IntN(len(pending))
		p := pending[i]
		pending = append(pending[:i], pending[i+1:]...)
		fail := rng.IntN(4) == 0
		now += time.Duration(rng.IntN(3000)) * time.Millisecond
		var ev any
		switch e := p.fx.(type) {
		case Fetch:
			if fail {
				ev = PassDone{Err: errNet, Attempt: e.Attempt}
			} else {
				ev = PassDone{Copied: 0, HWM: hwm, CopiedTo: hwm, Attempt: e.Attempt}
			}
		case PrepareHandoff:
			if fail {
				ev = Frozen{Err: errNet, Attempt: e.Attempt}
			} else {
				tokens++
				ev = Frozen{Token: fmt.Sprintf("tok%d", tokens), HWM: hwm, SentAt: now, Attempt: e.Attempt}
			}
		case Fence:
			ev = Fenced{Refused: fail && rng.IntN(2) == 0, Err: map[bool]error{true: errNet}[fail && rng.IntN(2) == 0], SentAt: now, Attempt: e.Attempt}
		case Verify:
			ev = Verified{OK: true, Attempt: e.Attempt}
		case Install:
			ev = Installed{Attempt: e.Attempt}
			if fail {
				ev = Installed{Err: errNet, Attempt: e.Attempt}
			}
		case ProposeFlip:
			ev = FlipAnswered{Code: FlipOK, Attempt: e.Attempt}
			if fail {
				ev = FlipAnswered{Err: errNet, Attempt: e.Attempt}
			}
		case ReadLeader:
			ev = LeaderRead{StartedAt: now, Found: true, Owner: Self, Attempt: e.Attempt}
		case ScheduleRetry:
			ev = Retry{Attempt: e.Attempt}
		case ScheduleRearm:
			ev = RearmDue{Token: e.Token}
		case Rearm:
			ev = Rearmed{Token: e.Token, Lapsed: fail, SentAt: now}
		}
		before := s.Phase
		if pd, ok := ev.(PassDone); ok && pd.Err == nil && pd.Attempt == s.Attempt {
			lastPassToken = p.token
		}
		s, fx = Step(c, s, now, ev)
		if s.Phase == Verifying && before == Finalize && lastPassToken != s.Token {
			t.Fatalf("seed %d: Finalize ended on a pass asked under freeze %q, want the freeze held, %q", seed, lastPassToken, s.Token)
		}
		add(s, fx)
		installs := 0
		for _, q := range pending {
			if _, ok := q.fx.(Install); ok {
				installs++
			}
		}
		if installs > 1 {
			t.Fatalf("seed %d: %d installs of the copy out at once after %T", seed, installs, ev)
		}
	}
}

// An install whose copy is not at the partition's path when read back is
// never flipped, and not retried over and over with the source frozen:
// the move blocks and the freeze lapses.
func TestAnInstallNotWholeAtThePathBlocksTheMove(t *testing.T) {
	sc := toFinalize(t).
		feed(PassDone{Copied: 0, HWM: 104, CopiedTo: 104}).
		feed(Verified{OK: true}).
		feed(Fenced{}).wantPhase(Installing).
		feed(Installed{Err: errNet, NotWhole: true}).wantPhase(Blocked).
		wantFx(Block{Reason: ReasonInstallNotWhole})
	if sc.s.Frozen {
		t.Fatal("a blocked move still counts on its freeze")
	}
	sc.feed(RearmDue{}).wantFx()
}

// Every request a move issues carries an attempt number greater than any
// before it, so that an outcome of an earlier request (one that outlived
// a retry, or answers a phase since left) is always told apart from the
// current one and ignored. Run through a whole move: the copy, the
// prepare, the fence, the verify, the install, the flip and a leader read.
func TestEveryRequestOfAMoveCarriesAFreshAttempt(t *testing.T) {
	var kinds []string
	var attempts []uint64
	record := func(fx []any) {
		for _, f := range fx {
			var a uint64
			switch e := f.(type) {
			case Fetch:
				a = e.Attempt
			case PrepareHandoff:
				a = e.Attempt
			case Fence:
				a = e.Attempt
			case Verify:
				a = e.Attempt
			case Stage:
				a = e.Attempt
			case Install:
				a = e.Attempt
			case ProposeFlip:
				a = e.Attempt
			case ReadLeader:
				a = e.Attempt
			default:
				continue
			}
			kinds = append(kinds, fmt.Sprintf("%T", f))
			attempts = append(attempts, a)
		}
	}
	sc := newScript(t)
	for _, ev := range []any{
		Start{},
		PassDone{Copied: 3 * mib, HWM: 100, CopiedTo: 100},
		Staged{OK: true},
		Installed{},
		Frozen{Token: "t1", HWM: 104},
		PassDone{Copied: 0, HWM: 104, CopiedTo: 104},
		Verified{OK: true},
		Fenced{},
		Installed{},
		FlipAnswered{Err: errNet},
	} {
		sc.feed(ev)
		record(sc.fx)
	}
	want := []string{"move.Fetch", "move.Stage", "move.Install", "move.PrepareHandoff", "move.Fetch", "move.Verify", "move.Fence", "move.Install", "move.ProposeFlip", "move.ReadLeader"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("requests: got %v, want %v", kinds, want)
	}
	for i := 1; i < len(attempts); i++ {
		if attempts[i] <= attempts[i-1] {
			t.Fatalf("attempts %v: %s got %d after %s's %d, want a greater one", attempts, kinds[i], attempts[i], kinds[i-1], attempts[i-1])
		}
	}
}

// Issue 46: a pre-copy that caught up stages the copy at the HWM it reached
// (verified and durable) before the freeze; a stage that failed freezes
// all the same (the install then does what the stage would have), and an
// outcome of an earlier stage is ignored.
func TestACaughtUpCopyIsStagedBeforeTheFreeze(t *testing.T) {
	newScript(t).feed(Start{}).
		feed(PassDone{Copied: mib, HWM: 100, CopiedTo: 100}).wantPhase(Staging).wantFx(Stage{HWM: 100}).
		feed(Staged{OK: false}).wantPhase(Freezing).wantFx(PrepareHandoff{})
	sc := newScript(t).feed(Start{}).feed(PassDone{Copied: mib, HWM: 100, CopiedTo: 100})
	stale := sc.s.Attempt - 1
	sc.feed(Staged{OK: true, Attempt: stale}).wantPhase(Staging).wantFx()
}

// rule P2 with issue 46: the force-promote gate runs while the copy is
// staged, before any freeze, as during the pre-copy.
func TestRuleP5APromoteCanComeWhileTheCopyIsStaged(t *testing.T) {
	newScript(t).feed(Start{}).
		feed(PassDone{Copied: mib, HWM: 100, CopiedTo: 100}).wantPhase(Staging).
		at(0).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).
		at(3*time.Minute).feed(SourceSeen{Dead: true, Leader: true, StampAge: 5 * time.Minute}).
		wantPhase(Verifying).wantFx(Log{Level: "warn"}, Verify{HWM: 100})
}

// Issue 46: a staged copy goes to the partition's path before the freeze,
// so the freeze holds only the tail, the fence and the flip. A fence
// refused on a placed copy freezes again with the copy where it is (rule
// F10: no flip was proposed on it); the install under the freeze then
// seals the tail in place, and only then is the flip proposed.
func TestACopyPlacedBeforeTheFreezeKeepsOnlyTheTailTheFenceAndTheFlipUnderIt(t *testing.T) {
	sc := toFinalize(t)
	if !sc.s.Placed || sc.s.Installed {
		t.Fatalf("frozen after the placing: got Placed %v Installed %v, want true, false", sc.s.Placed, sc.s.Installed)
	}
	sc.feed(PassDone{Copied: 0, HWM: 104}).
		feed(Verified{OK: true}).
		feed(Fenced{Refused: true}).wantPhase(Freezing).wantFx(PrepareHandoff{})
	if !sc.s.Placed {
		t.Fatal("a refused fence on a placed copy: got Placed false, want the copy left at the path")
	}
	sc.feed(Frozen{Token: "tok2", HWM: 110}).
		feed(PassDone{Copied: 600, HWM: 110}).
		feed(PassDone{Copied: 0, HWM: 110}).
		feed(PassDone{Copied: 0, HWM: 110}).wantPhase(Verifying).
		feed(Verified{OK: true}).wantFx(Fence{Token: "tok2", HWM: 110}).
		feed(Fenced{}).wantPhase(Installing).wantFx(Install{HWM: 110}).
		feed(Installed{}).wantPhase(Flipping).wantFx(ProposeFlip{})
}

// Issue 46: an install before the freeze that fails leaves the install to
// the freeze; one whose copy the path does not hold whole blocks the move;
// a move refused for good with a placed copy takes it off the path.
func TestAPlacingThatFailsOrAMoveThatEndsLeavesNoCopyAtThePath(t *testing.T) {
	toPlacing := func() *script {
		return newScript(t).feed(Start{}).
			feed(PassDone{Copied: mib, HWM: 9, CopiedTo: 9}).
			feed(Staged{OK: true}).wantPhase(Placing).wantFx(Install{HWM: 9})
	}
	sc := toPlacing().feed(Installed{Err: errNet}).wantPhase(Freezing).wantFx(PrepareHandoff{})
	if sc.s.Placed {
		t.Fatal("a failed placing: got Placed true, want false")
	}
	toPlacing().feed(Installed{Err: errNet, NotWhole: true}).wantPhase(Blocked).wantFx(Block{Reason: ReasonInstallNotWhole})
	sc = toPlacing().feed(Installed{}).feed(Frozen{Token: "tok", HWM: 9}).
		feed(PassDone{HWM: 9, CopiedTo: 9}).feed(Verified{OK: true}).feed(Fenced{}).feed(Installed{}).
		feed(FlipAnswered{Code: FlipRefused}).wantPhase(Ended).wantFx(RenameBack{}, RemoveStaging{})
}

// Rule X5, issue 46: a worker that starts with its own move's install at
// the path (an earlier worker's, whose flip may be pending) asks the
// leader first, and takes the copy off the path only on a read that
// started UnknownSettle after its own start; a read that shows the flip
// committed ends the move.
func TestRuleX5AWorkerThatFindsItsMovesInstallAtThePathAsksTheLeaderFirst(t *testing.T) {
	start := func() *script {
		return newScript(t).at(time.Second).feed(Start{InstalledAtPath: true}).wantPhase(Resolving).wantFx(ReadLeader{})
	}
	start().feed(LeaderRead{StartedAt: 2 * time.Second, Found: true, Owner: Source, Target: Self}).
		wantPhase(Resolving).wantFx(ScheduleRetry{After: time.Second}).
		feed(Retry{}).wantFx(ReadLeader{}).
		at(16*time.Second).
		feed(LeaderRead{StartedAt: 16 * time.Second, Found: true, Owner: Source, Target: Self}).
		wantPhase(CatchUp).wantFx(RenameBack{}, Fetch{})
	start().feed(LeaderRead{StartedAt: 2 * time.Second, Found: true, Owner: Self}).wantPhase(Done)
}

package move

import (
	"testing"
	"time"
)

// rule P2: the stamp's age the gate sees is DeadTimeout when the worker
// first reads the source dead, and grows on the worker's own clock after.
func TestWatchedRuleP2(t *testing.T) {
	const dt = 30 * time.Second
	seen := New()
	seen.SourceDead, seen.SourceDeadSince, seen.SourceBeats = true, 10*time.Second, 4
	for _, tc := range []struct {
		name   string
		s      State
		now    time.Duration
		dead   bool
		beats  uint64
		leader bool
		want   SourceSeen
	}{
		{"alive", seen, time.Minute, false, 5, false, SourceSeen{Heartbeats: 5}},
		{"first seen dead", New(), time.Minute, true, 4, false, SourceSeen{Dead: true, StampAge: dt, Heartbeats: 4}},
		{"dead since 10s, now 70s", seen, 70 * time.Second, true, 4, false, SourceSeen{Dead: true, StampAge: dt + time.Minute, Heartbeats: 4}},
		{"dead since 10s, now 10s", seen, 10 * time.Second, true, 4, false, SourceSeen{Dead: true, StampAge: dt, Heartbeats: 4}},
		{"its counter moved: back in between", seen, 70 * time.Second, true, 6, false, SourceSeen{Dead: true, StampAge: dt, Heartbeats: 6}},
		{"through the leader", seen, 70 * time.Second, true, 4, true, SourceSeen{Dead: true, StampAge: dt + time.Minute, Heartbeats: 4, Leader: true}},
	} {
		if got := Watched(tc.s, tc.now, tc.dead, tc.beats, tc.leader, dt); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// rule P2, a stale replica: the gate passes on this node's replica, which a
// cut-off destination holds stale, so it asks the leader before a promote;
// only the leader's reading promotes, and a heartbeat counter that moved
// while the record read dead throughout (the source was back, unseen)
// restarts the worker's clock. Found by the move simulator (seed 12588 of
// actors/move/sim before the fix).
func TestRuleP2APromoteIsConfirmedWithTheLeader(t *testing.T) {
	dead := func(beats uint64, leader bool) SourceSeen {
		return SourceSeen{Dead: true, StampAge: 5 * time.Minute, Heartbeats: beats, Leader: leader}
	}
	start := func(t *testing.T) *script {
		return newScript(t).feed(Start{}).
			feed(PassDone{Copied: 500 * mib, HWM: 100, CopiedTo: 100}).lost().
			at(0).feed(dead(7, false)).wantFx()
	}
	t.Run("the replica's reading asks the leader, one read at a time", func(t *testing.T) {
		start(t).at(3 * time.Minute).feed(dead(7, false)).wantPhase(CatchUp).wantFx(ConfirmSource{}).
			at(3*time.Minute + time.Second).feed(dead(7, false)).wantFx().
			// the read failed: the next tick asks again
			feed(SourceUnknown{}).wantFx().
			feed(dead(7, false)).wantFx(ConfirmSource{})
	})
	t.Run("the leader's reading promotes", func(t *testing.T) {
		start(t).at(3*time.Minute).feed(dead(7, false)).wantFx(ConfirmSource{}).
			feed(dead(7, true)).wantPhase(Verifying).wantFx(Log{Level: "warn"}, Verify{HWM: 100})
	})
	t.Run("the leader's counter moved: the clock restarts", func(t *testing.T) {
		start(t).at(3 * time.Minute).feed(dead(7, false)).wantFx(ConfirmSource{}).
			feed(dead(9, true)).wantPhase(CatchUp).wantFx().
			at(4*time.Minute + 59*time.Second).feed(dead(9, true)).wantPhase(CatchUp).wantFx().
			at(5 * time.Minute).feed(dead(9, true)).wantPhase(Verifying)
	})
	t.Run("a moved counter on the replica restarts it too", func(t *testing.T) {
		start(t).at(2 * time.Minute).feed(dead(8, false)).wantFx().
			at(3 * time.Minute).feed(dead(8, false)).wantFx().
			at(4 * time.Minute).feed(dead(8, false)).wantFx(ConfirmSource{})
	})
}

func TestNamed(t *testing.T) {
	for _, tc := range []struct{ id, want string }{{"n2", Self}, {"n1", Source}, {"n3", "n3"}, {"", ""}} {
		if got := Named(tc.id, "n2", "n1"); got != tc.want {
			t.Errorf("Named(%q, self n2, source n1): got %q, want %q", tc.id, got, tc.want)
		}
	}
}

// rules X1, X6: a stopping worker lifts the freeze before its install, and
// after it only when the replica shows the move gone; a copy is dropped
// only when the move is gone.
func TestGoneAndReleaseOnStop(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		installed, found      bool
		owner, target         string
		wantGone, wantRelease bool
	}{
		{"still targeted here, not installed", false, true, "n1", "n2", false, true},
		{"still targeted here, installed", true, true, "n1", "n2", false, false},
		{"flipped here, installed", true, true, "n2", "", false, false},
		{"aborted, installed", true, true, "n1", "", true, true},
		{"re-planned elsewhere, installed", true, true, "n1", "n3", true, true},
		{"topic deleted, installed", true, false, "", "", true, true},
		{"aborted, not installed", false, true, "n1", "", true, true},
	} {
		if got := Gone(tc.found, tc.owner, tc.target, "n2"); got != tc.wantGone {
			t.Errorf("%s: Gone: got %v, want %v", tc.name, got, tc.wantGone)
		}
		if got := ReleaseOnStop(tc.installed, tc.found, tc.owner, tc.target, "n2"); got != tc.wantRelease {
			t.Errorf("%s: ReleaseOnStop: got %v, want %v", tc.name, got, tc.wantRelease)
		}
	}
}

// rules P2, P4: no promote is decided while a listing or a prepare is on
// its way to the source (its answer may carry a higher HWM, and proves the
// source alive), and any answer from the source restarts the worker's own
// clock of its death. Found by the move simulator (seed 5021 before the
// fix: a source restarted moments before answered a listing above the HWM
// the promote had just been decided at).
func TestRuleP2NoPromoteWhileTheSourceMayStillAnswer(t *testing.T) {
	dead := SourceSeen{Dead: true, StampAge: 5 * time.Minute, Leader: true}
	t.Run("a listing on its way", func(t *testing.T) {
		newScript(t).feed(Start{}).
			feed(PassDone{Copied: 500 * mib, HWM: 100, CopiedTo: 100}).wantFx(Fetch{}).
			at(0).feed(dead).
			at(3*time.Minute).feed(dead).wantPhase(CatchUp).wantFx().
			// it fails: the source is gone after all, and the gate it held
			// back runs at once, not a tick later
			feed(PassDone{Err: errNet}).wantPhase(Verifying).
			wantFx(ScheduleRetry{After: time.Second}, Log{Level: "warn"}, Verify{HWM: 100})
	})
	t.Run("a prepare on its way", func(t *testing.T) {
		newScript(t).feed(Start{}).
			feed(PassDone{Copied: mib, HWM: 100, CopiedTo: 100}).wantPhase(Staging).feed(Staged{OK: true}).wantPhase(Placing).feed(Installed{}).wantPhase(Freezing).wantFx(PrepareHandoff{}).
			at(0).feed(dead).
			at(3 * time.Minute).feed(dead).wantPhase(Freezing).wantFx().
			feed(Frozen{Err: errNet}).wantPhase(Verifying)
	})
	t.Run("an answer restarts the clock", func(t *testing.T) {
		newScript(t).feed(Start{}).
			feed(PassDone{Copied: 500 * mib, HWM: 100, CopiedTo: 100}).lost().
			at(0).feed(dead).
			at(time.Minute).feed(Retry{}).wantFx(Fetch{}).
			// heard at 1m; the next pass fails at 1m too, and the death
			// counts from there
			feed(PassDone{Copied: 500 * mib, HWM: 120, CopiedTo: 120}).lost().
			at(2*time.Minute).feed(dead).wantPhase(CatchUp).wantFx().
			at(2*time.Minute+59*time.Second).feed(dead).wantPhase(CatchUp).wantFx().
			at(3*time.Minute).feed(dead).wantPhase(Verifying).wantFx(Log{Level: "warn"}, Verify{HWM: 120})
	})
	t.Run("a listing whose chunks failed is an answer too", func(t *testing.T) {
		newScript(t).feed(Start{}).
			feed(PassDone{Copied: 500 * mib, HWM: 100, CopiedTo: 100}).lost().
			at(0).feed(dead).
			at(time.Minute).feed(Retry{}).
			feed(PassDone{Listed: true, HWM: 100, Err: errNet}).
			at(2 * time.Minute).feed(dead).wantPhase(CatchUp).wantFx().
			at(2*time.Minute + 59*time.Second).feed(dead).wantPhase(CatchUp).wantFx().
			at(3 * time.Minute).feed(dead).wantPhase(Verifying)
	})
}

// rule P2: which events are answers from the source, restarting the
// worker's clock of its death (and lifting a copy_behind block), and which
// are not: failures, and answers out of their phase.
func TestRuleP2AnswersFromTheSourceRestartTheClock(t *testing.T) {
	deadIn := func(p Phase) State {
		s := New()
		s.Phase, s.SourceDead, s.SourceDeadSince, s.BehindLogged, s.Asking = p, true, time.Second, true, true
		s.Frozen, s.Fenceable, s.Token = true, true, "tok"
		return s
	}
	unblock := Unblock{Reason: ReasonSourceDeadCopyBehind}
	for _, tc := range []struct {
		name  string
		s     State
		ev    any
		heard bool
	}{
		{"a listing", deadIn(CatchUp), PassDone{Copied: 1, HWM: 5, CopiedTo: 5}, true},
		{"a listing whose chunks failed", deadIn(CatchUp), PassDone{Listed: true, HWM: 5, Err: errNet}, true},
		{"a failed pass", deadIn(CatchUp), PassDone{Err: errNet}, false},
		{"a listing out of phase", deadIn(Verifying), PassDone{Copied: 1, HWM: 5, CopiedTo: 5}, false},
		{"a prepare's answer", deadIn(Freezing), Frozen{Token: "t2", HWM: 5}, true},
		{"a failed prepare", deadIn(Freezing), Frozen{Err: errNet}, false},
		{"a prepare's answer out of phase", deadIn(CatchUp), Frozen{Token: "t2", HWM: 5}, false},
		{"a re-arm answered", deadIn(Finalize), Rearmed{Token: "tok"}, true},
		{"a re-arm answered lapsed", deadIn(Finalize), Rearmed{Token: "tok", Lapsed: true}, true},
		{"a re-arm without an answer", deadIn(Finalize), Rearmed{Token: "tok", Err: errNet}, false},
		{"a re-arm of an earlier freeze answered", deadIn(Finalize), Rearmed{Token: "tok0"}, false},
		{"a pass the move moved on from", deadIn(CatchUp), PassDone{Copied: 1, HWM: 5, CopiedTo: 5, Attempt: 7}, false},
		{"a fence answered", deadIn(Fencing), Fenced{Refused: true}, true},
		{"a fence without an answer", deadIn(Fencing), Fenced{Err: errNet}, false},
		{"a fence's answer out of phase", deadIn(Finalize), Fenced{}, false},
	} {
		s, fx := Step(DefaultConfig(), tc.s, time.Minute, tc.ev)
		if got := !s.SourceDead; got != tc.heard {
			t.Errorf("%s: clock restarted: got %v, want %v", tc.name, got, tc.heard)
		}
		if got := len(fx) > 0 && fx[0] == any(unblock); got != tc.heard {
			t.Errorf("%s: unblocked first: got %v (effects %v), want %v", tc.name, got, fx, tc.heard)
		}
	}
}

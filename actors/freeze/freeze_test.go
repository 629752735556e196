package freeze

import (
	"reflect"
	"testing"
	"time"
)

// t0 is when the scripts start; any instant does.
var t0 = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// cfg is the seed's table: a 30 s TTL, a 500 ms lease drain, a 10 ms poll.
var cfg = Config{FreezeTTL: 30 * time.Second, LeaseDrainTimeout: 500 * time.Millisecond, LeaseDrainPoll: 10 * time.Millisecond, ConfirmRetry: time.Second}

// settled is a partition with nothing on its way and no lease out.
var settled = Partition{}

// script feeds events to one gate at instants the test chooses and keeps
// the effects of the last event.
type script struct {
	t   *testing.T
	c   Config
	s   State
	now time.Time
	fx  []any
}

func newScript(t *testing.T) *script { return &script{t: t, c: cfg, now: t0} }

// at moves the script's clock to t0+d.
func (sc *script) at(d time.Duration) *script { sc.now = t0.Add(d); return sc }

func (sc *script) feed(ev any) *script {
	sc.t.Helper()
	sc.s, sc.fx = Step(sc.c, sc.s, sc.now, ev)
	return sc
}

// wantFx fails unless the last event's effects are exactly want.
func (sc *script) wantFx(want ...any) *script {
	sc.t.Helper()
	if len(sc.fx) == 0 && len(want) == 0 {
		return sc
	}
	if !reflect.DeepEqual(sc.fx, want) {
		sc.t.Fatalf("effects at t0+%s: got %#v, want %#v", sc.now.Sub(t0), sc.fx, want)
	}
	return sc
}

// wantHolds fails unless the freeze holds (or not) at the script's now.
func (sc *script) wantHolds(want bool) *script {
	sc.t.Helper()
	if got := sc.s.Holds(sc.now); got != want {
		sc.t.Fatalf("holds at t0+%s: got %v, want %v (state %+v)", sc.now.Sub(t0), got, want, sc.s)
	}
	return sc
}

// prepared is a gate whose prepare "asker" (nonce 0xab) reported at HWM
// 7 at t0: the freeze holds and the HWM is pinned.
func prepared(t *testing.T) *script {
	return newScript(t).
		feed(Prepare{Asker: "asker", Nonce: 0xab, Partition: settled}).
		wantFx(RefuseStash{}, Report{Asker: "asker", Token: "ab-1"}).
		feed(Reported{Token: "ab-1", HWM: 7, OK: true}).wantFx()
}

// rule F5: a prepare arms a freeze under a fresh token and reports.
func TestRuleF5APrepareArmsAFreezeUnderAFreshToken(t *testing.T) {
	sc := prepared(t).wantHolds(true)
	if sc.s.Until != t0.Add(cfg.FreezeTTL) || !sc.s.Reported || sc.s.HWM != 7 {
		t.Fatalf("after the report: got %+v, want until t0+30s, reported at 7", sc.s)
	}
	// A second prepare under the same nonce gets another token; the first
	// one no longer names a freeze.
	sc.at(time.Second).feed(Prepare{Asker: "second", Nonce: 0xab}).
		wantFx(RefuseStash{}, Report{Asker: "second", Token: "ab-2"})
	if sc.s.Reported {
		t.Fatalf("a fresh prepare: got reported %v, want false until it reports", sc.s.Reported)
	}
	sc.feed(Rearm{Token: "ab-1"}).wantFx(Gone{Why: "that freeze is no longer active"})
}

// rules F5, F12: unattended, the freeze lapses exactly at its TTL and
// nothing is needed to clean up: once the gate's own leader read confirms
// the node still owns the partition, commits land, consume resumes, the
// publish is free and the token is refused.
func TestRuleF12TheFreezeLapsesOnItsTTL(t *testing.T) {
	sc := prepared(t)
	sc.at(cfg.FreezeTTL - time.Nanosecond).wantHolds(true).
		feed(Commit{}).wantFx(RefuseCommit{}).
		feed(Publish{Awaiting: true}).wantFx(RefusePublish{HWM: 7})
	sc.at(cfg.FreezeTTL).wantHolds(false).
		feed(Commit{}).wantFx(ConfirmOwner{}, RefuseCommit{}).
		feed(OwnerConfirmed{Owner: true}).wantFx(NotifyConsumers{}).
		feed(Commit{}).wantFx().
		feed(Write{}).wantFx().
		feed(Reserve{}).wantFx().
		feed(Publish{Awaiting: true}).wantFx().
		feed(Fence{Token: "ab-1", HWM: 7, LogHWM: 7}).wantFx(Gone{Why: "that freeze is no longer active"}).
		feed(Rearm{Token: "ab-1"}).wantFx(Gone{Why: "that freeze is no longer active"}).
		wantHolds(false)
}

// rule F1: while the freeze holds, commits are refused and no lease is
// handed out; before and after, the gate is open.
func TestRuleF1CommitsAreRefusedAndConsumePausesWhileFrozen(t *testing.T) {
	for _, tc := range []struct {
		ev   any
		want any
	}{
		{Commit{}, RefuseCommit{}},
		{Write{}, RefuseStash{}},
		{Reserve{}, PauseConsume{}},
	} {
		t.Run(reflect.TypeOf(tc.ev).Name(), func(t *testing.T) {
			newScript(t).feed(tc.ev).wantFx()
			sc := prepared(t).at(time.Second).feed(tc.ev).wantFx(tc.want)
			sc.feed(Release{Token: "ab-1"}).feed(tc.ev).wantFx()
		})
	}
}

// rule F6: a token extends the freeze it names, by a full TTL from the
// re-arm, and never arms a new one.
func TestRuleF6ATokenExtendsOnlyTheFreezeItNames(t *testing.T) {
	gone := Gone{Why: "that freeze is no longer active"}
	for _, tc := range []struct {
		name  string
		token string
		at    time.Duration
		want  any
	}{
		{"its token", "ab-1", 20 * time.Second, Answer{Token: "ab-1"}},
		{"no token", "", 20 * time.Second, gone},
		{"another token", "ab-2", 20 * time.Second, gone},
		{"its token after the lapse", "ab-1", cfg.FreezeTTL, gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := []any{tc.want}
			if tc.at >= cfg.FreezeTTL {
				// the lapse of a reported freeze is found as the request arrives
				want = []any{ConfirmOwner{}, tc.want}
			}
			sc := prepared(t).at(tc.at).feed(Rearm{Token: tc.token}).wantFx(want...)
			if _, ok := tc.want.(Answer); ok {
				if sc.s.Until != sc.now.Add(cfg.FreezeTTL) {
					t.Fatalf("until: got t0+%s, want t0+%s", sc.s.Until.Sub(t0), tc.at+cfg.FreezeTTL)
				}
				sc.at(tc.at + cfg.FreezeTTL - time.Nanosecond).wantHolds(true)
				return
			}
			sc.wantHolds(tc.at < cfg.FreezeTTL)
		})
	}
	// Released, the token names nothing.
	prepared(t).feed(Release{Token: "ab-1"}).feed(Rearm{Token: "ab-1"}).wantFx(gone).wantHolds(false)
}

// rule F9: the fence holds only while the freeze its token names holds
// and the partition's HWM is the copy's; it renews the TTL.
func TestRuleF9TheFenceChecksTheTokenAndTheHWMAndRenews(t *testing.T) {
	gone := Gone{Why: "that freeze is no longer active"}
	for _, tc := range []struct {
		name string
		ev   Fence
		at   time.Duration
		want any
	}{
		{"at the copy's HWM", Fence{Token: "ab-1", HWM: 7, LogHWM: 7}, 20 * time.Second, Answer{Token: "ab-1"}},
		{"the copy is behind", Fence{Token: "ab-1", HWM: 6, LogHWM: 7}, time.Second, Gone{Why: "high watermark moved: 7, the copy has 6"}},
		{"the copy is ahead", Fence{Token: "ab-1", HWM: 8, LogHWM: 7}, time.Second, Gone{Why: "high watermark moved: 7, the copy has 8"}},
		{"another token", Fence{Token: "zz-1", HWM: 7, LogHWM: 7}, time.Second, gone},
		{"no token", Fence{HWM: 7, LogHWM: 7}, time.Second, gone},
		{"lapsed", Fence{Token: "ab-1", HWM: 7, LogHWM: 7}, cfg.FreezeTTL, gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := []any{tc.want}
			if tc.at >= cfg.FreezeTTL {
				want = []any{ConfirmOwner{}, tc.want}
			}
			sc := prepared(t).at(tc.at).feed(tc.ev).wantFx(want...)
			wantUntil := t0.Add(cfg.FreezeTTL)
			if _, ok := tc.want.(Answer); ok {
				wantUntil = sc.now.Add(cfg.FreezeTTL)
			}
			if sc.s.Until != wantUntil {
				t.Fatalf("until: got t0+%s, want t0+%s", sc.s.Until.Sub(t0), wantUntil.Sub(t0))
			}
		})
	}
}

// rule F3, the gate: the prepare refuses the stash before anything else,
// and a write about to start checks the gate again.
func TestRuleF3TheGateRefusesTheStashBeforeTheReport(t *testing.T) {
	sc := newScript(t).feed(Prepare{Asker: "a", Nonce: 1, Partition: Partition{Settling: true}}).wantFx(RefuseStash{})
	sc.feed(Write{}).wantFx(RefuseStash{})
}

// rule F3, the in-flight batches: a prepare that finds a batch on its way
// to visibility reports only once the pipeline has settled, and the
// publish that settles it is not refused: the HWM is not reported yet.
func TestRuleF3APrepareReportsOnlyOnceEveryBatchPastTheGateSettled(t *testing.T) {
	sc := newScript(t).feed(Prepare{Asker: "a", Nonce: 1, Partition: Partition{Settling: true}}).wantFx(RefuseStash{})
	sc.at(time.Millisecond).feed(Publish{Awaiting: true}).wantFx().
		feed(Settled{Partition{Settling: true}}).wantFx().
		feed(Settled{settled}).wantFx(Report{Asker: "a", Token: "1-1"}).
		feed(Reported{Token: "1-1", HWM: 2, OK: true}).
		// Answered once: a later settle reports nothing.
		feed(Settled{settled}).wantFx()
	// Nothing is on its way in the pipeline now, whatever the lease poll says.
	sc.feed(Poll{Token: "1-1", Partition: settled}).wantFx()
}

// rule F3, the HWM: from the report until the freeze lapses or is
// released, a publish that would move the HWM is refused; one that makes
// nothing visible is not.
func TestRuleF3TheReportedHWMIsPinnedUntilTheLapseOrTheRelease(t *testing.T) {
	t.Run("reported", func(t *testing.T) {
		prepared(t).at(time.Second).
			feed(Publish{Awaiting: false}).wantFx().
			feed(Publish{Awaiting: true}).wantFx(RefusePublish{HWM: 7})
	})
	t.Run("released", func(t *testing.T) {
		prepared(t).feed(Release{Token: "ab-1"}).feed(Publish{Awaiting: true}).wantFx()
	})
	t.Run("lapsed, ownership confirmed", func(t *testing.T) {
		prepared(t).at(cfg.FreezeTTL).feed(Publish{Awaiting: true}).wantFx(ConfirmOwner{}, RefusePublish{HWM: 7}).
			feed(OwnerConfirmed{Owner: true}).wantFx(NotifyConsumers{}).
			feed(Publish{Awaiting: true}).wantFx()
	})
	t.Run("the listing failed", func(t *testing.T) {
		newScript(t).feed(Prepare{Asker: "a", Nonce: 1}).
			feed(Reported{Token: "1-1", HWM: 7, OK: false}).
			feed(Publish{Awaiting: true}).wantFx()
	})
	t.Run("a report of another token", func(t *testing.T) {
		newScript(t).feed(Prepare{Asker: "a", Nonce: 1}).
			feed(Reported{Token: "1-0", HWM: 7, OK: true}).
			feed(Publish{Awaiting: true}).wantFx()
	})
}

// rule F2: with leases out the prepare polls them every LeaseDrainPoll
// and reports once none is out or LeaseDrainTimeout has passed.
func TestRuleF2APrepareWaitsForLeasesOutUpToTheDrainTimeout(t *testing.T) {
	out := Partition{LeasesOut: 2}
	poll := SchedulePoll{Token: "1-1", After: cfg.LeaseDrainPoll}
	t.Run("acked meanwhile", func(t *testing.T) {
		newScript(t).feed(Prepare{Asker: "a", Nonce: 1, Partition: out}).wantFx(RefuseStash{}, poll).
			// One poll at a time: a settle meanwhile schedules no other.
			feed(Settled{out}).wantFx().
			at(10 * time.Millisecond).feed(Poll{Token: "1-1", Partition: Partition{LeasesOut: 1}}).wantFx(poll).
			at(20 * time.Millisecond).feed(Poll{Token: "1-1", Partition: settled}).wantFx(Report{Asker: "a", Token: "1-1"})
	})
	t.Run("still out at the deadline", func(t *testing.T) {
		newScript(t).feed(Prepare{Asker: "a", Nonce: 1, Partition: out}).
			at(cfg.LeaseDrainTimeout - time.Nanosecond).feed(Poll{Token: "1-1", Partition: out}).wantFx(poll).
			at(cfg.LeaseDrainTimeout).feed(Poll{Token: "1-1", Partition: out}).wantFx(Report{Asker: "a", Token: "1-1"})
	})
	t.Run("a quarter of a short TTL", func(t *testing.T) {
		sc := newScript(t)
		sc.c.FreezeTTL = time.Second
		sc.feed(Prepare{Asker: "a", Nonce: 1, Partition: out}).
			at(250*time.Millisecond - time.Nanosecond).feed(Poll{Token: "1-1", Partition: out}).wantFx(poll).
			at(250 * time.Millisecond).feed(Poll{Token: "1-1", Partition: out}).wantFx(Report{Asker: "a", Token: "1-1"})
	})
	t.Run("leases wait behind the pipeline", func(t *testing.T) {
		newScript(t).feed(Prepare{Asker: "a", Nonce: 1, Partition: Partition{Settling: true}}).wantFx(RefuseStash{}).
			at(time.Hour).feed(Poll{Token: "1-1", Partition: Partition{Settling: true}}).wantFx().
			feed(Settled{settled}).wantFx(Report{Asker: "a", Token: "1-1"})
	})
	t.Run("a poll of an earlier prepare", func(t *testing.T) {
		newScript(t).feed(Prepare{Asker: "a", Nonce: 1, Partition: out}).
			feed(Prepare{Asker: "b", Nonce: 1, Partition: out}).wantFx(RefuseStash{}, SchedulePoll{Token: "1-2", After: cfg.LeaseDrainPoll}).
			at(time.Hour).feed(Poll{Token: "1-1", Partition: settled}).wantFx().
			feed(Poll{Token: "1-2", Partition: settled}).wantFx(Report{Asker: "b", Token: "1-2"})
	})
}

// A release lifts the freeze its token names, wakes consumes and drops a
// prepare still waiting (its asker's fence will fail); any other token
// changes nothing. Either way the release is answered OK.
func TestAReleaseLiftsOnlyTheFreezeItsTokenNames(t *testing.T) {
	newScript(t).feed(Prepare{Asker: "a", Nonce: 1, Partition: Partition{Settling: true}}).
		feed(Release{Token: ""}).wantFx(Answer{}).wantHolds(true).
		feed(Release{Token: "1-0"}).wantFx(Answer{}).wantHolds(true).
		feed(Release{Token: "1-1"}).wantFx(NotifyConsumers{}, Answer{}).wantHolds(false).
		feed(Settled{settled}).wantFx().
		feed(Release{Token: "1-1"}).wantFx(Answer{})
}

// BenchmarkStepAFreeze runs one freeze from prepare to release with a
// commit refused and a re-arm: the decisions alone, against which a
// commit's fsync is measured.
func BenchmarkStepAFreeze(b *testing.B) {
	events := []any{Commit{}, Reserve{}, Prepare{Asker: "a", Nonce: 1, Partition: Partition{Settling: true}},
		Publish{Awaiting: true}, Settled{}, Reported{Token: "1-1", HWM: 10, OK: true}, Commit{}, Reserve{},
		Rearm{Token: "1-1"}, Fence{Token: "1-1", HWM: 10, LogHWM: 10}, Release{Token: "1-1"}}
	for b.Loop() {
		var s State
		for _, ev := range events {
			s, _ = Step(cfg, s, t0, ev)
		}
		if s.Holds(t0) {
			b.Fatal("got a freeze that holds after its release, want none")
		}
	}
}

// BenchmarkStepACommitThroughAnOpenGate is what every commit pays for the
// gate when no move is under way.
func BenchmarkStepACommitThroughAnOpenGate(b *testing.B) {
	var s State
	var fx []any
	for b.Loop() {
		s, fx = Step(cfg, s, t0, Commit{})
		if fx != nil {
			b.Fatalf("got %#v, want no effect", fx)
		}
	}
}

// A freeze that reported an HWM and lapsed without a release: a flip at
// that HWM may have committed while this node's replica has not applied
// it (the source cut off from the metastore right after the fence). Found
// by the move simulator (actors/move/sim, seed 3221 before the fix). So
// nothing commits or is consumed until a leader read confirms this node
// still owns the partition.
func TestALapsedReportedFreezeWaitsForTheOwnerToBeConfirmed(t *testing.T) {
	t.Run("not confirmed yet", func(t *testing.T) {
		prepared(t).at(cfg.FreezeTTL).
			feed(Commit{}).wantFx(ConfirmOwner{}, RefuseCommit{}).
			// one leader read at a time
			feed(Commit{}).wantFx(RefuseCommit{}).
			feed(Write{}).wantFx(RefuseStash{}).
			feed(Reserve{}).wantFx(PauseConsume{})
	})
	t.Run("the read failed: asked again", func(t *testing.T) {
		prepared(t).at(cfg.FreezeTTL).feed(Commit{}).wantFx(ConfirmOwner{}, RefuseCommit{}).
			feed(OwnerConfirmed{Err: true}).wantFx(ConfirmOwner{After: cfg.ConfirmRetry}).
			feed(Commit{}).wantFx(RefuseCommit{})
	})
	t.Run("another node owns it", func(t *testing.T) {
		prepared(t).at(cfg.FreezeTTL).feed(Commit{}).wantFx(ConfirmOwner{}, RefuseCommit{}).
			feed(OwnerConfirmed{Owner: false}).wantFx(ConfirmOwner{After: cfg.ConfirmRetry}).
			feed(Commit{}).wantFx(RefuseCommit{})
	})
	t.Run("confirmed", func(t *testing.T) {
		prepared(t).at(cfg.FreezeTTL).feed(Commit{}).wantFx(ConfirmOwner{}, RefuseCommit{}).
			feed(OwnerConfirmed{Owner: true}).wantFx(NotifyConsumers{}).
			feed(Commit{}).wantFx().
			feed(Reserve{}).wantFx()
	})
	t.Run("a freeze that never reported lapses without a read", func(t *testing.T) {
		newScript(t).feed(Prepare{Asker: "a", Nonce: 1, Partition: Partition{Settling: true}}).
			at(cfg.FreezeTTL).feed(Commit{}).wantFx()
	})
	t.Run("a released freeze needs no read", func(t *testing.T) {
		prepared(t).feed(Release{Token: "ab-1"}).at(cfg.FreezeTTL).feed(Commit{}).wantFx()
	})
}

// A partition that opens while a move targets it (this node crashed or
// restarted under a freeze) starts frozen for a TTL at its HWM, and then
// waits for a leader read: a flip the lost freeze was holding may still be
// on its way. Found by the move simulator (seed 10107 with -aim: a source
// back a second after a crash took commits as the flip committed).
func TestAPartitionReopenedUnderAMoveStartsFrozen(t *testing.T) {
	sc := newScript(t).feed(Reopen{HWM: 7, Nonce: 0xcd}).wantFx().wantHolds(true)
	sc.feed(Commit{}).wantFx(RefuseCommit{}).
		feed(Write{}).wantFx(RefuseStash{}).
		feed(Reserve{}).wantFx(PauseConsume{}).
		feed(Publish{Awaiting: true}).wantFx(RefusePublish{HWM: 7}).
		// a token of the freeze before the restart is not this one
		feed(Rearm{Token: "ab-1"}).wantFx(Gone{Why: "that freeze is no longer active"})
	// A destination freezing again takes it over as any prepare does.
	newScript(t).feed(Reopen{HWM: 7, Nonce: 0xcd}).
		feed(Prepare{Asker: "a", Nonce: 2}).wantFx(RefuseStash{}, Report{Asker: "a", Token: "2-2"})
	// Unattended, it lapses into a leader read like any reported freeze.
	sc.at(cfg.FreezeTTL).feed(Commit{}).wantFx(ConfirmOwner{}, RefuseCommit{}).
		feed(OwnerConfirmed{Owner: true}).wantFx(NotifyConsumers{}).
		feed(Commit{}).wantFx()
}

// rule F9: the fence promises the destination that the freeze holds until
// its flip commits, so while a reported freeze holds only the destination
// that armed it may prepare again; another's prepare (a move aborted
// while its destination was cut off, unaware) is refused and takes
// nothing over. A destination that names nobody (an older release) takes
// over as before.
func TestRuleF9APrepareOfAnotherDestinationNeverTakesAReportedFreezeOver(t *testing.T) {
	c := cfg
	s, _ := Step(c, State{}, t0, Prepare{Asker: "n1", Nonce: 1, From: "n1"})
	s, _ = Step(c, s, t0, Reported{Token: s.Token, HWM: 7, OK: true})
	held := s.Token
	s2, fx := Step(c, s, t0.Add(time.Second), Prepare{Asker: "n3", Nonce: 1, From: "n3"})
	if s2.Token != held || len(fx) != 1 {
		t.Fatalf("another destination's prepare: got token %q effects %v, want %q kept and one refusal", s2.Token, fx, held)
	}
	if g, ok := fx[0].(Gone); !ok {
		t.Fatalf("another destination's prepare: got %T, want Gone", fx[0])
	} else if g.Why == "" {
		t.Fatal("the refusal says nothing")
	}
	if again, _ := Step(c, s, t0.Add(time.Second), Prepare{Asker: "n1", Nonce: 1, From: "n1"}); again.Token == held {
		t.Fatal("the holder's own prepare: kept the old token, want a fresh freeze")
	}
	if old, _ := Step(c, s, t0.Add(time.Second), Prepare{Asker: "x", Nonce: 1}); old.Token == held {
		t.Fatal("a prepare naming nobody: kept the old token, want it to take over")
	}
	if lapsed, _ := Step(c, s, s.Until, Prepare{Asker: "n3", Nonce: 1, From: "n3"}); lapsed.Token == held || lapsed.Holder != "n3" {
		t.Fatalf("another destination's prepare once the freeze lapsed: got token %q holder %q, want a fresh freeze held by n3", lapsed.Token, lapsed.Holder)
	}
}

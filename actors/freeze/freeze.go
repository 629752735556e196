// Package freeze is the decision core of a partition's handoff freeze on
// the source of a move (seed 000, rules F1-F6, F9, F12): the gate that
// refuses commits and pauses consume while a destination drains the tail,
// and the order in which a prepare reports the HWM the move will flip at.
// Start with Step.
//
// Step(config, state, now, event) returns the next state and the effects
// to carry out; it reads no clock (now is the caller's), does no I/O and
// draws no random numbers (the token's nonce comes with the prepare). The
// partition actor runs it: it feeds in what happened (a handoff request, a
// commit arriving, a write about to start, a publish, the pipeline moving
// on, the lease poll firing) with what the gate must know of the partition
// at that moment, and carries out what comes back (answers, refusals, the
// listing, a timer). Every rule is tested alone in freeze_test.go, the test
// names quoting the rule.
//
// The ordering that makes the reported HWM final (rule F3):
//
//  1. The gate: a prepare arms the freeze, and from then on no commit is
//     written. New ones are refused (RefuseCommit), stashed ones are
//     refused with nothing appended (RefuseStash), and a write about to
//     start checks the gate again (Write).
//  2. The lock is the partition actor itself: Step runs for one message at
//     a time.
//  3. A batch already written passed the gate before the freeze; the
//     prepare's answer waits until every such batch has become visible or
//     failed (Partition.Settling, looked at again on Settled).
//  4. Only then is the HWM read, with the listing, and reported (Report,
//     then Reported). From then until the freeze lapses or is released the
//     HWM is pinned: a publish that would move it is refused
//     (RefusePublish), which nothing reaches unless 1-3 are broken.
package freeze

import (
	"fmt"
	"time"
)

// Config is the source's part of the seed's constants table.
type Config struct {
	// FreezeTTL is how long a freeze holds unless a token renews it (the
	// seed's 30 s): a destination that dies leaves nothing to clean up
	// (rule F12).
	FreezeTTL time.Duration
	// LeaseDrainTimeout bounds how long a prepare waits for leases out to
	// be acked or released before it reports (the seed's 500 ms); a quarter
	// of FreezeTTL bounds it too (rule F2).
	LeaseDrainTimeout time.Duration
	// LeaseDrainPoll is how often a waiting prepare looks at the leases
	// again: an ack does not tell the gate, the poll does.
	LeaseDrainPoll time.Duration
	// ConfirmRetry paces the leader reads of a partition whose reported
	// freeze lapsed, while they fail (see State.Unconfirmed).
	ConfirmRetry time.Duration
}

// State is one partition's freeze. The zero value is a partition that has
// never been frozen.
type State struct {
	// Token names the freeze a prepare armed; "" once released. Seq counts
	// the prepares this actor answered, so a token never repeats within a
	// nonce.
	Token string
	Seq   uint64
	// Until is when the freeze lapses unless renewed (rule F5).
	Until time.Time
	// Waiting: a prepare waits for its report. Asker is whom it answers,
	// opaque to the gate; Deadline ends its wait for leases out (rule F2).
	Waiting  bool
	Asker    any
	Deadline time.Time
	// Polling: a lease poll for the waiting prepare is scheduled.
	Polling bool
	// Reported: the prepare of Token answered with a listing at HWM, which
	// is pinned while the freeze holds.
	Reported bool
	HWM      int64
	// Holder is the destination whose prepare armed the freeze: while a
	// reported freeze holds, only it may prepare again (Prepare.From).
	Holder string
	// Unconfirmed: a freeze that reported an HWM lapsed without a release.
	// A flip at that HWM may have committed while this node's replica
	// has not applied it (the node was cut off from the metastore, or its
	// replica lags), and a commit taken now would land past the HWM the
	// new owner's copy ends at. So commits and consumes wait until a
	// leader read (a ReadIndex) that started after the lapse shows this
	// node still the owner; when it is not, the replica has the flip by
	// then and the partition is handed over. Confirming: that read is in
	// flight.
	Unconfirmed, Confirming bool
}

// Holds reports whether the freeze is armed and has not lapsed: commits
// are refused and consume pauses (rule F1).
func (s State) Holds(now time.Time) bool { return s.Token != "" && now.Before(s.Until) }

// Refuses reports whether commits are refused and consume pauses: a freeze
// holds, or a reported one lapsed and ownership is not yet confirmed.
func (s State) Refuses(now time.Time) bool { return s.Holds(now) || s.Unconfirmed }

// Pinned reports whether the HWM must stay where the freeze reported it.
func (s State) Pinned(now time.Time) bool { return s.Reported && s.Holds(now) }

// Partition is what the gate must know of its partition when a prepare
// may report.
type Partition struct {
	// Settling: a batch written before the gate armed is still on its way
	// to visibility (its fsync under way, or durable and awaiting its
	// commit frame). Reporting now would hand out an HWM it is about to
	// pass (rule F3).
	Settling bool
	// LeasesOut is how many leases are out (rule F2).
	LeasesOut int
}

// Events the partition actor feeds to Step.
type (
	// Prepare is PrepareHandoff: arm a fresh freeze and report. Nonce
	// makes the token unique across the actor's restarts.
	Prepare struct {
		Asker any
		Nonce uint64
		// From names the destination asking. While a freeze another
		// destination was reported holds, the prepare is refused: that
		// move may have fenced and proposed its flip, which counts on
		// this freeze holding until it commits, and a prepare of a move
		// aborted meanwhile (its destination cut off, unaware) would take
		// the freeze over and release it. "" is a destination that does
		// not say (an older release): it takes over, as before.
		From string
		Partition
	}
	// Rearm presents a token to extend its freeze (rule F6).
	Rearm struct{ Token string }
	// Fence presents a token with the HWM of the destination's copy;
	// LogHWM is the partition's HWM now (rule F9).
	Fence struct {
		Token       string
		HWM, LogHWM int64
	}
	// Release lifts the freeze a token names.
	Release struct{ Token string }
	// Commit is a commit arriving.
	Commit struct{}
	// Write is the pipeline about to write the commits it stashed.
	Write struct{}
	// Reserve is a consume asking for a lease.
	Reserve struct{}
	// Publish is the pipeline about to make a synced write visible;
	// Awaiting says it carries the commit frame of a batch, so the HWM
	// moves.
	Publish struct{ Awaiting bool }
	// Settled is the pipeline having moved on: a write became visible or
	// failed.
	Settled struct{ Partition }
	// Poll is the lease poll firing for the prepare of Token.
	Poll struct {
		Token string
		Partition
	}
	// Reported is what Report read: the listing's HWM, OK when the listing
	// could be read.
	Reported struct {
		Token string
		HWM   int64
		OK    bool
	}
	// Reopen is the partition opening while a move targets it, after a
	// crash or a restart of this node. A freeze it held before may be what
	// a flip still on its way counts on, and the freeze did not survive:
	// the partition starts frozen for a whole TTL at its HWM, as if that
	// HWM had been reported, so that when it lapses a leader read (which
	// by then sees any such flip) decides before anything commits. Nonce
	// makes its token one no destination holds.
	Reopen struct {
		HWM   int64
		Nonce uint64
	}
	// OwnerConfirmed is ConfirmOwner's leader read: Owner when the leader
	// names this node the partition's owner; Err when it could not be read.
	OwnerConfirmed struct {
		Owner bool
		Err   bool
	}
)

// Effects Step asks the partition actor to carry out.
type (
	// Answer answers the handoff request OK, with Token ("" for a
	// release).
	Answer struct{ Token string }
	// Gone answers the handoff request 409: that freeze is no longer
	// active, or the HWM is not the copy's.
	Gone struct{ Why string }
	// RefuseCommit answers the arriving commit StatusFrozen, nothing
	// appended: the dispatcher keeps its records and retries them (rule K2).
	RefuseCommit struct{}
	// RefuseStash answers every stashed commit StatusFrozen, nothing
	// appended (rule F3's gate, under the lock).
	RefuseStash struct{}
	// PauseConsume answers the reservation empty: consume pauses on this
	// partition only (rules F1, K4).
	PauseConsume struct{}
	// RefusePublish takes the synced write back instead of publishing it:
	// its frames truncated, its commits failed, logged and counted. HWM is
	// the reported one it would have moved.
	RefusePublish struct{ HWM int64 }
	// SchedulePoll arms the lease poll: Poll{Token} after After.
	SchedulePoll struct {
		Token string
		After time.Duration
	}
	// Report reads the listing (consumer position, then HWM and segments,
	// rule C7), feeds Reported back, and answers Asker with it and Token.
	Report struct {
		Asker any
		Token string
	}
	// NotifyConsumers wakes consumes waiting on the topic: this partition
	// serves again.
	NotifyConsumers struct{}
	// ConfirmOwner asks the leader, After from now, whether this node
	// still owns the partition (a linearizable read, after which the local
	// replica has every flip committed before it), and feeds
	// OwnerConfirmed back.
	ConfirmOwner struct{ After time.Duration }
)

// Step is the transition function: the next state and the effects to
// carry out, given the state, the caller's now and an event.
func Step(c Config, s State, now time.Time, ev any) (State, []any) {
	var lapse []any
	if s.Token != "" && s.Reported && !s.Holds(now) {
		// A reported freeze lapsed: until a leader read confirms this node
		// still owns the partition, nothing commits (State.Unconfirmed).
		s.Token, s.Reported, s.Waiting, s.Asker = "", false, false, nil
		s.Unconfirmed = true
		if !s.Confirming {
			s.Confirming = true
			lapse = []any{ConfirmOwner{}}
		}
	}
	s, fx := step(c, s, now, ev)
	return s, append(lapse, fx...)
}

func step(c Config, s State, now time.Time, ev any) (State, []any) {
	switch e := ev.(type) {
	case Reopen:
		s.Seq++
		s.Token = fmt.Sprintf("%x-%x-reopened", e.Nonce, s.Seq)
		s.Until, s.Reported, s.HWM = now.Add(c.FreezeTTL), true, e.HWM
		return s, nil
	case OwnerConfirmed:
		s.Confirming = false
		switch {
		case e.Err:
			s.Confirming = true
			return s, []any{ConfirmOwner{After: c.ConfirmRetry}}
		case !e.Owner:
			// The replica has the flip now; the partition is about to be
			// handed over. Ask again later in case it never is.
			s.Confirming = true
			return s, []any{ConfirmOwner{After: c.ConfirmRetry}}
		}
		if !s.Unconfirmed {
			return s, nil
		}
		s.Unconfirmed = false
		return s, []any{NotifyConsumers{}}
	case Prepare:
		if s.Reported && s.Holds(now) && e.From != "" && s.Holder != "" && e.From != s.Holder {
			return s, []any{Gone{Why: "frozen for another destination's move"}}
		}
		return prepare(c, s, now, e)
	case Rearm:
		// Presenting a token extends the freeze it names and never arms a
		// new one (rule F6).
		if !s.active(e.Token, now) {
			return s, []any{Gone{Why: "that freeze is no longer active"}}
		}
		s.Until = now.Add(c.FreezeTTL)
		return s, []any{Answer{Token: e.Token}}
	case Fence:
		// rule F9: the freeze still holds and the HWM is the copy's; the
		// fence renews the TTL.
		if !s.active(e.Token, now) {
			return s, []any{Gone{Why: "that freeze is no longer active"}}
		}
		if e.LogHWM != e.HWM {
			return s, []any{Gone{Why: fmt.Sprintf("high watermark moved: %d, the copy has %d", e.LogHWM, e.HWM)}}
		}
		s.Until = now.Add(c.FreezeTTL)
		return s, []any{Answer{Token: e.Token}}
	case Release:
		if e.Token == "" || e.Token != s.Token {
			return s, []any{Answer{}}
		}
		s.Token, s.Waiting, s.Asker, s.Reported = "", false, nil, false
		return s, []any{NotifyConsumers{}, Answer{}}
	case Commit:
		if s.Refuses(now) {
			return s, []any{RefuseCommit{}} // rule F1
		}
	case Write:
		if s.Refuses(now) {
			// A commit that passed the gate before it was armed is refused
			// with nothing appended (rule F3).
			return s, []any{RefuseStash{}}
		}
	case Reserve:
		if s.Refuses(now) {
			return s, []any{PauseConsume{}} // rules F1, K4
		}
	case Publish:
		if e.Awaiting && (s.Pinned(now) || s.Unconfirmed) {
			return s, []any{RefusePublish{HWM: s.HWM}}
		}
	case Settled:
		return report(c, s, now, e.Partition)
	case Poll:
		if e.Token != s.Token {
			return s, nil // a newer prepare took over; the old asker's fence will fail
		}
		s.Polling = false
		return report(c, s, now, e.Partition)
	case Reported:
		if e.Token == s.Token && e.OK {
			s.Reported, s.HWM = true, e.HWM
		}
	}
	return s, nil
}

// active reports whether token names the freeze that holds now.
func (s State) active(token string, now time.Time) bool {
	return token != "" && token == s.Token && s.Holds(now)
}

// prepare arms a fresh freeze (rules F1, F5): commits not yet written are
// refused now, and the answer waits for the batches already written (rule
// F3) and up to LeaseDrainTimeout (or a quarter of the TTL) for leases out
// to be acked or released (rule F2).
func prepare(c Config, s State, now time.Time, e Prepare) (State, []any) {
	s.Seq++
	s.Token = fmt.Sprintf("%x-%x", e.Nonce, s.Seq)
	s.Until = now.Add(c.FreezeTTL)
	// A poll scheduled for an earlier prepare is ignored by its token.
	s.Reported, s.Polling = false, false
	s.Waiting, s.Asker, s.Holder = true, e.Asker, e.From
	s.Deadline = now.Add(min(c.LeaseDrainTimeout, c.FreezeTTL/4))
	s, fx := report(c, s, now, e.Partition)
	return s, append([]any{RefuseStash{}}, fx...)
}

// report answers the waiting prepare once nothing written is still on its
// way to visibility and no lease is out or its deadline passed. The
// listing is read then, in the actor that is the partition's produce lock:
// every batch that passed the gate is in it, and no later one can land
// (rules F3, F4).
func report(c Config, s State, now time.Time, p Partition) (State, []any) {
	if !s.Waiting || p.Settling {
		return s, nil
	}
	if p.LeasesOut > 0 && now.Before(s.Deadline) {
		if s.Polling {
			return s, nil
		}
		s.Polling = true
		return s, []any{SchedulePoll{Token: s.Token, After: c.LeaseDrainPoll}}
	}
	asker := s.Asker
	s.Waiting, s.Asker = false, nil
	return s, []any{Report{Asker: asker, Token: s.Token}}
}

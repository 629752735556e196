package freeze

import (
	"fmt"
	"time"
)

// Gate is the partition actor's side of its freeze: what it refuses, and
// the prepare waiting to report. The zero value is an open gate.
type Gate struct {
	// Token names the freeze the gate is closed for (Close, Reopen); ""
	// while open.
	Token string
	// Waiting: a prepare waits for its report. Asker is whom it answers,
	// opaque to the gate; Deadline ends its wait for leases out (rule F2).
	Waiting  bool
	Asker    any
	Deadline time.Time
	// Polling: a lease poll for the waiting prepare is scheduled.
	Polling bool
	// Reported: the prepare of Token answered with a listing at HWM, which
	// is pinned while the gate is closed for Token.
	Reported bool
	HWM      int64
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

// Closed reports whether a freeze closes the gate: commits are refused and
// consume pauses (rule F1).
func (g Gate) Closed() bool { return g.Token != "" }

// Refuses reports whether commits are refused and consume pauses: the gate
// is closed, or a reported freeze lapsed and ownership is not yet
// confirmed.
func (g Gate) Refuses() bool { return g.Closed() || g.Unconfirmed }

// Pinned reports whether the HWM must stay where the freeze reported it.
func (g Gate) Pinned() bool { return g.Reported && g.Closed() }

// Messages between the two sides, each an effect of one Step and an event
// of the other.
type (
	// Close is the hold arming Token for a prepare: the gate closes and
	// Asker is answered once the report is due. The partition actor fills
	// in Partition as it takes the message.
	Close struct {
		Token string
		Asker any
		Partition
	}
	// Lapsed is the hold's word that Token's freeze lapsed: no re-arm or
	// fence of it is answered OK any more.
	Lapsed struct{ Token string }
	// Released is the hold's word that Token's freeze was released.
	Released struct{ Token string }
	// Pinned tells the hold that the gate reported Token's HWM.
	Pinned struct {
		Token string
		HWM   int64
	}
	// Reopened tells the hold that the gate opened frozen under Token
	// (Reopen).
	Reopened struct {
		Token string
		HWM   int64
	}
)

// Events the partition actor feeds to GateStep besides the hold's messages.
type (
	// Commit is a commit arriving.
	Commit struct{}
	// Write is the pipeline about to write the commits it stashed.
	Write struct{}
	// Reserve is a consume asking for a lease.
	Reserve struct{}
	// Publish is the pipeline about to make a synced write visible;
	// Awaiting says it carries records, so the HWM moves.
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
	// by then sees any such flip) decides before anything commits. The
	// gate closes at once, before any commit can arrive, and tells the
	// hold (Reopened), which keeps the time. Nonce makes its token one no
	// destination holds.
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

// Effects of GateStep the partition actor carries out (and Pinned and
// Reopened, sent to the hold).
type (
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

// GateStep is the gate's transition function: the next gate and the effects
// to carry out, given the gate, the caller's now (the lease drain's only)
// and an event.
func GateStep(c Config, g Gate, now time.Time, ev any) (Gate, []any) {
	switch e := ev.(type) {
	case Close:
		// rules F1, F3: the stash is refused before anything else, and
		// the answer waits for the pipeline and the leases (F2).
		g.Token, g.Reported, g.Polling = e.Token, false, false
		g.Waiting, g.Asker = true, e.Asker
		g.Deadline = now.Add(min(c.LeaseDrainTimeout, c.FreezeTTL/4))
		g, fx := report(c, g, now, e.Partition)
		return g, append([]any{RefuseStash{}}, fx...)
	case Reopen:
		g.Token = fmt.Sprintf("%x-reopened", e.Nonce)
		g.Waiting, g.Asker, g.Polling = false, nil, false
		g.Reported, g.HWM = true, e.HWM
		return g, []any{Reopened{Token: g.Token, HWM: e.HWM}}
	case Lapsed:
		if e.Token == "" || e.Token != g.Token {
			return g, nil // a freeze the gate no longer closes for
		}
		reported := g.Reported
		g.Token, g.Waiting, g.Asker, g.Polling, g.Reported = "", false, nil, false, false
		if !reported {
			return g, []any{NotifyConsumers{}}
		}
		// A reported freeze lapsed: until a leader read confirms this node
		// still owns the partition, nothing commits (Gate.Unconfirmed).
		g.Unconfirmed = true
		if g.Confirming {
			return g, nil
		}
		g.Confirming = true
		return g, []any{ConfirmOwner{}}
	case Released:
		if e.Token == "" || e.Token != g.Token {
			return g, nil
		}
		g.Token, g.Waiting, g.Asker, g.Polling, g.Reported = "", false, nil, false, false
		return g, []any{NotifyConsumers{}}
	case OwnerConfirmed:
		g.Confirming = false
		if e.Err || !e.Owner {
			// Not read, or the replica has the flip now and the partition
			// is about to be handed over: ask again later in case it never
			// is.
			g.Confirming = true
			return g, []any{ConfirmOwner{After: c.ConfirmRetry}}
		}
		if !g.Unconfirmed {
			return g, nil
		}
		g.Unconfirmed = false
		return g, []any{NotifyConsumers{}}
	case Commit:
		if g.Refuses() {
			return g, []any{RefuseCommit{}} // rule F1
		}
	case Write:
		if g.Refuses() {
			// A commit that passed the gate before it closed is refused
			// with nothing appended (rule F3).
			return g, []any{RefuseStash{}}
		}
	case Reserve:
		if g.Refuses() {
			return g, []any{PauseConsume{}} // rules F1, K4
		}
	case Publish:
		if e.Awaiting && (g.Pinned() || g.Unconfirmed) {
			return g, []any{RefusePublish{HWM: g.HWM}}
		}
	case Settled:
		return report(c, g, now, e.Partition)
	case Poll:
		if e.Token != g.Token {
			return g, nil // a newer prepare took over; the old asker's fence will fail
		}
		g.Polling = false
		return report(c, g, now, e.Partition)
	case Reported:
		if e.Token != "" && e.Token == g.Token && e.OK {
			g.Reported, g.HWM = true, e.HWM
			return g, []any{Pinned{Token: e.Token, HWM: e.HWM}}
		}
	}
	return g, nil
}

// report answers the waiting prepare once nothing written is still on its
// way to visibility and no lease is out or its deadline passed. The
// listing is read then, in the actor that is the partition's produce lock:
// every batch that passed the gate is in it, and no later one can land
// (rules F3, F4).
func report(c Config, g Gate, now time.Time, p Partition) (Gate, []any) {
	if !g.Waiting || p.Settling {
		return g, nil
	}
	if p.LeasesOut > 0 && now.Before(g.Deadline) {
		if g.Polling {
			return g, nil
		}
		g.Polling = true
		return g, []any{SchedulePoll{Token: g.Token, After: c.LeaseDrainPoll}}
	}
	asker := g.Asker
	g.Waiting, g.Asker = false, nil
	return g, []any{Report{Asker: asker, Token: g.Token}}
}

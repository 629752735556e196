package mover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/messages"
)

// Effects is the move worker's effect code: for each effect move.Step
// returns, which of its ports it calls, in what order, and what event
// their answer becomes. It is written once, for two homes. The node's
// worker (worker.go) gives it ports over the router, the metastore and
// the staging copy on disk, and runs its work on goroutines whose events
// come back through the actor's mailbox. The simulator (actors/move/sim)
// gives it ports over its model of the network, the metastore and the
// disks, and runs its work on its scheduler. So a fault in this code is a
// fault the simulator's seeds can find.
//
// The work handed to Edge.Go calls the ports with continuations. The
// node's ports answer before they return (the work already runs on a
// goroutine of its own); the simulator's answer later, from its
// scheduler. The code here must read the same either way: nothing after a
// port call but its continuation.
//
// Do, Absorb and Release run where the worker's state lives (the actor,
// or the simulator's step); the work they hand to Edge.Go reads only the
// fields set before the move started, never what the effects keep.
type Effects struct {
	// Key is the partition moved; Source its owner, the move's source;
	// NodeID this node, the destination; Since the target's TargetSince
	// when the move started (its flip is for this move only).
	Key            messages.PartitionKey
	NodeID, Source string
	Since          uint64
	// DeadTimeout is the force-promote gate's clock (rule P2);
	// RequestTimeout bounds each request to the source or the leaders.
	DeadTimeout, RequestTimeout time.Duration
	Logger                      *slog.Logger
	Knobs                       Knobs

	Edge Edge
	Peer SourcePort
	Meta MetaPort
	Copy LocalCopy

	// What the effects keep between an effect and its outcome: the
	// consumer position the copy ends at (the handoff's, or the last
	// pass's for a force-promote, rule P5), the last listing and when it
	// arrived, the prepare's listing for the first final pass.
	position   messages.ConsumerPosition
	lastList   *messages.PartitionListing
	listedAt   time.Time
	frozenList *frozenListing
	// copied and listed are the bytes copied so far and the size of the
	// last listing, for the progress report.
	copied, listed int64
	// droppedEarly: a stage dropped an earlier ownership's state (rule
	// K7's drop before the install), so the install under the freeze
	// drops only after it.
	droppedEarly bool
	// released: the source's freeze was lifted (Release).
	released bool
}

// Edge is where the effects' work runs and how its events come back to
// the worker's Step.
type Edge interface {
	// Now is the time since the worker started on a clock that only moves
	// forward and is never stepped: the freeze's deadlines and rule P2's
	// gate are measured on it.
	Now() time.Duration
	// Time is the time of day, for the ages stamped on the copy's files.
	Time() time.Time
	// After feeds ev back once d has passed.
	After(d time.Duration, ev any)
	// Go runs work and feeds back the event it hands done (at most once:
	// an answer lost with a stopped worker never comes). lane: the work
	// uses the staging copy; a later such work supersedes it.
	Go(lane bool, work func(ctx context.Context, done func(ev any)))
	// Note carries out an effect that only tells: move.Log, move.Block,
	// move.Unblock.
	Note(effect any)
}

// SourcePort is the move's source as the effects reach it: its freeze
// through Handoff, its listing through List (alone: never waiting for a
// group, as under a freeze).
type SourcePort interface {
	Handoff(ctx context.Context, h messages.Handoff, alone bool, done func(*messages.HandoffResult, error))
	List(ctx context.Context, alone bool, done func(*messages.PartitionListing, error))
}

// MetaPort is the metastore's leaders as the effects reach them: the
// flip, and the linearizable reads of the partition's assignment (rule
// X2) and of a member's record (rule P2).
type MetaPort interface {
	Flip(ctx context.Context, f messages.Flip, done func(messages.AssignResult, error))
	LeaderAssignment(ctx context.Context, done func(a messages.Assignment, found bool, err error))
	LeaderMember(ctx context.Context, id string, done func(m messages.Member, found bool, err error))
}

// LocalCopy is the staging copy and the partition's path on this node.
// Fill, Verify, Stage and Install are called where the worker's state
// lives and take what they need of it then; the work they return runs on
// the staging lane. Discard, RenameBack, Remove and Installed run where
// the worker's state lives, once the lane's work ended.
type LocalCopy interface {
	// Fill brings the copy to the listing: reconcile, then each missing
	// range read from the source (rules C1, C4, C6).
	Fill() func(ctx context.Context, ls *messages.PartitionListing, done func(copied int64, err error))
	// Verify checks the copy holds exactly the records below hwm (rule V1).
	Verify(hwm int64) func(ctx context.Context, done func(ok bool))
	// Stage verifies the caught-up copy at hwm and makes it durable as the
	// install would, before the freeze (issue 46).
	Stage(hwm int64) func(ctx context.Context, done func(StageOutcome))
	// Install puts the copy at the partition's path with its marker.
	Install(hwm int64, force bool) func(ctx context.Context, done func(InstallOutcome))
	// Installed takes an install's outcome where the worker's state lives.
	Installed(InstallOutcome)
	Discard()
	RenameBack()
	Remove()
}

// StageOutcome is a stage's: OK, the copy is durable at the HWM; Dropped,
// it dropped an earlier ownership's state (rule K7).
type StageOutcome struct{ OK, Dropped bool }

// InstallOutcome is an install's: Err nil, the copy is at the path (Dir:
// the directory it put there); PrepareRefused, the topic directory's
// preparation refused it (rule V10).
type InstallOutcome struct {
	Err            error
	Dir            os.FileInfo
	PrepareRefused bool
}

// frozenListing is a prepare's listing, read under the freeze token names.
type frozenListing struct {
	token   string
	listing *messages.PartitionListing
	at      time.Time
}

// fetched is a pass's outcome with the listing it copied to.
type fetched struct {
	pass    move.PassDone
	listing *messages.PartitionListing
	at      time.Time
	final   bool
}

// prepared is PrepareHandoff's outcome with the frontier it reported and
// the listing read under the freeze, when it arrived.
type prepared struct {
	frozen   move.Frozen
	position messages.ConsumerPosition
	listing  *messages.PartitionListing
	at       time.Time
}

// staged and installed are a stage's and an install's outcomes with the
// attempt they answer.
type staged struct {
	StageOutcome
	attempt uint64
}

type installed struct {
	InstallOutcome
	attempt uint64
}

// sourceConfirmed is the source's member record read through the leader
// (move.ConfirmSource); found false: it is no member.
type sourceConfirmed struct {
	member messages.Member
	found  bool
}

// Copied and Listed are the bytes copied so far and the size of the last
// listing.
func (x *Effects) Copied() int64 { return x.copied }
func (x *Effects) Listed() int64 { return x.listed }

// Do carries out one effect of move.Step; st is the state Step returned
// with it.
func (x *Effects) Do(st move.State, f any) {
	switch e := f.(type) {
	case move.Fetch:
		// The first final pass copies to the listing the prepare answered
		// with, read under the same freeze (the HWM it pins, rules F3, F4),
		// so it asks for none: a round trip less inside every freeze. Once
		// only: rule F8's second quiet pass and a retried pass ask again.
		var given *frozenListing
		if e.Final && x.frozenList != nil && x.frozenList.token == st.Token {
			given = x.frozenList
		}
		x.frozenList = nil
		fill := x.Copy.Fill()
		x.Edge.Go(true, func(c context.Context, done func(any)) { x.pass(c, fill, e.Final, e.Attempt, given, done) })
	case move.PrepareHandoff:
		// The freeze requests carry when they were sent, taken before the
		// request goes out: the source's freeze holds at least TTL past it
		// (rules F7, F9).
		sent := x.Edge.Now()
		x.Edge.Go(false, func(c context.Context, done func(any)) { x.prepare(c, sent, e.Attempt, done) })
	case move.ScheduleRearm:
		x.Edge.After(e.After, move.RearmDue{Token: e.Token})
	case move.Rearm:
		sent := x.Edge.Now()
		x.Edge.Go(false, func(c context.Context, done func(any)) {
			x.handoff(c, messages.Handoff{Op: messages.HandoffRearm, Token: e.Token}, false, func(r *messages.HandoffResult, err error) {
				done(move.Rearmed{Token: e.Token, Lapsed: err == nil && r.Status == messages.StatusGone, SentAt: sent, Err: err})
			})
		})
	case move.Fence:
		sent := x.Edge.Now()
		x.Edge.Go(false, func(c context.Context, done func(any)) { x.fence(c, e, sent, done) })
	case move.Verify:
		verify := x.Copy.Verify(e.HWM)
		x.Edge.Go(true, func(c context.Context, done func(any)) {
			verify(c, func(ok bool) { done(move.Verified{OK: ok, Attempt: e.Attempt}) })
		})
	case move.Stage:
		stage := x.Copy.Stage(e.HWM)
		x.Edge.Go(true, func(c context.Context, done func(any)) {
			stage(c, func(o StageOutcome) { done(staged{StageOutcome: o, attempt: e.Attempt}) })
		})
	case move.DiscardCopy:
		x.Copy.Discard()
	case move.Install:
		install := x.Copy.Install(e.HWM, e.Force)
		x.Edge.Go(true, func(c context.Context, done func(any)) {
			install(c, func(o InstallOutcome) { done(installed{InstallOutcome: o, attempt: e.Attempt}) })
		})
	case move.ProposeFlip:
		hwm := st.FinalHWM
		x.Edge.Go(false, func(c context.Context, done func(any)) { x.flip(c, hwm, e.Attempt, done) })
	case move.ReadLeader:
		x.Edge.Go(false, func(c context.Context, done func(any)) { x.readLeader(c, e.Attempt, done) })
	case move.RenameBack:
		x.Copy.RenameBack()
	case move.RemoveStaging:
		x.Copy.Remove()
	case move.ScheduleRetry:
		x.Edge.After(e.After, move.Retry{Attempt: e.Attempt})
	case move.ConfirmSource:
		x.Edge.Go(false, x.confirmSource)
	case move.Log, move.Block, move.Unblock:
		x.Edge.Note(e)
	default:
		panic(fmt.Sprintf("move worker: unknown effect %T", f))
	}
}

// Absorb keeps what an effect's outcome carries beyond its event, and
// answers the event for Step; st is the worker's state now. Timers'
// events pass through unchanged.
func (x *Effects) Absorb(st move.State, ev any) any {
	switch e := ev.(type) {
	case fetched:
		x.copied += e.pass.Copied
		if e.listing != nil && e.pass.Attempt == st.Attempt {
			x.listed = toStorageListing(e.listing).Bytes()
			x.lastList, x.listedAt = e.listing, e.at
			if !e.final {
				x.position = e.listing.Position // a force-promote installs the last pass's (rule P5)
			}
		}
		return e.pass
	case prepared:
		if e.frozen.Err == nil && e.frozen.Attempt == st.Attempt {
			x.position = e.position // rule F4: the in-memory frontier
			if e.listing.Status == messages.StatusOK {
				x.frozenList = &frozenListing{token: e.frozen.Token, listing: e.listing, at: e.at}
			}
		}
		return e.frozen
	case staged:
		if e.Dropped {
			x.droppedEarly = true
		}
		return move.Staged{OK: e.OK, Attempt: e.attempt}
	case installed:
		x.Copy.Installed(e.InstallOutcome)
		return move.Installed{Err: e.Err, Attempt: e.attempt, NotWhole: errors.Is(e.Err, errInvariant)}
	case sourceConfirmed:
		dead := !e.found || e.member.Status == messages.MemberDead
		return move.Watched(st, x.Edge.Now(), dead, e.member.Heartbeats, true, x.DeadTimeout)
	}
	return ev
}

// Release lifts the source's freeze of a move that will not flip, so the
// partition takes commits and serves consumes at once rather than when
// the TTL runs out. A freeze that lapsed or was replaced ignores it.
func (x *Effects) Release(token string) {
	if token == "" || x.released {
		return
	}
	x.released = true
	ctx, cancel := context.WithTimeout(context.Background(), x.RequestTimeout)
	defer cancel()
	x.Peer.Handoff(ctx, messages.Handoff{Op: messages.HandoffRelease, Token: token}, false, func(_ *messages.HandoffResult, err error) {
		if err != nil {
			x.Logger.Warn("move: release the source's freeze; it lapses on its TTL", "partition", keyString(x.Key), "err", err)
		}
	})
}

// pass is one copy pass: a listing from the source (or the prepare's,
// given), then every byte the copy lacks (fill). A pass that fails after
// its listing arrived still reports the listing's HWM: the copy must
// reach it before any force-promote (rule P4).
func (x *Effects) pass(ctx context.Context, fill func(context.Context, *messages.PartitionListing, func(int64, error)), final bool, attempt uint64, given *frozenListing, done func(any)) {
	failed := func(pass move.PassDone) {
		pass.Attempt = attempt
		done(fetched{pass: pass})
	}
	if f := x.Knobs.Pass; f != nil {
		if err := f(ctx, x.Key, final); err != nil {
			failed(move.PassDone{Err: err})
			return
		}
	}
	copyTo := func(ls *messages.PartitionListing, at time.Time) {
		if f := x.Knobs.Listed; f != nil {
			f(ctx, x.Key, ls.HWM)
		}
		if err := checkSidecars(x.Key, x.Source, ls); err != nil {
			// rule K8: the pass fails and is retried.
			failed(move.PassDone{Listed: true, HWM: ls.HWM, Err: err})
			return
		}
		fill(ctx, ls, func(copied int64, err error) {
			if err != nil {
				failed(move.PassDone{Listed: true, HWM: ls.HWM, Err: err})
				return
			}
			done(fetched{pass: move.PassDone{Copied: copied, HWM: ls.HWM, CopiedTo: ls.HWM, Attempt: attempt}, listing: ls, at: at, final: final})
		})
	}
	if given != nil {
		copyTo(given.listing, given.at)
		return
	}
	// Under the freeze the listing goes alone: no wait for a group.
	x.Peer.List(ctx, final, func(ls *messages.PartitionListing, err error) {
		switch {
		case err != nil:
			failed(move.PassDone{Err: err})
		case ls.Status != messages.StatusOK:
			failed(move.PassDone{Err: fmt.Errorf("list %s at %s: %v", keyString(x.Key), x.Source, messages.Describe(ls))})
		default:
			copyTo(ls, x.Edge.Time())
		}
	})
}

// handoff sends h to the source; an answer of StatusUnavailable is an
// error (the source cannot serve now), as is no answer.
func (x *Effects) handoff(ctx context.Context, h messages.Handoff, alone bool, done func(*messages.HandoffResult, error)) {
	x.Peer.Handoff(ctx, h, alone, func(r *messages.HandoffResult, err error) {
		if err == nil && r.Status == messages.StatusUnavailable {
			err = fmt.Errorf("handoff of %s at %s: %s: %w", keyString(x.Key), x.Source, r.Err, errs.ErrUnavailable)
		}
		done(r, err)
	})
}

// prepare asks the source to freeze the partition for this node.
func (x *Effects) prepare(ctx context.Context, sent time.Duration, attempt uint64, done func(any)) {
	x.handoff(ctx, messages.Handoff{Op: messages.HandoffPrepare, From: x.NodeID}, false, func(r *messages.HandoffResult, err error) {
		switch {
		case err != nil:
			done(move.Frozen{Err: err, Attempt: attempt})
		case r.Status != messages.StatusOK || r.Listing == nil:
			done(move.Frozen{Err: fmt.Errorf("prepare handoff of %s at %s: %s", keyString(x.Key), x.Source, r.Err), Attempt: attempt})
		default:
			done(prepared{frozen: move.Frozen{Token: r.Token, HWM: r.Listing.HWM, SentAt: sent, Attempt: attempt}, position: r.Listing.Position,
				listing: r.Listing, at: x.Edge.Time()})
		}
	})
}

// fence presents the token with the copy's HWM (rule F9); it goes alone,
// since every write to the partition waits for it.
func (x *Effects) fence(ctx context.Context, e move.Fence, sent time.Duration, done func(any)) {
	if x.Knobs.TrustFence {
		// The break: taken as accepted before the source answers.
		done(move.Fenced{SentAt: sent, Attempt: e.Attempt})
		done = func(any) {}
	}
	x.handoff(ctx, messages.Handoff{Op: messages.HandoffFence, Token: e.Token, HWM: e.HWM}, true, func(r *messages.HandoffResult, err error) {
		refused := err == nil && r.Status == messages.StatusGone
		if refused {
			x.Logger.Warn("move: fence refused; freezing and draining again", "partition", keyString(x.Key), "why", r.Err)
		}
		done(move.Fenced{Refused: refused, SentAt: sent, Err: err, Attempt: e.Attempt})
	})
}

// flip proposes the ownership change, naming the HWM the copy ends at so
// the source can check its own against it as it lets the partition go,
// and the move by its target's TargetSince, so a late flip never
// commits for a later move to the same target.
func (x *Effects) flip(ctx context.Context, hwm int64, attempt uint64, done func(any)) {
	if f := x.Knobs.Flip; f != nil {
		f(ctx, x.Key)
	}
	f := messages.Flip{Incarnation: x.Key.Incarnation, Partition: x.Key.Partition, From: x.Source, To: x.NodeID, HWM: &hwm, TargetSince: x.Since}
	x.Meta.Flip(ctx, f, func(r messages.AssignResult, err error) {
		switch {
		case err != nil:
			done(move.FlipAnswered{Err: err, Attempt: attempt})
		case r.Code == messages.ResultOK:
			done(move.FlipAnswered{Code: move.FlipOK, Attempt: attempt})
		case r.Code == messages.ResultNotFound:
			done(move.FlipAnswered{Code: move.FlipNotFound, Attempt: attempt})
		default:
			done(move.FlipAnswered{Code: move.FlipRefused, Attempt: attempt})
		}
	})
}

// readLeader reads the assignment linearizably (rule X2: a ReadIndex
// through the leader) and names its nodes as Step knows them.
func (x *Effects) readLeader(ctx context.Context, attempt uint64, done func(any)) {
	started := x.Edge.Now()
	x.Meta.LeaderAssignment(ctx, func(a messages.Assignment, found bool, err error) {
		if err != nil {
			done(move.LeaderRead{StartedAt: started, Err: err, Attempt: attempt})
			return
		}
		done(move.LeaderRead{StartedAt: started, Found: found, Attempt: attempt,
			Owner: move.Named(a.Owner, x.NodeID, x.Source), Target: move.Named(a.Target, x.NodeID, x.Source)})
	})
}

// confirmSource reads the source's member record through the leader: the
// gate passed on this node's replica, which a cut-off or lagging node may
// hold stale. No answer, no promote: SourceUnknown lets the next tick ask
// again.
func (x *Effects) confirmSource(ctx context.Context, done func(any)) {
	x.Meta.LeaderMember(ctx, x.Source, func(m messages.Member, found bool, err error) {
		if err != nil {
			x.Logger.Warn("move: confirm the source's death with the leader", "partition", keyString(x.Key), "source", x.Source, "err", err)
			done(move.SourceUnknown{})
			return
		}
		done(sourceConfirmed{member: m, found: found})
	})
}

package actors

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// The sweeper owns the quarantine book (quarantine.go): the members
// listing and the "quarantine" verbs read it and change it by message, and
// its walks and releases run off the mailbox, each handing its outcome back
// as a message. One walk runs at a time, so a slow walk never replaces a
// later one's inventory; an ask that needs a fresh inventory is answered by
// the first walk that starts after it came.

// quarantineAsk asks the sweeper for this node's figures: from the last
// inventory (a quarantineCountsAnswer), or, fresh, its listing from a walk
// started after the ask (a quarantineListAnswer).
type quarantineAsk struct{ fresh bool }

// quarantineCountsAnswer is this node's share of the members listing;
// taken is false until the first inventory.
type quarantineCountsAnswer struct {
	counts messages.QuarantineCounts
	taken  bool
}

// quarantineListAnswer is this node's listing, or why there is none.
type quarantineListAnswer struct {
	list messages.NodeQuarantine
	err  error
}

// quarantineRelease asks the sweeper to release one copy set aside (or to
// say what it would release); the answer, a quarantineReleaseAnswer, comes
// after the walk that follows the release, so the gauges already show it.
type quarantineRelease struct {
	req messages.QuarantineReleaseRequest
}

// quarantineReleaseAnswer is a release's outcome.
type quarantineReleaseAnswer struct {
	reply messages.QuarantineReleaseReply
	err   error
}

// inventoryTaken is a walk's outcome, handed back to the sweeper.
type inventoryTaken struct {
	snap quarantineSnapshot
	err  error
}

// releaseDone is a release's outcome, handed back to the sweeper with the
// asker to answer.
type releaseDone struct {
	to     *actor.PID
	answer quarantineReleaseAnswer
}

// bookWaiter is an asker waiting for the next walk: a listing (release
// nil) or a release's answer.
type bookWaiter struct {
	to      *actor.PID
	release *quarantineReleaseAnswer
}

// askQuarantine answers from the book, or queues the asker for a fresh
// walk; past QuarantineAsksMax asks waiting it answers 503 at once.
func (s *sweeperActor) askQuarantine(ctx actor.Context, m quarantineAsk) {
	if !m.fresh {
		b := s.book.snapshot()
		ctx.Respond(quarantineCountsAnswer{taken: b.taken,
			counts: messages.QuarantineCounts{QuarantinedBytes: b.bytes, ReclaimedBytes: s.book.reclaimedBytes()}})
		return
	}
	if s.asksFull() {
		ctx.Respond(quarantineListAnswer{err: transport.Errorf(transport.StatusUnavailable, "%s: %d quarantine asks are waiting; ask again", s.cfg.NodeID, s.cfg.QuarantineAsksMax)})
		return
	}
	s.nextWalk = append(s.nextWalk, bookWaiter{to: ctx.Sender()})
	s.walk(ctx)
}

// release runs a release off the mailbox.
func (s *sweeperActor) release(ctx actor.Context, m quarantineRelease) {
	if s.asksFull() {
		ctx.Respond(quarantineReleaseAnswer{err: transport.Errorf(transport.StatusUnavailable, "%s: %d quarantine asks are waiting; ask again", s.cfg.NodeID, s.cfg.QuarantineAsksMax)})
		return
	}
	s.releasing++
	self, root, to, d := ctx.Self(), ctx.ActorSystem().Root, ctx.Sender(), s.deps
	s.io.Go(func() {
		reply, err := releaseCopy(d, m.req)
		root.Send(self, releaseDone{to: to, answer: quarantineReleaseAnswer{reply: reply, err: err}})
	})
}

// released queues a release's answer behind the next walk.
func (s *sweeperActor) released(ctx actor.Context, m releaseDone) {
	s.releasing--
	s.nextWalk = append(s.nextWalk, bookWaiter{to: m.to, release: &m.answer})
	s.walk(ctx)
}

func (s *sweeperActor) asksFull() bool {
	return len(s.nextWalk)+len(s.thisWalk)+s.releasing >= s.cfg.QuarantineAsksMax
}

// walk starts an inventory walk off the mailbox for the waiters queued so
// far, unless one is running: its end starts the next.
func (s *sweeperActor) walk(ctx actor.Context) {
	if s.walking {
		return
	}
	s.walking, s.walkWanted = true, false
	s.thisWalk, s.nextWalk = s.nextWalk, nil
	self, root, dir := ctx.Self(), ctx.ActorSystem().Root, s.cfg.DataDir
	s.io.Go(func() {
		snap, err := takeInventory(dir)
		root.Send(self, inventoryTaken{snap: snap, err: err})
	})
}

// walked applies a walk's inventory and answers its waiters; a walk that
// failed leaves the last inventory in place and fails the listings.
func (s *sweeperActor) walked(ctx actor.Context, m inventoryTaken) {
	s.walking = false
	if m.err != nil {
		s.deps.log.Error("take the inventory of copies set aside; the quarantine gauges keep the last one", "err", m.err)
	} else {
		s.book.apply(m.snap)
	}
	for _, w := range s.thisWalk {
		if w.release != nil {
			ctx.Send(w.to, *w.release)
			continue
		}
		a := quarantineListAnswer{err: m.err}
		if m.err != nil {
			a.err = transport.Errorf(transport.StatusInternal, "%s: %v", s.cfg.NodeID, m.err)
		} else {
			a.list = nodeQuarantineOf(s.cfg.NodeID, s.book.snapshot(), s.book.reclaimedBytes(), s.cfg.QuarantineListMaxCopies, time.Now())
		}
		ctx.Send(w.to, a)
	}
	s.thisWalk = nil
	if len(s.nextWalk) > 0 || s.walkWanted {
		s.walk(ctx)
	}
}

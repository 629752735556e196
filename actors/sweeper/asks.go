package sweeper

import (
	"errors"
	"path/filepath"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The sweeper owns the quarantine book (book.go): the members listing and
// the "quarantine" verbs read it and change it by message, and its walks
// and releases run off the mailbox, each handing its outcome back as a
// message. One walk runs at a time, so a slow walk never replaces a later
// one's inventory; an ask that needs a fresh inventory is answered by the
// first walk that starts after it came.

// QuarantineAsk asks the sweeper for this node's figures: from the last
// inventory (a QuarantineCountsAnswer), or, Fresh, its listing from a walk
// started after the ask (a QuarantineListAnswer).
type QuarantineAsk struct{ Fresh bool }

// QuarantineCountsAnswer is this node's share of the members listing;
// Taken is false until the first inventory.
type QuarantineCountsAnswer struct {
	Counts messages.QuarantineCounts
	Taken  bool
}

// QuarantineListAnswer is this node's listing, or why there is none (a
// transport error, whose status the verb answers with).
type QuarantineListAnswer struct {
	List messages.NodeQuarantine
	Err  error
}

// QuarantineRelease asks the sweeper to release one copy set aside (or to
// say what it would release); the answer, a QuarantineReleaseAnswer,
// comes after the walk that follows the release, so the gauges already
// show it.
type QuarantineRelease struct {
	Req messages.QuarantineReleaseRequest
}

// QuarantineReleaseAnswer is a release's outcome.
type QuarantineReleaseAnswer struct {
	Reply messages.QuarantineReleaseReply
	Err   error
}

// inventoryTaken is a walk's outcome, handed back to the sweeper.
type inventoryTaken struct {
	inv inventory
	err error
}

// releaseDone is a release's outcome, handed back to the sweeper with the
// asker to answer.
type releaseDone struct {
	to     *actor.PID
	answer QuarantineReleaseAnswer
}

// bookWaiter is an asker waiting for the next walk: a listing (release
// nil) or a release's answer.
type bookWaiter struct {
	to      *actor.PID
	release *QuarantineReleaseAnswer
}

// askQuarantine answers from the book, or queues the asker for a fresh
// walk; past Config.QuarantineAsksMax asks waiting it answers 503 at once.
func (s *Actor) askQuarantine(ctx actor.Context, m QuarantineAsk) {
	if !m.Fresh {
		b := s.book.snapshot()
		ctx.Respond(QuarantineCountsAnswer{Taken: b.taken,
			Counts: messages.QuarantineCounts{QuarantinedBytes: b.bytes, ReclaimedBytes: s.book.reclaimedBytes()}})
		return
	}
	if s.asksFull() {
		ctx.Respond(QuarantineListAnswer{Err: transport.Errorf(transport.StatusUnavailable, "%s: %d quarantine asks are waiting; ask again", s.d.NodeID, s.d.Config.QuarantineAsksMax)})
		return
	}
	s.nextWalk = append(s.nextWalk, bookWaiter{to: ctx.Sender()})
	s.walk(ctx)
}

// release runs a release off the mailbox.
func (s *Actor) release(ctx actor.Context, m QuarantineRelease) {
	if s.asksFull() {
		ctx.Respond(QuarantineReleaseAnswer{Err: transport.Errorf(transport.StatusUnavailable, "%s: %d quarantine asks are waiting; ask again", s.d.NodeID, s.d.Config.QuarantineAsksMax)})
		return
	}
	s.releasing++
	self, root, to, d := ctx.Self(), ctx.ActorSystem().Root, ctx.Sender(), s.d
	s.io.Go(func() {
		reply, err := releaseCopy(d, m.Req)
		root.Send(self, releaseDone{to: to, answer: QuarantineReleaseAnswer{Reply: reply, Err: err}})
	})
}

// released queues a release's answer behind the next walk.
func (s *Actor) released(ctx actor.Context, m releaseDone) {
	s.releasing--
	s.nextWalk = append(s.nextWalk, bookWaiter{to: m.to, release: &m.answer})
	s.walk(ctx)
}

func (s *Actor) asksFull() bool {
	return len(s.nextWalk)+len(s.thisWalk)+s.releasing >= s.d.Config.QuarantineAsksMax
}

// walk starts an inventory walk off the mailbox for the waiters queued so
// far, unless one is running: its end starts the next.
func (s *Actor) walk(ctx actor.Context) {
	if s.walking {
		return
	}
	s.walking, s.walkWanted = true, false
	s.thisWalk, s.nextWalk = s.nextWalk, nil
	self, root, dir := ctx.Self(), ctx.ActorSystem().Root, s.d.DataDir
	s.io.Go(func() {
		inv, err := takeInventory(dir)
		root.Send(self, inventoryTaken{inv: inv, err: err})
	})
}

// walked applies a walk's inventory and answers its waiters; a walk that
// failed leaves the last inventory in place and fails the listings.
func (s *Actor) walked(ctx actor.Context, m inventoryTaken) {
	s.walking = false
	if m.err != nil {
		s.d.Logger.Error("take the inventory of copies set aside; the quarantine gauges keep the last one", "err", m.err)
	} else {
		s.book.apply(m.inv)
	}
	for _, w := range s.thisWalk {
		if w.release != nil {
			ctx.Send(w.to, *w.release)
			continue
		}
		a := QuarantineListAnswer{Err: m.err}
		if m.err != nil {
			a.Err = transport.Errorf(transport.StatusInternal, "%s: %v", s.d.NodeID, m.err)
		} else {
			a.List = nodeQuarantineOf(s.d.NodeID, s.book.snapshot(), s.book.reclaimedBytes(), s.d.Config.QuarantineListMaxCopies, clock.Or(s.d.LogConfig.Clock).Now())
		}
		ctx.Send(w.to, a)
	}
	s.thisWalk = nil
	if len(s.nextWalk) > 0 || s.walkWanted {
		s.walk(ctx)
	}
}

// releaseCopy removes one copy set aside in the data dir, or says what it
// would remove (a dry run), under the topic's guard so that no install,
// sweep or set-aside of that topic runs meanwhile. Audited. It runs off the
// sweeper's mailbox.
func releaseCopy(d Deps, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	out := messages.QuarantineReleaseReply{Node: d.NodeID, Path: in.Path, DryRun: in.DryRun}
	rel := filepath.FromSlash(in.Path)
	c, err := storage.QuarantinedAt(d.DataDir, rel)
	if err != nil {
		return out, releaseRefusal(d.NodeID, in.Path, err)
	}
	unlock := d.Guards.Lock(c.Topic)
	defer unlock()
	if c, err = storage.QuarantinedAt(d.DataDir, rel); err != nil {
		return out, releaseRefusal(d.NodeID, in.Path, err)
	}
	out.Kind, out.Bytes = string(c.Kind), c.Bytes
	if in.DryRun {
		return out, nil
	}
	if err := storage.ReleaseQuarantined(d.DataDir, rel); err != nil {
		return out, releaseRefusal(d.NodeID, in.Path, err)
	}
	out.Released = true
	d.Logger.Warn("audit cluster.quarantine.release", "path", in.Path, "kind", c.Kind, "topic", c.Topic, "partition", c.Partition, "bytes", c.Bytes)
	return out, nil
}

// releaseRefusal is a refused release as the caller should see it: 400
// for a path that is no copy set aside, 404 for one not there.
func releaseRefusal(node, path string, err error) error {
	switch {
	case errors.Is(err, storage.ErrInvalid):
		return transport.Errorf(400, "%q is not the path of a copy set aside on %s (as `narad cluster quarantine` lists them)", path, node)
	case errors.Is(err, storage.ErrNotFound):
		return transport.Errorf(404, "no copy set aside at %q on %s", path, node)
	}
	return transport.Errorf(transport.StatusInternal, "release %q on %s: %v", path, node, err)
}

package sweeper

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The stale-copy sweep (seed 000 "Stale copies", rules R5, S1-S8, P6): a
// partition moved off this node leaves its copy on this node's disk. Every
// SweepEveryTicks runner ticks the sweeper judges each such copy: it asks
// the partition's owner for its listing and move marker, lets sweep.Judge
// decide, and carries the verdict out under the topic's guard, where it
// re-checks everything the verdict relied on. It also removes a deleted
// topic's directory once the leader confirms the incarnation gone (S7).
// The pass runs on a goroutine of its own, one at a time; the actor only
// starts it and takes its report, then walks for the inventory of copies
// set aside, whose book it owns (asks.go). Node.Stop stops the actor,
// which cancels a pass or walk under way and waits for it.

// Name is the sweeper's name under the node's actor system root.
const Name = "sweeper"

// Due is the move runner telling the sweeper its tick count came round
// (rule R5).
type Due struct{}

// passDone is a pass's report.
type passDone struct{ report report }

// Store is what the sweeper reads of the metastore: the local replica's
// topic records and assignments, the leader's topic record and the
// catch-up barrier.
type Store interface {
	Topic(name string) (messages.Topic, bool)
	Assignment(incarnation uint64, partition int) (messages.Assignment, bool)
	// LeaderTopic reads the topic record on the metadata leader: a lagging
	// replica may still name an incarnation already deleted, or not yet
	// name a recreated one.
	LeaderTopic(ctx context.Context, name string) (messages.Topic, bool, error)
	// CatchUp returns once the local replica applied everything the
	// leaders had committed when it was called.
	CatchUp(ctx context.Context) error
}

// Owners reaches a partition's owner, whichever node that is (the node's
// router): the sweeper asks it for its listing (*messages.ListPartition).
type Owners interface {
	Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
}

// Deps is what the sweeper needs of its node. Every field is set by the
// node before the spawn and only read afterwards.
type Deps struct {
	// NodeID is this node: a copy it owns, or one targeted here, is not
	// the sweep's.
	NodeID string
	// DataDir is the node's data dir, whose topics/, .stale and .moves the
	// sweep and the book walk.
	DataDir string
	// LogConfig is how the node's partition logs are laid out, to list a
	// copy as its log would; its Clock reads the copies' times and ages.
	LogConfig storage.LogConfig
	// RequestTimeout bounds each ask of an owner or the leader and each
	// catch-up barrier.
	RequestTimeout time.Duration
	Config         Config
	Logger         *slog.Logger
	// Guards is the node's topic open guard: every reclaim, set-aside and
	// release runs under its topic's lock (rules V9, S6).
	Guards  *storage.Guards
	Store   Store
	Owners  Owners
	Metrics Metrics
}

// Actor is the sweeper: it runs the passes one at a time, owns the
// quarantine book, and answers the node's asks of it. Spawn it with New;
// the node stops it, which ends and waits for whatever it runs.
type Actor struct {
	d Deps
	// book is the node's inventory of copies set aside (its gauges, rule
	// S8), this actor's alone: walked again after each pass, each fresh
	// listing and each release (asks.go).
	book *Book
	// walking: a walk is under way, for the asks in thisWalk; nextWalk
	// wait for the one after it, as does a pass's end (walkWanted).
	// releasing counts the releases under way.
	walking, walkWanted bool
	thisWalk, nextWalk  []bookWaiter
	releasing           int
	// running: a pass is under way. stopped ends when the actor stops or
	// restarts, cancelling a pass; io waits for it and for the walks and
	// releases.
	running bool
	stopped context.Context
	stop    context.CancelFunc
	io      sync.WaitGroup
	// next is where the next pass starts, so that a node holding more
	// copies than a pass judges gets to all of them in turn.
	next int
}

// New is the sweeper of a node, over the book the node took at start
// (TakeQuarantineAtStart).
func New(d Deps, book *Book) *Actor { return &Actor{d: d, book: book} }

func (s *Actor) Receive(ctx actor.Context) {
	defer supervise.LogPanic(s.d.Logger, Name)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.stopped, s.stop = context.WithCancel(context.Background())
	case *actor.Stopping, *actor.Restarting:
		s.stop()
		s.io.Wait()
	case Due:
		s.start(ctx)
	case passDone:
		s.done(ctx, m.report)
	case QuarantineAsk:
		s.askQuarantine(ctx, m)
	case QuarantineRelease:
		s.release(ctx, m)
	case releaseDone:
		s.released(ctx, m)
	case inventoryTaken:
		s.walked(ctx, m)
	}
}

// start runs a pass unless one is under way (a slow pass skips a turn).
func (s *Actor) start(ctx actor.Context) {
	if s.running {
		return
	}
	s.running = true
	self, root, stopped, from := ctx.Self(), ctx.ActorSystem().Root, s.stopped, s.next
	s.io.Go(func() {
		root.Send(self, passDone{report: s.pass(stopped, from)})
	})
}

// done takes a pass's report and walks for the inventory it changed.
func (s *Actor) done(ctx actor.Context, r report) {
	s.record(r)
	s.walkWanted = true
	s.walk(ctx)
}

// record counts what a pass did.
func (s *Actor) record(r report) {
	s.running = false
	s.next = r.next
	s.book.reclaimed(r.reclaimedBytes)
	for a, n := range r.judged {
		s.d.Metrics.Judged(a).Add(n)
	}
	if r.reclaimedBytes > 0 || r.quarantined > 0 || r.deletedTopics > 0 {
		s.d.Logger.Info("stale-copy sweep", "judged", r.judged, "reclaimed_bytes", r.reclaimedBytes,
			"quarantined", r.quarantined, "deleted_topics", r.deletedTopics, "more", r.more)
	}
}

// keyString is a partition as the node's log lines name it.
func keyString(k messages.PartitionKey) string { return fmt.Sprintf("%s/%d", k.Topic, k.Partition) }

// Package departure is a node's hand-off at shutdown (seed 003, rules
// B8-B11), its departure from the partitions before it stops: on
// the first stop signal a node marks itself leaving in the metastore and
// waits while the controller moves every partition it owns to live nodes
// that are not leaving, paced (B5) and batched like any bulk move; then
// the node's Stop runs as usual, its WAL drain and budgets untouched
// (B10). A restart registers the node again, which clears the flag, and
// the rebalance brings its share back.
//
// Start with Leaver.HandOff, which `narad serve` calls on the first
// signal. The moves themselves are the controller's (actors/controller)
// and the mover's (actors/mover); this package only marks, watches and
// gives up.
package departure

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/messages"
)

// poll is how often HandOff looks at what the node still owns: a count
// from the local replica's owner index, no walk.
const poll = 50 * time.Millisecond

// Replica is what the hand-off reads and proposes through the node's
// metastore replica.
type Replica interface {
	OwnedCount(node string) int
	Member(id string) (messages.Member, bool)
	Members() []messages.Member
	SetLeaving(ctx context.Context, id string, leaving bool) error
	ReplicaID() uint64
	TransferAllLeadership(ctx context.Context, away uint64) error
}

// Deps is what a Leaver needs of its node. Every field is set before the
// first call and only read afterwards.
type Deps struct {
	NodeID  string
	Replica Replica
	Logger  *slog.Logger
	// RetryAfter is the wait before proposing the leaving flag again (the
	// move config's RetryAfter).
	RetryAfter time.Duration
	// Stopping reports whether the node's Stop began: a hand-off then has
	// nothing to do.
	Stopping func() bool
	// Clock paces the polls and times the log lines. The wall clock: the
	// hand-off runs against the signal's context deadline, which a
	// stepped clock would not move (nil is the wall clock).
	Clock clock.Clock
}

// Leaver hands a node's partitions off before it stops. Safe for
// concurrent use; Leaving may be read at any time.
type Leaver struct {
	d       Deps
	leaving atomic.Bool
}

// New is the hand-off of the node d describes.
func New(d Deps) *Leaver {
	d.Clock = clock.Or(d.Clock)
	return &Leaver{d: d}
}

// Leaving is true once HandOff began: /readyz answers 503 from then on.
func (l *Leaver) Leaving() bool { return l.leaving.Load() }

// HandOff hands this node's partitions to the other nodes before a stop
// (rule B8). It returns when the node owns nothing, when no other node
// can take partitions (every one is dead, draining or leaving too: nodes
// that stop together never take each other's, B11), after timeout, or
// when ctx ends (a second signal ends the hand-off at once, B9). A zero
// timeout skips it. It reports how many partitions the node owned when it
// began and how many it still owns.
func (l *Leaver) HandOff(ctx context.Context, timeout time.Duration) (before, after int, err error) {
	self, store, log, c := l.d.NodeID, l.d.Replica, l.d.Logger, l.d.Clock
	before = store.OwnedCount(self)
	if timeout <= 0 || l.d.Stopping() {
		return before, before, nil
	}
	l.leaving.Store(true) // /readyz answers 503 from now on
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := c.Now()
	took := func() time.Duration { return c.Now().Sub(start).Round(time.Millisecond) }
	log.Info("handing partitions off before stopping", "owned", before, "timeout", timeout)
	if err := l.markLeaving(ctx); err != nil {
		return before, before, err
	}
	lastLog := start
	for {
		owned := store.OwnedCount(self)
		if owned == 0 {
			log.Info("hand-off done: this node owns nothing", "handed_off", before, "took", took())
			l.handLeadershipOff(ctx)
			return before, 0, nil
		}
		if !l.anyReceiver() {
			log.Info("hand-off ends: no other node takes partitions (every other one is dead, draining or leaving)", "owned", owned, "took", took())
			return before, owned, nil
		}
		if now := c.Now(); now.Sub(lastLog) >= time.Second {
			lastLog = now
			log.Info("handing off", "owned", owned, "of", before, "elapsed", now.Sub(start).Round(time.Millisecond))
		}
		if clock.Sleep(ctx, c, poll) != nil {
			why := "the hand-off timeout passed"
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				why = "a second stop signal ended it"
			}
			log.Warn("hand-off ends with partitions still owned: "+why, "owned", owned, "of", before, "took", took())
			return before, owned, nil
		}
	}
}

// handLeadershipOff moves the leadership of the metastore shards this node
// leads to other voters before it stops: otherwise each waits out an
// election after the stop, and reads sent to the old leader meanwhile are
// dropped (the restart's catch-up and the controller's barrier among
// them). Best effort, bounded by a second: a stop never waits on it.
func (l *Leaver) handLeadershipOff(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := l.d.Replica.TransferAllLeadership(ctx, l.d.Replica.ReplicaID()); err != nil {
		l.d.Logger.Warn("hand-off: move metastore leadership away", "err", err)
	}
}

// markLeaving proposes the leaving flag until it is applied or ctx ends.
func (l *Leaver) markLeaving(ctx context.Context) error {
	for {
		err := l.d.Replica.SetLeaving(ctx, l.d.NodeID, true)
		if err == nil {
			return nil
		}
		// A proposal whose answer was cut short (a second signal) may
		// have committed: the node is leaving whatever the call said.
		if m, ok := l.d.Replica.Member(l.d.NodeID); ok && m.Leaving {
			return nil
		}
		l.d.Logger.Warn("hand-off: mark this node leaving", "err", err)
		if clock.Sleep(ctx, l.d.Clock, l.d.RetryAfter) != nil {
			return fmt.Errorf("hand-off: mark leaving: %w", err)
		}
	}
}

// anyReceiver reports whether another member, as the local replica has
// it, is alive and neither draining nor leaving: one that can take this
// node's partitions.
func (l *Leaver) anyReceiver() bool {
	for _, m := range l.d.Replica.Members() {
		if m.ID != l.d.NodeID && m.Status == messages.MemberAlive && !m.Draining && !m.Leaving {
			return true
		}
	}
	return false
}

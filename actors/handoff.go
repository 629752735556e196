package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/naradmq/narad/messages"
)

// The hand-off at shutdown (seed 003, rules B8-B11): on the first stop
// signal a node marks itself leaving in the metastore and waits while the
// controller moves every partition it owns to live nodes that are not
// leaving, paced (B5) and batched like any bulk move; then Stop runs as
// usual, its WAL drain and budgets untouched (B10). A restart registers
// the node again, which clears the flag, and the rebalance brings its share
// back.

// handoffPoll is how often HandOff looks at what the node still owns: a
// count from the local replica's owner index, no walk.
const handoffPoll = 50 * time.Millisecond

// HandOff hands this node's partitions to the other nodes before a stop
// (rule B8). It returns when the node owns nothing, when no other node
// can take partitions (every one is dead, draining or leaving too: nodes
// that stop together never take each other's, B11), after timeout, or
// when ctx ends (a second signal ends the hand-off at once, B9). A zero
// timeout skips it. It reports how many partitions the node owned when it
// began and how many it still owns.
func (n *Node) HandOff(ctx context.Context, timeout time.Duration) (before, after int, err error) {
	before = n.store.OwnedCount(n.cfg.NodeID)
	if timeout <= 0 || n.Stopping() {
		return before, before, nil
	}
	n.leaving.Store(true) // /readyz answers 503 from now on
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	n.log.Info("handing partitions off before stopping", "owned", before, "timeout", timeout)
	if err := n.markLeaving(ctx); err != nil {
		return before, before, err
	}
	lastLog := start
	for {
		owned := n.store.OwnedCount(n.cfg.NodeID)
		if owned == 0 {
			n.log.Info("hand-off done: this node owns nothing", "handed_off", before, "took", time.Since(start).Round(time.Millisecond))
			n.handLeadershipOff(ctx)
			return before, 0, nil
		}
		if !n.anyReceiver() {
			n.log.Info("hand-off ends: no other node takes partitions (every other one is dead, draining or leaving)", "owned", owned, "took", time.Since(start).Round(time.Millisecond))
			return before, owned, nil
		}
		if now := time.Now(); now.Sub(lastLog) >= time.Second {
			lastLog = now
			n.log.Info("handing off", "owned", owned, "of", before, "elapsed", now.Sub(start).Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			why := "the hand-off timeout passed"
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				why = "a second stop signal ended it"
			}
			n.log.Warn("hand-off ends with partitions still owned: "+why, "owned", owned, "of", before, "took", time.Since(start).Round(time.Millisecond))
			return before, owned, nil
		case <-time.After(handoffPoll):
		}
	}
}

// handLeadershipOff moves the leadership of the metastore shards this node
// leads to other voters before it stops: otherwise each waits out an
// election after the stop, and reads sent to the old leader meanwhile are
// dropped (the restart's catch-up and the controller's barrier among
// them). Best effort, bounded by a second: a stop never waits on it.
func (n *Node) handLeadershipOff(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := n.store.TransferAllLeadership(ctx, n.store.ReplicaID()); err != nil {
		n.log.Warn("hand-off: move metastore leadership away", "err", err)
	}
}

// markLeaving proposes the leaving flag until it is applied or ctx ends.
func (n *Node) markLeaving(ctx context.Context) error {
	for {
		err := n.store.SetLeaving(ctx, n.cfg.NodeID, true)
		if err == nil {
			return nil
		}
		// A proposal whose answer was cut short (a second signal) may
		// have committed: the node is leaving whatever the call said.
		if m, ok := n.store.Member(n.cfg.NodeID); ok && m.Leaving {
			return nil
		}
		n.log.Warn("hand-off: mark this node leaving", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("hand-off: mark leaving: %w", err)
		case <-time.After(n.cfg.Move.RetryAfter):
		}
	}
}

// anyReceiver reports whether another member, as the local replica has
// it, is alive and neither draining nor leaving: one that can take this
// node's partitions.
func (n *Node) anyReceiver() bool {
	for _, m := range n.store.Members() {
		if m.ID != n.cfg.NodeID && m.Status == messages.MemberAlive && !m.Draining && !m.Leaving {
			return true
		}
	}
	return false
}

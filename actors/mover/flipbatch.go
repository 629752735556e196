package mover

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// The flips of moves that finish together share their Raft entries: each
// move worker still proposes its own flip and handles its own result, but
// the node's FlipBatcher gathers the flips proposed within
// FlipBatchWindow, up to MaxFlipBatch, and proposes them with
// Store.FlipMany, one entry per assignment shard. Each flip is a
// compare-and-swap of its own inside the entry, so batching changes no
// outcome: only the round trips are shared.

// flipsInFlight bounds the batches proposed at once: a batch waits for
// its entries to commit, and the next flips should not wait behind it.
const flipsInFlight = 8

// FlipMany is metastore.Store.FlipMany.
type FlipMany func(ctx context.Context, flips []messages.Flip) []metastore.FlipOutcome

// FlipBatcher is the node's batcher of its move workers' flips. The node
// makes it (NewFlipBatcher), hands it to the runner in Deps.Flips, and
// closes it once the runner stopped.
type FlipBatcher struct {
	b *batcher[askedFlip, metastore.FlipOutcome]
}

// askedFlip is a flip with the deadline its caller waits for it until.
type askedFlip struct {
	flip     messages.Flip
	deadline time.Time
}

// errFlipNotProposed answers a flip whose caller stopped waiting before
// its batch was proposed: it never is.
var errFlipNotProposed = errors.New("not proposed: its caller stopped waiting")

// NewFlipBatcher batches flips by c's FlipBatchWindow (on clk) and
// MaxFlipBatch, each batch proposed with many within timeout at most.
func NewFlipBatcher(c Config, clk clock.Clock, timeout time.Duration, many FlipMany) *FlipBatcher {
	return &FlipBatcher{b: newBatcher(clk, c.FlipBatchWindow, c.MaxFlipBatch, flipsInFlight, func(asked []askedFlip) []metastore.FlipOutcome {
		// The callers' deadlines are their contexts', on the runtime's clock.
		return proposeAsked(many, asked, clock.DeadlineNow(), timeout)
	})}
}

// proposeAsked proposes the flips whose callers still wait, under the
// earliest of their deadlines: no flip is proposed, nor its proposal
// waited for, after its caller took it for an unknown outcome. Rule X5
// counts its settle time from that moment, the last unknown proposal as
// the worker knows it; a flip a batch proposed later could commit after a
// leader read the worker counted as settled, and the worker would take its
// install off the path of a partition that is its by then (issue 26).
func proposeAsked(many FlipMany, asked []askedFlip, now time.Time, timeout time.Duration) []metastore.FlipOutcome {
	out := make([]metastore.FlipOutcome, len(asked))
	deadline := now.Add(timeout)
	var flips []messages.Flip
	var at []int
	for i, a := range asked {
		if !a.deadline.IsZero() && !now.Before(a.deadline) {
			out[i].Err = fmt.Errorf("flip %d/%d: %w", a.flip.Incarnation, a.flip.Partition, errFlipNotProposed)
			continue
		}
		if !a.deadline.IsZero() && a.deadline.Before(deadline) {
			deadline = a.deadline
		}
		flips, at = append(flips, a.flip), append(at, i)
	}
	if len(flips) == 0 {
		return out
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	for j, o := range many(ctx, flips) {
		out[at[j]] = o
	}
	return out
}

// Flip proposes one flip in the next batch and waits for its outcome, as
// Store.Flip does: an error means the outcome is unknown (the worker
// resolves it with a leader read), including a flip that ctx ended before
// its answer, which is only the safe side of unknown.
func (fb *FlipBatcher) Flip(ctx context.Context, f messages.Flip) (messages.AssignResult, error) {
	if ctx.Err() != nil {
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: not proposed: %w", f.Incarnation, f.Partition, ctx.Err())
	}
	deadline, _ := ctx.Deadline()
	done, ok := fb.b.submit(askedFlip{flip: f, deadline: deadline})
	if !ok {
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: the node is stopping: %w", f.Incarnation, f.Partition, errs.ErrUnavailable)
	}
	select {
	case o := <-done:
		return o.Result, o.Err
	case <-ctx.Done():
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: no answer: %w", f.Incarnation, f.Partition, ctx.Err())
	}
}

// Close stops gathering and waits for the batches out; a flip asked after
// it answers errs.ErrUnavailable (unknown, to its worker).
func (fb *FlipBatcher) Close() { fb.b.close() }

// batchedFlips is the move store a worker sees: its flips go through the
// node's batcher.
type batchedFlips struct {
	Store
	flips *FlipBatcher
}

func (s batchedFlips) Flip(ctx context.Context, c messages.Flip) (messages.AssignResult, error) {
	return s.flips.Flip(ctx, c)
}

package actors

import (
	"context"
	"fmt"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// The flips of moves that finish together share their Raft entries: each
// move worker still proposes its own flip and handles its own result, but
// the node's flipBatcher gathers the flips proposed within
// FlipBatchWindow, up to MaxFlipBatch, and proposes them with
// Store.FlipMany, one entry per assignment shard. Each flip is a
// compare-and-swap of its own inside the entry, so batching changes no
// outcome: only the round trips are shared.

// flipsInFlight bounds the batches proposed at once: a batch waits for
// its entries to commit, and the next flips should not wait behind it.
const flipsInFlight = 8

// flipMany is Store.FlipMany.
type flipMany func(ctx context.Context, flips []messages.Flip) []metastore.FlipOutcome

type flipBatcher struct {
	b *batcher[messages.Flip, metastore.FlipOutcome]
}

func newFlipBatcher(c Config, many flipMany) *flipBatcher {
	timeout := c.RequestTimeout
	return &flipBatcher{b: newBatcher(c.FlipBatchWindow, c.MaxFlipBatch, flipsInFlight, func(flips []messages.Flip) []metastore.FlipOutcome {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return many(ctx, flips)
	})}
}

// Flip proposes one flip in the next batch and waits for its outcome, as
// Store.Flip does: an error means the outcome is unknown (the worker
// resolves it with a leader read), including a flip that ctx ended before
// its answer, which is only the safe side of unknown.
func (fb *flipBatcher) Flip(ctx context.Context, f messages.Flip) (messages.AssignResult, error) {
	if ctx.Err() != nil {
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: not proposed: %w", f.Incarnation, f.Partition, ctx.Err())
	}
	done, ok := fb.b.submit(f)
	if !ok {
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: the node is stopping: %w", f.Incarnation, f.Partition, ErrUnavailable)
	}
	select {
	case o := <-done:
		return o.Result, o.Err
	case <-ctx.Done():
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: no answer: %w", f.Incarnation, f.Partition, ctx.Err())
	}
}

// close stops gathering and waits for the batches out; a flip asked after
// it answers ErrUnavailable (unknown, to its worker).
func (fb *flipBatcher) close() { fb.b.close() }

// batchedFlips is the move store a worker sees: its flips go through the
// node's batcher.
type batchedFlips struct {
	moveStore
	flips *flipBatcher
}

func (s batchedFlips) Flip(ctx context.Context, c messages.Flip) (messages.AssignResult, error) {
	return s.flips.Flip(ctx, c)
}

package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// The flips of moves that finish together share their Raft entries (seed
// 003's batching across moves): each move worker still proposes its own
// flip and handles its own result, but the node's flipBatcher gathers the
// flips proposed within FlipBatchWindow, up to MaxFlipBatch, and proposes
// them with Store.FlipMany, one entry per assignment shard. Each flip is a
// compare-and-swap of its own inside the entry, so batching changes no
// outcome: only the round trips are shared.

// flipsInFlight bounds the batches proposed at once: a batch waits for
// its entries to commit, and the next flips should not wait behind it.
const flipsInFlight = 8

// flipMany is Store.FlipMany.
type flipMany func(ctx context.Context, flips []messages.Flip) []metastore.FlipOutcome

type flipReq struct {
	flip messages.Flip
	done chan metastore.FlipOutcome // buffered: the batcher never blocks on it
}

type flipBatcher struct {
	many    flipMany
	window  time.Duration
	max     int
	timeout time.Duration
	reqs    chan flipReq
	stop    chan struct{}
	// wg counts the run loop and the batches out; close waits for them.
	wg sync.WaitGroup
}

func newFlipBatcher(c Config, many flipMany) *flipBatcher {
	b := &flipBatcher{many: many, window: c.FlipBatchWindow, max: c.MaxFlipBatch, timeout: c.RequestTimeout,
		reqs: make(chan flipReq, c.MaxFlipBatch), stop: make(chan struct{})}
	b.wg.Go(b.run)
	return b
}

// Flip proposes one flip in the next batch and waits for its outcome, as
// Store.Flip does: an error means the outcome is unknown (the worker
// resolves it with a leader read), including a flip that ctx ended before
// it was proposed, which is only the safe side of unknown.
func (b *flipBatcher) Flip(ctx context.Context, f messages.Flip) (messages.AssignResult, error) {
	req := flipReq{flip: f, done: make(chan metastore.FlipOutcome, 1)}
	select {
	case <-b.stop:
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: the node is stopping: %w", f.Incarnation, f.Partition, ErrUnavailable)
	default:
	}
	select {
	case b.reqs <- req:
	case <-ctx.Done():
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: not proposed: %w", f.Incarnation, f.Partition, ctx.Err())
	case <-b.stop:
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: the node is stopping: %w", f.Incarnation, f.Partition, ErrUnavailable)
	}
	select {
	case o := <-req.done:
		return o.Result, o.Err
	case <-ctx.Done():
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: no answer: %w", f.Incarnation, f.Partition, ctx.Err())
	case <-b.stop:
		// It may be in a batch being proposed: unknown, not refused.
		return messages.AssignResult{}, fmt.Errorf("flip %d/%d: the node stopped before the answer: %w", f.Incarnation, f.Partition, ErrUnavailable)
	}
}

// run gathers a batch from the first flip for at most window, or until it
// holds max, and proposes it on a goroutine of its own (at most
// flipsInFlight out). It ends when close is called.
func (b *flipBatcher) run() {
	sem := make(chan struct{}, flipsInFlight)
	for {
		var batch []flipReq
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
		case <-b.stop:
			return
		}
		timer := time.NewTimer(b.window)
	gather:
		for len(batch) < b.max {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			case <-timer.C:
				break gather
			case <-b.stop:
				break gather
			}
		}
		timer.Stop()
		sem <- struct{}{}
		b.wg.Go(func() {
			defer func() { <-sem }()
			b.propose(batch)
		})
	}
}

func (b *flipBatcher) propose(batch []flipReq) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	flips := make([]messages.Flip, len(batch))
	for i, r := range batch {
		flips[i] = r.flip
	}
	out := b.many(ctx, flips)
	for i, r := range batch {
		r.done <- out[i]
	}
}

// close stops gathering and waits for the batches out; a flip asked after
// it answers ErrUnavailable (unknown, to its worker).
func (b *flipBatcher) close() {
	close(b.stop)
	b.wg.Wait()
}

// batchedFlips is the move store a worker sees: its flips go through the
// node's batcher.
type batchedFlips struct {
	moveStore
	flips *flipBatcher
}

func (s batchedFlips) Flip(ctx context.Context, c messages.Flip) (messages.AssignResult, error) {
	return s.flips.Flip(ctx, c)
}

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/messages"
)

// topic is the run's one topic, on a fresh cluster.
const topic = "chaos"

// padBytes pads each body past its id, so a record is about 150 bytes.
const padBytes = 128

// Attempts of one produce and of one ack. A produce's first attempt goes to
// its producer's node, each retry to the next node, so a node down costs
// one attempt; with the backoff (50 ms doubled up to 1 s) the attempts span
// several seconds, longer than a restart. An ack left unanswered is
// delivered again once its lease runs out: a duplicate, not a loss.
const (
	produceAttempts = 10
	ackAttempts     = 8
)

// consumeWait is each consume's long poll.
const consumeWait = time.Second

func backoff(attempt int) time.Duration {
	return client.Backoff(attempt, 50*time.Millisecond, time.Second)
}

// retryable is what a worker tries again: the contract's retryable errors
// (502, 503, no answer) and any other 5xx, which a node going down may
// answer too.
func retryable(err error) bool {
	var se *client.StatusError
	if errors.As(err, &se) && se.Status >= 500 {
		return true
	}
	return client.IsRetryable(err)
}

// workers are the producers and consumers of one run: they record what
// they did in hist and count what went wrong on the way.
type workers struct {
	bs    []*client.Broker
	hist  *history.History
	start time.Time
	// every is each producer's pause between two produces; 0 none.
	every time.Duration

	mu sync.Mutex
	// seen holds the ids delivered once; dups the time (since start) of
	// each delivery of an id already delivered.
	seen map[string]struct{}
	dups []time.Duration
	// errs keeps the first few errors no retry could help, for the report.
	errs []string

	produceRetries, produceGaveUp, produceRefused atomic.Int64
	consumeErrors, unreadable                     atomic.Int64
	ackRetries, ackGone, ackGaveUp, ackRefused    atomic.Int64
}

func newWorkers(bs []*client.Broker, cfg config, start time.Time) *workers {
	w := &workers{bs: bs, hist: history.New(), start: start, seen: map[string]struct{}{}}
	if cfg.rate > 0 {
		w.every = time.Duration(cfg.producers) * time.Second / time.Duration(cfg.rate)
	}
	return w
}

// maxErrs bounds the errors kept.
const maxErrs = 5

func (w *workers) note(what string, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.errs) < maxErrs {
		w.errs = append(w.errs, fmt.Sprintf("%s: %v", what, err))
	}
}

// producer produces records p<index>-<n> until stop is closed or ctx ends,
// at its share of -rate.
func (w *workers) producer(ctx context.Context, index int, stop <-chan struct{}) {
	next := time.Now()
	for n := 1; ; n++ {
		if w.every > 0 {
			// A producer held up by a fault does not catch up in a burst.
			next = next.Add(w.every)
			if floor := time.Now().Add(-time.Second); next.Before(floor) {
				next = floor
			}
			if d := time.Until(next); d > 0 {
				select {
				case <-stop:
					return
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		select {
		case <-stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		w.produce(ctx, index, fmt.Sprintf("p%d-%07d", index, n))
	}
}

// produce sends one record until a node answers 202, produceAttempts at
// most. Every attempt answered otherwise may have stored it (ProduceFailed);
// a retry that stores it again is a duplicate the history counts.
func (w *workers) produce(ctx context.Context, index int, id string) {
	body := history.MakeBody(id, padBytes)
	for attempt := 1; attempt <= produceAttempts; attempt++ {
		b := w.bs[(index+attempt-1)%len(w.bs)]
		err := b.Produce(ctx, topic, body, "", nil)
		if err == nil {
			w.hist.Produced(id)
			return
		}
		w.hist.ProduceFailed(id)
		if ctx.Err() != nil {
			return
		}
		if !retryable(err) {
			w.produceRefused.Add(1)
			w.note("produce "+id, err)
			return
		}
		w.produceRetries.Add(1)
		client.Sleep(ctx, backoff(attempt))
	}
	w.produceGaveUp.Add(1)
}

// consumer consumes from its node (index mod n) and acks each delivery
// until done says every record answered 202 was delivered (it then calls
// stop, which ends the other consumers' long polls too) or consumeCtx ends.
// After a failed consume it moves on to the next node. Acks use ctx: an
// ack is not cut short by the end of the drain.
func (w *workers) consumer(ctx, consumeCtx context.Context, index int, done func() bool, stop func()) {
	server, failures := index, 0
	for consumeCtx.Err() == nil {
		if done() {
			stop()
			return
		}
		b := w.bs[server%len(w.bs)]
		m, err := b.Consume(consumeCtx, topic, client.ConsumeOptions{Wait: consumeWait})
		if err != nil {
			if consumeCtx.Err() != nil {
				return
			}
			w.consumeErrors.Add(1)
			if !retryable(err) {
				w.note("consume", err)
			}
			failures++
			server++
			client.Sleep(consumeCtx, backoff(failures))
			continue
		}
		failures = 0
		if m == nil {
			continue
		}
		id, ok := history.ParseBody(m.Payload)
		if !ok {
			// Every body of this run carries an id: this one was
			// stored or served wrong.
			w.unreadable.Add(1)
			w.note("consume", fmt.Errorf("%s/%d@%d: a body without an id: %.80s", m.Topic, m.Partition, m.Offset, m.Payload))
		} else {
			w.delivered(id, m)
		}
		w.ack(ctx, server, m, id)
	}
}

// delivered records one delivery, and its time when the id was delivered
// before.
func (w *workers) delivered(id string, m *messages.MessageInfo) {
	w.hist.Consumed(id, m.Topic, m.Partition, m.Offset)
	at := time.Since(w.start)
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[id]; ok {
		w.dups = append(w.dups, at)
		return
	}
	w.seen[id] = struct{}{}
}

// ack acks m, first on the node that delivered it, each retry on the next
// node (any node forwards an ack to the partition's owner). 204 and 410
// both end the delivery for the worker: 410 says the lease ran out and the
// record will be delivered again, which the history counts as a
// duplicate.
func (w *workers) ack(ctx context.Context, server int, m *messages.MessageInfo, id string) {
	for attempt := 1; attempt <= ackAttempts; attempt++ {
		b := w.bs[(server+attempt-1)%len(w.bs)]
		err := b.Ack(ctx, topic, m.ReceiptHandle)
		switch {
		case err == nil:
			if id != "" {
				w.hist.Acked(id)
			}
			return
		case client.IsStatus(err, 410):
			w.ackGone.Add(1)
			return
		case ctx.Err() != nil:
			return
		case !retryable(err):
			w.ackRefused.Add(1)
			w.note(fmt.Sprintf("ack %d@%d", m.Partition, m.Offset), err)
			return
		}
		w.ackRetries.Add(1)
		client.Sleep(ctx, backoff(attempt))
	}
	w.ackGaveUp.Add(1)
}

// duplicateTimes returns the times of the duplicate deliveries, in the
// order they happened.
func (w *workers) duplicateTimes() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.dups...)
}

// refusals returns the errors kept.
func (w *workers) refusals() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.errs...)
}

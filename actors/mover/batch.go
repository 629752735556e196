package mover

import (
	"sync"
	"time"

	"github.com/naradmq/narad/actors/clock"
)

// batcher gathers the requests many goroutines make within a window and
// carries them out together (seed 003's batching across moves): the move
// workers' flips (flipbatch.go) and installs (installbatch.go). Each
// request still gets its own outcome. A batch starts with its first
// request and closes after window, or once it holds max; at most
// inFlight batches run at once, so the next ones gather meanwhile.
type batcher[T, R any] struct {
	clock    clock.Clock // times the window
	do       func(items []T) []R
	window   time.Duration
	max      int
	inFlight int
	reqs     chan batchReq[T, R]
	stop     chan struct{}
	// wg counts the run loop and the batches out; close waits for them.
	wg sync.WaitGroup
}

type batchReq[T, R any] struct {
	item T
	done chan R // buffered: the batcher never blocks on it
}

func newBatcher[T, R any](c clock.Clock, window time.Duration, max, inFlight int, do func([]T) []R) *batcher[T, R] {
	b := &batcher[T, R]{clock: clock.Or(c), do: do, window: window, max: max, inFlight: inFlight,
		reqs: make(chan batchReq[T, R], max), stop: make(chan struct{})}
	b.wg.Go(b.run)
	return b
}

// submit queues item for the next batch and returns the channel its
// outcome arrives on; ok is false when the batcher is closed (the item
// was not queued).
func (b *batcher[T, R]) submit(item T) (done <-chan R, ok bool) {
	select {
	case <-b.stop:
		return nil, false
	default:
	}
	req := batchReq[T, R]{item: item, done: make(chan R, 1)}
	select {
	case b.reqs <- req:
		return req.done, true
	case <-b.stop:
		return nil, false
	}
}

// run gathers a batch and carries it out on a goroutine of its own; it
// ends when close is called. A request queued as the batcher closes is
// still carried out: whoever submitted it is waiting for its outcome.
func (b *batcher[T, R]) run() {
	sem := make(chan struct{}, b.inFlight)
	for {
		var batch []batchReq[T, R]
		select {
		case r := <-b.reqs:
			batch = append(batch, r)
		case <-b.stop:
			b.drain(sem)
			return
		}
		timer := clock.NewAlarm(b.clock, b.window)
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
		b.start(sem, batch)
	}
}

// drain carries out what is still queued once the batcher is closing.
func (b *batcher[T, R]) drain(sem chan struct{}) {
	for {
		var batch []batchReq[T, R]
		for len(batch) < b.max {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
				continue
			default:
			}
			break
		}
		if len(batch) == 0 {
			return
		}
		b.start(sem, batch)
	}
}

func (b *batcher[T, R]) start(sem chan struct{}, batch []batchReq[T, R]) {
	sem <- struct{}{}
	b.wg.Go(func() {
		defer func() { <-sem }()
		items := make([]T, len(batch))
		for i, r := range batch {
			items[i] = r.item
		}
		out := b.do(items)
		for i, r := range batch {
			r.done <- out[i]
		}
	})
}

// close stops taking requests, carries out those queued and waits for
// every batch.
func (b *batcher[T, R]) close() {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	b.wg.Wait()
}

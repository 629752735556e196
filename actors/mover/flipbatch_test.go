package mover

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// fakeFlipMany records each batch and answers each flip by partition:
// even OK, odd refused; partition 99's batch fails as a whole (unknown).
type fakeFlipMany struct {
	mu      sync.Mutex
	batches [][]messages.Flip
	release chan struct{} // nil: answer at once
}

func (f *fakeFlipMany) many(ctx context.Context, flips []messages.Flip) []metastore.FlipOutcome {
	f.mu.Lock()
	f.batches = append(f.batches, flips)
	f.mu.Unlock()
	if f.release != nil {
		<-f.release
	}
	out := make([]metastore.FlipOutcome, len(flips))
	for i, fl := range flips {
		switch {
		case fl.Partition == 99:
			out[i].Err = errors.New("proposal timed out")
		case fl.Partition%2 == 0:
			out[i].Result.Code = messages.ResultOK
		default:
			out[i].Result.Code = messages.ResultRefused
		}
	}
	return out
}

// Flips proposed together share one FlipMany call, and each caller gets
// its own flip's outcome: batching changes no result (seed 003).
func TestFlipsProposedTogetherShareABatchAndEachGetsItsOwnOutcome(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FlipBatchWindow, cfg.MaxFlipBatch = time.Hour, 5 // a batch closes when full
	f := &fakeFlipMany{}
	b := NewFlipBatcher(cfg, nil, 10*time.Second, f.many)
	defer b.Close()
	type got struct {
		p    int
		code messages.ResultCode
		err  error
	}
	results := make(chan got, 5)
	for _, p := range []int{0, 1, 2, 3, 99} {
		go func() {
			r, err := b.Flip(t.Context(), messages.Flip{Partition: p, From: "a", To: "b"})
			results <- got{p, r.Code, err}
		}()
	}
	for range 5 {
		g := <-results
		switch {
		case g.p == 99 && g.err == nil:
			t.Errorf("partition 99: got no error, want its batch's unknown outcome")
		case g.p != 99 && g.err != nil:
			t.Errorf("partition %d: got error %v, want its own result", g.p, g.err)
		case g.p%2 == 0 && g.code != messages.ResultOK, g.p%2 == 1 && g.p != 99 && g.code != messages.ResultRefused:
			t.Errorf("partition %d: got code %d, want the one its flip was answered", g.p, g.code)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.batches) != 1 || len(f.batches[0]) != 5 {
		t.Fatalf("batches: got %d (first of %d), want one batch of 5", len(f.batches), len(f.batches[0]))
	}
}

// A batch is proposed once FlipBatchWindow passed since its first flip,
// full or not, and holds at most MaxFlipBatch.
func TestAFlipBatchClosesAfterItsWindowOrWhenFull(t *testing.T) {
	cfg := DefaultConfig()
	cfg.FlipBatchWindow, cfg.MaxFlipBatch = time.Millisecond, 2
	f := &fakeFlipMany{}
	b := NewFlipBatcher(cfg, nil, 10*time.Second, f.many)
	defer b.Close()
	if r, err := b.Flip(t.Context(), messages.Flip{Partition: 0}); err != nil || r.Code != messages.ResultOK {
		t.Fatalf("a lone flip: got %v %v, want OK once its window passed", r.Code, err)
	}
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() { b.Flip(t.Context(), messages.Flip{Partition: 2 * p}) })
	}
	wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, batch := range f.batches {
		if len(batch) > 2 {
			t.Fatalf("batch %d: got %d flips, want at most MaxFlipBatch 2", i, len(batch))
		}
	}
}

// A flip whose caller gives up is an unknown outcome, never a result.
func TestAFlipWhoseCallerGivesUpIsUnknown(t *testing.T) {
	cfg := DefaultConfig()
	f := &fakeFlipMany{release: make(chan struct{})}
	b := NewFlipBatcher(cfg, nil, 10*time.Second, f.many)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := b.Flip(ctx, messages.Flip{Partition: 0})
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want an error wrapping context.Canceled", err)
	}
	close(f.release)
	b.Close()
	if _, err := b.Flip(t.Context(), messages.Flip{Partition: 2}); !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("a flip after close: got %v, want ErrUnavailable", err)
	}
}

// rule X5 (issue 26): a flip whose caller gave up before its batch was
// proposed is never proposed, and a batch is proposed, and waited for, no
// longer than its earliest caller waits: the worker counts its settle
// time from when its flip's outcome turned unknown, and a flip proposed
// after that could commit after the worker took its install off the path.
func TestRuleX5AFlipIsNeverProposedAfterItsCallerGaveUp(t *testing.T) {
	now := time.Now()
	var proposed []messages.Flip
	var deadline time.Time
	many := func(ctx context.Context, flips []messages.Flip) []metastore.FlipOutcome {
		proposed = flips
		deadline, _ = ctx.Deadline()
		out := make([]metastore.FlipOutcome, len(flips))
		for i := range out {
			out[i].Result.Code = messages.ResultOK
		}
		return out
	}
	out := proposeAsked(many, []askedFlip{
		{flip: messages.Flip{Partition: 1}, deadline: now.Add(-time.Millisecond)}, // its caller gave up
		{flip: messages.Flip{Partition: 2}, deadline: now.Add(3 * time.Second)},
		{flip: messages.Flip{Partition: 3}, deadline: now.Add(8 * time.Second)},
	}, now, 10*time.Second)
	if !errors.Is(out[0].Err, errFlipNotProposed) {
		t.Errorf("flip of a caller that gave up: got %+v, want errFlipNotProposed", out[0])
	}
	if len(proposed) != 2 || proposed[0].Partition != 2 || proposed[1].Partition != 3 {
		t.Errorf("proposed: got %+v, want partitions 2 and 3", proposed)
	}
	if want := now.Add(3 * time.Second); !deadline.Equal(want) {
		t.Errorf("batch deadline: got %v, want the earliest caller's, %v", deadline, want)
	}
	if out[1].Result.Code != messages.ResultOK || out[2].Result.Code != messages.ResultOK {
		t.Errorf("outcomes of the flips proposed: got %+v, want each its own", out[1:])
	}
}

package actors

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

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
	b := newFlipBatcher(cfg, f.many)
	defer b.close()
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
	b := newFlipBatcher(cfg, f.many)
	defer b.close()
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
	b := newFlipBatcher(cfg, f.many)
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
	b.close()
	if _, err := b.Flip(t.Context(), messages.Flip{Partition: 2}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a flip after close: got %v, want ErrUnavailable", err)
	}
}

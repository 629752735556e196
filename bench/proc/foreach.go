package proc

import (
	"context"
	"errors"
	"sync"
)

// ForEach runs fn on every item with at most conc at once; the first error
// cancels the rest and is returned. The benches drive their clusters' many
// topics and partitions through it.
func ForEach[T any](ctx context.Context, items []T, conc int, fn func(context.Context, T) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan T)
	var wg sync.WaitGroup
	for range min(conc, len(items)) {
		wg.Go(func() {
			for it := range work {
				if err := fn(ctx, it); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for _, it := range items {
		select {
		case work <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

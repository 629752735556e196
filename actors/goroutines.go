package actors

import "context"

// untilClosed is a context for I/O an actor started on a goroutine of its
// own and waits for as it stops: closing stop cancels it, so the wait is
// short. cancel releases it once the I/O is over.
func untilClosed(stop <-chan struct{}) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(context.Background())
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

package mailbox

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/naradmq/narad/actors/clock"
)

// The pool runs every run it is given: on an idle worker when there is
// one, else on a new one, so a run that blocks holds no other back; a
// worker idle for its idle time ends.
func TestMailboxesRunEveryRunAndShrinkWhenIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(clock.Wall{}, 300, time.Second)
		block, blocked := make(chan struct{}), make(chan struct{})
		m.Schedule(func() { close(blocked); <-block })
		<-blocked
		var wg sync.WaitGroup
		wg.Add(10)
		for range 10 {
			m.Schedule(wg.Done) // one worker is held: these get others
		}
		wg.Wait()
		synctest.Wait()
		if got := m.workers.Load(); got < 2 || got > 11 {
			t.Fatalf("workers with one blocked: got %d, want 2 to 11", got)
		}
		before := m.workers.Load()
		wg.Add(1)
		m.Schedule(wg.Done) // an idle worker takes it: no new one
		wg.Wait()
		synctest.Wait()
		if got := m.workers.Load(); got != before {
			t.Fatalf("workers after a run with some idle: got %d, want %d (reused)", got, before)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := m.workers.Load(); got != 1 {
			t.Fatalf("workers after the idle time: got %d, want 1 (the blocked one)", got)
		}
		close(block)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := m.workers.Load(); got != 0 {
			t.Fatalf("workers after the last run and the idle time: got %d, want 0", got)
		}
	})
}

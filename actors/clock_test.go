package actors

import (
	"slices"
	"sync"
	"time"
)

// fakeClock is a node's clock that moves only when a test advances it.
// Timers that fall due fire in order on the advancing goroutine (they
// only send a message to an actor).
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
}

type fakeTimer struct {
	at time.Time
	f  func()
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now()} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), f: f})
}

// advance moves the clock by d and fires every timer due by then.
func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []fakeTimer
	c.timers = slices.DeleteFunc(c.timers, func(tm fakeTimer) bool {
		if tm.at.After(c.now) {
			return false
		}
		due = append(due, tm)
		return true
	})
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b fakeTimer) int { return a.at.Compare(b.at) })
	for _, tm := range due {
		tm.f()
	}
}

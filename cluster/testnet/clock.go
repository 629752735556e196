package testnet

import (
	"slices"
	"sync"
	"time"
)

// Clock is a node's clock that moves only when a test advances it, for the
// actors that take an injected clock (Now, AfterFunc). Timers that fall due
// fire in order on the advancing goroutine (they only send a message to an
// actor).
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers []clockTimer
}

type clockTimer struct {
	at time.Time
	f  func()
}

// NewClock is a Clock reading the wall clock's now until advanced.
func NewClock() *Clock { return &Clock{now: time.Now()} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc calls f once the clock is advanced by d or more.
func (c *Clock) AfterFunc(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.timers = append(c.timers, clockTimer{at: c.now.Add(d), f: f})
}

// Advance moves the clock by d and fires every timer due by then.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	var due []clockTimer
	c.timers = slices.DeleteFunc(c.timers, func(tm clockTimer) bool {
		if tm.at.After(c.now) {
			return false
		}
		due = append(due, tm)
		return true
	})
	c.mu.Unlock()
	slices.SortStableFunc(due, func(a, b clockTimer) int { return a.at.Compare(b.at) })
	for _, tm := range due {
		tm.f()
	}
}

// Pending is how many timers wait for the clock to reach them.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

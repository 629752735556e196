package testnet

import (
	"slices"
	"sync"
	"time"

	"github.com/naradmq/narad/actors/clock"
)

// Clock is a clock.Clock (actors/clock) that moves only when a test
// advances it. Timers that fall due fire in order on the advancing
// goroutine (they only send a message to an actor, or to a channel).
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	last   uint64 // the id of the last timer set
	timers []clockTimer
}

type clockTimer struct {
	id uint64
	at time.Time
	f  func()
}

// clockTimerRef is a pending timer of a Clock, to stop or reset.
type clockTimerRef struct {
	c  *Clock
	id uint64
	f  func()
}

// Reset sets the timer to fire once the clock is advanced by d from now,
// and reports whether it was still pending.
func (r clockTimerRef) Reset(d time.Duration) bool {
	was := r.Stop()
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.c.timers = append(r.c.timers, clockTimer{id: r.id, at: r.c.now.Add(d), f: r.f})
	return was
}

// Stop takes the timer off its clock, and reports whether it was still
// pending.
func (r clockTimerRef) Stop() bool {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	n := len(r.c.timers)
	r.c.timers = slices.DeleteFunc(r.c.timers, func(tm clockTimer) bool { return tm.id == r.id })
	return len(r.c.timers) < n
}

// NewClock is a Clock reading the wall clock's now until advanced.
func NewClock() *Clock { return &Clock{now: time.Now()} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc calls f once the clock is advanced by d or more, unless the
// timer is stopped first.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last++
	c.timers = append(c.timers, clockTimer{id: c.last, at: c.now.Add(d), f: f})
	return clockTimerRef{c: c, id: c.last, f: f}
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

// A test hands a Clock wherever a package takes a clock.Clock.
var _ clock.Clock = (*Clock)(nil)

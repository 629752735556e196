// Package clock is the only place in the node that reads the machine's
// clock. Every timestamp, deadline, timer and ticker of the actors, the
// cluster packages and storage goes through a Clock handed to them in
// their Deps or Config; a source scan (wallclock_test.go) fails on a
// direct read anywhere else. Start here, then look at a package's Deps to
// see which clock it takes.
//
// A node holds two clocks of this one type, and wires each package with
// the one its decisions need:
//
//   - the node clock (Deps.Clock where a package has both): the freeze,
//     leases and handoff TTLs, the dispatcher's retries, the limit on
//     failed logins. A test hands a fake one (cluster/testnet.Clock) and
//     moves it, so no test waits for a threshold to pass; the nemesis
//     (narad serve --debug-faults) steps it like a stepped wall clock.
//   - the steady clock (Deps.Steady, or a package's only Clock when the
//     node gives it this one): the cadences that pace a whole cluster
//     (heartbeats, the controller's liveness pass, the move runner's
//     tick), rule P2's worker time, record and segment times that clients
//     compare with their own, and the durations measured for metrics. It
//     is never stepped and never moved by a node-wide fake: a test that
//     moves the node clock by whole freeze TTLs would otherwise find every
//     member silent that long and dead. A package's own tests may still
//     hand it a fake.
//
// Both are Wall in production; a nil Clock is Wall (Or).
//
// A context's deadline is kept by the runtime on the wall clock, so a
// context.WithTimeout is a duration the runtime measures, not a read of
// ours, and the time left before a context's deadline is measured on the
// wall (Left).
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock is a source of time and timers. AfterFunc calls f on a goroutine
// of its own once d has passed, unless the Timer is stopped first; the
// actors only send themselves a message from f, so every decision still
// runs in a mailbox.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc. Stop keeps f from being called and
// reports whether it did (false: f has run or is running, or the timer
// was stopped before). Reset calls f once d has passed from now instead,
// and reports whether the timer was pending (false: f has run or was
// stopped, and runs again). A *time.Timer is one.
type Timer interface {
	Stop() bool
	Reset(d time.Duration) bool
}

// Wall is the machine's clock. Its times carry Go's monotonic reading, so
// the durations between them do not jump when the machine's clock is set.
type Wall struct{}

// Now is the wall clock's time.
func (Wall) Now() time.Time { return time.Now() }

// AfterFunc calls f once d has passed on the wall clock.
func (Wall) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Or is c, or Wall when c is nil: a Deps left without a clock runs on the
// wall clock.
func Or(c Clock) Clock {
	if c == nil {
		return Wall{}
	}
	return c
}

// Since is how long ago t was on c.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Until is how long until t on c.
func Until(c Clock, t time.Time) time.Duration { return t.Sub(c.Now()) }

// DeadlineNow is now on the clock the runtime keeps context deadlines on
// (the wall clock's), for code that compares a time with ctx.Deadline():
// whichever clock the caller decides by, a deadline is measured there.
func DeadlineNow() time.Time { return time.Now() }

// Left is the time before ctx's deadline, and whether it has one. The
// runtime keeps a context's deadline on the wall clock, so it is measured
// there whichever clock the caller decides by.
func Left(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return dl.Sub(DeadlineNow()), true
}

// Sleep waits d on c, or until ctx is done: nil when d passed, else ctx's
// error. The timer is stopped either way.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	a := NewAlarm(c, d)
	defer a.Stop()
	select {
	case <-a.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Alarm is a timer with a channel, for a goroutine that selects on it
// beside its stop: C receives c's time once d has passed, unless Stop
// came first.
type Alarm struct {
	C <-chan time.Time
	t Timer
}

// NewAlarm starts an Alarm of d on c.
func NewAlarm(c Clock, d time.Duration) *Alarm {
	ch := make(chan time.Time, 1)
	return &Alarm{C: ch, t: c.AfterFunc(d, func() {
		select {
		case ch <- c.Now():
		default: // a reset alarm whose earlier time was not taken
		}
	})}
}

// Stop keeps C from receiving, and reports whether it did. Like
// time.Timer's, it does not drain C.
func (a *Alarm) Stop() bool { return a.t.Stop() }

// Reset arms the alarm again for d from now, and reports whether it was
// pending. It does not drain C: a time sent before and not taken stays
// there, so a reader that must not see it drains C first.
func (a *Alarm) Reset(d time.Duration) bool { return a.t.Reset(d) }

// Ticker is a repeating Alarm: C receives c's time every d until Stop. A
// tick the reader has not taken yet is dropped rather than queued, as
// time.Ticker does, so a slow reader never finds a backlog.
type Ticker struct {
	C <-chan time.Time

	c       Clock
	d       time.Duration
	ch      chan time.Time
	mu      sync.Mutex
	next    Timer
	stopped bool
}

// NewTicker starts a Ticker of d (more than zero) on c.
func NewTicker(c Clock, d time.Duration) *Ticker {
	if d <= 0 {
		panic("clock: NewTicker with a period of zero or less")
	}
	ch := make(chan time.Time, 1)
	t := &Ticker{C: ch, c: c, d: d, ch: ch}
	t.mu.Lock()
	t.next = c.AfterFunc(d, t.tick)
	t.mu.Unlock()
	return t
}

// tick sends c's time and sets the next one, unless the ticker stopped.
func (t *Ticker) tick() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	select {
	case t.ch <- t.c.Now():
	default: // the reader has not taken the last one: drop this one
	}
	t.next = t.c.AfterFunc(t.d, t.tick)
}

// Stop ends the ticks: after it returns, C receives nothing new.
func (t *Ticker) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.next.Stop()
}

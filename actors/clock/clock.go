// Package clock is the time the node's actors decide by. The node hands
// each actor one Clock: Wall in production, a fake that moves only when a
// test advances it (cluster/testnet.Clock) in tests, so that no test waits
// for a threshold to pass. Start here to find what a test can move: every
// actor whose Deps has a Clock.
package clock

import "time"

// Clock is a source of time and timers. AfterFunc calls f on a goroutine
// of its own once d has passed; the actors only send themselves a message
// from it, so every decision still runs in a mailbox.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func())
}

// Wall is the machine's clock.
type Wall struct{}

// Now is the wall clock's time.
func (Wall) Now() time.Time { return time.Now() }

// AfterFunc calls f once d has passed on the wall clock.
func (Wall) AfterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

// Or is c, or Wall when c is nil: a Deps left without a clock runs on the
// wall clock.
func Or(c Clock) Clock {
	if c == nil {
		return Wall{}
	}
	return c
}

package clock

import "time"

// After is a channel closed once d has passed on c: time.After on the
// injected clock, for a loop that waits in a select beside its context.
// The timer is not stopped when the select takes another case; it fires
// later into a channel nobody reads, as time.After's did.
func After(c Clock, d time.Duration) <-chan struct{} {
	ch := make(chan struct{})
	c.AfterFunc(d, func() { close(ch) })
	return ch
}

package actors

import "time"

// clock is the time the actors' decisions read: a partition's handoff
// freeze, leases and consumer-flush timer, and the dispatcher's retries and
// reroute grace. Config.clock nil is the wall clock; tests hand a node a
// fake one, so that none of them waits for a threshold to pass. Record,
// segment and retention times stay on the wall clock: clients read them
// and compare them with their own.
type clock interface {
	Now() time.Time
	// AfterFunc calls f on a goroutine of its own once d has passed.
	AfterFunc(d time.Duration, f func())
}

type wallClock struct{}

func (wallClock) Now() time.Time                      { return time.Now() }
func (wallClock) AfterFunc(d time.Duration, f func()) { time.AfterFunc(d, f) }

// clockOrWall is the clock the node's actors run on.
func (c Config) clockOrWall() clock {
	if c.clock != nil {
		return c.clock
	}
	return wallClock{}
}

package actors

import "time"

// clock is the time the actors' decisions about one partition read: its
// handoff freeze, its leases and consumer-flush timer, and the
// dispatcher's retries and reroute grace. Config.clock nil is the wall
// clock; tests hand a node a fake one, so that none of them waits for a
// threshold to pass.
//
// On the wall clock stay: record, segment and retention times (clients
// read them and compare them with their own); and the cadences that pace
// a whole cluster: heartbeats, the controller's liveness pass and the move
// runner's tick. A test that moves a fake clock by whole freeze TTLs would
// otherwise find every member silent for that long and dead. Their
// decisions are pure functions of the time they are handed
// (membership.Tracker.Observe, scanDue), tested with times of the test's
// choosing.
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

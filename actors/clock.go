package actors

import "github.com/naradmq/narad/actors/clock"

// The node's actors decide by one injected clock (actors/clock): the
// partition actors (their handoff freeze, leases and consumer-flush
// timer), the freeze pacer and the dispatcher (retries, reroute grace).
// Config.clock nil is the wall clock; tests hand a node a fake one, so
// that none of them waits for a threshold to pass.
//
// On the wall clock stay: record, segment and retention times (clients
// read them and compare them with their own); and the cadences that pace
// a whole cluster: heartbeats, the controller's liveness pass and the move
// runner's tick. A test that moves a fake clock by whole freeze TTLs would
// otherwise find every member silent for that long and dead. Their
// decisions are pure functions of the time they are handed
// (membership.Tracker.Observe, scanDue), tested with times of the test's
// choosing.

// clockOrWall is the clock the node's actors run on.
func (c Config) clockOrWall() clock.Clock { return clock.Or(c.clock) }

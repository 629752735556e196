package actors

import "github.com/naradmq/narad/actors/clock"

// The node holds two clocks (package actors/clock says why), both nil
// for the wall clock:
//
//   - Config.clock, the node clock: the partition actors' handoff freeze,
//     leases and consumer-flush timer, the freeze pacer, the dispatcher's
//     retries and reroute grace, the failed-login limit. Tests hand a node
//     a fake one, so that none of them waits for a threshold to pass; the
//     nemesis (faults.go) steps it.
//   - Config.steady, the steady clock: record, segment and retention times
//     (clients compare them with their own; withClocks puts it in the
//     storage configs), commit deadlines (another node may have set
//     them), and the cadences that pace a whole cluster: heartbeats, the
//     controller's liveness pass, the commit notices. A test that moves
//     the node clock by whole freeze TTLs would otherwise find every
//     member silent for that long and dead. Their decisions are pure
//     functions of the time they are handed (membership.Tracker.Observe,
//     scanDue), tested with times of the test's choosing.

// clockOrWall is the clock the node's actors run on.
func (c Config) clockOrWall() clock.Clock { return clock.Or(c.clock) }

// steadyOrWall is the clock of the node's cadences and record times.
func (c Config) steadyOrWall() clock.Clock { return clock.Or(c.steady) }

// withClocks is c with the steady clock in its storage configs: the logs'
// record and segment times (which every reader of a log takes from
// Log.Clock), the WAL's and the sync lane's waits.
func (c Config) withClocks() Config {
	s := c.steadyOrWall()
	c.Log.Clock, c.WAL.Clock, c.SyncLane.Clock = s, s, s
	return c
}

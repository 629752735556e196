package dispatch

import (
	"fmt"
	"time"
)

// Config is the dispatcher's part of the node's configuration
// (actors.Config composes it as Dispatch). The limits that cross other
// parts of the node's configuration (the log's batch limits, the commit
// byte caps, which the node's NATS payload check reads too) are checked
// by actors.Config.Validate.
type Config struct {
	// CommitRetryInterval is how often the dispatcher retries a commit that
	// a partition refused or did not answer (the seed's "about once a second").
	CommitRetryInterval time.Duration
	// RerouteGrace is how long a partition's commits may fail before the
	// dispatcher sends what it holds to a live sibling partition (the
	// seed's 3 s: longer than a normal hand-off freeze).
	RerouteGrace time.Duration
	// MaxCommitBatchRecords caps one dispatcher commit: it is also the group
	// commit size of the partition log.
	MaxCommitBatchRecords int
	// MaxCommitsInFlight is how many commits the dispatcher keeps in flight
	// per partition owned here. Two keep a busy partition's next group
	// commit waiting in its stash while the first syncs.
	MaxCommitsInFlight int
}

// DefaultConfig is the dispatcher's settings as a node runs them.
func DefaultConfig() Config {
	return Config{CommitRetryInterval: time.Second, RerouteGrace: 3 * time.Second, MaxCommitBatchRecords: 1024, MaxCommitsInFlight: 2}
}

// Validate reports the first field out of range, naming it.
func (c Config) Validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("dispatch config: %s %v %s", field, v, why)
	}
	switch {
	case c.CommitRetryInterval <= 0:
		return bad("CommitRetryInterval", c.CommitRetryInterval, "must be positive")
	case c.RerouteGrace < c.CommitRetryInterval:
		return bad("RerouteGrace", c.RerouteGrace, "must be at least CommitRetryInterval")
	case c.MaxCommitBatchRecords < 1:
		return bad("MaxCommitBatchRecords", c.MaxCommitBatchRecords, "must be within 1..Log.MaxBatchRecords")
	case c.MaxCommitsInFlight < 1 || c.MaxCommitsInFlight > 16:
		return bad("MaxCommitsInFlight", c.MaxCommitsInFlight, "must be within 1..16")
	}
	return nil
}

package controller

import (
	"fmt"
	"time"
)

// Config is the controller's part of the node's configuration
// (actors.Config composes it as Controller). The node-wide settings the
// controller also reads (ControllerTimeout, RequestTimeout,
// MaxInFlightMoves, Membership) stay in actors.Config, where other code
// reads them too, and reach the controller in Deps.
type Config struct {
	// MetastoreVoters is how many voters the controller keeps in every
	// metastore shard by promoting non-voters when a voter leaves: three
	// survive one failure, and each voter more slows every commit.
	MetastoreVoters int
	// VoterCheckInterval is how often the controller compares the voters
	// with MetastoreVoters; each check reads the Raft membership.
	VoterCheckInterval time.Duration
	// MaxCreatesPerGroup bounds the topic creates the controller commits
	// together (one metadata round for their records, one PutAssignments
	// for their partitions): 64 creates of 100 partitions are 6,400
	// assignments, about 1,600 per entry of each of four shards, well
	// under an entry's 4,096; the rest wait for the next group.
	MaxCreatesPerGroup int
	// DeadTargetAbortAfter is how long a move's destination may be dead,
	// on the leader's clock, before the controller clears the target (2 min).
	DeadTargetAbortAfter time.Duration
	// RebalanceInterval is how often the controller's rebalance pass runs
	// on the metadata leader (clearing dead targets, planning, the
	// decommission steps) while nothing moves; RebalanceBusyInterval while
	// moves are in flight or a node sheds its partitions (100 ms): a bulk
	// move's slots are refilled as its moves end, not a second later. Each
	// pass is a barrier and a scan of the assignments, a few milliseconds
	// at 30,000 partitions.
	RebalanceInterval     time.Duration
	RebalanceBusyInterval time.Duration
	// Rebalance lets the controller plan moves; off, it sets no target (it
	// still clears the targets of dead destinations).
	Rebalance bool
}

// DefaultConfig is the controller's settings as a node runs them.
func DefaultConfig() Config {
	return Config{MetastoreVoters: 3, VoterCheckInterval: time.Second, MaxCreatesPerGroup: 64,
		DeadTargetAbortAfter: 2 * time.Minute, RebalanceInterval: time.Second, RebalanceBusyInterval: 100 * time.Millisecond,
		Rebalance: true}
}

// Validate reports the first field out of range, naming it.
func (c Config) Validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("controller config: %s %v %s", field, v, why)
	}
	switch {
	case c.MetastoreVoters < 1 || c.MetastoreVoters > 7:
		return bad("MetastoreVoters", c.MetastoreVoters, "must be within 1..7")
	case c.VoterCheckInterval <= 0:
		return bad("VoterCheckInterval", c.VoterCheckInterval, "must be positive")
	case c.MaxCreatesPerGroup < 1 || c.MaxCreatesPerGroup > 1024:
		return bad("MaxCreatesPerGroup", c.MaxCreatesPerGroup, "must be within 1..1024")
	case c.RebalanceInterval <= 0:
		return bad("RebalanceInterval", c.RebalanceInterval, "must be positive")
	case c.RebalanceBusyInterval <= 0 || c.RebalanceBusyInterval > c.RebalanceInterval:
		return bad("RebalanceBusyInterval", c.RebalanceBusyInterval, "must be positive and at most RebalanceInterval")
	case c.DeadTargetAbortAfter <= 0:
		return bad("DeadTargetAbortAfter", c.DeadTargetAbortAfter, "must be positive")
	}
	return nil
}

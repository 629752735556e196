package actors

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/route"
	"github.com/naradmq/narad/cluster/planner"
	"github.com/naradmq/narad/messages"
)

func TestNodeConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := map[string]func(*Config){
		"NodeID":                 func(c *Config) { c.NodeID = "" },
		"TopicDefaultPartitions": func(c *Config) { c.TopicDefaultPartitions = 2 },
		"MaxConsumeWait":         func(c *Config) { c.MaxConsumeWait = c.HTTPWriteTimeout },
		"MaxCommitBatchBytes":    func(c *Config) { c.MaxCommitBatchBytes = c.Log.MaxBodyBytes },
		"FanoutAnchorWait":       func(c *Config) { c.FanoutAnchorWait = c.HTTPWriteTimeout },
		"LeaseRequestTimeout":    func(c *Config) { c.LeaseRequestTimeout = 0 },
		"MaxAuthFailureSources":  func(c *Config) { c.MaxAuthFailureSources = 0 },
		"MaxAuthFailureUsers":    func(c *Config) { c.MaxAuthFailureUsers = 1000001 },
		"MaxHTTPConnections":     func(c *Config) { c.MaxHTTPConnections = 1 },
		// A long poll holds a connection: all of them waiting would leave
		// no room for the acks that free their records.
		"MaxConsumeLongPolls": func(c *Config) { c.MaxConsumeLongPolls = c.MaxHTTPConnections },
		"MaxAdminTimeout":     func(c *Config) { c.MaxAdminTimeout = time.Hour },
		// Two commits that queued during a sync are written as one batch:
		// together they must fit the log's batch limits.
		"MaxCommitsInFlight*MaxCommitBatchRecords": func(c *Config) { c.Dispatch.MaxCommitsInFlight = 8 },
		"MaxCommitsInFlight*MaxCommitBatchBytes":   func(c *Config) { c.MaxCommitBatchBytes = 10 << 20 },
		// The runner's full scan is at least its tick (actors/mover), and
		// the mover's own limits are checked with the node's.
		"Mover.FullScanEvery":              func(c *Config) { c.Mover.FullScanEvery = c.MoveTick - 1 },
		"Mover: mover config: ChunkWindow": func(c *Config) { c.Mover.ChunkWindow = 0 },
	}
	for field, mutate := range bad {
		c := DefaultConfig()
		mutate(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s out of range: got %v, want ErrInvalid naming it", field, err)
		}
	}
}

// rule B1: the planner keeps up to 512 moves in flight by default: a node
// leaving with 10,000 partitions gets 512 moves in the first round, and a
// round with 500 in flight tops them up to 512.
func TestRuleB1ThePlannerKeeps512MovesInFlightByDefault(t *testing.T) {
	max := DefaultConfig().MaxInFlightMoves
	members := []planner.Member{{ID: "a", Alive: true, Leaving: true}, {ID: "b", Alive: true}, {ID: "c", Alive: true}}
	var ps []planner.Placement
	for p := range 10000 {
		ps = append(ps, planner.Placement{Ref: planner.Ref{Topic: "t", Incarnation: 1, Partition: p}, Owner: "a"})
	}
	if got := len(planner.Plan(planner.NewInput(members, ps, max))); got != 512 {
		t.Fatalf("first round: got %d moves, want 512", got)
	}
	for p := range 500 {
		ps[p].Target = "b"
	}
	if got := len(planner.Plan(planner.NewInput(members, ps, max))); got != 12 {
		t.Fatalf("with 500 in flight: got %d moves, want 12", got)
	}
}

// rule R1: the move runner looks for partitions targeted at its node every
// MoveTick, a second unless told otherwise. (The runner's ticks are tested
// in actors/mover, TestRuleR1R4ANewTargetStartsItsWorkerOnTheNextTick.)
func TestRuleR1TheMoveTickIsASecondByDefault(t *testing.T) {
	if got := DefaultConfig().MoveTick; got != time.Second {
		t.Fatalf("default MoveTick: got %v, want 1s (rule R1)", got)
	}
}

// A lease operation sent to a peer is waited for LeaseRequestTimeout, every
// other request RequestTimeout: an ack whose owner was killed with it in
// flight is answered 503 in time for its retry to find the lease the
// owner's next life restores.
func TestALeaseOperationToAPeerIsWaitedForLeaseRequestTimeoutOnly(t *testing.T) {
	cfg := DefaultConfig()
	r := &route.Router{Timeout: cfg.RequestTimeout, LeaseTimeout: cfg.LeaseRequestTimeout}
	for _, tc := range []struct {
		msg  any
		want time.Duration
	}{
		{&messages.Lease{Action: messages.LeaseAck}, cfg.LeaseRequestTimeout},
		{&messages.Lease{Action: messages.LeaseNack}, cfg.LeaseRequestTimeout},
		{&messages.Commit{}, cfg.RequestTimeout},
		{&messages.Reserve{}, cfg.RequestTimeout},
		{&messages.GetStats{}, cfg.RequestTimeout},
	} {
		if got := r.Within(tc.msg); got != tc.want {
			t.Errorf("Within(%T %+v): got %v, want %v", tc.msg, tc.msg, got, tc.want)
		}
	}
	if cfg.LeaseRequestTimeout >= cfg.RequestTimeout {
		t.Fatalf("LeaseRequestTimeout %v: want it below RequestTimeout %v", cfg.LeaseRequestTimeout, cfg.RequestTimeout)
	}
	cfg.RequestTimeout = cfg.LeaseRequestTimeout / 2
	if got := cfg.leaseRequestTimeout(); got != cfg.RequestTimeout {
		t.Fatalf("under a RequestTimeout of %v: got %v, want it capped there", cfg.RequestTimeout, got)
	}
}

package controller

import (
	"fmt"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/cluster/membership"
	"github.com/naradmq/narad/cluster/metastore/metastoretest"
	"github.com/naradmq/narad/cluster/testnet"
)

// The controller's tests run its passes one call at a time (rebalance,
// place, createGroup, decommissionStep) over a fake replica and a store
// that records what the pass proposes; no cluster, no Raft. The cluster
// tests of the controller stay in the root package (controller_test.go,
// decommission_test.go), which starts nodes.

// fakeReplica is the tests' metastore replica in memory
// (metastoretest.Replica): the test writes topics, members and
// assignments into it, and the controller reads it (Replica, PlanReads).
type fakeReplica = metastoretest.Replica

func newFakeReplica() *fakeReplica { return metastoretest.NewReplica() }

// testMetrics is a Metrics on a set of its own, as the node's handle is on
// the node's (node is the series' node label).
func testMetrics(node string) Metrics {
	set := metrics.NewSet()
	name := func(base string) string { return fmt.Sprintf(`%s{node=%q}`, base, node) }
	return Metrics{
		Placed:         set.GetOrCreateCounter(name("narad_controller_placed_partitions_total")),
		Promoted:       set.GetOrCreateCounter(name("narad_controller_promotions_total")),
		CreateGroups:   set.GetOrCreateCounter(name("narad_controller_create_groups_total")),
		CreatesGrouped: set.GetOrCreateCounter(name("narad_controller_creates_total")),
		HeartbeatAge: func(member string, seconds float64) {
			set.GetOrCreateGauge(fmt.Sprintf(`narad_member_heartbeat_age_seconds{node=%q,member=%q}`, node, member), nil).Set(seconds)
		},
		MovesBlocked: func(reason string, n float64) {
			set.GetOrCreateGauge(fmt.Sprintf(`narad_moves_blocked{node=%q,reason=%q}`, node, reason), nil).Set(n)
		},
		DecommissionBlocked: func(member, reason string) *metrics.Gauge {
			return set.GetOrCreateGauge(fmt.Sprintf(`narad_decommission_blocked{node=%q,reason=%q}`, member, reason), nil)
		},
	}
}

// testDeps is the Deps a node with the default settings hands its
// controller, over s, without NATS.
func testDeps(t testing.TB, cfg Config, s Store) Deps {
	return Deps{Config: cfg, Membership: testMembership, Timeout: testTimeout, RequestTimeout: testRequestTimeout,
		MaxInFlightMoves: testMaxInFlightMoves, Logger: testnet.Logger(t), Store: s}
}

// The node-wide settings a node with the default config hands its
// controller in Deps (actors.DefaultConfig: Membership, ControllerTimeout,
// RequestTimeout, MaxInFlightMoves).
var (
	testMembership       = membership.Config{}.WithDefaults()
	testTimeout          = 10 * time.Second
	testRequestTimeout   = 10 * time.Second
	testMaxInFlightMoves = 512
)

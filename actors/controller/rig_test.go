package controller

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/cluster/membership"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// The controller's tests run its passes one call at a time (rebalance,
// place, createGroup, decommissionStep) over a fake replica and a store
// that records what the pass proposes; no cluster, no Raft. The cluster
// tests of the controller stay in the root package (controller_test.go,
// decommission_test.go), which starts nodes.

// fakeReplica is a metastore replica held in memory: the test writes
// topics, members and assignments into it. It holds only what the
// controller reads (Replica, PlanReads).
type fakeReplica struct {
	mu          sync.Mutex
	topics      map[string]messages.Topic
	members     map[string]messages.Member
	assignments map[messages.PartitionKey]messages.Assignment // keyed without the topic name
	version     uint64
}

func newFakeReplica() *fakeReplica {
	return &fakeReplica{topics: map[string]messages.Topic{}, members: map[string]messages.Member{},
		assignments: map[messages.PartitionKey]messages.Assignment{}}
}

func assignmentKey(incarnation uint64, partition int) messages.PartitionKey {
	return messages.PartitionKey{Incarnation: incarnation, Partition: partition}
}

// put sets topic t and the owner of each of its partitions.
func (f *fakeReplica) put(t messages.Topic, owners ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.topics[t.Name] = t
	for p, o := range owners {
		f.assignments[assignmentKey(t.Incarnation, p)] = messages.Assignment{Topic: t.Name, Incarnation: t.Incarnation, Partition: p, Owner: o}
	}
	f.version++
}

func (f *fakeReplica) Topic(name string) (messages.Topic, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[name]
	return t, ok
}

func (f *fakeReplica) Member(id string) (messages.Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[id]
	return m, ok
}

func (f *fakeReplica) Topics() []messages.Topic {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []messages.Topic
	for _, t := range f.topics {
		out = append(out, t)
	}
	return out
}

func (f *fakeReplica) Members() []messages.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []messages.Member
	for _, m := range f.members {
		out = append(out, m)
	}
	return out
}

func (f *fakeReplica) Assignments(incarnation uint64, partitions int) []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Incarnation == incarnation && a.Partition < partitions })
}

func (f *fakeReplica) OwnedBy(node string) []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Owner == node })
}

func (f *fakeReplica) TargetedAt(node string) []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Target == node })
}

func (f *fakeReplica) Moving() []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Target != "" })
}

func (f *fakeReplica) OwnedCount(node string) int { return len(f.OwnedBy(node)) }

// FirstSettled answers in (incarnation, partition) order, so a test's plan
// does not depend on map order; the store promises no order.
func (f *fakeReplica) FirstSettled(node string, k int) []messages.PartitionKey {
	as := f.collect(func(a messages.Assignment) bool { return a.Owner == node && a.Target == "" })
	slices.SortFunc(as, func(x, y messages.Assignment) int {
		return cmp.Or(cmp.Compare(x.Incarnation, y.Incarnation), cmp.Compare(x.Partition, y.Partition))
	})
	var out []messages.PartitionKey
	for _, a := range as[:min(k, len(as))] {
		out = append(out, messages.PartitionKey{Topic: a.Topic, Incarnation: a.Incarnation, Partition: a.Partition})
	}
	return out
}

func (f *fakeReplica) TopicParent(name string) (uint64, string, bool) {
	t, ok := f.Topic(name)
	return t.Incarnation, t.Parent, ok
}

func (f *fakeReplica) collect(keep func(messages.Assignment) bool) []messages.Assignment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []messages.Assignment
	for _, a := range f.assignments {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

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

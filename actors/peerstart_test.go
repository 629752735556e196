package actors

import (
	"testing"

	"github.com/naradmq/narad/messages"
)

// A node killed and started again is ready only once its metastore replica
// holds what was committed while it was down (CONTRACT.md §4: /readyz
// means the metastore caught up), though a peer, not the shard leaders,
// told it how far to catch up; and a peer proposed its registration.
func TestClusterARestartedNodeIsReadyOnlyOnceCaughtUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := newTestCluster(t, 3)
	c.waitFor("three members alive", func() bool { return len(c.memberStatuses(0)) == 3 })
	// Not the metadata leader: its controller answers the create.
	leader := c.leader()
	victim := (leader + 1) % 3
	c.kill(victim)
	id := c.node(victim).cfg.NodeID
	c.waitFor(id+" dead at the leader", func() bool { return c.memberStatuses(leader)[id] == "dead" })
	// Committed without the victim; the leaders' Raft transport holds
	// back from its address for a while after the kill.
	c.node(leader).createTopic("while-down", 3)
	c.restart(victim)
	n := c.node(victim).n
	if _, ok := n.store.Topic("while-down"); !ok {
		t.Fatalf("n%d ready after its restart: got no topic while-down in its replica, want the topic created while it was down", victim+1)
	}
	if got := n.metrics.registeredThroughPeer.Get(); got != 1 {
		t.Fatalf("n%d's registrations proposed by a peer: got %d, want 1", victim+1, got)
	}
	c.waitFor(id+" alive again at the leader", func() bool { return c.memberStatuses(leader)[id] == "alive" })
	t.Logf("n%d caught up through a peer: %d", victim+1, n.metrics.readyFromPeer.Get())
}

// A registration a peer proposed is waited for, until this node's own
// replica applied it, exactly when it changes what the node reads of
// itself (rule B8's restart: a node that was leaving reads itself back).
func TestRegistrationChanges(t *testing.T) {
	m := messages.Member{ID: "n1", ReplicaID: 1, HTTPAddr: "h:1", RaftAddr: "r:1", Role: messages.RoleVoter}
	alive := m
	alive.Status = messages.MemberAlive
	with := func(f func(*messages.Member)) messages.Member { b := alive; f(&b); return b }
	for _, tc := range []struct {
		name   string
		before messages.Member
		found  bool
		want   bool
	}{
		{"alive, same addresses", alive, true, false},
		{"no record yet", messages.Member{}, false, true},
		{"leaving", with(func(b *messages.Member) { b.Leaving = true }), true, true},
		{"dead", with(func(b *messages.Member) { b.Status = messages.MemberDead }), true, true},
		{"another HTTP address", with(func(b *messages.Member) { b.HTTPAddr = "h:2" }), true, true},
		{"another Raft address", with(func(b *messages.Member) { b.RaftAddr = "r:2" }), true, true},
		{"another replica id", with(func(b *messages.Member) { b.ReplicaID = 2 }), true, true},
		{"another role", with(func(b *messages.Member) { b.Role = messages.RoleNonVoter }), true, true},
		{"draining stays draining", with(func(b *messages.Member) { b.Draining = true }), true, false},
	} {
		if got := registrationChanges(tc.before, tc.found, m); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

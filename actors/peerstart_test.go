package actors

import "testing"

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
	if got := n.metrics.startup.RegisteredThroughPeer.Get(); got != 1 {
		t.Fatalf("n%d's registrations proposed by a peer: got %d, want 1", victim+1, got)
	}
	c.waitFor(id+" alive again at the leader", func() bool { return c.memberStatuses(leader)[id] == "alive" })
	t.Logf("n%d caught up through a peer: %d", victim+1, n.metrics.startup.ReadyFromPeer.Get())
}

package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

func (tn *testNode) members() map[string]messages.MemberInfo {
	tn.t.Helper()
	var b messages.MemberList
	if err := json.Unmarshal(tn.must(http.StatusOK, "GET", "/v1/cluster/members", nil), &b); err != nil {
		tn.t.Fatal(err)
	}
	out := map[string]messages.MemberInfo{}
	for _, m := range b.Members {
		out[m.ID] = m
	}
	return out
}

func TestANodeRegistersItselfAndStaysAlive(t *testing.T) {
	tn := newTestNode(t, func(c *Config) {
		c.Membership.HeartbeatInterval = 20 * time.Millisecond
		c.Membership.DeadTimeout = 200 * time.Millisecond
	})
	tn.createTopic("t", 3)
	waitFor(t, func() bool {
		m, ok := tn.n.store.Member("n1")
		return ok && m.Heartbeats > 10 // well past several DeadTimeouts' worth of passes
	})
	self := tn.members()["n1"]
	if self.Status != messages.MemberAlive || self.Addr != tn.n.Addr() || self.OwnedPartitions != 3 {
		t.Fatalf("members: got %+v, want n1 alive at %s owning 3 partitions", self, tn.n.Addr())
	}
}

// A member that stops heartbeating is marked dead by the metadata leader
// after DeadTimeout on the leader's own clock, and alive again when its
// heartbeats resume.
func TestASilentMemberIsMarkedDeadAndAliveAgainWhenItHeartbeats(t *testing.T) {
	tn := newTestNode(t, func(c *Config) {
		c.Membership.HeartbeatInterval = 20 * time.Millisecond
		c.Membership.DeadTimeout = 200 * time.Millisecond
	})
	ctx := context.Background()
	if _, err := tn.n.store.PutMember(ctx, messages.Member{ID: "n9", ReplicaID: 9, HTTPAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return tn.members()["n9"].Status == messages.MemberDead })
	if got := tn.members()["n1"].Status; got != messages.MemberAlive {
		t.Fatalf("the heartbeating node: got %s, want alive", got)
	}
	if err := tn.n.store.Heartbeat(ctx, "n9"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return tn.members()["n9"].Status == messages.MemberAlive })
}

// placedBy is how many partitions tn's controller has placed (its node's
// metrics set).
func placedBy(tn *testNode) uint64 {
	return tn.n.metrics.placed.Get()
}

// Topics created on a follower are placed by the controller on the
// metadata leader, balanced over the members; when the leadership moves,
// the controller moves with it.
func TestClusterTheControllerOnTheMetadataLeaderPlacesTopicsCreatedAnywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 nodes")
	}
	c := newTestCluster(t, 3)
	lead := c.leader()
	follower := (lead + 1) % 3
	leadID, followerID := fmt.Sprintf("n%d", lead+1), fmt.Sprintf("n%d", follower+1)

	beforeLead, beforeFollower := placedBy(c.node(lead)), placedBy(c.node(follower))
	c.node(follower).createTopic("first", 6)
	if got := placedBy(c.node(lead)) - beforeLead; got != 6 {
		t.Errorf("partitions placed by the leader %s: got %d, want 6", leadID, got)
	}
	if got := placedBy(c.node(follower)) - beforeFollower; got != 0 {
		t.Errorf("partitions placed by the follower %s: got %d, want 0", followerID, got)
	}
	owners, _ := ownersOf(t, c.node(lead), "first")
	perNode := map[string]int{}
	for _, o := range owners {
		perNode[o]++
	}
	if perNode["n1"] != 2 || perNode["n2"] != 2 || perNode["n3"] != 2 {
		t.Errorf("owners of 6 partitions over 3 members: got %v, want 2 each", perNode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterWaitBound)
	defer cancel()
	if err := c.node(lead).n.Store().TransferLeadership(ctx, metastore.MetaShard, uint64(follower+1)); err != nil {
		t.Fatalf("transfer the metadata leadership to %s: %v", followerID, err)
	}
	c.waitFor(followerID+" leading the metadata shard", func() bool { return c.leader() == follower })
	beforeFollower = placedBy(c.node(follower))
	c.node(lead).createTopic("second", 3)
	if got := placedBy(c.node(follower)) - beforeFollower; got != 3 {
		t.Errorf("partitions placed by the new leader %s: got %d, want 3", followerID, got)
	}
	c.node(lead).must(http.StatusAccepted, "POST", "/v1/topics/second/produce", []byte(`"x"`))
	if m := c.node(follower).consume("second", "wait=5s"); m == nil {
		t.Fatalf("consume on %s of a topic placed by the new leader: got nothing", followerID)
	}
}

// When a voter leaves the metastore, the controller promotes an alive
// non-voter in every shard, so the cluster keeps three voters.
func TestClusterANonVoterIsPromotedWhenAVoterLeaves(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes")
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) { cfg.Controller.VoterCheckInterval = 100 * time.Millisecond })
	j := c.join()
	joined := uint64(j + 1)
	lead := c.leader()
	gone := (lead + 1) % 3
	c.waitFor("n4 alive", func() bool { return c.memberStatuses(lead)["n4"] == messages.MemberAlive })
	if m, _ := c.node(lead).n.Store().Member("n4"); m.Role != messages.RoleNonVoter {
		t.Fatalf("n4 after joining: got role %q, want %q", m.Role, messages.RoleNonVoter)
	}

	c.kill(gone)
	ctx, cancel := context.WithTimeout(context.Background(), clusterWaitBound)
	defer cancel()
	if err := c.node(lead).n.Store().RemoveReplica(ctx, uint64(gone+1)); err != nil {
		t.Fatalf("remove n%d's replicas: %v", gone+1, err)
	}

	store := c.node(lead).n.Store()
	var last metastore.RaftMembership
	c.waitFor("n4 a voter of every shard", func() bool {
		for _, sh := range store.Shards() {
			rm, err := store.RaftMembership(ctx, sh)
			if err != nil {
				return false
			}
			last = rm
			if _, ok := rm.Voters[joined]; !ok || len(rm.Voters) != 3 {
				return false
			}
		}
		return true
	})
	if _, gone := last.Voters[uint64(gone+1)]; gone {
		t.Errorf("voters of shard %d: got %v, want the removed replica gone", last.Shard, last.Voters)
	}
	c.waitFor("n4's member record saying voter", func() bool {
		m, _ := store.Member("n4")
		return m.Role == messages.RoleVoter
	})
	c.node(j).createTopic("after-promotion", 3)
}

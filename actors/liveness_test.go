package actors

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

type membersBody struct {
	Members []memberJSON `json:"members"`
}

func (tn *testNode) members() map[string]memberJSON {
	tn.t.Helper()
	var b membersBody
	if err := json.Unmarshal(tn.must(http.StatusOK, "GET", "/v1/cluster/members", nil), &b); err != nil {
		tn.t.Fatal(err)
	}
	out := map[string]memberJSON{}
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

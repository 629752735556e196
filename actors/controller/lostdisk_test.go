package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// lostStore is decomStore with the re-creations a lost member's step
// proposes applied to its fake replica and recorded.
type lostStore struct {
	*decomStore
	recreated []messages.Recreate
}

func (s *lostStore) OwnedCount(node string) int { return len(s.replica.OwnedBy(node)) }
func (s *lostStore) RecreateMany(_ context.Context, cs []messages.Recreate) []metastore.RecreateOutcome {
	out := make([]metastore.RecreateOutcome, len(cs))
	for i, c := range cs {
		s.replica.Recreate(messages.Topic{Incarnation: c.Incarnation}, c.Partition, c.To)
		s.recreated = append(s.recreated, c)
		out[i].Result.Code = messages.ResultOK
	}
	return out
}

// A member an operator forgot (its disk is lost) is taken apart by the
// decommission pass without the steps that need its disk: its partitions
// are re-created empty on the live receivers, the least loaded first,
// never on a draining or dead member; then it leaves Raft behind the voter
// guards without being asked for its ingress WAL, which is gone. A dead
// member that is only draining keeps its partitions (rule L5) and stays
// until it can be asked.
func TestALostMemberIsRecreatedElsewhereAndRemovedWithoutItsWAL(t *testing.T) {
	srv := testnet.StartNATS(t, nil)
	leader, err := transport.Connect(context.Background(), transport.Config{Cluster: "test", NodeID: "n1", URLs: []string{srv.ClientURL()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(leader.Close)

	for _, lost := range []bool{true, false} {
		f := newFakeReplica()
		gone := messages.Member{ID: "n3", ReplicaID: 3, Status: messages.MemberDead, Draining: true, Lost: lost}
		for _, m := range []messages.Member{
			{ID: "n1", ReplicaID: 1, Status: messages.MemberAlive},
			{ID: "n2", ReplicaID: 2, Status: messages.MemberAlive},
			{ID: "n4", ReplicaID: 4, Status: messages.MemberAlive, Draining: true},
			{ID: "n5", ReplicaID: 5, Status: messages.MemberDead},
			gone,
		} {
			f.SetMember(m)
		}
		owners := []string{"n1", "n1", "n1", "n3", "n3", "n3", "n3", "n3"}
		for p, o := range owners {
			f.SetAssignments(messages.Assignment{Topic: "t", Incarnation: 5, Partition: p, Owner: o})
		}
		s := &lostStore{decomStore: &decomStore{replica: f, rm: metastore.RaftMembership{
			Voters: map[uint64]string{1: "a1", 2: "a2", 3: "a3", 4: "a4", 5: "a5"}}}}
		d := testDeps(t, DefaultConfig(), s)
		d.RequestTimeout = time.Second
		d.NATS = leader // n3 serves no drain service: asked, it would be "unreachable"
		a := &Actor{d: d}
		members := f.Members()

		first := a.decommissionStep(context.Background(), gone, members)
		second := a.decommissionStep(context.Background(), gone, members)
		replicas, ids := s.removed()
		if !lost {
			if first != "partitions_left" || len(s.recreated) != 0 || len(replicas) != 0 {
				t.Fatalf("a dead draining member that is not lost: got %q, %d re-created, removed %v; want partitions_left, none, none",
					first, len(s.recreated), replicas)
			}
			continue
		}
		if first != "" || second != "" {
			t.Fatalf("lost member's steps: got %q then %q, want both to progress", first, second)
		}
		if got := len(f.OwnedBy("n3")); got != 0 || len(s.recreated) != 5 {
			t.Fatalf("after the re-creation: n3 owns %d and %d were re-created, want 0 and 5", got, len(s.recreated))
		}
		for _, c := range s.recreated {
			if c.From != "n3" || (c.To != "n1" && c.To != "n2") {
				t.Errorf("re-created %d from %s on %s, want from n3 on a live receiver (n1 or n2)", c.Partition, c.From, c.To)
			}
			if a, _ := f.Assignment(5, c.Partition); a.Floor != messages.FloorGeneration {
				t.Errorf("partition %d: got floor %d, want %d", c.Partition, a.Floor, messages.FloorGeneration)
			}
		}
		if n1, n2 := s.OwnedCount("n1"), s.OwnedCount("n2"); n1 != 4 || n2 != 4 {
			t.Errorf("owned after the re-creation: n1 %d, n2 %d; want 4 each (the least loaded first)", n1, n2)
		}
		if !slices.Equal(replicas, []uint64{3}) || !slices.Equal(ids, []string{"n3"}) {
			t.Errorf("removals: got replicas %v members %v, want [3] [n3]", replicas, ids)
		}
	}
}

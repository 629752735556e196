//go:build !noraft

package metastore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// openCluster starts three replicas in this process, each with its own
// NodeHost on a loopback port and its own in-memory filesystem.
func openCluster(t testing.TB, ctx context.Context) []*Store {
	t.Helper()
	return openClusterWith(t, ctx, nil)
}

// openClusterWith is openCluster with each replica's Config passed through
// tune (when not nil) before Open, and returns once every replica is ready.
func openClusterWith(t testing.TB, ctx context.Context, tune func(*Config)) []*Store {
	t.Helper()
	members := map[uint64]string{1: freeAddr(t), 2: freeAddr(t), 3: freeAddr(t)}
	var stores []*Store
	for id := uint64(1); id <= 3; id++ {
		cfg := raftNodeConfig(id, members[id], members)
		if tune != nil {
			tune(&cfg)
		}
		s, err := Open(cfg, testLog)
		if err != nil {
			t.Fatalf("Open replica %d: %v", id, err)
		}
		t.Cleanup(s.Close)
		stores = append(stores, s)
	}
	for _, s := range stores {
		if err := s.WaitReady(ctx); err != nil {
			t.Fatalf("WaitReady replica %d: %v", s.ReplicaID(), err)
		}
	}
	return stores
}

// raftNodeConfig is one voter of the three-replica clusters in these tests:
// in memory, 1 ms ticks, 50 ms elections (fast failover without flapping
// under -race).
func raftNodeConfig(id uint64, addr string, members map[uint64]string) Config {
	return Config{
		NodeID:          fmt.Sprintf("n%d", id),
		ReplicaID:       id,
		RaftAddr:        addr,
		InMemory:        true,
		InitialMembers:  members,
		RTTMillisecond:  1,
		ElectionRTT:     50,
		HeartbeatRTT:    5,
		ProposalTimeout: time.Second,
	}
}

// metaLeader is the replica that leads the metadata shard, and its id; the
// cluster is ready, so there is one.
func metaLeader(t testing.TB, stores []*Store) (*Store, uint64) {
	t.Helper()
	id, ok := stores[0].Leader(MetaShard)
	if !ok {
		t.Fatalf("metadata shard leader: got none after WaitReady, want one")
	}
	return stores[id-1], id
}

// retry repeats op while its outcome is unknown (ErrUnavailable), as a
// client would; op must be idempotent.
func retry(t *testing.T, ctx context.Context, what string, op func() error) {
	t.Helper()
	for {
		err := op()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

func TestThreeReplicas(t *testing.T) {
	ctx := longTest(t, "starts three NodeHosts and a failover")
	stores := openCluster(t, ctx)

	leader, leaderID := metaLeader(t, stores)
	follower := stores[leaderID%3] // any replica that is not the leader

	// Dragonboat forwards a follower's proposals (and read indexes) to the
	// leader: the follower's Store works like the leader's.
	orders, err := follower.CreateTopic(ctx, messages.Topic{Name: "orders", Partitions: 6})
	if err != nil {
		t.Fatalf("CreateTopic on follower %d: %v", follower.ReplicaID(), err)
	}
	var as []messages.Assignment
	for p := range orders.Partitions {
		as = append(as, messages.Assignment{Topic: "orders", Incarnation: orders.Incarnation, Partition: p, Owner: "n1", Target: "n2"})
	}
	if err := follower.PutAssignments(ctx, as); err != nil {
		t.Fatalf("PutAssignments on follower: %v", err)
	}
	r, err := follower.Flip(ctx, messages.Flip{Incarnation: orders.Incarnation, Partition: 0, From: "n1", To: "n2"})
	if err != nil || r.Code != messages.ResultOK {
		t.Fatalf("Flip on follower: got (%+v, %v), want OK", r, err)
	}
	if a, found, err := follower.LeaderAssignment(ctx, orders.Incarnation, 0); err != nil || !found || a.Owner != "n2" {
		t.Fatalf("LeaderAssignment on follower: got (%+v, %t, %v), want owner n2", a, found, err)
	}

	// Every replica converges, read locally.
	for _, s := range stores {
		waitUntil(t, ctx, s, "topic and flip replicated", func() bool {
			got := s.Assignments(orders.Incarnation, orders.Partitions)
			_, hasTopic := s.Topic("orders")
			return hasTopic && len(got) == 6 && got[0].Owner == "n2" && len(s.OwnedBy("n2")) == 1
		})
	}

	// Stop the metadata leader's NodeHost: the other two elect and keep
	// accepting proposals on every shard.
	leader.Close()
	var survivors []*Store
	for _, s := range stores {
		if s != leader {
			survivors = append(survivors, s)
		}
	}
	for i, s := range survivors {
		name := fmt.Sprintf("after-failover-%d", i)
		retry(t, ctx, "create "+name, func() error {
			_, err := s.CreateTopic(ctx, messages.Topic{Name: name, Partitions: 1})
			if errors.Is(err, ErrExists) {
				return nil // an earlier attempt whose outcome was unknown did apply
			}
			return err
		})
		for p := 1; p < orders.Partitions; p++ {
			retry(t, ctx, fmt.Sprintf("flip %d", p), func() error {
				r, err := s.Flip(ctx, messages.Flip{Incarnation: orders.Incarnation, Partition: p, From: "n1", To: "n2"})
				if err == nil && r.Code != messages.ResultOK {
					return fmt.Errorf("flip %d: got code %d, want OK", p, r.Code)
				}
				return err
			})
		}
	}
	if id, ok := survivors[0].Leader(MetaShard); !ok || id == leaderID {
		t.Errorf("metadata leader after failover: got (%d, %t), want a survivor", id, ok)
	}
	for _, s := range survivors {
		waitUntil(t, ctx, s, "proposals after failover replicated", func() bool {
			_, a := s.Topic("after-failover-0")
			_, b := s.Topic("after-failover-1")
			return a && b && len(s.OwnedBy("n2")) == orders.Partitions && len(s.TargetedAt("n2")) == 0
		})
		if _, found, err := s.LeaderTopic(ctx, "after-failover-1"); err != nil || !found {
			t.Errorf("LeaderTopic on replica %d after failover: got (%t, %v), want found", s.ReplicaID(), found, err)
		}
	}
}

// rule X2, as this design has it: a leader read (LeaderAssignment) is a
// ReadIndex, answered only once the asking replica has applied all the
// leader had committed (the barrier), so on a follower it reflects every
// flip that completed before it, where the follower's own replica may not
// yet; and a replica that cannot reach a leader answers nothing from its
// own state (the 421 of a follower): ErrUnavailable, so that an answer
// that is not a leader read can never undo a move (rule X8).
func TestRuleX2ALeaderReadIsBehindABarrierAndNeverLocal(t *testing.T) {
	ctx := longTest(t, "starts three NodeHosts")
	stores := openCluster(t, ctx)
	leader, _ := metaLeader(t, stores)
	const partitions = 64
	topic, err := leader.CreateTopic(ctx, messages.Topic{Name: "x2", Partitions: partitions})
	if err != nil {
		t.Fatal(err)
	}
	var as []messages.Assignment
	for p := range partitions {
		as = append(as, messages.Assignment{Topic: "x2", Incarnation: topic.Incarnation, Partition: p, Owner: "n1", Target: "n2"})
	}
	if err := leader.PutAssignments(ctx, as); err != nil {
		t.Fatal(err)
	}
	// Each flip proposed through the leader of its assignment shard, read
	// at once on another replica.
	for p := range partitions {
		shard := AssignmentShard(topic.Incarnation, p, leader.cfg.AssignmentShards)
		id, ok := leader.Leader(shard)
		if !ok {
			t.Fatalf("shard %d: no leader", shard)
		}
		proposer, reader := stores[id-1], stores[id%3]
		retry(t, ctx, fmt.Sprintf("flip %d", p), func() error {
			_, err := proposer.Flip(ctx, messages.Flip{Incarnation: topic.Incarnation, Partition: p, From: "n1", To: "n2"})
			return err
		})
		a, found, err := reader.LeaderAssignment(ctx, topic.Incarnation, p)
		if err != nil || !found || a.Owner != "n2" {
			t.Fatalf("partition %d read on replica %d right after its flip: got (%s, %t, %v), want owner n2", p, reader.ReplicaID(), a.Owner, found, err)
		}
	}

	// Two replicas gone: the third holds the flips in its own state, but a
	// leader read there is refused, not answered from it.
	survivor := stores[2]
	waitUntil(t, ctx, survivor, "every flip applied", func() bool {
		return len(survivor.OwnedBy("n2")) == partitions
	})
	stores[0].Close()
	stores[1].Close()
	if _, _, err := survivor.LeaderAssignment(ctx, topic.Incarnation, 0); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("leader read with no leader: got %v, want ErrUnavailable", err)
	}
	if a, ok := survivor.Assignment(topic.Incarnation, 0); !ok || a.Owner != "n2" {
		t.Fatalf("local read with no leader: got (%+v, %t), want owner n2", a, ok)
	}
}

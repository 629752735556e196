package controller

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/membership"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// t1Store is the leader's store for one target check: a Raft
// configuration, reads of it counted, and the targets it cleared.
type t1Store struct {
	Store
	rm      metastore.RaftMembership
	mu      sync.Mutex
	reads   int
	cleared []messages.SetTarget
}

func (s *t1Store) RaftMembership(context.Context, uint64) (metastore.RaftMembership, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reads++
	return s.rm, nil
}

func (s *t1Store) SetTarget(_ context.Context, st messages.SetTarget) (messages.AssignResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleared = append(s.cleared, st)
	return messages.AssignResult{Code: messages.ResultOK}, nil
}

// rule T1: the seed's threshold, 2 minutes of death on the leader's own
// clock, is the node's default, and it is what the controller applies: a
// destination seen dead a moment less keeps its move, one seen dead that
// long loses it.
func TestRuleT1TheDefaultThresholdIsTwoMinutes(t *testing.T) {
	cfg := DefaultConfig()
	if cfg.DeadTargetAbortAfter != 2*time.Minute {
		t.Fatalf("DeadTargetAbortAfter: got %s, want the seed's 2m", cfg.DeadTargetAbortAfter)
	}
	for _, tc := range []struct {
		deadFor time.Duration
		cleared bool
	}{{2*time.Minute - time.Millisecond, false}, {2 * time.Minute, true}} {
		s := &t1Store{rm: metastore.RaftMembership{Voters: map[uint64]string{3: "a3"}}}
		tracker, err := membership.NewTracker(testMembership)
		if err != nil {
			t.Fatal(err)
		}
		target := messages.Member{ID: "n3", ReplicaID: 3, Status: messages.MemberDead}
		seen := time.Now()
		tracker.Observe(seen, []messages.Member{target}) // this leader first sees it dead
		a := &Actor{d: testDeps(t, cfg, s), tracker: tracker}
		as := messages.Assignment{Topic: "t", Incarnation: 7, Partition: 1, Owner: "n1", Target: "n3"}
		ctx := context.Background()
		if got := a.targetGone(ctx, as, map[string]messages.Member{"n3": target}, seen.Add(tc.deadFor), a.raftConfig(ctx)); got != tc.cleared {
			t.Fatalf("destination dead %s by the leader's clock: got cleared %v, want %v", tc.deadFor, got, tc.cleared)
		}
	}
}

// rule T1: the controller clears the target of a move whose destination is
// out of the Raft configuration while dead or draining, without waiting for
// DeadTargetAbortAfter; a destination still in the configuration (a voter,
// or a non-voter waiting for promotion) keeps its move; and the pass reads
// the configuration only when some destination is dead or draining.
func TestRuleT1ADestinationOutOfTheRaftConfigurationWhileDeadOrDrainingLosesItsMove(t *testing.T) {
	for _, tc := range []struct {
		name      string
		target    messages.Member
		cleared   bool
		readsRaft bool
	}{
		{"dead, removed from Raft", messages.Member{ID: "n3", ReplicaID: 3, Status: messages.MemberDead}, true, true},
		{"draining, removed from Raft", messages.Member{ID: "n3", ReplicaID: 3, Status: messages.MemberAlive, Draining: true}, true, true},
		{"dead, still a voter", messages.Member{ID: "n3", ReplicaID: 1, Status: messages.MemberDead}, false, true},
		{"draining, a non-voter waiting for promotion", messages.Member{ID: "n3", ReplicaID: 2, Status: messages.MemberAlive, Draining: true}, false, true},
		{"alive, out of Raft (a join not yet added)", messages.Member{ID: "n3", ReplicaID: 3, Status: messages.MemberAlive}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &t1Store{rm: metastore.RaftMembership{Voters: map[uint64]string{1: "a1"}, NonVoters: map[uint64]string{2: "a2"}}}
			cfg := DefaultConfig()
			a := &Actor{d: testDeps(t, cfg, s)}
			as := messages.Assignment{Topic: "t", Incarnation: 7, Partition: 1, Owner: "n1", Target: "n3"}
			ctx := context.Background()
			got := a.targetGone(ctx, as, map[string]messages.Member{"n3": tc.target}, time.Now(), a.raftConfig(ctx))
			if got != tc.cleared || (len(s.cleared) == 1) != tc.cleared {
				t.Fatalf("target %+v: got cleared %v (%d proposals), want %v", tc.target, got, len(s.cleared), tc.cleared)
			}
			if tc.cleared && (s.cleared[0].From != "n3" || s.cleared[0].To != "") {
				t.Fatalf("clear proposal: got %+v, want From n3 To \"\"", s.cleared[0])
			}
			if (s.reads > 0) != tc.readsRaft {
				t.Fatalf("Raft configuration reads: got %d, want some: %v", s.reads, tc.readsRaft)
			}
		})
	}
}

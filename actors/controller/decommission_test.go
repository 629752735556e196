package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cluster/transport"

	"github.com/naradmq/narad/messages"
)

// rule D2: a draining voter leaves the Raft configuration only behind the
// guards: never below MinVoters (without a non-voter to promote first),
// the voters left alive a strict majority of the new configuration, and a
// dead draining voter before a live one.
func TestRuleD2AVoterLeavesOnlyBehindTheGuards(t *testing.T) {
	voters := func(n int) map[uint64]string {
		v := map[uint64]string{}
		for i := 1; i <= n; i++ {
			v[uint64(i)] = fmt.Sprintf("r%d", i)
		}
		return v
	}
	member := func(i int, alive, draining bool) messages.Member {
		st := messages.MemberDead
		if alive {
			st = messages.MemberAlive
		}
		return messages.Member{ID: fmt.Sprintf("n%d", i), ReplicaID: uint64(i), Status: st, Draining: draining}
	}
	for _, tc := range []struct {
		name    string
		voters  int
		members []messages.Member
		leaving int // index into members
		want    string
	}{
		{"four live voters, one draining", 4,
			[]messages.Member{member(1, true, false), member(2, true, false), member(3, true, false), member(4, true, true)}, 3, ""},
		{"three voters and nobody to promote", 3,
			[]messages.Member{member(1, true, false), member(2, true, false), member(3, true, true)}, 2, "too_few_voters"},
		{"the voters left alive no strict majority", 5,
			[]messages.Member{member(1, true, false), member(2, true, false), member(3, false, false), member(4, false, false), member(5, true, true)}, 4, "no_live_majority"},
		{"a live draining voter while a dead one drains", 5,
			[]messages.Member{member(1, true, false), member(2, true, false), member(3, true, false), member(4, false, true), member(5, true, true)}, 4, "dead_draining_voter_first"},
		{"the dead draining voter itself", 5,
			[]messages.Member{member(1, true, false), member(2, true, false), member(3, true, false), member(4, false, true), member(5, true, true)}, 3, ""},
	} {
		a := &Actor{}
		rm := metastore.RaftMembership{Voters: voters(tc.voters), NonVoters: map[uint64]string{}}
		if got := a.voterMayLeave(context.Background(), tc.members[tc.leaving], tc.members, rm); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

// rule D8: a decommission that could never complete is refused up front.
func TestDecommissionVerdict(t *testing.T) {
	m := func(id string, replica uint64, status string) messages.Member {
		return messages.Member{ID: id, ReplicaID: replica, Status: status}
	}
	alive, dead := messages.MemberAlive, messages.MemberDead
	three := map[uint64]string{1: "a", 2: "b", 3: "c"}
	four := map[uint64]string{1: "a", 2: "b", 3: "c", 4: "d"}
	five := map[uint64]string{1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}
	for _, tc := range []struct {
		name    string
		id      string
		members []messages.Member
		rv      RaftView
		owned   int
		refused string // a word of the reason, "" for accepted
	}{
		{"a lone node", "n1", []messages.Member{m("n1", 1, alive)}, RaftView{Voters: map[uint64]string{1: "a"}}, 3, "no other live member"},
		{"three voters and nobody to promote", "n2", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive)}, RaftView{Voters: three}, 2, "too few voters"},
		{"three voters and a non-voter to promote", "n2", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, alive)},
			RaftView{Voters: three, NonVoters: map[uint64]string{4: "d"}}, 2, ""},
		{"a non-voter leaves freely", "n4", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, alive)},
			RaftView{Voters: three, NonVoters: map[uint64]string{4: "d"}}, 1, ""},
		{"a dead owner", "n4", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, dead)}, RaftView{Voters: four}, 5, "dead"},
		{"a dead member that owns nothing", "n4", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, dead)}, RaftView{Voters: four}, 0, ""},
		{"no live majority left", "n1", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, dead), m("n4", 4, dead), m("n5", 5, alive)},
			RaftView{Voters: five}, 0, "no live majority"},
		{"not a member", "n9", []messages.Member{m("n1", 1, alive)}, RaftView{Voters: map[uint64]string{1: "a"}}, 0, "not a member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := DecommissionVerdict(tc.id, tc.members, tc.rv, tc.owned)
			switch {
			case tc.refused == "" && got != "":
				t.Fatalf("got refused: %s, want accepted", got)
			case tc.refused != "" && !strings.Contains(got, tc.refused):
				t.Fatalf("got %q, want a refusal saying %q", got, tc.refused)
			}
		})
	}
}

// decomStore is the metadata leader's store for a decommission step: the
// members and assignments of a fake replica, a Raft configuration in
// which the draining node is a non-voter (so no voter guard applies, rule
// D3), and removals that are recorded. Any other role panics.
type decomStore struct {
	Store
	replica *fakeReplica
	rm      metastore.RaftMembership

	// refuse fails every SetTarget.
	refuse bool
	// self is this leader's replica ID (1 when zero).
	self uint64

	transferredAway []uint64

	mu              sync.Mutex
	removedReplicas []uint64
	removedMembers  []string
	cleared         []int // partitions whose move to the draining node was cleared
}

func (s *decomStore) Member(id string) (messages.Member, bool) { return s.replica.Member(id) }
func (s *decomStore) Members() []messages.Member               { return s.replica.Members() }
func (s *decomStore) OwnedBy(node string) []messages.Assignment {
	return s.replica.OwnedBy(node)
}
func (s *decomStore) TargetedAt(node string) []messages.Assignment {
	return s.replica.TargetedAt(node)
}
func (s *decomStore) ReplicaID() uint64 { return max(s.self, 1) }
func (s *decomStore) TransferAllLeadership(_ context.Context, away uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transferredAway = append(s.transferredAway, away)
	return nil
}
func (s *decomStore) RaftMembership(context.Context, uint64) (metastore.RaftMembership, error) {
	return s.rm, nil
}
func (s *decomStore) RemoveReplica(_ context.Context, id uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removedReplicas = append(s.removedReplicas, id)
	return nil
}
func (s *decomStore) RemoveMember(_ context.Context, id string) (messages.Member, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removedMembers = append(s.removedMembers, id)
	return messages.Member{ID: id}, nil
}

// SetTarget clears a move aimed at the draining node (rule D4), unless
// refuse says the proposal fails.
func (s *decomStore) SetTarget(_ context.Context, st messages.SetTarget) (messages.AssignResult, error) {
	if s.refuse {
		return messages.AssignResult{}, metastore.ErrUnavailable
	}
	s.replica.SetTarget(messages.Topic{Incarnation: st.Incarnation}, st.Partition, st.To)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleared = append(s.cleared, st.Partition)
	return messages.AssignResult{Code: messages.ResultOK}, nil
}

func (s *decomStore) removed() ([]uint64, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.removedReplicas), slices.Clone(s.removedMembers)
}

// rule D6: the leader removes a draining node that owns nothing only once
// that node answers that it refuses produce and its ingress WAL has handed
// every accepted record on; a backlog, a node still admitting produce, or
// one that cannot be asked keeps it in Raft and in the members.
func TestRuleD6ADrainingNodeLeavesOnlyWithAnEmptyWALAndProduceRefused(t *testing.T) {
	srv := testnet.StartNATS(t, nil)
	connect := func(id string) *transport.Transport {
		tr, err := transport.Connect(context.Background(), transport.Config{Cluster: "test", NodeID: id, URLs: []string{srv.ClientURL()}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(tr.Close)
		return tr
	}
	leader := connect("n1")
	members := []messages.Member{
		{ID: "n1", ReplicaID: 1, Status: messages.MemberAlive, Role: messages.RoleVoter},
		{ID: "n2", ReplicaID: 2, Status: messages.MemberAlive, Role: messages.RoleVoter},
		{ID: "n4", ReplicaID: 4, Status: messages.MemberAlive, Role: messages.RoleVoter},
		{ID: "n3", ReplicaID: 3, Status: messages.MemberAlive, Draining: true},
		{ID: "n5", ReplicaID: 5, Status: messages.MemberAlive, Draining: true}, // serves no drain service
		// Removed from the metadata shard by a removal cut short: it left,
		// and serves no drain service any more.
		{ID: "n6", ReplicaID: 6, Status: messages.MemberAlive, Draining: true},
	}

	// answer is what n3's drain service says, one case after another.
	var mu sync.Mutex
	var answer DrainStatus
	n3 := connect("n3")
	if err := transport.HandleJSON(n3, DrainService, func(context.Context, string, struct{}) (DrainStatus, error) {
		mu.Lock()
		defer mu.Unlock()
		return answer, nil
	}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		drain   int // the draining member's index in members
		status  DrainStatus
		want    string
		removed bool
	}{
		{"records accepted and not yet handed on", 3, DrainStatus{Refusing: true, Backlog: 5}, "wal_backlog", false},
		{"one record left", 3, DrainStatus{Refusing: true, Backlog: 1}, "wal_backlog", false},
		{"still admitting produce", 3, DrainStatus{Refusing: false, Backlog: 0}, "wal_backlog", false},
		{"a node that cannot be asked", 4, DrainStatus{}, "unreachable", false},
		{"refusing produce with an empty WAL", 3, DrainStatus{Refusing: true, Backlog: 0}, "", true},
		{"its removal began, so it was asked before", 5, DrainStatus{}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeReplica()
			for _, m := range members {
				f.SetMember(m)
			}
			s := &decomStore{replica: f, rm: metastore.RaftMembership{
				Voters:    map[uint64]string{1: "a1", 2: "a2", 4: "a4"},
				NonVoters: map[uint64]string{3: "a3", 5: "a5"},
				Removed:   map[uint64]bool{6: true},
			}}
			mu.Lock()
			answer = tc.status
			mu.Unlock()
			d := testDeps(t, DefaultConfig(), s)
			d.RequestTimeout = 5 * time.Second
			d.NATS = leader
			a := &Actor{d: d}
			m := members[tc.drain]
			if got := a.decommissionStep(context.Background(), m, members); got != tc.want {
				t.Fatalf("decommission step of %s answering %+v: got %q, want %q", m.ID, tc.status, got, tc.want)
			}
			replicas, ids := s.removed()
			wantReplicas, wantIDs := []uint64(nil), []string(nil)
			if tc.removed {
				wantReplicas, wantIDs = []uint64{m.ReplicaID}, []string{m.ID}
			}
			if !slices.Equal(replicas, wantReplicas) || !slices.Equal(ids, wantIDs) {
				t.Fatalf("removals of %s answering %+v: got replicas %v and members %v, want %v and %v", m.ID, tc.status, replicas, ids, wantReplicas, wantIDs)
			}
		})
	}
}

// rule D4: a draining node that is still a move's target is not removed;
// the moves aimed at it are cleared first, and while one cannot be, it
// stays. rule D5: a move whose source is dead or gone is left alone (the
// draining node may hold the only live copy), and the node stays.
func TestRuleD4D5MovesAimedAtADrainingNode(t *testing.T) {
	draining := messages.Member{ID: "n3", ReplicaID: 3, Status: messages.MemberAlive, Draining: true}
	for _, tc := range []struct {
		name    string
		sources []messages.Member
		owners  []string // of partitions 0.., each targeted at n3
		refuse  bool
		want    string
		cleared []int
		removed bool
	}{
		{"moves from live sources are cleared, then it leaves",
			[]messages.Member{{ID: "n1", Status: messages.MemberAlive}, {ID: "n2", Status: messages.MemberAlive}},
			[]string{"n1", "n2"}, false, "", []int{0, 1}, true},
		{"a move that cannot be cleared keeps it (rule D4)",
			[]messages.Member{{ID: "n1", Status: messages.MemberAlive}},
			[]string{"n1"}, true, "move_target", nil, false},
		{"a move from a dead source is left alone (rule D5)",
			[]messages.Member{{ID: "n1", Status: messages.MemberDead}},
			[]string{"n1"}, false, "move_target", nil, false},
		{"a move from a source with no record is left alone (rule D5)",
			nil, []string{"gone"}, false, "move_target", nil, false},
	} {
		f := newFakeReplica()
		f.SetMember(draining)
		for _, m := range tc.sources {
			f.SetMember(m)
		}
		for p, owner := range tc.owners {
			f.SetAssignments(messages.Assignment{Topic: "t", Incarnation: 5, Partition: p, Owner: owner, Target: "n3"})
		}
		s := &decomStore{replica: f, refuse: tc.refuse,
			rm: metastore.RaftMembership{Voters: map[uint64]string{1: "a", 2: "b", 4: "d"}, NonVoters: map[uint64]string{3: "c"}}}
		a := &Actor{d: testDeps(t, DefaultConfig(), s)}
		got := a.decommissionStep(context.Background(), draining, f.Members())
		replicas, _ := s.removed()
		slices.Sort(s.cleared) // the replica lists a node's moves in no order
		if got != tc.want || !slices.Equal(s.cleared, tc.cleared) || (len(replicas) > 0) != tc.removed {
			t.Errorf("%s: got %q, cleared %v, removed %v; want %q, cleared %v, removed %v",
				tc.name, got, s.cleared, replicas, tc.want, tc.cleared, tc.removed)
		}
	}
}

// rule D2: a draining voter that leads the metadata shard hands its
// leaderships over before anything removes it; the next leader's
// controller removes it. One that does not lead is removed at once.
func TestRuleD2ALeaderTransfersLeadershipFirst(t *testing.T) {
	draining := messages.Member{ID: "n4", ReplicaID: 4, Status: messages.MemberAlive, Draining: true}
	for _, tc := range []struct {
		name         string
		self         uint64
		wantTransfer bool
	}{
		{"it leads: transfer, no removal", 4, true},
		{"another leads: removal", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeReplica()
			for i := 1; i <= 3; i++ {
				id := fmt.Sprintf("n%d", i)
				f.SetMember(messages.Member{ID: id, ReplicaID: uint64(i), Status: messages.MemberAlive})
			}
			f.SetMember(draining)
			s := &decomStore{replica: f, self: tc.self,
				rm: metastore.RaftMembership{Voters: map[uint64]string{1: "a", 2: "b", 3: "c", 4: "d"}, NonVoters: map[uint64]string{}}}
			a := &Actor{d: testDeps(t, DefaultConfig(), s)}
			if why := a.decommissionStep(context.Background(), draining, f.Members()); why != "" {
				t.Fatalf("step blocked: got %q, want progress", why)
			}
			replicas, members := s.removed()
			if tc.wantTransfer {
				if !slices.Equal(s.transferredAway, []uint64{4}) || len(replicas) > 0 || len(members) > 0 {
					t.Fatalf("got transfers %v, removed %v and %v; want a transfer away from 4 and nothing removed", s.transferredAway, replicas, members)
				}
				return
			}
			if len(s.transferredAway) > 0 || !slices.Equal(replicas, []uint64{4}) || !slices.Equal(members, []string{"n4"}) {
				t.Fatalf("got transfers %v, removed %v and %v; want no transfer and 4 (n4) removed", s.transferredAway, replicas, members)
			}
		})
	}
}

// rule D7: the reasons a controller reports are its leadership's: once
// another node leads, its gauges go back to 0, so an operator reads one
// reason per draining member, the current leader's.
func TestRuleD7AFormerLeaderClearsItsBlockedReasons(t *testing.T) {
	s := &leaderStore{leader: 1}
	d := testDeps(t, DefaultConfig(), s)
	d.Metrics = testMetrics("n1")
	a := &Actor{d: d}
	a.reportBlocked(map[string]string{"n4": "raft_removal"})
	gauge := d.Metrics.DecommissionBlocked("n4", "raft_removal")
	if !a.leading() || gauge.Get() != 1 {
		t.Fatalf("while leading: got leading %v, gauge %v, want true and 1", a.leading(), gauge.Get())
	}
	s.leader = 2
	if a.leading() {
		t.Fatal("leading after the leadership moved to replica 2: got true, want false")
	}
	if got := gauge.Get(); got != 0 {
		t.Errorf("narad_decommission_blocked{node=n4,reason=raft_removal} on the former leader: got %v, want 0", got)
	}
}

// leaderStore is a store whose metadata shard is led by replica leader;
// this node is replica 1.
type leaderStore struct {
	Store
	leader uint64
}

func (s *leaderStore) Leader(uint64) (uint64, bool) { return s.leader, true }
func (s *leaderStore) ReplicaID() uint64            { return 1 }

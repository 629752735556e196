package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/cluster/metastore"
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
		a := &controllerActor{}
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
		rv      raftView
		owned   int
		refused string // a word of the reason, "" for accepted
	}{
		{"a lone node", "n1", []messages.Member{m("n1", 1, alive)}, raftView{Voters: map[uint64]string{1: "a"}}, 3, "no other live member"},
		{"three voters and nobody to promote", "n2", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive)}, raftView{Voters: three}, 2, "too few voters"},
		{"three voters and a non-voter to promote", "n2", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, alive)},
			raftView{Voters: three, NonVoters: map[uint64]string{4: "d"}}, 2, ""},
		{"a non-voter leaves freely", "n4", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, alive)},
			raftView{Voters: three, NonVoters: map[uint64]string{4: "d"}}, 1, ""},
		{"a dead owner", "n4", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, dead)}, raftView{Voters: four}, 5, "dead"},
		{"a dead member that owns nothing", "n4", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, dead)}, raftView{Voters: four}, 0, ""},
		{"no live majority left", "n1", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, dead), m("n4", 4, dead), m("n5", 5, alive)},
			raftView{Voters: five}, 0, "no live majority"},
		{"not a member", "n9", []messages.Member{m("n1", 1, alive)}, raftView{Voters: map[uint64]string{1: "a"}}, 0, "not a member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decommissionVerdict(tc.id, tc.members, tc.rv, tc.owned)
			switch {
			case tc.refused == "" && got != "":
				t.Fatalf("got refused: %s, want accepted", got)
			case tc.refused != "" && !strings.Contains(got, tc.refused):
				t.Fatalf("got %q, want a refusal saying %q", got, tc.refused)
			}
		})
	}
}

// rules D1-D6: a voter is decommissioned to zero under load: its
// partitions move off, it refuses produce, a non-voter is promoted so
// three voters stay, and it leaves the Raft configuration and the members.
func TestClusterADecommissionedVoterDrainsToZeroAndLeavesRaft(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes")
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) {
		cfg.MoveTick, cfg.RebalanceInterval = 100*time.Millisecond, 100*time.Millisecond
		cfg.MaxInFlightMoves = 4
	})
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":12,"visibility_timeout_ms":2000}`))
	load := startLoad(c, "m", 3, 300)
	load.waitProduced(100)
	j := c.join()
	c.waitFor("n4 owning 3 partitions after the rebalance", func() bool {
		per, moving := c.owned(0, "m")
		return per["n4"] == 3 && moving == 0
	})

	gone := (c.leader() + 1) % 3 // a voter that does not lead the metadata
	id := fmt.Sprintf("n%d", gone+1)
	// A dry run says what would happen and changes nothing.
	c.waitFor("the dry run of "+id+"'s decommission answered", func() bool {
		code, body := c.node(j).do("POST", "/v1/cluster/members/"+id+"/decommission?dry_run=1", nil)
		if code == http.StatusServiceUnavailable {
			return false // the control plane's transient 503, retried as a client would
		}
		if code != http.StatusOK {
			t.Fatalf("dry run of %s's decommission: got %d %s, want 200", id, code, body)
		}
		return true
	})
	if m, _ := c.node(j).n.Store().Member(id); m.Draining {
		t.Fatal("a dry run set the drain flag")
	}
	// A member the leader misjudged dead for a moment (a starved
	// heartbeat: DeadTimeout is 500 ms here) is rightly refused (rule
	// D8); it reads alive again at its next heartbeat. Any other answer
	// fails the test.
	c.waitFor("the decommission of "+id+" accepted", func() bool {
		code, body := c.node(j).do("POST", "/v1/cluster/members/"+id+"/decommission", nil)
		if code == http.StatusConflict && strings.Contains(string(body), "the member is dead") {
			return false
		}
		if code != http.StatusNoContent {
			t.Fatalf("decommission %s: got %d %s, want 204", id, code, body)
		}
		return true
	})
	probes := 0
	c.waitFor(id+" refusing produce", func() bool {
		// A probe taken before the flag reached the node is a record
		// like any other: the history must know it.
		probes++
		pid := fmt.Sprintf("probe-%d", probes)
		code, _ := c.node(gone).do("POST", "/v1/topics/m/produce", history.MakeBody(pid, 16))
		if code == http.StatusAccepted {
			load.h.Produced(pid)
		}
		return code == http.StatusServiceUnavailable
	})
	store := c.node(j).n.Store()
	c.waitFor(id+" out of the members and of every shard's Raft configuration", func() bool {
		if _, ok := store.Member(id); ok {
			return false
		}
		for _, sh := range store.Shards() {
			rm, err := store.RaftMembership(context.Background(), sh)
			if err != nil {
				return false
			}
			if _, v := rm.Voters[uint64(gone+1)]; v || len(rm.Voters) != 3 {
				return false
			}
		}
		return true
	})
	load.down(gone)
	rep := load.finish()
	per, moving := c.owned(j, "m")
	t.Logf("after the decommission of %s: %v; %s", id, per, rep)
	if per[id] != 0 || moving != 0 || per["n4"] == 0 {
		t.Fatalf("owners: got %v with %d moving, want none on %s", per, moving, id)
	}
	if m, _ := store.Member("n4"); m.Role != messages.RoleVoter {
		t.Fatalf("n4: got role %q, want voter (promoted to keep three)", m.Role)
	}
}

// rule D7: a decommission that cannot progress says why, in the members
// listing of the admin verb, whichever node answers it.
func TestClusterABlockedDecommissionSaysWhyInTheMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	// Planning off: the draining node's partitions stay, so it waits.
	c := newTestCluster(t, 3, func(_ int, cfg *Config) {
		cfg.Rebalance = false
		cfg.RebalanceInterval = 100 * time.Millisecond
	})
	c.node(0).createTopic("t", 3)
	id := fmt.Sprintf("n%d", (c.leader()+1)%3+1)
	if err := c.node(0).n.Store().SetDraining(context.Background(), id, true); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.node(0).cfg.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var got messages.AdminMemberList
	c.waitFor(id+" listed with why its decommission waits", func() bool {
		msg, err := nc.Request("narad.test.admin.members", []byte("{}"), 5*time.Second)
		if err != nil || json.Unmarshal(msg.Data, &got) != nil {
			return false
		}
		for _, m := range got.Members {
			if m.ID == id {
				return m.Draining && m.DecommissionBlocked == "partitions_left"
			}
		}
		return false
	})
}

// decomStore is the metadata leader's store for a decommission step: the
// members and assignments of a fake replica, a Raft configuration in
// which the draining node is a non-voter (so no voter guard applies, rule
// D3), and removals that are recorded. Any other role panics.
type decomStore struct {
	controllerStore
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
	f := s.replica
	f.mu.Lock()
	k := assignmentKey(st.Incarnation, st.Partition)
	asg := f.assignments[k]
	asg.Target = st.To
	f.assignments[k] = asg
	f.version++
	f.mu.Unlock()
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
	srv := startTestNATS(t)
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
	}

	// answer is what n3's drain service says, one case after another.
	var mu sync.Mutex
	var answer drainStatus
	n3 := connect("n3")
	if err := transport.HandleJSON(n3, drainService, func(context.Context, string, struct{}) (drainStatus, error) {
		mu.Lock()
		defer mu.Unlock()
		return answer, nil
	}); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		drain   int // the draining member's index in members
		status  drainStatus
		want    string
		removed bool
	}{
		{"records accepted and not yet handed on", 3, drainStatus{Refusing: true, Backlog: 5}, "wal_backlog", false},
		{"one record left", 3, drainStatus{Refusing: true, Backlog: 1}, "wal_backlog", false},
		{"still admitting produce", 3, drainStatus{Refusing: false, Backlog: 0}, "wal_backlog", false},
		{"a node that cannot be asked", 4, drainStatus{}, "unreachable", false},
		{"refusing produce with an empty WAL", 3, drainStatus{Refusing: true, Backlog: 0}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeReplica()
			for _, m := range members {
				f.members[m.ID] = m
			}
			s := &decomStore{replica: f, rm: metastore.RaftMembership{
				Voters:    map[uint64]string{1: "a1", 2: "a2", 4: "a4"},
				NonVoters: map[uint64]string{3: "a3", 5: "a5"},
			}}
			mu.Lock()
			answer = tc.status
			mu.Unlock()
			cfg := DefaultConfig()
			cfg.RequestTimeout = 5 * time.Second
			a := &controllerActor{deps: deps{cfg: cfg, log: testLogger(t)}, store: s, nats: leader}
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

// rule D6 (the draining node's side): its drain service says it refuses
// produce only once its member record is draining, and counts as held
// every record accepted and not yet handed to its owner, including a
// produce admitted before the flag that has not answered yet: the leader
// must not count zero while such a produce may still answer 202.
func TestRuleD6TheDrainServiceCountsEveryAdmittedProduceUntilHandedOn(t *testing.T) {
	held, reached := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tn := newTestNode(t, func(c *Config) {
		c.faults = &faultHooks{produceAdmitted: func(_ string, body []byte) {
			if string(body) == `"held"` {
				once.Do(func() { close(reached) })
				<-held
			}
		}}
	})
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // before the node stops, should the test fail first
	tn.createTopic("d", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/d/produce?partition=0", []byte(`"first"`))
	waitFor(t, func() bool { return tn.n.drainStatus().Backlog == 0 }) // "first" handed on
	if got := tn.n.drainStatus(); got.Refusing {
		t.Fatalf("drain status of a node not draining: got %+v, want not refusing", got)
	}

	// A produce admitted before the flag, held before its WAL append.
	answered := make(chan int, 1)
	go func() {
		code, _, err := tn.attempt("POST", "/v1/topics/d/produce?partition=0", []byte(`"held"`))
		if err != nil {
			code = -1
		}
		answered <- code
	}()
	<-reached
	if err := tn.n.store.SetDraining(context.Background(), tn.cfg.NodeID, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tn.n.draining)
	if got := tn.n.drainStatus(); !got.Refusing || got.Backlog < 1 {
		t.Fatalf("drain status with a produce admitted before the flag, not yet answered: got %+v, want refusing with a backlog of at least 1", got)
	}
	if code, body := tn.do("POST", "/v1/topics/d/produce?partition=0", []byte(`"late"`)); code != http.StatusServiceUnavailable {
		t.Fatalf("produce while draining: got %d %s, want 503", code, body)
	}

	release()
	if code := <-answered; code != http.StatusAccepted {
		t.Fatalf("the produce admitted before the flag: got %d, want 202", code)
	}
	waitFor(t, func() bool { return tn.n.drainStatus() == drainStatus{Refusing: true} })
	if got := hwmOf(t, tn, "d"); got != 2 {
		t.Fatalf("partition 0 once the drain service counts zero: got HWM %d, want 2 (first and held)", got)
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
		f.members[draining.ID] = draining
		for _, m := range tc.sources {
			f.members[m.ID] = m
		}
		for p, owner := range tc.owners {
			f.assignments[assignmentKey(5, p)] = messages.Assignment{Topic: "t", Incarnation: 5, Partition: p, Owner: owner, Target: "n3"}
		}
		s := &decomStore{replica: f, refuse: tc.refuse,
			rm: metastore.RaftMembership{Voters: map[uint64]string{1: "a", 2: "b", 4: "d"}, NonVoters: map[uint64]string{3: "c"}}}
		a := &controllerActor{deps: deps{cfg: DefaultConfig(), log: testLogger(t)}, store: s}
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
				f.members[id] = messages.Member{ID: id, ReplicaID: uint64(i), Status: messages.MemberAlive}
			}
			f.members[draining.ID] = draining
			s := &decomStore{replica: f, self: tc.self,
				rm: metastore.RaftMembership{Voters: map[uint64]string{1: "a", 2: "b", 3: "c", 4: "d"}, NonVoters: map[uint64]string{}}}
			a := &controllerActor{deps: deps{cfg: DefaultConfig(), log: testLogger(t)}, store: s}
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

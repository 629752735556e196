package controller

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// avoidStore is the leader's store for one planning pass: reads from a fake
// replica, a barrier that passes, and the targets the pass proposed.
type avoidStore struct {
	Store
	f       *fakeReplica
	mu      sync.Mutex
	targets []messages.SetTarget
}

func (s *avoidStore) CatchUp(context.Context) error { return nil }
func (s *avoidStore) Topics() []messages.Topic      { return s.f.Topics() }
func (s *avoidStore) Members() []messages.Member    { return s.f.Members() }
func (s *avoidStore) Topic(name string) (messages.Topic, bool) {
	return s.f.Topic(name)
}
func (s *avoidStore) Assignments(incarnation uint64, partitions int) []messages.Assignment {
	return s.f.Assignments(incarnation, partitions)
}

func (s *avoidStore) Moving() []messages.Assignment { return s.f.Moving() }
func (s *avoidStore) OwnedBy(node string) []messages.Assignment {
	return s.f.OwnedBy(node)
}
func (s *avoidStore) OwnedCount(node string) int { return s.f.OwnedCount(node) }
func (s *avoidStore) FirstSettled(node string, k int) []messages.PartitionKey {
	return s.f.FirstSettled(node, k)
}
func (s *avoidStore) CurrentParent(incarnation uint64) (string, bool) {
	return s.f.CurrentParent(incarnation)
}

func (s *avoidStore) SetTarget(_ context.Context, st messages.SetTarget) (messages.AssignResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets = append(s.targets, st)
	return messages.AssignResult{Code: messages.ResultOK}, nil
}

func (s *avoidStore) SetTargetMany(ctx context.Context, sts []messages.SetTarget) []metastore.TargetOutcome {
	out := make([]metastore.TargetOutcome, len(sts))
	for i, st := range sts {
		out[i].Result, out[i].Err = s.SetTarget(ctx, st)
	}
	return out
}

// rule L6: the controller steers a child's partition i off the node owning
// its parent's partition i when a balanced alternative exists. n1 is
// leaving with both partitions of child c; parent p has p0 on n2 and p1 on
// n3. With the deficits tied, c0 would go to n2 (ids break ties) and c1 to
// n3: each onto its parent's node. With the preference each goes to the
// other, and the result is as balanced.
func TestRuleL6TheControllerSteersAChildOffItsParentsNode(t *testing.T) {
	f := newFakeReplica()
	f.SetMember(messages.Member{ID: "n1", Status: messages.MemberAlive, Leaving: true})
	f.SetMember(messages.Member{ID: "n2", Status: messages.MemberAlive})
	f.SetMember(messages.Member{ID: "n3", Status: messages.MemberAlive})
	f.Put(messages.Topic{Name: "p", Incarnation: 10, Partitions: 2,
		Children: []messages.ChildLink{{Name: "c", Incarnation: 11, AttachEpoch: 12}}}, "n2", "n3")
	f.Put(messages.Topic{Name: "c", Incarnation: 11, Partitions: 2, Parent: "p", AttachEpoch: 12}, "n1", "n1")
	s := &avoidStore{f: f}
	cfg := DefaultConfig()
	cfg.Rebalance = true
	d := testDeps(t, cfg, s)
	d.Metrics = testMetrics("l6-" + t.Name())
	a := &Actor{d: d}
	a.rebalance(time.Now())

	s.mu.Lock()
	got := slices.Clone(s.targets)
	s.mu.Unlock()
	slices.SortFunc(got, func(x, y messages.SetTarget) int { return x.Partition - y.Partition })
	want := []messages.SetTarget{
		{Incarnation: 11, Partition: 0, Owner: "n1", To: "n3"},
		{Incarnation: 11, Partition: 1, Owner: "n1", To: "n2"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("targets: got %+v, want %+v (each child partition off its parent's node)", got, want)
	}
}

// rule L6: a standalone topic and a partition past the parent's count
// avoid nothing; the parent's assignments are read once per pass.
func TestParentPlacementNamesTheParentsOwner(t *testing.T) {
	f := newFakeReplica()
	f.Put(messages.Topic{Name: "p", Incarnation: 1, Partitions: 2}, "n2", "n3")
	pp := newParentPlacement(f)
	child := messages.Topic{Name: "c", Incarnation: 2, Partitions: 3, Parent: "p"}
	for _, tc := range []struct {
		topic messages.Topic
		p     int
		want  string
	}{
		{child, 0, "n2"}, {child, 1, "n3"}, {child, 2, ""},
		{messages.Topic{Name: "s", Incarnation: 3, Partitions: 1}, 0, ""},
		{messages.Topic{Name: "o", Incarnation: 4, Partitions: 1, Parent: "gone"}, 0, ""},
	} {
		if got := pp.avoid(tc.topic.Parent, tc.p); got != tc.want {
			t.Errorf("avoid(%s, %d): got %q, want %q", tc.topic.Name, tc.p, got, tc.want)
		}
	}
}

// barrierStore is avoidStore with a barrier that fails when told, which
// notes any planning read made before the barrier.
type barrierStore struct {
	*avoidStore
	barrierErr          error
	barrier, readBefore bool
}

func (s *barrierStore) CatchUp(context.Context) error { s.barrier = true; return s.barrierErr }
func (s *barrierStore) Members() []messages.Member {
	s.readBefore = s.readBefore || !s.barrier
	return s.avoidStore.Members()
}
func (s *barrierStore) Moving() []messages.Assignment {
	s.readBefore = s.readBefore || !s.barrier
	return s.avoidStore.Moving()
}

// rule L4: a planning pass runs after a Raft barrier (the controller's
// CatchUp) and reads nothing to plan with before it; when the barrier
// fails, the pass plans nothing (the next one tries again). The mutex is
// the controller actor itself: one pass at a time.
func TestRuleL4PlanningRunsAfterARaftBarrier(t *testing.T) {
	for _, tc := range []struct {
		name        string
		barrierErr  error
		wantTargets int
	}{
		{"the barrier passes", nil, 2},
		{"the barrier fails", metastore.ErrUnavailable, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeReplica()
			f.SetMember(messages.Member{ID: "n1", Status: messages.MemberAlive, Leaving: true})
			f.SetMember(messages.Member{ID: "n2", Status: messages.MemberAlive})
			f.SetMember(messages.Member{ID: "n3", Status: messages.MemberAlive})
			f.Put(messages.Topic{Name: "t", Incarnation: 10, Partitions: 2}, "n1", "n1")
			s := &barrierStore{avoidStore: &avoidStore{f: f}, barrierErr: tc.barrierErr}
			cfg := DefaultConfig()
			cfg.Rebalance = true
			d := testDeps(t, cfg, s)
			d.Metrics = testMetrics("l4-" + t.Name())
			a := &Actor{d: d}
			a.rebalance(time.Now())
			if !s.barrier {
				t.Fatalf("the pass ran no barrier")
			}
			if s.readBefore {
				t.Fatalf("the pass read members or moves before its barrier")
			}
			s.mu.Lock()
			got := len(s.targets)
			s.mu.Unlock()
			if got != tc.wantTargets {
				t.Fatalf("targets set: got %d, want %d", got, tc.wantTargets)
			}
		})
	}
}

// ownerWriteStore is avoidStore that counts every proposal other than a
// target's: a flip, an assignment written or deleted, a member changed.
type ownerWriteStore struct {
	*avoidStore
	others []string
	put    []messages.Assignment
}

func (s *ownerWriteStore) Flip(_ context.Context, c messages.Flip) (messages.AssignResult, error) {
	s.others = append(s.others, "Flip")
	return messages.AssignResult{Code: messages.ResultOK}, nil
}
func (s *ownerWriteStore) PutAssignments(_ context.Context, as []messages.Assignment) error {
	s.others = append(s.others, "PutAssignments")
	s.put = append(s.put, as...)
	return nil
}
func (s *ownerWriteStore) DeleteAssignments(context.Context, uint64, int) error {
	s.others = append(s.others, "DeleteAssignments")
	return nil
}
func (s *ownerWriteStore) SetMemberStatusIf(context.Context, messages.SetMemberStatus) (messages.MetaResult, error) {
	s.others = append(s.others, "SetMemberStatusIf")
	return messages.MetaResult{}, nil
}

// rule O2: the controller writes only Target; the destination does the
// move. A pass that sheds a leaving node, fills an empty one and drops a
// move aimed at a leaving node proposes targets (set and cleared, each a
// compare-and-swap naming the owner it read) and nothing else: no owner
// changes until a destination's own flip.
func TestRuleO2TheControllerWritesOnlyTargets(t *testing.T) {
	f := newFakeReplica()
	f.SetMember(messages.Member{ID: "n1", Status: messages.MemberAlive, Leaving: true})
	f.SetMember(messages.Member{ID: "n2", Status: messages.MemberAlive})
	f.SetMember(messages.Member{ID: "n3", Status: messages.MemberAlive})
	f.SetMember(messages.Member{ID: "n4", Status: messages.MemberAlive})
	f.SetMember(messages.Member{ID: "n5", Status: messages.MemberAlive, Leaving: true})
	topic := messages.Topic{Name: "t", Incarnation: 10, Partitions: 8}
	f.Put(topic, "n1", "n1", "n2", "n2", "n2", "n3", "n3", "n3")
	f.SetTarget(topic, 7, "n5")
	owners := map[int]string{}
	for _, as := range f.Assignments(10, 8) {
		owners[as.Partition] = as.Owner
	}

	s := &ownerWriteStore{avoidStore: &avoidStore{f: f}}
	cfg := DefaultConfig()
	cfg.Rebalance = true
	d := testDeps(t, cfg, s)
	d.Metrics = testMetrics("o2-" + t.Name())
	a := &Actor{d: d}
	a.rebalance(time.Now())

	if len(s.others) > 0 {
		t.Fatalf("proposals other than targets: got %v, want none", s.others)
	}
	s.mu.Lock()
	targets := slices.Clone(s.targets)
	s.mu.Unlock()
	var set, cleared int
	for _, st := range targets {
		if st.Owner != owners[st.Partition] {
			t.Errorf("partition %d: target proposed against owner %q, the replica has %q", st.Partition, st.Owner, owners[st.Partition])
		}
		if st.To == "" {
			cleared++
		} else {
			set++
		}
	}
	if set < 2 || cleared != 1 {
		t.Fatalf("targets: got %d set and %d cleared (%+v), want at least 2 set (n1 shed) and 1 cleared (n5 leaving)", set, cleared, targets)
	}
	for _, as := range f.Assignments(10, 8) {
		if as.Owner != owners[as.Partition] {
			t.Fatalf("partition %d: owner %q after the pass, want %q", as.Partition, as.Owner, owners[as.Partition])
		}
	}
}

// rule D4's placement lock: a draining node, the least loaded of all, is
// given no partition of a new topic and
// is the target of no planned move, so no create and no flip lands on it
// while it waits for its removal.
func TestRuleD4NothingIsPlacedOnADrainingNode(t *testing.T) {
	f := newFakeReplica()
	f.SetMember(messages.Member{ID: "n1", Status: messages.MemberAlive})
	f.SetMember(messages.Member{ID: "n2", Status: messages.MemberAlive})
	f.SetMember(messages.Member{ID: "n3", ReplicaID: 3, Status: messages.MemberAlive, Draining: true})
	f.Put(messages.Topic{Name: "old", Incarnation: 10, Partitions: 8}, "n1", "n1", "n1", "n1", "n1", "n1", "n2", "n3")
	s := &ownerWriteStore{avoidStore: &avoidStore{f: f}}
	cfg := DefaultConfig()
	cfg.Rebalance = true
	d := testDeps(t, cfg, s)
	d.Metrics = testMetrics("d4-" + t.Name())
	a := &Actor{d: d}

	placed, err := a.place(context.Background(), messages.Topic{Name: "new", Incarnation: 11, Partitions: 12})
	if err != nil || placed != 12 {
		t.Fatalf("place: got %d, %v; want 12 placed", placed, err)
	}
	for _, as := range s.put {
		if as.Owner == "n3" {
			t.Fatalf("partition %d of %s: got owner n3, want any node but the draining one", as.Partition, as.Topic)
		}
	}

	a.rebalance(time.Now())
	s.mu.Lock()
	targets := slices.Clone(s.targets)
	s.mu.Unlock()
	if len(targets) == 0 {
		t.Fatalf("targets: got none, want n1's surplus planned onto n2")
	}
	for _, st := range targets {
		if st.To == "n3" {
			t.Fatalf("partition %d: got a move to n3, want none to the draining node", st.Partition)
		}
	}
}

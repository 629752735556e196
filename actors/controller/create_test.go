package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// createStore is a leader's store for topic creates: topics and
// assignments in a fake replica, and every PutAssignments call recorded.
type createStore struct {
	Store
	f    *fakeReplica
	mu   sync.Mutex
	next uint64
	puts [][]messages.Assignment
}

func (s *createStore) Leader(uint64) (uint64, bool) { return 1, true }
func (s *createStore) ReplicaID() uint64            { return 1 }
func (s *createStore) Members() []messages.Member   { return s.f.Members() }
func (s *createStore) OwnedCount(node string) int   { return s.f.OwnedCount(node) }
func (s *createStore) Assignments(incarnation uint64, partitions int) []messages.Assignment {
	return s.f.Assignments(incarnation, partitions)
}

func (s *createStore) CreateTopic(_ context.Context, t messages.Topic) (messages.Topic, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.f.Topic(t.Name); ok {
		return old, fmt.Errorf("create topic %s: %w", t.Name, metastore.ErrExists)
	}
	s.next++
	t.Incarnation = s.next
	s.f.Put(t)
	return t, nil
}

func (s *createStore) PutAssignments(_ context.Context, as []messages.Assignment) error {
	s.mu.Lock()
	s.puts = append(s.puts, as)
	s.mu.Unlock()
	s.f.SetAssignments(as...)
	return nil
}

// Creates asked together commit together: every topic's partitions in one
// PutAssignments, placed as evenly over the group as one at a time would
// be, and a name already taken fails only its own create.
func TestCreatesAskedTogetherArePlacedInOnePut(t *testing.T) {
	f := newFakeReplica()
	for _, id := range []string{"n1", "n2", "n3"} {
		f.SetMember(messages.Member{ID: id, Status: messages.MemberAlive})
	}
	f.Put(messages.Topic{Name: "taken", Incarnation: 100, Partitions: 1}, "n1")
	s := &createStore{f: f}
	d := testDeps(t, DefaultConfig(), s)
	d.Metrics = testMetrics("creates-" + t.Name())
	a := &Actor{d: d}
	deadline := time.Now().Add(time.Minute)
	var asks []*Ask
	for _, name := range []string{"a", "b", "taken", "c", "d"} {
		asks = append(asks, &Ask{Deadline: deadline, Req: messages.ControllerRequest{CreateTopic: &messages.Topic{Name: name, Partitions: 5}}})
	}
	answers := a.createGroup(asks)

	if len(s.puts) != 1 {
		t.Fatalf("PutAssignments calls: got %d, want 1 for the whole group", len(s.puts))
	}
	if got, want := len(s.puts[0]), 4*5; got != want {
		t.Fatalf("assignments put: got %d, want %d (four topics of 5)", got, want)
	}
	for i, ans := range answers {
		name := asks[i].Req.CreateTopic.Name
		switch {
		case name == "taken" && !errors.Is(ans.Err, metastore.ErrExists):
			t.Errorf("create %s: got %v, want ErrExists", name, ans.Err)
		case name != "taken" && (ans.Err != nil || ans.Reply.Placed != 5 || ans.Reply.Topic.Name != name):
			t.Errorf("create %s: got %+v, %v; want the topic with 5 partitions placed", name, ans.Reply, ans.Err)
		}
	}
	// 21 partitions over three members, one of them on n1 before: 7 each
	// (each topic placed from the loads the group's earlier ones left).
	for _, id := range []string{"n1", "n2", "n3"} {
		if got := f.OwnedCount(id); got != 7 {
			t.Errorf("%s owns %d after the group, want 7", id, got)
		}
	}
}

// The creates waiting for a group are bounded: past createQueueGroups
// groups' worth, a create is refused at once as unavailable (the client
// asks again) rather than queued to wait out its deadline.
func TestCreatesPastTheQueueBoundAreRefusedAtOnce(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxCreatesPerGroup = 2
	a := &Actor{d: Deps{Config: cfg}}
	for range createQueueGroups*cfg.MaxCreatesPerGroup - 1 {
		a.creates = append(a.creates, pendingCreate{})
	}
	if err := a.admitCreate(); err != nil {
		t.Fatalf("with %d waiting: got %v, want admitted", len(a.creates), err)
	}
	a.creates = append(a.creates, pendingCreate{})
	if err := a.admitCreate(); !errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("with %d waiting: got %v, want ErrUnavailable", len(a.creates), err)
	}
}

package actors

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// fakeReplica is a metastore replica held in memory: the test writes
// topics and assignments into it, and change() wakes whoever watches it,
// as an applied entry would. No Raft, no NATS.
type fakeReplica struct {
	mu sync.Mutex
	// leaderOwner, when set, is the owner the leader names for every
	// partition, ahead of this replica (a flip it has not applied yet).
	leaderOwner string
	topics      map[string]messages.Topic
	members     map[string]messages.Member
	assignments map[messages.PartitionKey]messages.Assignment // keyed without the topic name
	version     uint64
	// metaVersion moves with put and drop, the fake's topic changes.
	metaVersion uint64
	// ownerMarks is each cursor's view of the owners at its mark, so that
	// OwnerChangesSince also names the changes a test wrote straight into
	// assignments.
	ownerMarks map[*metastore.OwnerCursor]map[messages.PartitionKey]string
	changed    chan struct{}
}

func newFakeReplica() *fakeReplica {
	return &fakeReplica{topics: map[string]messages.Topic{}, members: map[string]messages.Member{},
		assignments: map[messages.PartitionKey]messages.Assignment{}, changed: make(chan struct{})}
}

func assignmentKey(incarnation uint64, partition int) messages.PartitionKey {
	return messages.PartitionKey{Incarnation: incarnation, Partition: partition}
}

// put sets topic t and the owner of each of its partitions, then tells the
// watchers.
func (f *fakeReplica) put(t messages.Topic, owners ...string) {
	f.mu.Lock()
	f.topics[t.Name] = t
	for p, o := range owners {
		f.assignments[assignmentKey(t.Incarnation, p)] = messages.Assignment{Topic: t.Name, Incarnation: t.Incarnation, Partition: p, Owner: o}
	}
	f.metaVersion++
	f.mu.Unlock()
	f.change()
}

// setOwner moves partition p of t to owner, no topic record changing (a
// flip), then tells the watchers.
func (f *fakeReplica) setOwner(t messages.Topic, p int, owner string) {
	f.mu.Lock()
	a := f.assignments[assignmentKey(t.Incarnation, p)]
	a.Owner, a.Target = owner, ""
	f.assignments[assignmentKey(t.Incarnation, p)] = a
	f.mu.Unlock()
	f.change()
}

// drop deletes topic name and its assignments, then tells the watchers.
func (f *fakeReplica) drop(name string) {
	f.mu.Lock()
	t := f.topics[name]
	delete(f.topics, name)
	for k := range f.assignments {
		if k.Incarnation == t.Incarnation {
			delete(f.assignments, k)
		}
	}
	f.metaVersion++
	f.mu.Unlock()
	f.change()
}

func (f *fakeReplica) change() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeReplica) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *fakeReplica) Topic(name string) (messages.Topic, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[name]
	return t, ok
}

func (f *fakeReplica) Member(id string) (messages.Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[id]
	return m, ok
}

func (f *fakeReplica) Assignment(incarnation uint64, partition int) (messages.Assignment, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.assignments[assignmentKey(incarnation, partition)]
	return a, ok
}

// LeaderAssignment answers from the replica, with leaderOwner as the owner
// when it is set.
func (f *fakeReplica) LeaderAssignment(_ context.Context, incarnation uint64, partition int) (messages.Assignment, bool, error) {
	a, ok := f.Assignment(incarnation, partition)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaderOwner != "" {
		a.Owner, a.Target = f.leaderOwner, ""
	}
	return a, ok, nil
}

func (f *fakeReplica) Topics() []messages.Topic {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []messages.Topic
	for _, t := range f.topics {
		out = append(out, t)
	}
	return out
}

func (f *fakeReplica) Members() []messages.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []messages.Member
	for _, m := range f.members {
		out = append(out, m)
	}
	return out
}

func (f *fakeReplica) Assignments(incarnation uint64, partitions int) []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Incarnation == incarnation && a.Partition < partitions })
}

func (f *fakeReplica) OwnedBy(node string) []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Owner == node })
}

func (f *fakeReplica) AppendOwnedBy(node string, buf []messages.Assignment) []messages.Assignment {
	return append(buf, f.OwnedBy(node)...)
}

func (f *fakeReplica) TargetedAt(node string) []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Target == node })
}

func (f *fakeReplica) Moving() []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Target != "" })
}

func (f *fakeReplica) OwnedCount(node string) int { return len(f.OwnedBy(node)) }

// FirstSettled answers in (incarnation, partition) order, so a test's plan
// does not depend on map order; the store promises no order.
func (f *fakeReplica) FirstSettled(node string, k int) []messages.PartitionKey {
	as := f.collect(func(a messages.Assignment) bool { return a.Owner == node && a.Target == "" })
	slices.SortFunc(as, func(x, y messages.Assignment) int {
		return cmp.Or(cmp.Compare(x.Incarnation, y.Incarnation), cmp.Compare(x.Partition, y.Partition))
	})
	var out []messages.PartitionKey
	for _, a := range as[:min(k, len(as))] {
		out = append(out, messages.PartitionKey{Topic: a.Topic, Incarnation: a.Incarnation, Partition: a.Partition})
	}
	return out
}

func (f *fakeReplica) TopicParent(name string) (uint64, string, bool) {
	t, ok := f.Topic(name)
	return t.Incarnation, t.Parent, ok
}

func (f *fakeReplica) collect(keep func(messages.Assignment) bool) []messages.Assignment {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []messages.Assignment
	for _, a := range f.assignments {
		if keep(a) {
			out = append(out, a)
		}
	}
	return out
}

// MetaVersion moves with the fake's topic changes (put, drop).
func (f *fakeReplica) MetaVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.metaVersion
}

func (f *fakeReplica) MarkOwners(c *metastore.OwnerCursor) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ownerMarks == nil {
		f.ownerMarks = map[*metastore.OwnerCursor]map[messages.PartitionKey]string{}
	}
	f.ownerMarks[c] = f.ownersLocked()
}

// OwnerChangesSince compares the owners now with those at c's mark.
func (f *fakeReplica) OwnerChangesSince(c *metastore.OwnerCursor, buf []messages.Assignment) ([]messages.Assignment, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	mark, ok := f.ownerMarks[c]
	if !ok {
		return buf, false
	}
	now := f.ownersLocked()
	for k, o := range now {
		if was, ok := mark[k]; !ok || was != o {
			buf = append(buf, f.assignments[k])
		}
	}
	for k := range mark {
		if _, ok := now[k]; !ok {
			buf = append(buf, messages.Assignment{Incarnation: k.Incarnation, Partition: k.Partition})
		}
	}
	f.ownerMarks[c] = now
	return buf, true
}

func (f *fakeReplica) ownersLocked() map[messages.PartitionKey]string {
	out := make(map[messages.PartitionKey]string, len(f.assignments))
	for k, a := range f.assignments {
		out[k] = a.Owner
	}
	return out
}

func (f *fakeReplica) AssignmentsVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version
}

// rule K6, on open: a partition whose consumer state holds acked-ahead
// offsets at or past its log's HWM (an install or a recovery that ended
// short of them) forgets them, though its frontier needs no clamp: the
// records later appended at those offsets are delivered, not skipped as
// acked.
func TestRuleK6AnOpenedPartitionForgetsAckedAheadPastItsHWM(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("k", 3)
	for i := range 3 {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/k/produce?partition=0", fmt.Appendf(nil, `"r%d"`, i))
	}
	waitFor(t, func() bool { return hwmOf(t, tn, "k") == 3 })
	tn.stop()
	dir := storage.PartitionPath(tn.cfg.DataDir, "k", 0)
	if err := storage.SaveConsumerState(dir, storage.ConsumerState{Frontier: 0, AckedAhead: []int64{2, 5}}, true); err != nil {
		t.Fatal(err)
	}
	tn.start()
	for i := 3; i < 7; i++ {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/k/produce?partition=0", fmt.Appendf(nil, `"r%d"`, i))
	}
	waitFor(t, func() bool { return hwmOf(t, tn, "k") == 7 })
	var got []int64
	for {
		m := tn.consume("k", "partition=0&wait=0")
		if m == nil {
			break
		}
		got = append(got, m.Offset)
	}
	if want := []int64{1, 3, 4, 5, 6}; !slices.Equal(got, want) {
		t.Fatalf("offsets delivered after an open at HWM 3 with offsets 2 and 5 acked ahead: got %v, want %v (5 was appended after the open)", got, want)
	}
}

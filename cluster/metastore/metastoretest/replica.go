// Package metastoretest is a metastore replica in memory for the tests of
// the packages that read one (the partitions supervisor, the peer routing,
// the move runner, the controller): a test writes topics, members and
// owners into it and the readers see them as if Raft had applied them.
// Tests only.
package metastoretest

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"sync"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// Replica is a metastore replica held in memory: the test writes topics,
// members and assignments into it (Put, SetMember, SetAssignments,
// SetOwner, SetTarget, Drop), and each write wakes whoever watches it and
// moves AssignmentsVersion, as an applied entry would. No Raft, no NATS.
type Replica struct {
	mu sync.Mutex
	// leaderOwner, when set, is the owner the leader names for every
	// partition, ahead of this replica (a flip it has not applied yet).
	leaderOwner string
	topics      map[string]messages.Topic
	members     map[string]messages.Member
	assignments map[messages.PartitionKey]messages.Assignment // keyed without the topic name
	version     uint64
	// topicsVersion moves with Put and Drop, the fake's changes to topic
	// records; Existing not with a Put of a name it did not hold, with no
	// parent (a create).
	topicsVersion metastore.TopicsVersion
	// ownerMarks is each cursor's view of the owners at its mark, so that
	// OwnerChangesSince also names the changes a test wrote straight into
	// assignments.
	ownerMarks map[*metastore.OwnerCursor]map[messages.PartitionKey]string
	changed    chan struct{}
}

func NewReplica() *Replica {
	return &Replica{topics: map[string]messages.Topic{}, members: map[string]messages.Member{},
		assignments: map[messages.PartitionKey]messages.Assignment{}, changed: make(chan struct{})}
}

func assignmentKey(incarnation uint64, partition int) messages.PartitionKey {
	return messages.PartitionKey{Incarnation: incarnation, Partition: partition}
}

// Put sets topic t and the owner of each of its partitions, then tells the
// watchers; with no owners, only the topic record changes. A Put of a name
// the fake did not hold, with no parent, is a create: it moves the topics
// version's Any only.
func (f *Replica) Put(t messages.Topic, owners ...string) {
	f.mu.Lock()
	_, existed := f.topics[t.Name]
	f.topics[t.Name] = t
	for p, o := range owners {
		f.assignments[assignmentKey(t.Incarnation, p)] = messages.Assignment{Topic: t.Name, Incarnation: t.Incarnation, Partition: p, Owner: o}
	}
	f.topicsVersion.Any++
	if existed || t.Parent != "" {
		f.topicsVersion.Existing++
	}
	f.mu.Unlock()
	f.change()
}

// SetMember writes member m's record, then tells the watchers. It moves
// no topic record, so not TopicsVersion either (a heartbeat's change).
func (f *Replica) SetMember(m messages.Member) {
	f.mu.Lock()
	f.members[m.ID] = m
	f.mu.Unlock()
	f.change()
}

// SetAssignments writes each of as as it is (keyed by its incarnation and
// partition, whether or not a topic names it), all in one change, then
// tells the watchers; TopicsVersion stays, as with SetOwner.
func (f *Replica) SetAssignments(as ...messages.Assignment) {
	f.mu.Lock()
	for _, a := range as {
		f.assignments[assignmentKey(a.Incarnation, a.Partition)] = a
	}
	f.mu.Unlock()
	f.change()
}

// SetOwner moves partition p of t to owner, no topic record changing (a
// flip), then tells the watchers.
func (f *Replica) SetOwner(t messages.Topic, p int, owner string) {
	f.mu.Lock()
	a := f.assignments[assignmentKey(t.Incarnation, p)]
	a.Owner, a.Target = owner, ""
	f.assignments[assignmentKey(t.Incarnation, p)] = a
	f.mu.Unlock()
	f.change()
}

// Recreate gives partition p of t to owner as the metastore's Recreate
// does after a lost disk: no target, the next floor up. Then it tells the
// watchers.
func (f *Replica) Recreate(t messages.Topic, p int, owner string) {
	f.mu.Lock()
	a := f.assignments[assignmentKey(t.Incarnation, p)]
	a.Floor = messages.RecreateFloor(a)
	a.Owner, a.Target, a.FlippedFrom, a.FlippedAtHWM = owner, "", "", 0
	f.assignments[assignmentKey(t.Incarnation, p)] = a
	f.mu.Unlock()
	f.change()
}

// SetTarget plans a move of partition p of t to target, then tells the
// watchers.
func (f *Replica) SetTarget(t messages.Topic, p int, target string) {
	f.mu.Lock()
	a := f.assignments[assignmentKey(t.Incarnation, p)]
	a.Target = target
	f.assignments[assignmentKey(t.Incarnation, p)] = a
	f.mu.Unlock()
	f.change()
}

// Drop deletes topic name and its assignments, then tells the watchers.
func (f *Replica) Drop(name string) {
	f.mu.Lock()
	t := f.topics[name]
	delete(f.topics, name)
	for k := range f.assignments {
		if k.Incarnation == t.Incarnation {
			delete(f.assignments, k)
		}
	}
	f.topicsVersion.Any++
	f.topicsVersion.Existing++
	f.mu.Unlock()
	f.change()
}

// SetLeaderOwner makes the leader name owner for every partition, ahead
// of this replica (a flip it has not applied yet); "" is this replica's.
func (f *Replica) SetLeaderOwner(owner string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leaderOwner = owner
}

func (f *Replica) change() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.version++
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *Replica) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

func (f *Replica) Topic(name string) (messages.Topic, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.topics[name]
	return t, ok
}

func (f *Replica) Member(id string) (messages.Member, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.members[id]
	return m, ok
}

func (f *Replica) Assignment(incarnation uint64, partition int) (messages.Assignment, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a, ok := f.assignments[assignmentKey(incarnation, partition)]
	return a, ok
}

// LeaderAssignment answers from the replica, with leaderOwner as the owner
// when it is set.
func (f *Replica) LeaderAssignment(_ context.Context, incarnation uint64, partition int) (messages.Assignment, bool, error) {
	a, ok := f.Assignment(incarnation, partition)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leaderOwner != "" {
		a.Owner, a.Target = f.leaderOwner, ""
	}
	return a, ok, nil
}

// Topics lists the topics in no particular order, nil when there are none.
func (f *Replica) Topics() []messages.Topic {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Values(f.topics))
}

// Members lists the members in no particular order, nil when there are none.
func (f *Replica) Members() []messages.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Values(f.members))
}

func (f *Replica) Assignments(incarnation uint64, partitions int) []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Incarnation == incarnation && a.Partition < partitions })
}

func (f *Replica) OwnedBy(node string) []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Owner == node })
}

func (f *Replica) AppendOwnedBy(node string, buf []messages.Assignment) []messages.Assignment {
	return append(buf, f.OwnedBy(node)...)
}

func (f *Replica) TargetedAt(node string) []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Target == node })
}

func (f *Replica) Moving() []messages.Assignment {
	return f.collect(func(a messages.Assignment) bool { return a.Target != "" })
}

func (f *Replica) OwnedCount(node string) int { return len(f.OwnedBy(node)) }

// FirstSettled answers in (incarnation, partition) order, so a test's plan
// does not depend on map order; the store promises no order.
func (f *Replica) FirstSettled(node string, k int) []messages.PartitionKey {
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

func (f *Replica) CurrentParent(incarnation uint64) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range f.topics {
		if t.Incarnation == incarnation {
			return t.Parent, true
		}
	}
	return "", false
}

func (f *Replica) collect(keep func(messages.Assignment) bool) []messages.Assignment {
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

// TopicsVersion moves with the fake's changes to topic records (Put,
// Drop), not with SetMember.
func (f *Replica) TopicsVersion() metastore.TopicsVersion {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.topicsVersion
}

func (f *Replica) MarkOwners(c *metastore.OwnerCursor) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ownerMarks == nil {
		f.ownerMarks = map[*metastore.OwnerCursor]map[messages.PartitionKey]string{}
	}
	f.ownerMarks[c] = f.ownersLocked()
}

// OwnerChangesSince compares the owners now with those at c's mark.
func (f *Replica) OwnerChangesSince(c *metastore.OwnerCursor, buf []messages.Assignment) ([]messages.Assignment, bool) {
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

func (f *Replica) ownersLocked() map[messages.PartitionKey]string {
	out := make(map[messages.PartitionKey]string, len(f.assignments))
	for k, a := range f.assignments {
		out[k] = a.Owner
	}
	return out
}

func (f *Replica) AssignmentsVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version
}

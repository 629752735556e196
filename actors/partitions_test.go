package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/partition"
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

// supervisorRig is the partitions supervisor of node n1 alone, in an actor
// system of its own, over a fake replica.
type supervisorRig struct {
	t       testing.TB
	replica *fakeReplica
	system  *actor.ActorSystem
	owned   *atomic.Int64
	dataDir string
	metrics *nodeMetrics
}

func newSupervisorRig(t testing.TB, tweak ...func(*Config)) *supervisorRig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.NodeID, cfg.DataDir = "n1", t.TempDir()
	for _, f := range tweak {
		f(&cfg)
	}
	r := &supervisorRig{t: t, replica: newFakeReplica(), system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testLogger(t) })), owned: new(atomic.Int64), dataDir: cfg.DataDir}
	m := newNodeMetrics("rig-" + t.Name())
	d := deps{cfg: cfg, log: testLogger(t), metrics: m, notifier: newCommitNotifier()}
	pd := partitionDeps(d, newFanoutDeps(cfg, testLogger(t), m, &router{self: "n1", system: r.system, replica: r.replica, timeout: time.Second}), nil)
	r.metrics = d.metrics
	pid, err := r.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return partition.NewSupervisor(pd, r.replica, r.owned)
	}), partition.SupervisorName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.system.Root.StopFuture(pid).Wait()
		r.system.Shutdown()
	})
	return r
}

// serving reports whether partition p of t has an actor here that answers.
func (r *supervisorRig) serving(t messages.Topic, p int) bool {
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: p}
	_, err := request(context.Background(), r.system.Root, partition.PID(r.system, k), &messages.GetStats{}, time.Second)
	return err == nil
}

// waitServing waits until partition p of t is served here, or not, as want
// says.
func (r *supervisorRig) waitServing(t messages.Topic, p int, want bool) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.serving(t, p) != want {
		if time.Now().After(deadline) {
			r.t.Fatalf("partition %s/%d served here: got %v, want %v", t.Name, p, !want, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTheSupervisorServesWhatTheReplicaSaysThisNodeOwns(t *testing.T) {
	r := newSupervisorRig(t)
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 3}
	r.replica.put(orders, "n1", "n2", "n1")
	r.waitServing(orders, 0, true)
	r.waitServing(orders, 2, true)
	if r.serving(orders, 1) {
		t.Fatal("partition 1 is n2's: got an actor here, want none")
	}
	if got := r.owned.Load(); got != 2 {
		t.Fatalf("partitions owned: got %d, want 2", got)
	}

	// Partition 2 moves to n2: its actor stops, its data stays (the topic
	// lives on, and a later move back may resume from it).
	r.replica.put(orders, "n1", "n2", "n2")
	r.waitServing(orders, 2, false)
	if _, err := os.Stat(storage.PartitionPath(r.dataDir, "orders", 2)); err != nil {
		t.Fatalf("data of a partition that moved away: got %v, want it kept", err)
	}

	// The topic is deleted: the last actor stops and its data goes.
	r.replica.drop("orders")
	r.waitServing(orders, 0, false)
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := os.Stat(storage.PartitionPath(r.dataDir, "orders", 0))
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("data of a deleted topic's partition: got %v, want it removed", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The gauge is stored at the end of the reconcile that purged the data.
	for r.owned.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("partitions owned after the delete: got %d, want 0", r.owned.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Flips move no topic record, so the supervisor follows them from the
// owner journal, not by a whole pass: what moves here is served, what
// moves away stops, and what did not change keeps its actor.
func TestTheSupervisorFollowsFlipsChangeByChange(t *testing.T) {
	r := newSupervisorRig(t)
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 4}
	r.replica.put(orders, "n1", "n2", "n1", "n2")
	r.waitServing(orders, 0, true)
	r.waitServing(orders, 2, true)
	meta := r.replica.MetaVersion()
	r.replica.setOwner(orders, 1, "n1")
	r.replica.setOwner(orders, 2, "n2")
	r.waitServing(orders, 1, true)
	r.waitServing(orders, 2, false)
	r.replica.setOwner(orders, 3, "n1")
	r.replica.setOwner(orders, 2, "n1") // back again
	r.waitServing(orders, 3, true)
	r.waitServing(orders, 2, true)
	r.waitServing(orders, 0, true)
	if got := r.replica.MetaVersion(); got != meta {
		t.Fatalf("metadata version: got %d, want %d (no whole pass asked for)", got, meta)
	}
	deadline := time.Now().Add(20 * time.Second)
	for r.owned.Load() != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("partitions owned: got %d, want 4", r.owned.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A recreated topic is a new incarnation: the old one's actor never
// serves it, and its data is not the new topic's.
func TestTheSupervisorNeverServesARecreatedTopicFromTheOldIncarnation(t *testing.T) {
	r := newSupervisorRig(t)
	old := messages.Topic{Name: "jobs", Incarnation: 1, Partitions: 1}
	r.replica.put(old, "n1")
	r.waitServing(old, 0, true)
	r.replica.drop("jobs")
	recreated := messages.Topic{Name: "jobs", Incarnation: 2, Partitions: 1}
	r.replica.put(recreated, "n1")
	r.waitServing(recreated, 0, true)
	r.waitServing(old, 0, false)
}

// The assignments of a deleted incarnation can outlive its topic record
// for a moment (two shards, two proposals): while they do, the name's new
// incarnation is served and the old one is not.
func TestTheSupervisorIgnoresAssignmentsOfAnIncarnationNoLongerListed(t *testing.T) {
	r := newSupervisorRig(t)
	old := messages.Topic{Name: "jobs", Incarnation: 1, Partitions: 1}
	r.replica.put(old, "n1")
	r.waitServing(old, 0, true)
	recreated := messages.Topic{Name: "jobs", Incarnation: 2, Partitions: 1}
	r.replica.put(recreated, "n1") // the old assignment stays
	r.waitServing(recreated, 0, true)
	r.waitServing(old, 0, false)
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

// A reported freeze that lapses: until the leader confirms this node still
// owns the partition, commits are refused with nothing appended; while the
// leader names another owner (a flip this replica has not applied, the
// source cut off right after the fence) they stay refused. Found by the
// move simulator (actors/move/sim, break Confirm).
func TestALapsedFreezeCommitsOnlyOnceTheLeaderConfirmsTheOwner(t *testing.T) {
	clk := newFakeClock()
	r := newSupervisorRig(t, func(c *Config) { c.clock = clk })
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}
	r.replica.put(orders, "n1")
	r.waitServing(orders, 0, true)
	k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	ask := func(msg any) any {
		t.Helper()
		res, err := request(context.Background(), r.system.Root, partition.PID(r.system, k), msg, 5*time.Second)
		if err != nil {
			t.Fatalf("ask %T: %v", msg, err)
		}
		return res
	}
	commit := func(seq uint64) messages.Status {
		return ask(&messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: seq, Body: []byte(`"x"`)}}}).(*messages.CommitResult).Status
	}
	if got := commit(1); got != messages.StatusOK {
		t.Fatalf("commit before the move: got status %d, want OK", got)
	}
	if r, ok := ask(&messages.Handoff{Op: messages.HandoffPrepare}).(*messages.HandoffResult); !ok || r.Status != messages.StatusOK {
		t.Fatalf("prepare: got %+v, want OK", r)
	}

	// The leader has flipped the partition away; this replica has not.
	r.replica.mu.Lock()
	r.replica.leaderOwner = "n2"
	r.replica.mu.Unlock()
	clk.advance(DefaultConfig().Move.FreezeTTL)
	for seq := uint64(2); seq < 6; seq++ {
		if got := commit(seq); got != messages.StatusFrozen {
			t.Fatalf("commit %d after the lapse, the leader naming n2: got status %d, want StatusFrozen (%d)", seq, got, messages.StatusFrozen)
		}
		clk.advance(DefaultConfig().Move.RetryAfter) // the confirm's retries
	}

	// The leader names this node after all (the move was aborted).
	r.replica.mu.Lock()
	r.replica.leaderOwner = "n1"
	r.replica.mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for commit(9) != messages.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("commit once the leader confirms n1: still refused after 20s")
		}
		clk.advance(DefaultConfig().Move.RetryAfter)
		time.Sleep(5 * time.Millisecond)
	}
	st := ask(&messages.GetStats{}).(*messages.PartitionStats)
	if st.HighWatermark != 2 {
		t.Fatalf("HWM after the confirm: got %d, want 2 (nothing appended while refused)", st.HighWatermark)
	}
}

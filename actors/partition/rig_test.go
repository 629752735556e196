package partition

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The package's test rig: the partitions supervisor of one node, n1, in an
// actor system of its own, over a metastore replica held in memory
// (fakeReplica, a copy of the root package's), with the fan-out's route a
// stand-in for the node's router (rigRoute). No Node, no Raft, no NATS.

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

// setTarget plans a move of partition p of t to target, then tells the
// watchers.
func (f *fakeReplica) setTarget(t messages.Topic, p int, target string) {
	f.mu.Lock()
	a := f.assignments[assignmentKey(t.Incarnation, p)]
	a.Target = target
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
	// fanoutPanics is the fan-out's panics counter, read by the tests.
	fanoutPanics *metrics.Counter
	// leasesRestored is narad_leases_restored_total, read by the tests.
	leasesRestored *metrics.Counter
	// alreadyCommitted is narad_commit_records_already_committed_total.
	alreadyCommitted *metrics.Counter
}

// rigDeps is what a node would hand its supervisor, with the node's
// defaults: the rig's data dir and logger, no pacer, no sync lane, no
// open bound, no figures, no commit notices.
func rigDeps(t testing.TB, dataDir string) Deps {
	mc := move.DefaultConfig()
	return Deps{Config: DefaultConfig(), NodeID: "n1", DataDir: dataDir, LogConfig: storage.DefaultLogConfig(),
		Consumer: storage.DefaultConsumerConfig(), RequestTimeout: 10 * time.Second, MoveTick: time.Second,
		MoveChunkBytes: 768 << 10, FreezeTTL: mc.FreezeTTL, ConfirmRetry: mc.RetryAfter,
		FreezeHoldFor: 2 * time.Second, Logger: testnet.Logger(t), Clock: clock.Wall{}}
}

func newSupervisorRig(t testing.TB, tweak ...func(*Deps)) *supervisorRig {
	t.Helper()
	r := &supervisorRig{t: t, replica: newFakeReplica(), system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testnet.Logger(t) })),
		owned: new(atomic.Int64), dataDir: t.TempDir()}
	set := metrics.NewSet()
	r.fanoutPanics = set.NewCounter(`narad_fanout_actor_panics_total{node="n1"}`)
	d := rigDeps(t, r.dataDir)
	d.Metrics = Metrics{CommitSeconds: set.NewPrometheusHistogram(`narad_commit_seconds{node="n1"}`)}
	for _, c := range []**metrics.Counter{&d.Metrics.CommitRecords, &d.Metrics.CommitsExpired, &d.Metrics.CommitFailures, &d.Metrics.Consumed,
		&d.Metrics.Acked, &d.Metrics.Nacked, &d.Metrics.Extended, &d.Metrics.Redelivered, &d.Metrics.CorruptSkipped,
		&d.Metrics.FrozenPublishRefused, &d.Metrics.HandoverSetAside, &d.Metrics.HandoverSetAsideRecs, &d.Metrics.AcksRepeated, &d.Metrics.LeasesRestored,
		&d.Metrics.RecordsAlreadyCommitted} {
		*c = set.NewCounter(fmt.Sprintf("rig_counter_%d", len(set.ListMetricNames())))
	}
	r.leasesRestored = d.Metrics.LeasesRestored
	r.alreadyCommitted = d.Metrics.RecordsAlreadyCommitted
	d.Fanout = fanout.Deps{Config: fanout.DefaultConfig(), RequestTimeout: time.Second, Logger: testnet.Logger(t),
		Route: rigRoute{system: r.system, replica: r.replica}, PartitionOf: partitionForKey,
		Metrics: fanout.Metrics{Copied: set.NewCounter("copied"), Failures: set.NewCounter("failures"), Skipped: set.NewCounter("skipped"),
			Panics: r.fanoutPanics, Lags: fanout.NewLags("n1", set)}}
	for _, f := range tweak {
		f(&d)
	}
	pid, err := r.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return NewSupervisor(d, r.replica, r.owned)
	}), SupervisorName)
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
	_, err := request(context.Background(), r.system.Root, PID(r.system, k), &messages.GetStats{}, time.Second)
	return err == nil
}

// ask sends msg to partition k's actor and returns its answer.
func (r *supervisorRig) ask(k messages.PartitionKey, msg any) any {
	r.t.Helper()
	res, err := request(context.Background(), r.system.Root, PID(r.system, k), msg, 5*time.Second)
	if err != nil {
		r.t.Fatalf("ask %T: %v", msg, err)
	}
	return res
}

// commit commits one record of sequence seq to partition k and returns
// the answer's status.
func (r *supervisorRig) commit(k messages.PartitionKey, seq uint64) messages.Status {
	r.t.Helper()
	return r.ask(k, &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: seq, Body: []byte(`"x"`)}}}).(*messages.CommitResult).Status
}

// servedWithOneRecord puts topic orders (incarnation 7, one partition)
// on n1, waits until it is served here, and commits record 1 to it.
func (r *supervisorRig) servedWithOneRecord() (messages.Topic, messages.PartitionKey) {
	r.t.Helper()
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}
	r.replica.put(orders, "n1")
	r.waitServing(orders, 0, true)
	k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	if got := r.commit(k, 1); got != messages.StatusOK {
		r.t.Fatalf("commit before the move: got status %d, want OK", got)
	}
	return orders, k
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

// errNoOwner is a partition without an owner, as the router answers it.
var errNoOwner = errors.New("partition has no owner")

// rigRoute stands in for the node's router as the fan-out's route: a
// partition owned by n1 is asked here, one without an owner is refused
// (the router of a node without NATS does the same), and a key's
// partition keeps to itself unless its owner reads dead.
type rigRoute struct {
	system  *actor.ActorSystem
	replica *fakeReplica
}

func (rr rigRoute) Topic(name string) (messages.Topic, bool) { return rr.replica.Topic(name) }

func (rr rigRoute) LivePartition(t messages.Topic, p int) int {
	for i := 0; i < t.Partitions; i++ {
		q := (p + i) % t.Partitions
		a, _ := rr.replica.Assignment(t.Incarnation, q)
		if m, ok := rr.replica.Member(a.Owner); ok && m.Status != messages.MemberDead {
			return q
		}
		if a.Owner == "n1" {
			return q
		}
	}
	return p
}

func (rr rigRoute) Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	if a, _ := rr.replica.Assignment(k.Incarnation, k.Partition); a.Owner == "" {
		return nil, fmt.Errorf("%s/%d: %w", k.Topic, k.Partition, errNoOwner)
	}
	return request(ctx, rr.system.Root, PID(rr.system, k), msg, time.Second)
}

// partitionForKey is the produce rule (the root's produce.go), which the
// node hands the fan-out as its PartitionOf.
func partitionForKey(key string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}

// request asks pid and waits for its answer, at most timeout.
func request(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	res, err := root.RequestFuture(pid, msg, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("%T to %s: %w", msg, pid.Id, err)
	}
	return res, nil
}

// fakeClock is a clock the test moves (cluster/testnet.Clock).
type fakeClock = testnet.Clock

func newFakeClock() *fakeClock { return testnet.NewClock() }

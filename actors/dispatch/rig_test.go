package dispatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The root package's dispatcher tests (actors/dispatcher_test.go,
// walincarnation_test.go) run the actor on a running node's metastore;
// this rig needs none: a fake replica, owners that are all peers, a real
// ingress WAL and a clock that never fires on its own.

// fakeStore is a replica of fixed topics and members.
type fakeStore struct {
	mu      sync.Mutex
	topics  map[string]messages.Topic
	members map[string]messages.Member
}

func (s *fakeStore) Topic(name string) (messages.Topic, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[name]
	return t, ok
}

func (s *fakeStore) Member(id string) (messages.Member, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.members[id]
	return m, ok
}

// peerOwners owns every partition on n1, a peer, and answers each commit
// with answer.
type peerOwners struct {
	mu      sync.Mutex
	answer  func(*messages.Commit) (any, error)
	commits []*messages.Commit
}

func (o *peerOwners) Ask(_ context.Context, _ messages.PartitionKey, msg any) (any, error) {
	c := msg.(*messages.Commit)
	o.mu.Lock()
	o.commits = append(o.commits, c)
	answer := o.answer
	o.mu.Unlock()
	return answer(c)
}
func (o *peerOwners) IsLocal(messages.PartitionKey) bool   { return false }
func (o *peerOwners) OwnerOf(messages.PartitionKey) string { return "n1" }
func (o *peerOwners) Sibling(k messages.PartitionKey) (messages.PartitionKey, bool) {
	return k, false
}

func answerOK(c *messages.Commit) (any, error) {
	return &messages.CommitResult{Key: c.Key, Status: messages.StatusOK}, nil
}

// stillClock is a clock whose timers fire only when the test says.
type stillClock struct {
	mu     sync.Mutex
	timers []*stillTimer
}

// stillTimer is one timer of a stillClock; stopped, it never fires.
type stillTimer struct {
	c       *stillClock
	f       func()
	stopped bool
}

func (c *stillClock) Now() time.Time { return time.Unix(1e9, 0) }
func (c *stillClock) AfterFunc(_ time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &stillTimer{c: c, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Reset arms a stopped timer again: a still clock never fires it.
func (t *stillTimer) Reset(time.Duration) bool {
	was := t.Stop()
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	t.stopped = false
	if !slices.Contains(t.c.timers, t) {
		t.c.timers = append(t.c.timers, t)
	}
	return was
}

func (t *stillTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was && slices.Contains(t.c.timers, t)
}

type rig struct {
	t      *testing.T
	deps   Deps
	wal    *storage.WAL
	walDir string
	owners *peerOwners
	set    *metrics.Set
	system *actor.ActorSystem
	pid    *actor.PID
}

func newRig(t *testing.T, store *fakeStore) *rig {
	t.Helper()
	walDir := t.TempDir()
	wal, err := storage.OpenWAL(walDir, storage.DefaultWALConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wal.Close() })
	set := metrics.NewSet()
	o := &peerOwners{answer: answerOK}
	d := Deps{Config: DefaultConfig(), RequestTimeout: time.Second, MaxCommitBatchBytes: 4 << 20, MaxRemoteCommitBytes: 2 << 20,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Store: store, Owners: o, WAL: wal,
		PartitionPID: func(*actor.ActorSystem, messages.PartitionKey) *actor.PID { return nil },
		Clock:        &stillClock{}, Metrics: Metrics{Set: set, Node: "rig", CommitsTooLarge: set.NewCounter(`narad_dispatcher_commits_too_large_total{node="rig"}`)}}
	return &rig{t: t, deps: d, wal: wal, walDir: walDir, owners: o, set: set, system: actor.NewActorSystem()}
}

func (r *rig) start() {
	d := New(r.deps)
	r.pid = r.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return d }))
	r.t.Cleanup(func() { _ = r.system.Root.StopFuture(r.pid).Wait() })
}

func (r *rig) produce(rec storage.WALRecord) {
	r.t.Helper()
	seq, err := r.wal.Append(context.Background(), rec)
	if err != nil {
		r.t.Fatal(err)
	}
	rec.Seq = seq
	r.system.Root.Send(r.pid, &Record{Rec: rec})
}

// committedBodies are the bodies of every record committed so far, in
// the order the owners got them.
func (r *rig) committedBodies() []string {
	r.owners.mu.Lock()
	defer r.owners.mu.Unlock()
	var bodies []string
	for _, c := range r.owners.commits {
		for _, cr := range c.Records {
			bodies = append(bodies, string(cr.Body))
		}
	}
	return bodies
}

// waitBacklog waits until the WAL holds want records.
func (r *rig) waitBacklog(want int64) {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		held, _ := r.wal.Backlog()
		if held == want {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("WAL backlog: got %d records, want %d", held, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A record of a live topic is committed at its partition's owner, pinned
// to the topic's incarnation, and released from the WAL; one whose
// incarnation is gone is released without a commit and counted.
func TestDispatcherCommitsOrDropsEachRecord(t *testing.T) {
	store := &fakeStore{topics: map[string]messages.Topic{"t": {Name: "t", Incarnation: 3, Partitions: 2}}, members: map[string]messages.Member{}}
	r := newRig(t, store)
	r.start()
	r.produce(storage.WALRecord{Topic: "t", Partition: 1, Key: []byte("k"), Body: []byte("live")})
	r.produce(storage.WALRecord{Topic: "t", Incarnation: 2, Partition: 0, Key: []byte("k"), Body: []byte("gone")})
	r.produce(storage.WALRecord{Topic: "t", Incarnation: 3, Partition: 5, Key: []byte("k"), Body: []byte("no partition")})
	r.waitBacklog(0)
	r.owners.mu.Lock()
	commits := r.owners.commits
	r.owners.mu.Unlock()
	if len(commits) != 1 || commits[0].Key != (messages.PartitionKey{Topic: "t", Incarnation: 3, Partition: 1}) || string(commits[0].Records[0].Body) != "live" {
		var got []string
		for _, c := range commits {
			got = append(got, fmt.Sprintf("%+v %d records", c.Key, len(c.Records)))
		}
		t.Fatalf("commits: got %q, want the live record's alone, at incarnation 3 partition 1", got)
	}
	for _, why := range []string{DropTopicDeleted, DropNoPartition} {
		if n := r.set.GetOrCreateCounter(fmt.Sprintf(`narad_wal_records_dropped_total{node="rig",reason=%q}`, why)).Get(); n != 1 {
			t.Errorf("narad_wal_records_dropped_total{reason=%q}: got %d, want 1", why, n)
		}
	}
}

// A record appended to the WAL while the start's replay reads it is
// replayed, and its Record, queued behind the start, is then skipped: it is
// committed once. (Sent before the start here, so the replay surely reads
// it; a produce in the first moments of a node's start races the same way.)
func TestARecordTheReplayReadIsCommittedOnce(t *testing.T) {
	store := &fakeStore{topics: map[string]messages.Topic{"t": {Name: "t", Incarnation: 3, Partitions: 2}}, members: map[string]messages.Member{}}
	r := newRig(t, store)
	rec := storage.WALRecord{Topic: "t", Incarnation: 3, Partition: 1, Key: []byte("k"), Body: []byte("once")}
	seq, err := r.wal.Append(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	rec.Seq = seq
	r.start()
	r.system.Root.Send(r.pid, &Record{Rec: rec})
	r.waitBacklog(0)
	later := storage.WALRecord{Topic: "t", Incarnation: 3, Partition: 0, Key: []byte("k"), Body: []byte("after")}
	r.produce(later)
	r.waitBacklog(0)
	bodies := r.committedBodies()
	if !slices.Equal(bodies, []string{"once", "after"}) {
		t.Fatalf("records committed: got %q, want [once after]", bodies)
	}
}

// A failure is of unknown outcome unless the partition answered or the
// request provably was not processed.
func TestOutcomeUnknown(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    commitDone
		want bool
	}{
		{"answered", commitDone{res: &messages.CommitResult{Status: messages.StatusFrozen}}, false},
		{"wrong answer type", commitDone{}, true},
		{"timeout", commitDone{err: context.DeadlineExceeded}, true},
		{"too large to send", commitDone{err: fmt.Errorf("send: %w", transport.ErrTooLarge)}, false},
		{"dead letter", commitDone{err: actor.ErrDeadLetter}, false},
		{"other", commitDone{err: errors.New("boom")}, true},
	} {
		if got := outcomeUnknown(&tc.m); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A produce batch's records come in one Records message and are
// committed as if each came alone, in order.
func TestRecordsOfABatchAreCommittedInOrder(t *testing.T) {
	store := &fakeStore{topics: map[string]messages.Topic{"t": {Name: "t", Incarnation: 3, Partitions: 2}}, members: map[string]messages.Member{}}
	r := newRig(t, store)
	r.start()
	var recs []storage.WALRecord
	for i := range 5 {
		rec := storage.WALRecord{Topic: "t", Incarnation: 3, Partition: 1, Key: []byte("k"), Body: []byte(fmt.Sprint(i))}
		seq, err := r.wal.Append(context.Background(), rec)
		if err != nil {
			t.Fatal(err)
		}
		rec.Seq = seq
		recs = append(recs, rec)
	}
	r.system.Root.Send(r.pid, &Records{Recs: recs})
	r.waitBacklog(0)
	bodies := r.committedBodies()
	if !slices.Equal(bodies, []string{"0", "1", "2", "3", "4"}) {
		t.Fatalf("records committed: got %q, want [0 1 2 3 4]", bodies)
	}
}

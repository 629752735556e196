package actors

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/dispatch"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// commitAttempt is one commit the fake owners saw.
type commitAttempt struct {
	partition int
	// incarnation is the topic incarnation the commit named.
	incarnation uint64
	seqs        []uint64
	// bytes counts the records as the dispatcher's caps count them.
	bytes int
	at    time.Time
}

func (a commitAttempt) String() string {
	return fmt.Sprintf("partition %d (incarnation %d) seqs %v (%d bytes) at %s", a.partition, a.incarnation, a.seqs, a.bytes, a.at.Format("15:04:05.000"))
}

// fakeOwners stands in for every partition's owner: each partition answers
// commits as its answer function says, and every attempt is recorded.
type fakeOwners struct {
	clock    *fakeClock
	mu       sync.Mutex
	answers  map[int]func(*messages.Commit) (any, error)
	owners   map[int]string
	attempts []commitAttempt
}

func (f *fakeOwners) Ask(_ context.Context, k messages.PartitionKey, msg any) (any, error) {
	c := msg.(*messages.Commit)
	seqs, size := make([]uint64, len(c.Records)), 0
	for i, r := range c.Records {
		seqs[i] = r.Seq
		size += len(r.Key) + len(r.Body) + recordOverheadBytes
	}
	f.mu.Lock()
	f.attempts = append(f.attempts, commitAttempt{partition: k.Partition, incarnation: k.Incarnation, seqs: seqs, bytes: size, at: f.clock.Now()})
	answer := f.answers[k.Partition]
	f.mu.Unlock()
	return answer(c)
}

// answer sets how partition p answers from now on.
func (f *fakeOwners) answer(p int, a func(*messages.Commit) (any, error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[p] = a
}

func (f *fakeOwners) OwnerOf(k messages.PartitionKey) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.owners[k.Partition]
}

// IsLocal is false: every partition is a peer's.
func (f *fakeOwners) IsLocal(messages.PartitionKey) bool { return false }

// Sibling is the next partition, whose owner the rig takes as alive.
func (f *fakeOwners) Sibling(k messages.PartitionKey) (messages.PartitionKey, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k.Partition = (k.Partition + 1) % len(f.owners)
	return k, true
}

// seen returns the attempts so far at partition p.
func (f *fakeOwners) seen(p int) []commitAttempt {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []commitAttempt
	for _, a := range f.attempts {
		if a.partition == p {
			out = append(out, a)
		}
	}
	return out
}

func answerStatus(s messages.Status) func(*messages.Commit) (any, error) {
	return func(c *messages.Commit) (any, error) {
		res := &messages.CommitResult{Key: c.Key, Status: s}
		for _, r := range c.Records {
			res.Seqs = append(res.Seqs, r.Seq)
		}
		return res, nil
	}
}

func answerError(err error) func(*messages.Commit) (any, error) {
	return func(*messages.Commit) (any, error) { return nil, err }
}

// dispatcherRig is a dispatcher actor of its own, with its own ingress WAL,
// on a running node's metastore (for topics and members), committing to
// fake owners: every partition is a peer's, reached through ask. Its time
// is a fake clock: a retry, and the reroute grace, come only when the
// test moves it (tick).
type dispatcherRig struct {
	t      *testing.T
	clock  *fakeClock
	tn     *testNode
	wal    *storage.WAL
	walDir string
	owners *fakeOwners
	// deps is the dispatcher's, which a test may change until start;
	// metrics the node series its handle is on.
	deps    dispatch.Deps
	metrics *nodeMetrics
	pid     *actor.PID
	// handled counts the commit outcomes the dispatcher handled (its
	// Handled knob).
	handled *atomic.Int64
}

// The rig's reroute grace and retry tick, on its fake clock.
const (
	rigGrace = 200 * time.Millisecond
	rigTick  = 20 * time.Millisecond
)

func newDispatcherRig(t *testing.T, tn *testNode, owners map[int]string, tweak ...func(*Config)) *dispatcherRig {
	t.Helper()
	return newDispatcherRigOn(t, tn, filepath.Join(t.TempDir(), "wal"), owners, tweak...)
}

// newDispatcherRigOn is newDispatcherRig over the WAL in walDir, as another
// life of a node would find it.
func newDispatcherRigOn(t *testing.T, tn *testNode, walDir string, owners map[int]string, tweak ...func(*Config)) *dispatcherRig {
	t.Helper()
	wal, err := storage.OpenWAL(walDir, tn.cfg.WAL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := wal.Close(); err != nil {
			t.Errorf("close the rig's WAL: %v", err)
		}
	})
	clk := newFakeClock()
	cfg := tn.cfg
	cfg.Dispatch.RerouteGrace, cfg.Dispatch.CommitRetryInterval, cfg.clock = rigGrace, rigTick, clk
	for _, f := range tweak {
		f(&cfg)
	}
	f := &fakeOwners{clock: clk, answers: map[int]func(*messages.Commit) (any, error){}, owners: owners}
	for p := range owners {
		f.answers[p] = answerStatus(messages.StatusOK)
	}
	m := newNodeMetrics("rig-" + t.Name())
	d := newDispatchDeps(deps{cfg: cfg, log: testLogger(t), metrics: m}, tn.n.Store(), wal, f)
	handled := new(atomic.Int64)
	d.Knobs.Handled = func() { handled.Add(1) }
	return &dispatcherRig{t: t, clock: clk, tn: tn, wal: wal, walDir: walDir, owners: f, deps: d, metrics: m, handled: handled}
}

// toNode makes the rig commit to the node's own partitions, through its
// router and the partitions' doors as the node's own dispatcher does (a
// partition created at rest opens at its first commit), rather than to
// fake owners.
func (r *dispatcherRig) toNode() *dispatcherRig {
	r.deps.Owners, r.deps.Doors = r.tn.n.route, r.tn.n.running
	return r
}

// start spawns the rig's dispatcher, which first replays what its WAL
// holds. It is stopped when the test ends.
func (r *dispatcherRig) start() *dispatcherRig {
	system := r.tn.n.system
	d := dispatch.New(r.deps)
	r.pid = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return d }))
	// Runs before the WAL's close, registered earlier.
	r.t.Cleanup(func() { _ = system.Root.StopFuture(r.pid).Wait() })
	return r
}

// append writes a record for topic/partition to the rig's WAL only, as
// if the node had stopped before dispatching it.
func (r *dispatcherRig) append(topic string, partition int, body []byte) storage.WALRecord {
	r.t.Helper()
	rec := storage.WALRecord{Topic: topic, Partition: int32(partition), Key: []byte("k"), Body: body}
	seq, err := r.wal.Append(context.Background(), rec)
	if err != nil {
		r.t.Fatal(err)
	}
	rec.Seq = seq
	return rec
}

// produce appends a record to the WAL and hands it to the running
// dispatcher, as the API does; it returns the record's seq.
func (r *dispatcherRig) produce(topic string, partition int, body []byte) uint64 {
	r.t.Helper()
	rec := r.append(topic, partition, body)
	r.tn.n.system.Root.Send(r.pid, &dispatch.Record{Rec: rec})
	return rec.Seq
}

// tick moves the rig's clock one retry interval on and waits until the
// dispatcher acted on it: another attempt, at partition p or at any other
// (a reroute). It first waits until the dispatcher handled the answer to
// every attempt so far and armed its next tick: a tick that landed before
// the last answer saw that commit in flight and retried nothing, and a
// clock moved before the timer was armed fired nothing (a CI run hung on
// both).
func (r *dispatcherRig) tick(p int) {
	r.t.Helper()
	var before int
	waitFor(r.t, func() bool {
		r.owners.mu.Lock()
		before = len(r.owners.attempts)
		r.owners.mu.Unlock()
		return r.handled.Load() >= int64(before) && r.clock.Pending() > 0
	})
	r.clock.Advance(rigTick)
	waitFor(r.t, func() bool {
		r.owners.mu.Lock()
		defer r.owners.mu.Unlock()
		return len(r.owners.attempts) > before
	})
}

// tickUntilMoved ticks until seq reached partition 1 (the rig's sibling of
// partition 0), for at most twice the grace.
func (r *dispatcherRig) tickUntilMoved(seq uint64) {
	r.t.Helper()
	for range 2 * rigGrace / rigTick {
		for _, a := range r.owners.seen(1) {
			if slices.Contains(a.seqs, seq) {
				return
			}
		}
		r.tick(0)
	}
}

// rigWaitBound bounds the rig's waits: a liveness bound, not a
// performance threshold.
const rigWaitBound = 10 * time.Second

// waitCommitted waits until partition p was sent a commit holding seq.
func (r *dispatcherRig) waitCommitted(p int, seq uint64) commitAttempt {
	r.t.Helper()
	deadline := time.Now().Add(rigWaitBound)
	for {
		for _, a := range r.owners.seen(p) {
			for _, s := range a.seqs {
				if s == seq {
					return a
				}
			}
		}
		if time.Now().After(deadline) {
			r.owners.mu.Lock()
			defer r.owners.mu.Unlock()
			r.t.Fatalf("after %s: no commit of seq %d reached partition %d; got %v", rigWaitBound, seq, p, r.owners.attempts)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Records whose commits fail for a reason other than a freeze or a dead
// owner stay on their partition however long it lasts: a paused owner, a
// refusal, a timeout, a commit too large to send (issue 9: an explicit
// ?partition= was overridden because a send failed). Once the owner
// answers they commit there. (rule K3)
func TestDispatcherKeepsRecordsOfAPartitionThatFailsForOtherReasons(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("held", 3)
	tooLarge := answerError(fmt.Errorf("commit to n1: %w: %w", transport.ErrTooLarge, ErrUnavailable))
	for _, tc := range []struct {
		name     string
		owner    string
		answer   func(*messages.Commit) (any, error)
		tooLarge bool
	}{
		// n1, the node under the rig, is an alive member.
		{"unavailable", "n1", answerStatus(messages.StatusUnavailable), false},
		{"failed", "n1", answerStatus(messages.StatusFailed), false},
		{"timeout", "n1", answerError(fmt.Errorf("commit to n1: %w: %w", transport.ErrTimeout, ErrUnavailable)), false},
		{"no responders", "n1", answerError(fmt.Errorf("commit to n1: %w: %w", transport.ErrNoResponders, ErrUnavailable)), false},
		{"too large", "n1", tooLarge, true},
		// Too large fails the same way at any partition: even a gone
		// owner's records must not loop between siblings.
		{"too large, owner gone", "not-a-member", tooLarge, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newDispatcherRig(t, tn, map[int]string{0: tc.owner, 1: "n1", 2: "n1"}).start()
			r.owners.answer(0, tc.answer)
			seq := r.produce("held", 0, []byte(`"v"`))
			r.waitCommitted(0, seq)
			// Retries go on for three graces: the old dispatcher rerouted
			// right after one.
			for range 3 * rigGrace / rigTick {
				r.tick(0)
			}
			for _, p := range []int{1, 2} {
				if got := r.owners.seen(p); len(got) != 0 {
					t.Fatalf("commits at sibling partition %d while partition 0 failed (%s): got %v, want none", p, tc.name, got)
				}
			}
			r.owners.answer(0, answerStatus(messages.StatusOK))
			r.tick(0)
			waitFor(t, func() bool { return r.wal.CommittedThrough() >= seq })
			if got := r.metrics.commitsTooLarge.Get(); (got > 0) != tc.tooLarge {
				t.Fatalf("narad_dispatcher_commits_too_large_total: got %d, want it counted: %v", got, tc.tooLarge)
			}
		})
	}
}

// rule K3: a partition that answers frozen for longer than RerouteGrace
// (a hand-off gone wrong) has its held records sent to a live sibling, and
// not before the grace.
func TestDispatcherReroutesAFreezeThatOutlastsTheGrace(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("frozen", 3)
	r := newDispatcherRig(t, tn, map[int]string{0: "n1", 1: "n1", 2: "n1"}).start()
	r.owners.answer(0, answerStatus(messages.StatusFrozen))
	seq := r.produce("frozen", 0, []byte(`"v"`))
	frozenAt := r.waitCommitted(0, seq).at
	r.tickUntilMoved(seq)
	moved := r.waitCommitted(1, seq).at
	if waited := moved.Sub(frozenAt); waited < rigGrace || waited > rigGrace+2*rigTick {
		t.Fatalf("frozen records rerouted after %s: want the grace %s, within two retries", waited, rigGrace)
	}
	waitFor(t, func() bool { return r.wal.CommittedThrough() >= seq })
}

// rule K3: the records of a partition whose owner is gone (no member, or
// no owner at all) go to a live sibling once commits failed for the grace.
// A member marked dead is the cluster test
// TestClusterHeldRecordsAreReroutedToALiveSiblingAfterTheGrace: a member
// made up here would be promoted to a metastore voter by the controller.
func TestDispatcherReroutesTheRecordsOfAGoneOwner(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("orphan", 3)
	for _, owner := range []string{"not-a-member", ""} {
		t.Run(fmt.Sprintf("owner %q", owner), func(t *testing.T) {
			r := newDispatcherRig(t, tn, map[int]string{0: owner, 1: "n1", 2: "n1"}).start()
			r.owners.answer(0, answerError(fmt.Errorf("commit to %q: %w: %w", owner, transport.ErrNoResponders, ErrUnavailable)))
			seq := r.produce("orphan", 0, []byte(`"v"`))
			failedAt := r.waitCommitted(0, seq).at
			r.tickUntilMoved(seq)
			moved := r.waitCommitted(1, seq).at
			if waited := moved.Sub(failedAt); waited < rigGrace || waited > rigGrace+2*rigTick {
				t.Fatalf("records of a gone owner rerouted after %s: want the grace %s, within two retries", waited, rigGrace)
			}
			waitFor(t, func() bool { return r.wal.CommittedThrough() >= seq })
		})
	}
}

// A commit to a peer crosses NATS as one message: the dispatcher caps its
// records at MaxRemoteCommitBytes, which the node checked at start that
// the server carries, however much is queued for the partition.
func TestDispatcherCapsACommitToAPeerAtMaxRemoteCommitBytes(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("wide", 3)
	limit := tn.cfg.Log.MaxBodyBytes + tn.cfg.Log.MaxKeyBytes + recordOverheadBytes
	r := newDispatcherRig(t, tn, map[int]string{0: "n1", 1: "n1", 2: "n1"}, func(c *Config) { c.MaxRemoteCommitBytes = limit })
	// Replayed at the start, all three queue before the first commit
	// returns, so the second and third could go as one batch.
	body := make([]byte, 600<<10)
	var last uint64
	for range 3 {
		last = r.append("wide", 0, body).Seq
	}
	r.start()
	waitFor(t, func() bool { return r.wal.CommittedThrough() >= last })
	for _, a := range r.owners.seen(0) {
		if a.bytes > limit {
			t.Fatalf("commit to a peer: got %v, want at most MaxRemoteCommitBytes %d", a, limit)
		}
	}
}

// rigMembers overrides the replica's members the dispatcher reads: the
// rig's owners may be dead members, or removed ones, without a cluster.
type rigMembers struct {
	dispatch.Store
	mu sync.Mutex
	// members holds the overridden ids; a nil value is a removed member.
	members map[string]*messages.Member
}

func (m *rigMembers) Member(id string) (messages.Member, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mem, ok := m.members[id]; ok {
		if mem == nil {
			return messages.Member{}, false
		}
		return *mem, true
	}
	return m.Store.Member(id)
}

// set makes id a member of the status, or removes it ("").
func (m *rigMembers) set(id, status string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if status == "" {
		m.members[id] = nil
		return
	}
	m.members[id] = &messages.Member{ID: id, Status: status}
}

// answerFirst answers the first commit with first and every later one
// with then.
func answerFirst(first, then func(*messages.Commit) (any, error)) func(*messages.Commit) (any, error) {
	var mu sync.Mutex
	calls := 0
	return func(c *messages.Commit) (any, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			return first(c)
		}
		return then(c)
	}
}

// Issue 15 item 2: a commit whose outcome is unknown (a timeout) is not
// resent to a sibling while the node it went to is a member of the
// cluster, alive or marked dead (a paused owner commits the originals when
// it wakes): its records wait at their partition, counted in
// narad_dispatcher_unknown_outcome_records, until the owner answers or is
// removed, and are not resent to the owner either while it reads dead
// (each resend would be one more copy once it wakes). A commit proven not
// processed (no responders) still moves after the grace (rule K3), and so
// does one whose owner was removed.
func TestDispatcherNeverReroutesACommitOfUnknownOutcomeWhileItsOwnerIsAMember(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("unknown", 3)
	timeout := answerError(fmt.Errorf("commit to n9: %w: %w", transport.ErrTimeout, ErrUnavailable))
	noResponders := answerError(fmt.Errorf("commit to n9: %w: %w", transport.ErrNoResponders, ErrUnavailable))
	for _, tc := range []struct {
		name   string
		answer func(*messages.Commit) (any, error)
		// aliveFirst: the owner reads alive for one grace (retries go on),
		// then dead; otherwise dead from the start.
		aliveFirst bool
		// removed: the owner leaves the cluster after three graces.
		removed bool
		// moves: the records reach the sibling; otherwise they stay and
		// commit at partition 0 once its owner is back.
		moves bool
	}{
		{"timeout, owner dead", timeout, false, false, false},
		{"timeout, then no responders", answerFirst(timeout, noResponders), true, false, false},
		{"timeout, then frozen", answerFirst(timeout, answerStatus(messages.StatusFrozen)), true, false, false},
		{"cancelled", answerError(fmt.Errorf("commit to n9: %w", context.Canceled)), false, false, false},
		{"no responders, owner dead", noResponders, false, false, true},
		{"timeout, owner removed", timeout, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newDispatcherRig(t, tn, map[int]string{0: "n9", 1: "n1", 2: "n1"})
			members := &rigMembers{Store: r.deps.Store, members: map[string]*messages.Member{}}
			members.set("n9", messages.MemberDead)
			if tc.aliveFirst {
				members.set("n9", messages.MemberAlive)
			}
			r.deps.Store = members
			r.start()
			r.owners.answer(0, tc.answer)
			seq := r.produce("unknown", 0, []byte(`"v"`))
			r.waitCommitted(0, seq)
			if tc.aliveFirst {
				for range rigGrace / rigTick {
					r.tick(0)
				}
				members.set("n9", messages.MemberDead)
			}
			before := len(r.owners.seen(0))
			// Three graces: the old dispatcher rerouted right after one.
			for i := 0; i < int(3*rigGrace/rigTick) && len(r.owners.seen(1)) == 0; i++ {
				r.tickQuiet()
			}
			if early := len(r.owners.seen(1)) > 0; early != (tc.moves && !tc.removed) {
				t.Fatalf("%s: records at the sibling within three graces: got %v, want %v", tc.name, early, tc.moves && !tc.removed)
			}
			if !tc.moves {
				if got := len(r.owners.seen(0)); got != before {
					t.Fatalf("%s: commits resent to the dead owner: got %d, want none", tc.name, got-before)
				}
			}
			if tc.removed {
				members.set("n9", "")
				r.tickUntilMoved(seq)
			}
			moved := len(r.owners.seen(1)) > 0
			if moved != tc.moves {
				t.Fatalf("%s: records at the sibling: got %v, want %v (attempts at it: %v)", tc.name, moved, tc.moves, r.owners.seen(1))
			}
			if !tc.moves {
				if got := unknownOutcomeGauge(r, "n9"); got != 1 {
					t.Fatalf("narad_dispatcher_unknown_outcome_records for n9: got %v, want 1", got)
				}
				// The owner wakes and answers.
				r.owners.answer(0, answerStatus(messages.StatusOK))
				members.set("n9", messages.MemberAlive)
				r.tick(0)
			}
			waitFor(t, func() bool { return r.wal.CommittedThrough() >= seq })
			// The next tick's report clears the gauge.
			r.clock.Advance(rigTick)
			waitFor(t, func() bool { return unknownOutcomeGauge(r, "n9") == 0 })
		})
	}
}

// tickQuiet moves the rig's clock one retry interval on and waits until
// the dispatcher ran that tick (it arms the next one), whether or not it
// sent anything.
func (r *dispatcherRig) tickQuiet() {
	r.t.Helper()
	r.clock.Advance(rigTick)
	waitFor(r.t, func() bool { return r.clock.Pending() > 0 })
}

func unknownOutcomeGauge(r *dispatcherRig, node string) float64 {
	return r.metrics.set.GetOrCreateGauge(fmt.Sprintf(`narad_dispatcher_unknown_outcome_records{node=%q,destination=%q}`, r.metrics.node, node), nil).Get()
}

// replayCopy opens a copy of the rig's WAL, as a restart would find it
// now, and returns the seqs it replays.
func (r *dispatcherRig) replayCopy() []uint64 {
	r.t.Helper()
	dir := r.t.TempDir()
	entries, err := os.ReadDir(r.walDir)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(r.walDir, e.Name()))
		if err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	w, err := storage.OpenWAL(dir, r.tn.cfg.WAL)
	if err != nil {
		r.t.Fatal(err)
	}
	defer w.Close()
	var seqs []uint64
	if _, err := w.Replay(func(rec storage.WALRecord) error {
		seqs = append(seqs, rec.Seq)
		return nil
	}); err != nil {
		r.t.Fatal(err)
	}
	return seqs
}

// Issue 15 item 3: a clean stop replays nothing committed. A commit still
// in flight when the dispatcher stops is waited for, not cancelled, and
// what it committed is released and persisted before the actor is gone;
// the old dispatcher cancelled it and dropped the answer, so a committed
// record came back at the next start. What was never committed does come
// back.
func TestDispatcherStopKeepsTheOutcomeOfACommitInFlight(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("stop", 3)
	r := newDispatcherRig(t, tn, map[int]string{0: "n1", 1: "n1", 2: "n1"}).start()
	for p := range 3 {
		r.produce("stop", p, []byte(`"committed before the stop"`))
	}
	waitFor(t, func() bool { return r.wal.CommittedThrough() >= 3 })
	answer := make(chan struct{})
	r.owners.answer(0, func(c *messages.Commit) (any, error) {
		<-answer // the owner commits while the node stops
		return answerStatus(messages.StatusOK)(c)
	})
	r.owners.answer(1, answerStatus(messages.StatusUnavailable))
	inFlight := r.produce("stop", 0, []byte(`"in flight at the stop"`))
	refused := r.produce("stop", 1, []byte(`"never committed"`))
	r.waitCommitted(0, inFlight)
	r.waitCommitted(1, refused)
	stopped := r.tn.n.system.Root.StopFuture(r.pid)
	close(answer)
	if err := stopped.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := r.replayCopy(); !slices.Equal(got, []uint64{refused}) {
		t.Fatalf("replayed after a clean stop: got seqs %v, want only %d (never committed)", got, refused)
	}
}

// Issue 15 item 3: a graceful restart under load replays nothing already
// committed. Producers run while the node stops; after the restart every
// record the node accepted (202) is delivered, and none twice.
func TestAGracefulRestartUnderLoadDeliversNoDuplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a node under load")
	}
	tn := newTestNode(t)
	tn.createTopic("restart", 6)
	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		wg       sync.WaitGroup
		quit     = make(chan struct{})
	)
	client := &http.Client{Timeout: 10 * time.Second}
	for p := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-quit:
					return
				default:
				}
				body := fmt.Sprintf(`"producer %d record %d"`, p, i)
				resp, err := client.Post(tn.base+"/v1/topics/restart/produce", "application/json", strings.NewReader(body))
				if err != nil {
					continue // the server is shutting down
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					mu.Lock()
					accepted[body] = true
					mu.Unlock()
				}
			}
		})
	}
	waitFor(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) >= 300
	})
	tn.stop()
	close(quit)
	wg.Wait()
	tn.start()

	seen := map[string]int{}
	for {
		m := tn.consume("restart", "wait=500ms")
		if m == nil {
			break
		}
		seen[string(m.Payload)]++
		tn.must(http.StatusNoContent, "POST", "/v1/topics/restart/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
	}
	var twice, missing []string
	for body, n := range seen {
		if n > 1 {
			twice = append(twice, body)
		}
	}
	for body := range accepted {
		if seen[body] == 0 {
			missing = append(missing, body)
		}
	}
	if len(twice) > 0 || len(missing) > 0 {
		t.Fatalf("after a graceful restart with %d records accepted: got %d delivered twice (first %q), %d missing (first %q), want none",
			len(accepted), len(twice), twice[:min(3, len(twice))], len(missing), missing[:min(3, len(missing))])
	}
}

package sweeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/sweep"
	"github.com/naradmq/narad/cluster/metastore/metastoretest"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The sweeper's tests run one pass at a time on a real data dir (copies
// written with storage.Log, topic markers with storage.PrepareTopicDir),
// over a fake replica and a fake owner; no cluster, no NATS. Node n1 runs
// the sweep; n2 owns the partitions that moved away. The fakes are this
// package's own: the replica holds only what the sweeper reads (Store).

// errOwnerUnreachable is what the fake owner answers for a partition it
// has no listing of.
var errOwnerUnreachable = errors.New("owner unreachable")

// sweepReplica is the fake replica: its topic records and assignments
// (metastoretest.Replica), and the leader's topic records, which the
// replica does not hold.
type sweepReplica struct {
	*metastoretest.Replica
	// mu guards the leader's side: leader is the leader's topic records;
	// leaderErr, when set, fails every read; onLeader runs at each read,
	// before it answers.
	mu        sync.Mutex
	leader    map[string]messages.Topic
	leaderErr error
	onLeader  func()
	// catchUpErr, when set, fails every catch-up barrier.
	catchUpErr error
}

func newSweepReplica() *sweepReplica {
	return &sweepReplica{Replica: metastoretest.NewReplica(), leader: map[string]messages.Topic{}}
}

func (r *sweepReplica) CatchUp(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.catchUpErr
}

func (r *sweepReplica) LeaderTopic(_ context.Context, name string) (messages.Topic, bool, error) {
	r.mu.Lock()
	hook, err := r.onLeader, r.leaderErr
	t, ok := r.leader[name]
	r.mu.Unlock()
	if hook != nil {
		hook()
	}
	if err != nil {
		return messages.Topic{}, false, err
	}
	return t, ok, nil
}

// sweepOwners is the partitions' owner: it answers a ListPartition with
// the listing the test gave, or errOwnerUnreachable.
type sweepOwners struct {
	mu       sync.Mutex
	listings map[messages.PartitionKey]*messages.PartitionListing
	asked    []messages.PartitionKey
	// onAsk runs at each ask, before it answers: between the sweep's
	// judgement and its act.
	onAsk func(messages.PartitionKey)
}

func (o *sweepOwners) Ask(_ context.Context, k messages.PartitionKey, msg any) (any, error) {
	if _, ok := msg.(*messages.ListPartition); !ok {
		return nil, fmt.Errorf("fake owner: got %T, want *messages.ListPartition", msg)
	}
	o.mu.Lock()
	o.asked = append(o.asked, k)
	hook, ls := o.onAsk, o.listings[k]
	o.mu.Unlock()
	if hook != nil {
		hook(k)
	}
	if ls == nil {
		return nil, errOwnerUnreachable
	}
	return ls, nil
}

func (o *sweepOwners) answer(k messages.PartitionKey, ls *messages.PartitionListing) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.listings[k] = ls
}

func (o *sweepOwners) askedKeys() []messages.PartitionKey {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.asked)
}

// newTestMetrics is a set of the series the sweeper sets, of its own, so
// that each rig's gauges start at zero under -count.
func newTestMetrics() Metrics {
	set := metrics.NewSet()
	return Metrics{
		QuarantinedCopies: set.GetOrCreateGauge("narad_quarantined_copies", nil),
		QuarantinedBytes:  set.GetOrCreateGauge("narad_quarantined_bytes", nil),
		OrphanTopicDirs:   set.GetOrCreateGauge("narad_orphan_topic_dirs", nil),
		Reclaimed:         set.GetOrCreateCounter("narad_sweep_reclaimed_bytes_total"),
		Judged: func(a sweep.Action) *metrics.Counter {
			return set.GetOrCreateCounter(fmt.Sprintf(`narad_sweep_copies_judged_total{verdict=%q}`, a))
		},
	}
}

// recordingHandler keeps every log record, for tests that read what was
// logged and at which level.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

func recordAttrs(r slog.Record) map[string]string {
	out := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { out[a.Key] = a.Value.String(); return true })
	return out
}

func newTestSystem(t *testing.T) *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testnet.Logger(t) }))
}

// sweepRig is node n1's sweeper over a temp data dir.
type sweepRig struct {
	t       *testing.T
	d       Deps
	replica *sweepReplica
	owners  *sweepOwners
	logs    *recordingHandler
	metrics Metrics
	guards  *storage.Guards
	s       *Actor
}

func newSweepRig(t *testing.T, tweak ...func(*Config)) *sweepRig {
	t.Helper()
	cfg := DefaultConfig()
	for _, f := range tweak {
		f(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	// Small segments: a copy of a dozen records spans several.
	logCfg := storage.DefaultLogConfig()
	logCfg.SegmentMaxBytes = 4 << 10
	r := &sweepRig{t: t, replica: newSweepReplica(),
		owners: &sweepOwners{listings: map[messages.PartitionKey]*messages.PartitionListing{}}, logs: &recordingHandler{},
		metrics: newTestMetrics(), guards: storage.NewGuards()}
	r.d = Deps{NodeID: "n1", DataDir: t.TempDir(), LogConfig: logCfg, RequestTimeout: 10 * time.Second, Config: cfg,
		Logger: slog.New(r.logs), Guards: r.guards, Store: r.replica, Owners: r.owners, Metrics: r.metrics}
	r.s = New(r.d, newBook(r.metrics))
	return r
}

// topic puts t in the replica and the leader, with the owners of its
// partitions, and makes its directory t's incarnation's.
func (r *sweepRig) topic(t messages.Topic, owners ...string) {
	r.t.Helper()
	r.replica.Put(t, owners...)
	r.replica.mu.Lock()
	r.replica.leader[t.Name] = t
	r.replica.mu.Unlock()
	if _, err := storage.PrepareTopicDir(r.d.DataDir, t.Name, t.Incarnation); err != nil {
		r.t.Fatal(err)
	}
}

// setTarget aims k's assignment at node.
func (r *sweepRig) setTarget(k messages.PartitionKey, node string) {
	r.replica.SetTarget(messages.Topic{Name: k.Topic, Incarnation: k.Incarnation}, k.Partition, node)
}

// appendRecords appends n records of about 1 KiB to the log at dir (a
// copy this node served) and closes it; it returns the copy's listing.
func (r *sweepRig) appendRecords(dir string, n int) storage.Listing {
	r.t.Helper()
	if err := r.writeRecords(dir, n); err != nil {
		r.t.Fatal(err)
	}
	ls, err := storage.ListClosed(dir, r.d.LogConfig, time.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	return ls
}

// writeRecords is appendRecords for a hook on the pass's goroutines,
// which must not call Fatal.
func (r *sweepRig) writeRecords(dir string, n int) error {
	l, err := storage.OpenLog(dir, r.d.LogConfig)
	if err != nil {
		return err
	}
	body := fmt.Appendf(nil, `"%01000d"`, 0)
	for i := range n {
		if _, err := l.Append(time.Now(), []storage.Entry{{Key: fmt.Appendf(nil, "k%d", i), Body: body}}); err != nil {
			l.Close()
			return err
		}
	}
	return l.Close()
}

// copyOf writes n records into k's local copy and returns its listing.
func (r *sweepRig) copyOf(k messages.PartitionKey, n int) storage.Listing {
	return r.appendRecords(r.path(k), n)
}

func (r *sweepRig) path(k messages.PartitionKey) string {
	return storage.PartitionPath(r.d.DataDir, k.Topic, k.Partition)
}

// pass runs one sweep from the from'th copy, then does what the actor
// does with its report: counts it and takes the inventory.
func (r *sweepRig) pass(from int) report {
	r.t.Helper()
	rep := r.s.pass(context.Background(), from)
	r.s.record(rep)
	if err := r.s.book.refresh(r.d.DataDir); err != nil {
		r.t.Fatal(err)
	}
	return rep
}

// sweeperPID spawns the rig's sweeper in an actor system of its own;
// the test's end stops it and waits.
func (r *sweepRig) sweeperPID() (*actor.ActorSystem, *actor.PID) {
	r.t.Helper()
	system := newTestSystem(r.t)
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return r.s }), Name)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		_ = system.Root.StopFuture(pid).Wait()
		system.Shutdown()
	})
	return system, pid
}

// movedFromHere is the listing n2 answers after a move from n1 that
// copied ls: the same segments, its HWM, and a durable marker from n1
// promoted at promoted.
func movedFromHere(ls storage.Listing, hwm, promoted int64) *messages.PartitionListing {
	return &messages.PartitionListing{Status: messages.StatusOK, Segments: wireSegments(ls.Segments), HWM: hwm, Clock: time.Now(),
		Marker: &messages.MoveMarker{PromotedHWM: promoted, SourceNode: "n1", Durable: true, InstallAgeMs: time.Hour.Milliseconds()}}
}

func wireSegments(segs []storage.SegmentInfo) []messages.SegmentInfo {
	out := make([]messages.SegmentInfo, len(segs))
	for i, s := range segs {
		out[i] = messages.SegmentInfo{Name: s.Name, Base: s.Base, Size: s.Size, ModTime: s.ModTime}
	}
	return out
}

func pathExists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Lstat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

func sweptBytes(t *testing.T, dir string) int64 {
	t.Helper()
	n, err := storage.DirBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// errorsWith counts the error lines whose attribute key reads value.
func (r *sweepRig) errorsWith(key, value string) int {
	r.logs.mu.Lock()
	defer r.logs.mu.Unlock()
	n := 0
	for _, rec := range r.logs.records {
		if rec.Level == slog.LevelError && recordAttrs(rec)[key] == value {
			n++
		}
	}
	return n
}

// judgedTotal counts the copies a pass judged, whatever the verdict.
func judgedTotal(rep report) int {
	n := 0
	for _, c := range rep.judged {
		n += c
	}
	return n
}

// seedSetAside writes copies set aside (and live data beside them) into a
// data dir as earlier runs of a node would have left them; it returns the
// bytes set aside. (The root package's node tests seed the same.)
func seedSetAside(t testing.TB, dataDir string) int64 {
	t.Helper()
	files := map[string]int{
		"topics/gone/incarnation":              2,
		"topics/gone/0.quarantine/00000.log":   100,
		"topics/gone/0.quarantine/consumer":    24,
		".stale/old@3/0/00000.log":             50,
		".moves/gone-1.quarantine/00000.log":   26,
		"topics/orphan/0/00000.log":            7, // no marker: an orphan, not a copy
		"topics/gone/0.quarantine.x/00000.log": 1, // not a name a set-aside takes
	}
	for rel, size := range files {
		p := filepath.Join(dataDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return 100 + 24 + 50 + 26
}

var sweepOrders = messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}

var sweepOrders0 = messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}

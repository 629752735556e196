package fanout

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// rig is one fan-out actor under a stand-in for its partition actor (the
// parent, which serves Read from a slice of records and keeps the cursors
// it is told to Advance to) over a fake route to one child topic. The
// root package's partition_fanout_test.go runs the same actor under the
// real partition actor.
type rig struct {
	t       testing.TB
	system  *actor.ActorSystem
	parent  *actor.PID
	route   *fakeRoute
	set     *metrics.Set
	metrics Metrics
	key     messages.PartitionKey
	link    messages.ChildLink

	mu     sync.Mutex
	recs   []storage.Record // offsets oldest.. in order
	oldest int64
	cursor int64
}

// add is the test committing records to the parent partition.
type add struct{ n int }

// parentActor is the rig's partition actor: it spawns the fan-out actor
// as its child, as partition.Actor.setLinks does.
type parentActor struct {
	r     *rig
	d     Deps
	child *actor.PID
}

func (p *parentActor) Receive(ctx actor.Context) {
	r := p.r
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d, k := p.d, r.key
		p.child = ctx.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return New(d, k) }), "fanout")
		ctx.Send(p.child, r.links())
	case Hello:
		ctx.Send(p.child, r.links())
	case *Read:
		ctx.Respond(r.read(m))
	case Advance:
		r.mu.Lock()
		if m.Child == r.link.Name && m.Epoch == r.link.AttachEpoch && m.Offset > r.cursor {
			r.cursor = m.Offset
		}
		r.mu.Unlock()
	case add:
		r.mu.Lock()
		next := r.oldest + int64(len(r.recs))
		for i := range m.n {
			off := next + int64(i)
			r.recs = append(r.recs, storage.Record{Offset: off, Key: fmt.Appendf(nil, "k%d", off%7),
				Body: fmt.Appendf(nil, "b%d", off), Time: time.Now().UnixNano()})
		}
		hwm := r.oldest + int64(len(r.recs))
		r.mu.Unlock()
		ctx.Send(p.child, Wake{HWM: hwm})
	}
}

func (r *rig) links() Links {
	r.mu.Lock()
	defer r.mu.Unlock()
	return Links{Links: []messages.ChildLink{r.link}, Cursors: map[string]int64{r.link.Name: r.cursor}, HWM: r.oldest + int64(len(r.recs))}
}

// read answers a Read as partition.Actor.fanoutRead does, the byte bound
// aside.
func (r *rig) read(m *Read) Records {
	r.mu.Lock()
	defer r.mu.Unlock()
	hwm := r.oldest + int64(len(r.recs))
	out := Records{Child: m.Child, Epoch: m.Epoch, From: m.From, HWM: hwm, Oldest: r.oldest}
	switch {
	case m.From < r.oldest:
		out.Gone = true
	case m.From < hwm:
		i := m.From - r.oldest
		out.Recs = append([]storage.Record(nil), r.recs[i:min(i+int64(m.Max), int64(len(r.recs)))]...)
	}
	return out
}

// fakeRoute is one child topic whose partitions commit what they are
// sent, unless refuse says no.
type fakeRoute struct {
	child messages.Topic
	mu    sync.Mutex
	// got is each child partition's records, by body, in commit order.
	got    map[int][]string
	refuse func(partition int) bool
}

func (f *fakeRoute) Topic(name string) (messages.Topic, bool) {
	return f.child, name == f.child.Name
}

func (f *fakeRoute) LivePartition(_ messages.Topic, p int) int { return p }

func (f *fakeRoute) Ask(_ context.Context, k messages.PartitionKey, msg any) (any, error) {
	c := msg.(*messages.Commit)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse != nil && f.refuse(k.Partition) {
		return &messages.CommitResult{Key: k, Status: messages.StatusUnavailable, Err: "frozen"}, nil
	}
	for _, rec := range c.Records {
		f.got[k.Partition] = append(f.got[k.Partition], string(rec.Body))
	}
	return &messages.CommitResult{Key: k, Status: messages.StatusOK}, nil
}

// bodies is every body the child committed, with how many times.
func (f *fakeRoute) bodies() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for _, bs := range f.got {
		for _, b := range bs {
			out[b]++
		}
	}
	return out
}

func newRig(t testing.TB, knobs Knobs, refuse func(partition int) bool) *rig {
	t.Helper()
	return newRigOn(t, nil, knobs, refuse)
}

// newRigOn is newRig whose fan-out actor runs on clk (nil: the wall).
func newRigOn(t testing.TB, clk clock.Clock, knobs Knobs, refuse func(partition int) bool) *rig {
	t.Helper()
	set := metrics.NewSet()
	m := Metrics{Copied: set.NewCounter("copied"), Failures: set.NewCounter("failures"), Skipped: set.NewCounter("skipped"),
		Panics: set.NewCounter("panics"), Lags: NewLags("n1", set)}
	r := &rig{t: t, set: set, metrics: m, key: messages.PartitionKey{Topic: "orders", Incarnation: 10, Partition: 0},
		link:  messages.ChildLink{Name: "audit", Incarnation: 20, AttachEpoch: 21},
		route: &fakeRoute{child: messages.Topic{Name: "audit", Incarnation: 20, Partitions: 4}, got: map[int][]string{}, refuse: refuse}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	r.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	cfg := DefaultConfig()
	cfg.BatchRecords, cfg.RetryMin, cfg.RetryMax = 8, 5*time.Millisecond, 20*time.Millisecond
	d := Deps{Config: cfg, RequestTimeout: time.Second, Logger: quiet, Route: r.route, PartitionOf: fnv32a, Metrics: m, Knobs: knobs, Clock: clk}
	r.parent = r.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &parentActor{r: r, d: d} }))
	t.Cleanup(func() {
		_ = r.system.Root.StopFuture(r.parent).Wait()
		r.system.Shutdown()
	})
	return r
}

func (r *rig) cursorAt() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cursor
}

func (r *rig) eventually(what string, ok func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lagSeries is the link's lag gauge as the node's /metrics shows it; ""
// when the series is not registered.
func (r *rig) lagSeries() string {
	var b bytes.Buffer
	r.set.WritePrometheus(&b)
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(line, `narad_fanout_lag_records{node="n1",parent="orders",child="audit"} `) {
			return line
		}
	}
	return ""
}

func TestActorCopiesEachRecordToItsKeysPartitionThenAdvances(t *testing.T) {
	r := newRig(t, Knobs{}, nil)
	r.system.Root.Send(r.parent, add{n: 30})
	r.eventually("the cursor at 30", func() bool { return r.cursorAt() == 30 })
	got := r.route.bodies()
	if len(got) != 30 {
		t.Fatalf("child records: got %d distinct, want 30", len(got))
	}
	for b, n := range got {
		if n != 1 {
			t.Fatalf("%s committed %d times, want once", b, n)
		}
	}
	r.route.mu.Lock()
	for p, bs := range r.route.got {
		last := -1
		for _, b := range bs {
			var off int
			fmt.Sscanf(b, "b%d", &off)
			if want := fnv32a(fmt.Sprintf("k%d", off%7), 4); want != p {
				t.Errorf("%s on child partition %d, want %d", b, p, want)
			}
			if off <= last {
				t.Errorf("child partition %d: %s after b%d", p, b, last)
			}
			last = off
		}
	}
	r.route.mu.Unlock()
	if got := r.metrics.Copied.Get(); got != 30 {
		t.Fatalf("copied: got %d, want 30", got)
	}
	r.eventually("the lag gauge at 0", func() bool { return strings.HasSuffix(r.lagSeries(), " 0") })
	// The gauge goes with the actor: a partition moved away lags nothing here.
	if err := r.system.Root.StopFuture(r.parent).Wait(); err != nil {
		t.Fatal(err)
	}
	if s := r.lagSeries(); s != "" {
		t.Fatalf("after the stop: %q still registered", s)
	}
}

func TestActorRetriesOnlyTheGroupsThatFailedAndAdvancesOnceAllCommitted(t *testing.T) {
	var mu sync.Mutex
	refusals := 0
	r := newRig(t, Knobs{}, func(p int) bool {
		mu.Lock()
		defer mu.Unlock()
		if p == fnv32a("k1", 4) && refusals < 3 {
			refusals++
			return true
		}
		return false
	})
	r.system.Root.Send(r.parent, add{n: 8}) // one batch: every key k0..k6
	r.eventually("the cursor at 8", func() bool { return r.cursorAt() == 8 })
	for b, n := range r.route.bodies() {
		if n != 1 {
			t.Fatalf("%s committed %d times, want once: only the refused group is sent again", b, n)
		}
	}
	if got := len(r.route.bodies()); got != 8 {
		t.Fatalf("child records: got %d, want 8", got)
	}
	if got := r.metrics.Failures.Get(); got != 3 {
		t.Fatalf("failures: got %d, want 3", got)
	}
}

func TestActorThatPanicsIsCountedRestartedAndResumesFromTheLastAdvance(t *testing.T) {
	var mu sync.Mutex
	answers := 0
	r := newRig(t, Knobs{OnRecords: func(messages.PartitionKey) {
		mu.Lock()
		answers++
		n := answers
		mu.Unlock()
		if n == 2 {
			panic("injected: a bug in the copy loop")
		}
	}}, nil)
	r.system.Root.Send(r.parent, add{n: 8})
	r.eventually("the first batch copied", func() bool { return r.cursorAt() == 8 })
	r.system.Root.Send(r.parent, add{n: 8}) // its read's answer panics the actor
	r.eventually("the second batch copied after the restart", func() bool { return r.cursorAt() == 16 })
	if got := len(r.route.bodies()); got != 16 {
		t.Fatalf("child records: got %d distinct, want 16", got)
	}
	if got := r.metrics.Panics.Get(); got != 1 {
		t.Fatalf("panics: got %d, want 1", got)
	}
}

func TestActorJumpsPastRecordsRetentionRemovedAndCountsThem(t *testing.T) {
	r := newRig(t, Knobs{}, nil)
	// Retention removed offsets 0..5 before the link's cursor (0) was
	// copied from: the first read finds them gone.
	r.mu.Lock()
	r.oldest = 6
	r.mu.Unlock()
	r.system.Root.Send(r.parent, add{n: 4}) // offsets 6..9
	r.eventually("the cursor at 10", func() bool { return r.cursorAt() == 10 })
	if got := r.metrics.Skipped.Get(); got != 6 {
		t.Fatalf("skipped: got %d, want 6", got)
	}
	got := r.route.bodies()
	if len(got) != 4 {
		t.Fatalf("child records: got %v, want b6..b9", got)
	}
	for i := 6; i < 10; i++ {
		if got[fmt.Sprintf("b%d", i)] != 1 {
			t.Fatalf("child records: got %v, want b6..b9 once each", got)
		}
	}
}

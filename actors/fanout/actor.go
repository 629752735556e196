package fanout

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/messages"
)

// Fan-out: each parent partition's owner copies the partition's committed
// records to the topic's children, the way each node looks after its own
// partitions (seed 000). Two actors share the work:
//
//   - the partition actor (in the root package actors) owns the cursor
//     files (fanout-<child>.offset in its directory, storage/cursor.go):
//     it anchors a link's cursor when the link first appears
//     (AnchorCursor), serves the committed records past a cursor (Read),
//     and moves a cursor on only when told the child committed everything
//     before it (Advance);
//   - its child, the fan-out actor (Actor), runs one copy loop per link:
//     read from the cursor, wait out a delay child's delay, commit each
//     record to the child's partition of its key, then advance.
//
// A link's cursor survives a restart in its file and a move as a sidecar
// of the move's listing (rule K8); a cursor missing after a move for a
// link the move marker names resumes from the oldest retained offset
// (rule K9), never the tail. Nothing here ever skips a committed record
// past a cursor but retention, which the metastore keeps longer than any
// delay (rule: retention >= delay + 1 h).

// Route is what the fan-out actor needs of the node: the child topic's
// record, the live partition for a key's, and a commit to the partition's
// owner wherever it is (the node's router).
type Route interface {
	Topics
	LivePartition(t messages.Topic, p int) int
	Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
}

// Knobs are failures a test injects into the fan-out actors; zero in
// production.
type Knobs struct {
	// OnRecords runs as a fan-out actor takes a read's answer; it may
	// panic, as a bug would, to show the actor is restarted and resumes.
	OnRecords func(k messages.PartitionKey)
}

// Deps is what the fan-out actors need of their node. Every field is set
// by the node before the first spawn and only read afterwards; one Deps
// serves all of a node's fan-out actors.
type Deps struct {
	Config Config
	// RequestTimeout bounds one copy: every commit of its groups has
	// answered or timed out by then.
	RequestTimeout time.Duration
	Logger         *slog.Logger
	Route          Route
	// PartitionOf is the API contract's partition of a key (the node's
	// produce rule), so a copy lands where a produce of its key would.
	PartitionOf func(key string, partitions int) int
	// Metrics: every counter set; Lags may be nil.
	Metrics Metrics
	Knobs   Knobs
	// Clock is the clock the parent's records' times were read from (the
	// node gives it its logs' clock, storage.LogConfig.Clock): a link's
	// delay counts from a record's time. It also times the back-off. Nil
	// is the wall clock.
	Clock clock.Clock
}

// linkState is one link's copy loop state.
type linkState struct {
	link   messages.ChildLink
	cursor int64
	// reading or sending: a read or a copy is out (one per link: the
	// records in flight per link are at most Config.BatchRecords).
	reading, sending bool
	// pending are groups of a batch that failed, retried alone so the
	// groups that committed are not copied twice; upto is the cursor
	// after the batch.
	pending []group
	upto    int64
	// failures counts consecutive failed copies, for the back-off.
	failures int
	retryAt  time.Time
	// dueAt: the next record of a delay child falls due then.
	dueAt time.Time
}

// Actor copies one parent partition's records to its children. It is the
// partition actor's child: it stops with it (a move away, a restart), and
// it reads the log only through it. Spawn it with New.
type Actor struct {
	d     Deps
	key   messages.PartitionKey
	name  string
	links map[string]*linkState
	hwm   int64
	// timerAt is the earliest armed wake, and wake its timer; zero and
	// nil when none. The timer is stopped with the actor.
	timerAt time.Time
	wake    clock.Timer
	clock   clock.Clock
}

// New is the fan-out actor of parent partition k.
func New(d Deps, k messages.PartitionKey) *Actor {
	return &Actor{d: d, key: k, name: fmt.Sprintf("%s/%d", k.Topic, k.Partition), links: map[string]*linkState{}, clock: clock.Or(d.Clock)}
}

func (f *Actor) Receive(ctx actor.Context) {
	defer f.countPanic()
	defer supervise.LogPanic(f.d.Logger, "fanout "+f.name)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// A restarted fan-out actor starts with no links: ask for them
		// (and the cursors, which resume from the last advance).
		ctx.Send(ctx.Parent(), Hello{})
	case Links:
		f.setLinks(m)
		f.pump(ctx)
	case Wake:
		f.hwm = max(f.hwm, m.HWM)
		f.pump(ctx)
	case Records:
		f.records(ctx, m)
		f.pump(ctx)
	case sent:
		f.sent(ctx, m)
		f.pump(ctx)
	case timer:
		f.timerAt, f.wake = time.Time{}, nil
		f.pump(ctx)
	case *actor.Stopping:
		if f.wake != nil {
			f.wake.Stop()
		}
		for child := range f.links {
			f.d.Metrics.Lags.Forget(f.key, child)
		}
	}
}

// countPanic counts a panic on its way to the partition actor, whose
// default strategy restarts the fan-out actor (which then asks for its
// links again, Hello): visible in narad_fanout_actor_panics_total beside
// logPanic's error line.
func (f *Actor) countPanic() {
	if r := recover(); r != nil {
		f.d.Metrics.Panics.Inc()
		panic(r)
	}
}

func (f *Actor) setLinks(m Links) {
	f.hwm = max(f.hwm, m.HWM)
	want := map[string]bool{}
	for _, l := range m.Links {
		want[l.Name] = true
		cur, ok := m.Cursors[l.Name]
		if !ok {
			continue // not anchored: the partition could not open it
		}
		if old, ok := f.links[l.Name]; ok && old.link.AttachEpoch == l.AttachEpoch {
			old.link = l // a delay is fixed per attach; the incarnation too
			continue
		}
		f.links[l.Name] = &linkState{link: l, cursor: cur}
	}
	for child := range f.links {
		if !want[child] {
			delete(f.links, child)
			f.d.Metrics.Lags.Forget(f.key, child)
		}
	}
}

// pump starts what each link can do now: a retry, a read, or nothing
// (caught up, waiting out a delay or a back-off), and arms one timer for
// the earliest of the waits.
func (f *Actor) pump(ctx actor.Context) {
	now := f.clock.Now()
	var wake time.Time
	later := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	for _, l := range f.links {
		f.d.Metrics.Lags.Set(f.key, l.link, f.hwm-l.cursor)
		switch {
		case l.reading || l.sending:
		case now.Before(l.retryAt):
			later(l.retryAt)
		case len(l.pending) > 0:
			f.copy(ctx, l, l.pending, l.upto)
		case !l.dueAt.IsZero() && now.Before(l.dueAt):
			later(l.dueAt)
		case l.cursor < f.hwm || !l.dueAt.IsZero():
			l.dueAt = time.Time{}
			l.reading = true
			ctx.Request(ctx.Parent(), &Read{Child: l.link.Name, Epoch: l.link.AttachEpoch, From: l.cursor,
				Max: f.d.Config.BatchRecords, Bytes: f.d.Config.BatchBytes})
		}
	}
	if !wake.IsZero() && (f.timerAt.IsZero() || wake.Before(f.timerAt)) {
		if f.wake != nil {
			f.wake.Stop() // a later wake, now early enough with this one
		}
		f.timerAt = wake
		self, root := ctx.Self(), ctx.ActorSystem().Root
		f.wake = f.clock.AfterFunc(clock.Until(f.clock, wake), func() { root.Send(self, timer{}) })
	}
}

func (f *Actor) records(ctx actor.Context, m Records) {
	l, ok := f.links[m.Child]
	if !ok || l.link.AttachEpoch != m.Epoch {
		return
	}
	l.reading = false
	if h := f.d.Knobs.OnRecords; h != nil {
		h(f.key)
	}
	f.hwm = max(f.hwm, m.HWM)
	switch {
	case m.Err != nil:
		f.failed(l, m.Err)
		return
	case m.Gone:
		// Retention removed records before they were copied: the
		// metastore keeps retention above every delay, so only a child
		// whose owner stayed away longer than the retention gets here.
		f.d.Logger.Error("fan-out records removed by retention before they were copied", "partition", f.name,
			"child", m.Child, "from", m.From, "oldest", m.Oldest)
		f.d.Metrics.Skipped.Add(int(m.Oldest - m.From))
		l.cursor = m.Oldest
		ctx.Send(ctx.Parent(), Advance{Child: m.Child, Epoch: m.Epoch, Offset: l.cursor})
		return
	case len(m.Recs) == 0:
		if l.cursor < m.HWM {
			// A read below the HWM always holds a record; back off rather
			// than ask again at once.
			f.failed(l, fmt.Errorf("read from %d below the HWM %d returned nothing", l.cursor, m.HWM))
		}
		return
	}
	if m.Recs[0].Offset != l.cursor {
		panic(fmt.Sprintf("fan-out %s to %s: read from %d began at %d", f.name, m.Child, l.cursor, m.Recs[0].Offset))
	}
	n, due := duePrefix(m.Recs, time.Duration(l.link.DelayMs)*time.Millisecond, f.clock.Now())
	if n == 0 {
		l.dueAt = due
		return
	}
	if n < len(m.Recs) {
		l.dueAt = due
	}
	child, ok := f.d.Route.Topic(l.link.Name)
	if !ok || child.Incarnation != l.link.Incarnation {
		f.failed(l, fmt.Errorf("child topic %s (incarnation %d) is gone", l.link.Name, l.link.Incarnation))
		return
	}
	upto := m.Recs[n-1].Offset + 1
	f.copy(ctx, l, groupRecords(m.Recs[:n], child.Partitions, f.d.PartitionOf), upto)
}

func (f *Actor) sent(ctx actor.Context, m sent) {
	l, ok := f.links[m.child]
	if !ok || l.link.AttachEpoch != m.epoch {
		return
	}
	l.sending = false
	if len(m.pending) > 0 {
		l.pending, l.upto = m.pending, m.upto
		f.failed(l, m.err)
		return
	}
	f.d.Metrics.Copied.Add(int(m.upto - l.cursor))
	l.cursor, l.failures, l.retryAt = m.upto, 0, time.Time{}
	ctx.Send(ctx.Parent(), Advance{Child: m.child, Epoch: m.epoch, Offset: m.upto})
}

// failed backs a link off: Config.RetryMin doubling to Config.RetryMax, so
// a child whose owner is down or frozen costs a request now and then.
func (f *Actor) failed(l *linkState, err error) {
	f.d.Metrics.Failures.Inc()
	l.failures++
	d := f.d.Config.RetryMin << min(l.failures-1, 16)
	d = min(d, f.d.Config.RetryMax)
	l.retryAt = f.clock.Now().Add(d)
	if l.failures == 1 || l.failures%50 == 0 {
		f.d.Logger.Warn("fan-out copy failed; retrying", "partition", f.name, "child", l.link.Name,
			"failures", l.failures, "retry_in", d, "err", err)
	}
}

package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// Fan-out: each parent partition's owner copies the partition's committed
// records to the topic's children, the way each node looks after its own
// partitions (seed 000). Two actors share the work:
//
//   - the partition actor owns the cursor files (fanout-<child>.offset in
//     its directory, storage/cursor.go): it anchors a link's cursor when
//     the link first appears (anchorCursor), serves the committed records
//     past a cursor (fanoutRead), and moves a cursor on only when told the
//     child committed everything before it (fanoutAdvance);
//   - its child, the fan-out actor (fanoutActor), runs one copy loop per
//     link: read from the cursor, wait out a delay child's delay, commit
//     each record to the child's partition of its key, then advance.
//
// A link's cursor survives a restart in its file and a move as a sidecar
// of the move's listing (rule K8); a cursor missing after a move for a
// link the move marker names resumes from the oldest retained offset
// (rule K9), never the tail. Nothing here ever skips a committed record
// past a cursor but retention, which the metastore keeps longer than any
// delay (rule: retention >= delay + 1 h).

// fanoutRoute is what the fan-out actor needs of the node: the child
// topic's record, the live partition for a key's, and a commit to the
// partition's owner wherever it is.
type fanoutRoute interface {
	Topic(name string) (messages.Topic, bool)
	livePartition(t messages.Topic, p int) int
	ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
}

// routeFanout is the router as a fanoutRoute.
type routeFanout struct{ r *router }

func (f routeFanout) Topic(name string) (messages.Topic, bool)  { return f.r.replica.Topic(name) }
func (f routeFanout) livePartition(t messages.Topic, p int) int { return f.r.livePartition(t, p) }
func (f routeFanout) ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	return f.r.ask(ctx, k, msg)
}

// fanoutLinks tells a partition actor the fan-out links of its topic as
// the local replica now has them (the partitions supervisor sends it on a
// change), and the partition actor tells its fan-out actor the same with
// the anchored cursors.
type fanoutLinks struct {
	links   []messages.ChildLink
	cursors map[string]int64
	hwm     int64
}

// fanoutRead asks the partition actor for committed records from offset
// from on, at most records of them and about bytes (one record at least).
type fanoutRead struct {
	child string
	epoch uint64
	from  int64
	max   int
	bytes int
}

// fanoutRecords answers fanoutRead. gone: from is below the oldest retained
// offset, which oldest names.
type fanoutRecords struct {
	child  string
	epoch  uint64
	from   int64
	recs   []storage.Record
	hwm    int64
	oldest int64
	gone   bool
	err    error
}

// fanoutAdvance tells the partition actor that the child committed every
// record before offset: its cursor may move there.
type fanoutAdvance struct {
	child  string
	epoch  uint64
	offset int64
}

// fanoutHello is a fan-out actor's first word to its partition actor,
// which answers with fanoutLinks: after a restart (a panic) it knows none.
type fanoutHello struct{}

// fanoutWake tells the fan-out actor the partition's HWM moved.
type fanoutWake struct{ hwm int64 }

// fanoutTimer wakes the fan-out actor after a back-off or a delay.
type fanoutTimer struct{}

// fanoutSent is a copy goroutine's outcome: the groups still to commit
// (empty when every one committed).
type fanoutSent struct {
	child   string
	epoch   uint64
	upto    int64
	pending []fanoutGroup
	err     error
}

// topicReader looks a topic up in the local replica.
type topicReader interface {
	Topic(name string) (messages.Topic, bool)
}

// linksOf is the fan-out links a parent partition serves now.
func linksOf(store topicReader, k messages.PartitionKey) []messages.ChildLink {
	t, ok := store.Topic(k.Topic)
	if !ok || t.Incarnation != k.Incarnation {
		return nil
	}
	return t.Children
}

// linksSignature tells two link sets apart cheaply, for the supervisor's
// "changed since I last said" check.
func linksSignature(links []messages.ChildLink) string {
	if len(links) == 0 {
		return ""
	}
	s := ""
	for _, l := range links {
		s += fmt.Sprintf("%s/%d/%d/%d;", l.Name, l.Incarnation, l.AttachEpoch, l.DelayMs)
	}
	return s
}

// anchorWhy says where a link's cursor was anchored.
type anchorWhy int

const (
	// anchorFile: the link's own cursor file (this attach's epoch).
	anchorFile anchorWhy = iota
	// anchorTail: a new link, anchored at the HWM: no backfill of records
	// committed before the attach.
	anchorTail
	// anchorMarker: no file for a link the move marker names (rule K9):
	// the oldest retained offset, never the tail over data.
	anchorMarker
	// anchorCorrupt: a file that never verified: the oldest offset, since
	// where it stood is unknown and a gap is worse than redeliveries.
	anchorCorrupt
)

// anchorInput is what anchorCursor decides from.
type anchorInput struct {
	file     storage.Cursor
	found    bool // a file verified
	corrupt  bool // a file exists and never verified
	epoch    uint64
	inMarker bool // the move marker names (child, epoch)
	oldest   int64
	hwm      int64
}

// anchorCursor is where a link's cursor starts on this owner: pure, so
// every case is a table row (fanout_test.go).
func anchorCursor(in anchorInput) (int64, anchorWhy) {
	switch {
	case in.found && in.file.Epoch == in.epoch:
		// Rule K6: a cursor past the HWM is lowered to it.
		return storage.ClampCursor(in.file.Offset, in.hwm), anchorFile
	case in.corrupt:
		return in.oldest, anchorCorrupt
	case in.inMarker:
		return in.oldest, anchorMarker
	}
	// No file, or one of an earlier attach of the same name: a link this
	// owner sees for the first time.
	return in.hwm, anchorTail
}

// markerNames reports whether the move marker lists the link.
func markerNames(m *openedMarker, child string, epoch uint64) bool {
	if m == nil {
		return false
	}
	for _, l := range m.m.Children {
		if l.Child == child && l.AttachEpoch == epoch {
			return true
		}
	}
	return false
}

// anchorLinks anchors every link without a cursor, removes the cursor
// files of links gone from the metadata, and tells the fan-out actor (one
// is spawned for the first link, stopped with the last).
func (p *partitionActor) setLinks(ctx actor.Context, links []messages.ChildLink) {
	if p.log == nil {
		p.links = links
		return
	}
	p.links = links
	if p.cursors == nil {
		p.cursors = map[string]storage.Cursor{}
	}
	want := make(map[string]messages.ChildLink, len(links))
	for _, l := range links {
		want[l.Name] = l
		if c, ok := p.cursors[l.Name]; ok && c.Epoch == l.AttachEpoch {
			continue
		}
		p.anchor(l)
	}
	for child := range p.cursors {
		if _, ok := want[child]; !ok {
			p.dropCursor(child)
		}
	}
	if !p.swept && len(links) > 0 {
		// Files of links detached while this node was down (a topic with
		// no links left keeps them: harmless, each names an old epoch,
		// and the open of every partition need not read its directory).
		p.swept = true
		if files, err := storage.ListCursors(p.dir, p.cfg.Consumer.CursorReadAttempts); err == nil {
			for child := range files {
				if _, ok := want[child]; !ok {
					p.dropCursor(child)
				}
			}
		} else {
			p.deps.log.Warn("list fan-out cursors", "partition", p.name, "err", err)
		}
	}
	switch {
	case len(links) == 0 && p.fanout != nil:
		ctx.Stop(p.fanout)
		p.fanout = nil
	case len(links) > 0 && p.fanout == nil:
		d, k := p.deps, p.key
		// A prefix, not a name: the child of an earlier life of a
		// restarted partition actor may still be stopping.
		p.fanout = ctx.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return newFanoutActor(d, k) }), "fanout")
	}
	if p.fanout != nil {
		ctx.Send(p.fanout, fanoutLinks{links: links, cursors: p.cursorOffsets(), hwm: p.log.HWM()})
	}
}

// anchor decides and writes a new link's cursor, durably: a lost anchor
// would be re-decided at a later HWM, skipping what came between.
func (p *partitionActor) anchor(l messages.ChildLink) {
	in := anchorInput{epoch: l.AttachEpoch, inMarker: markerNames(p.marker, l.Name, l.AttachEpoch),
		oldest: p.log.Oldest(), hwm: p.log.HWM()}
	c, err := storage.ReadCursor(p.dir, l.Name, p.cfg.Consumer.CursorReadAttempts)
	switch {
	case err == nil:
		in.file, in.found = c, true
	case errors.Is(err, storage.ErrNotFound):
	default:
		in.corrupt = true
		p.deps.log.Error("fan-out cursor unreadable; copying from the oldest record", "partition", p.name, "child", l.Name, "err", err)
	}
	off, why := anchorCursor(in)
	cur := storage.Cursor{Child: l.Name, Epoch: l.AttachEpoch, Offset: off}
	if err := storage.WriteCursor(p.dir, cur, true); err != nil {
		// The memory cursor still serves; the next advance writes again.
		p.deps.log.Error("write fan-out cursor", "partition", p.name, "child", l.Name, "err", err)
	}
	p.cursors[l.Name] = cur
	switch why {
	case anchorMarker:
		p.deps.log.Warn("fan-out cursor missing for a link the move marker names; copying from the oldest record (rule K9)",
			"partition", p.name, "child", l.Name, "offset", off)
	case anchorTail:
		p.deps.log.Info("fan-out link anchored at the log end", "partition", p.name, "child", l.Name, "offset", off)
	}
}

func (p *partitionActor) dropCursor(child string) {
	delete(p.cursors, child)
	if err := storage.RemoveCursor(p.dir, child); err != nil {
		p.deps.log.Error("remove fan-out cursor", "partition", p.name, "child", child, "err", err)
	}
	p.fanoutLags.forget(p.key, child)
}

func (p *partitionActor) cursorOffsets() map[string]int64 {
	if len(p.cursors) == 0 {
		return nil
	}
	out := make(map[string]int64, len(p.cursors))
	for child, c := range p.cursors {
		out[child] = c.Offset
	}
	return out
}

// fanoutRead serves committed records past a cursor: never past the HWM
// (a copy must not expose records the parent has not made visible).
func (p *partitionActor) fanoutRead(ctx actor.Context, m *fanoutRead) {
	out := fanoutRecords{child: m.child, epoch: m.epoch, from: m.from}
	if p.log == nil {
		out.err = errors.New("partition not open")
		ctx.Respond(out)
		return
	}
	out.hwm, out.oldest = p.log.HWM(), p.log.Oldest()
	switch {
	case m.from < out.oldest:
		out.gone = true
	case m.from < out.hwm:
		n := min(int64(m.max), out.hwm-m.from)
		recs, err := p.log.Read(m.from, int(n), m.bytes)
		if errors.Is(err, storage.ErrOutOfRange) {
			out.gone = true
		} else if err != nil {
			out.err = err
		}
		for _, r := range recs {
			if r.Offset >= out.hwm {
				panic(fmt.Sprintf("partition %s: fan-out read offset %d at or past the HWM %d", p.name, r.Offset, out.hwm))
			}
		}
		out.recs = recs
	}
	ctx.Respond(out)
}

// fanoutAdvance moves a cursor once the child committed what lies before
// it. The file is overwritten without a sync: a crash that loses the write
// copies those records again (at-least-once), never skips them.
func (p *partitionActor) fanoutAdvance(m fanoutAdvance) {
	c, ok := p.cursors[m.child]
	if !ok || c.Epoch != m.epoch || m.offset <= c.Offset {
		return // detached, re-attached, or an old answer
	}
	c.Offset = m.offset
	p.cursors[m.child] = c
	if p.log == nil {
		return
	}
	if err := storage.WriteCursor(p.dir, c, false); err != nil {
		p.deps.log.Error("write fan-out cursor", "partition", p.name, "child", m.child, "err", err)
	}
}

// helloFanout answers a (re)started fan-out actor with the links.
func (p *partitionActor) helloFanout(ctx actor.Context) {
	if p.fanout != nil && p.log != nil {
		ctx.Send(p.fanout, fanoutLinks{links: p.links, cursors: p.cursorOffsets(), hwm: p.log.HWM()})
	}
}

// wakeFanout tells the fan-out actor that records became visible.
func (p *partitionActor) wakeFanout(ctx actor.Context) {
	if p.fanout != nil && p.log != nil {
		ctx.Send(p.fanout, fanoutWake{hwm: p.log.HWM()})
	}
}

// fanoutGroup is the records of one batch bound for one child partition.
type fanoutGroup struct {
	partition int
	records   []messages.CommitRecord
}

// fanoutDue is how many of recs (in offset order) a child with delay may
// have at now, and, when not all, when the next one falls due. Commit
// times may step back a little (a clock adjusted), so the first record not
// yet due ends the prefix: the cursor never passes a record not copied.
func fanoutDue(recs []storage.Record, delay time.Duration, now time.Time) (int, time.Time) {
	if delay <= 0 {
		return len(recs), time.Time{}
	}
	for i, r := range recs {
		due := time.Unix(0, r.Time).Add(delay)
		if due.After(now) {
			return i, due
		}
	}
	return len(recs), time.Time{}
}

// fanoutGroups sorts a batch by the child partition of each record's key,
// keeping the key, in offset order within a group. Corrupt records (a
// damaged frame in a sealed segment) have nothing to copy.
func fanoutGroups(recs []storage.Record, partitions int) []fanoutGroup {
	var groups []fanoutGroup
	at := map[int]int{}
	for _, r := range recs {
		if r.Corrupt {
			continue
		}
		p := partitionForKey(string(r.Key), partitions)
		i, ok := at[p]
		if !ok {
			i = len(groups)
			at[p] = i
			groups = append(groups, fanoutGroup{partition: p})
		}
		groups[i].records = append(groups[i].records, messages.CommitRecord{Seq: uint64(r.Offset), Key: r.Key, Body: r.Body})
	}
	return groups
}

// fanoutLink is one link's copy loop state.
type fanoutLink struct {
	link   messages.ChildLink
	cursor int64
	// reading or sending: a read or a copy is out (one per link: the
	// records in flight per link are at most FanoutBatchRecords).
	reading, sending bool
	// pending are groups of a batch that failed, retried alone so the
	// groups that committed are not copied twice; upto is the cursor
	// after the batch.
	pending []fanoutGroup
	upto    int64
	// failures counts consecutive failed copies, for the back-off.
	failures int
	retryAt  time.Time
	// dueAt: the next record of a delay child falls due then.
	dueAt time.Time
}

// fanoutActor copies one parent partition's records to its children. It
// is the partition actor's child: it stops with it (a move away, a
// restart), and it reads the log only through it.
type fanoutActor struct {
	deps
	key   messages.PartitionKey
	name  string
	links map[string]*fanoutLink
	hwm   int64
	// timerAt is the earliest armed wake; zero when none.
	timerAt time.Time
}

func newFanoutActor(d deps, k messages.PartitionKey) *fanoutActor {
	return &fanoutActor{deps: d, key: k, name: fmt.Sprintf("%s/%d", k.Topic, k.Partition), links: map[string]*fanoutLink{}}
}

func (f *fanoutActor) Receive(ctx actor.Context) {
	defer f.countPanic()
	defer logPanic(f.deps.log, "fanout "+f.name)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		// A restarted fan-out actor starts with no links: ask for them
		// (and the cursors, which resume from the last advance).
		ctx.Send(ctx.Parent(), fanoutHello{})
	case fanoutLinks:
		f.setLinks(m)
		f.pump(ctx)
	case fanoutWake:
		f.hwm = max(f.hwm, m.hwm)
		f.pump(ctx)
	case fanoutRecords:
		f.records(ctx, m)
		f.pump(ctx)
	case fanoutSent:
		f.sent(ctx, m)
		f.pump(ctx)
	case fanoutTimer:
		f.timerAt = time.Time{}
		f.pump(ctx)
	case *actor.Stopping:
		for child := range f.links {
			f.fanoutLags.forget(f.key, child)
		}
	}
}

// countPanic counts a panic on its way to the partition actor, whose
// default strategy restarts the fan-out actor (which then asks for its
// links again, fanoutHello): visible in narad_fanout_actor_panics_total
// beside logPanic's error line.
func (f *fanoutActor) countPanic() {
	if r := recover(); r != nil {
		f.metrics.fanoutPanics.Inc()
		panic(r)
	}
}

func (f *fanoutActor) setLinks(m fanoutLinks) {
	f.hwm = max(f.hwm, m.hwm)
	want := map[string]bool{}
	for _, l := range m.links {
		want[l.Name] = true
		cur, ok := m.cursors[l.Name]
		if !ok {
			continue // not anchored: the partition could not open it
		}
		if old, ok := f.links[l.Name]; ok && old.link.AttachEpoch == l.AttachEpoch {
			old.link = l // a delay is fixed per attach; the incarnation too
			continue
		}
		f.links[l.Name] = &fanoutLink{link: l, cursor: cur}
	}
	for child := range f.links {
		if !want[child] {
			delete(f.links, child)
			f.fanoutLags.forget(f.key, child)
		}
	}
}

// pump starts what each link can do now: a retry, a read, or nothing
// (caught up, waiting out a delay or a back-off), and arms one timer for
// the earliest of the waits.
func (f *fanoutActor) pump(ctx actor.Context) {
	now := time.Now()
	var wake time.Time
	later := func(t time.Time) {
		if wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	for _, l := range f.links {
		f.fanoutLags.set(f.key, l.link, f.hwm-l.cursor)
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
			ctx.Request(ctx.Parent(), &fanoutRead{child: l.link.Name, epoch: l.link.AttachEpoch, from: l.cursor,
				max: f.cfg.FanoutBatchRecords, bytes: f.cfg.FanoutBatchBytes})
		}
	}
	if !wake.IsZero() && (f.timerAt.IsZero() || wake.Before(f.timerAt)) {
		f.timerAt = wake
		self, root := ctx.Self(), ctx.ActorSystem().Root
		time.AfterFunc(time.Until(wake), func() { root.Send(self, fanoutTimer{}) })
	}
}

func (f *fanoutActor) records(ctx actor.Context, m fanoutRecords) {
	l, ok := f.links[m.child]
	if !ok || l.link.AttachEpoch != m.epoch {
		return
	}
	l.reading = false
	if h := f.cfg.faults; h != nil && h.fanoutRecords != nil {
		h.fanoutRecords(f.key)
	}
	f.hwm = max(f.hwm, m.hwm)
	switch {
	case m.err != nil:
		f.failed(l, m.err)
		return
	case m.gone:
		// Retention removed records before they were copied: the
		// metastore keeps retention above every delay, so only a child
		// whose owner stayed away longer than the retention gets here.
		f.deps.log.Error("fan-out records removed by retention before they were copied", "partition", f.name,
			"child", m.child, "from", m.from, "oldest", m.oldest)
		f.metrics.fanoutSkipped.Add(int(m.oldest - m.from))
		l.cursor = m.oldest
		ctx.Send(ctx.Parent(), fanoutAdvance{child: m.child, epoch: m.epoch, offset: l.cursor})
		return
	case len(m.recs) == 0:
		if l.cursor < m.hwm {
			// A read below the HWM always holds a record; back off rather
			// than ask again at once.
			f.failed(l, fmt.Errorf("read from %d below the HWM %d returned nothing", l.cursor, m.hwm))
		}
		return
	}
	if m.recs[0].Offset != l.cursor {
		panic(fmt.Sprintf("fan-out %s to %s: read from %d began at %d", f.name, m.child, l.cursor, m.recs[0].Offset))
	}
	n, due := fanoutDue(m.recs, time.Duration(l.link.DelayMs)*time.Millisecond, time.Now())
	if n == 0 {
		l.dueAt = due
		return
	}
	if n < len(m.recs) {
		l.dueAt = due
	}
	child, ok := f.copyRoute.Topic(l.link.Name)
	if !ok || child.Incarnation != l.link.Incarnation {
		f.failed(l, fmt.Errorf("child topic %s (incarnation %d) is gone", l.link.Name, l.link.Incarnation))
		return
	}
	upto := m.recs[n-1].Offset + 1
	f.copy(ctx, l, fanoutGroups(m.recs[:n], child.Partitions), upto)
}

// copy commits the groups to the child's partitions, all at once, on a
// goroutine of its own that ends when each commit has answered or timed
// out (Config.RequestTimeout).
func (f *fanoutActor) copy(ctx actor.Context, l *fanoutLink, groups []fanoutGroup, upto int64) {
	child, ok := f.copyRoute.Topic(l.link.Name)
	if !ok || child.Incarnation != l.link.Incarnation {
		f.failed(l, fmt.Errorf("child topic %s (incarnation %d) is gone", l.link.Name, l.link.Incarnation))
		return
	}
	l.sending, l.pending, l.upto = true, nil, upto
	self, root, route, timeout := ctx.Self(), ctx.ActorSystem().Root, f.copyRoute, f.cfg.RequestTimeout
	name, epoch := l.link.Name, l.link.AttachEpoch
	// One per link at most (l.sending); it ends when every commit has
	// answered or the timeout passed.
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		failed := make([]error, len(groups))
		var wg sync.WaitGroup
		for i, g := range groups {
			wg.Go(func() {
				k := messages.PartitionKey{Topic: child.Name, Incarnation: child.Incarnation, Partition: route.livePartition(child, g.partition)}
				failed[i] = commitGroup(cctx, route, k, g.records)
			})
		}
		wg.Wait()
		out := fanoutSent{child: name, epoch: epoch, upto: upto}
		for i, err := range failed {
			if err != nil {
				out.pending = append(out.pending, groups[i])
				out.err = err
			}
		}
		root.Send(self, out)
	}()
}

func commitGroup(ctx context.Context, route fanoutRoute, k messages.PartitionKey, recs []messages.CommitRecord) error {
	res, err := route.ask(ctx, k, &messages.Commit{Key: k, Records: recs})
	if err != nil {
		return err
	}
	r, ok := res.(*messages.CommitResult)
	switch {
	case !ok:
		return fmt.Errorf("commit to %s/%d answered %T", k.Topic, k.Partition, res)
	case r.Status != messages.StatusOK:
		return fmt.Errorf("commit to %s/%d: status %d: %s", k.Topic, k.Partition, r.Status, r.Err)
	}
	return nil
}

func (f *fanoutActor) sent(ctx actor.Context, m fanoutSent) {
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
	f.metrics.fanoutCopied.Add(int(m.upto - l.cursor))
	l.cursor, l.failures, l.retryAt = m.upto, 0, time.Time{}
	ctx.Send(ctx.Parent(), fanoutAdvance{child: m.child, epoch: m.epoch, offset: m.upto})
}

// failed backs a link off: FanoutRetryMin doubling to FanoutRetryMax, so a
// child whose owner is down or frozen costs a request now and then.
func (f *fanoutActor) failed(l *fanoutLink, err error) {
	f.metrics.fanoutFailures.Inc()
	l.failures++
	d := f.cfg.FanoutRetryMin << min(l.failures-1, 16)
	d = min(d, f.cfg.FanoutRetryMax)
	l.retryAt = time.Now().Add(d)
	if l.failures == 1 || l.failures%50 == 0 {
		f.deps.log.Warn("fan-out copy failed; retrying", "partition", f.name, "child", l.link.Name,
			"failures", l.failures, "retry_in", d, "err", err)
	}
}

// fanoutLags is each link's lag on this node (records the parent holds
// past the cursor), summed over the node's partitions of the parent into
// one gauge per link: narad_fanout_lag_records{node,parent,child}. No
// per-partition series: 30,000 partitions would flood a TSDB.
type fanoutLags struct {
	node string
	reg  *metrics.Set
	mu   sync.Mutex
	lag  map[fanoutLagKey]map[int]int64 // by parent partition
}

type fanoutLagKey struct {
	parent, child string
	incarnation   uint64
}

func newFanoutLags(m *nodeMetrics) *fanoutLags {
	return &fanoutLags{node: m.node, reg: m.set, lag: map[fanoutLagKey]map[int]int64{}}
}

func (g *fanoutLags) gaugeName(k fanoutLagKey) string {
	return fmt.Sprintf(`narad_fanout_lag_records{node=%q,parent=%q,child=%q}`, g.node, k.parent, k.child)
}

func (g *fanoutLags) set(p messages.PartitionKey, l messages.ChildLink, lag int64) {
	if g == nil {
		return
	}
	k := fanoutLagKey{parent: p.Topic, child: l.Name, incarnation: p.Incarnation}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.lag[k]
	if m == nil {
		m = map[int]int64{}
		g.lag[k] = m
	}
	if old, ok := m[p.Partition]; ok && old == lag {
		return
	}
	m[p.Partition] = lag
	var sum int64
	for _, v := range m {
		sum += v
	}
	g.reg.GetOrCreateGauge(g.gaugeName(k), nil).Set(float64(sum))
}

func (g *fanoutLags) forget(p messages.PartitionKey, child string) {
	if g == nil {
		return
	}
	k := fanoutLagKey{parent: p.Topic, child: child, incarnation: p.Incarnation}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.lag[k]
	if m == nil {
		return
	}
	delete(m, p.Partition)
	if len(m) == 0 {
		delete(g.lag, k)
		g.reg.UnregisterMetric(g.gaugeName(k))
		return
	}
	var sum int64
	for _, v := range m {
		sum += v
	}
	g.reg.GetOrCreateGauge(g.gaugeName(k), nil).Set(float64(sum))
}

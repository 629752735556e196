package partition

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The source side of a move, in the partition actor: transfer listings,
// chunk reads and the gate of the handoff freeze (seed 000, rules C4, C7,
// F1-F6, F9). The freeze itself is split (actors/freeze): the partition
// actor keeps the gate (freeze.GateStep) and carries out its effects here;
// its child, the freeze actor (freeze.Actor), owns the token, the TTL, the
// re-arm, the fence and the pacing turn, takes the destination's requests
// this actor forwards to it, and tells the gate each change as a message,
// taken here in this mailbox's order.

// LeaseDrainPoll is how often a prepare looks at the leases out again.
const LeaseDrainPoll = 10 * time.Millisecond

// freezePoll is the lease poll's timer firing for the prepare of token.
type freezePoll struct{ token string }

// gateConfig is the freeze's part of the node's configuration.
func gateConfig(d *Deps) freeze.Config {
	return freeze.Config{FreezeTTL: d.FreezeTTL, LeaseDrainTimeout: d.Config.LeaseDrainTimeout, LeaseDrainPoll: LeaseDrainPoll,
		ConfirmRetry: d.ConfirmRetry}
}

// step feeds one event to the gate and carries out what it decides. It
// reports whether the gate refused what the event asked for (a commit, a
// reservation, a publish); the caller answers that refusal itself.
func (p *Actor) step(ctx actor.Context, ev any) (refused bool) {
	var fx []any
	p.gate, fx = freeze.GateStep(p.gateCfg, p.gate, p.clock.Now(), ev)
	for _, f := range fx {
		switch f := f.(type) {
		case freeze.RefuseStash:
			p.refuseStash(ctx)
		case freeze.RefuseCommit, freeze.PauseConsume, freeze.RefusePublish:
			refused = true
		case freeze.SchedulePoll:
			self, root, poll := ctx.Self(), ctx.ActorSystem().Root, freezePoll{token: f.Token}
			p.clock.AfterFunc(f.After, func() { root.Send(self, poll) })
		case freeze.Report:
			p.reportHandoff(ctx, f)
		case freeze.NotifyConsumers:
			p.notify() // consumes may resume here
		case freeze.ConfirmOwner:
			p.confirmOwner(ctx, f.After)
		case freeze.Pinned, freeze.Reopened:
			ctx.Send(p.freezeActor(ctx), f)
		default:
			panic(fmt.Sprintf("partition %s: freeze effect %T not carried out", p.name, f))
		}
	}
	return refused
}

// freezeActor is this partition's freeze actor, spawned with its first
// freeze; it lives as long as this actor (a restart stops it with the
// freeze: a restarted partition opens frozen again if a move still
// targets it, freeze.Reopen).
func (p *Actor) freezeActor(ctx actor.Context) *actor.PID {
	if p.freezer == nil {
		d := p.freezeDeps()
		p.freezer = ctx.SpawnPrefix(actor.PropsFromProducer(func() actor.Actor { return freeze.New(d) }), "freeze")
	}
	return p.freezer
}

// freezeDeps is the freeze actor of partition p.
func (p *Actor) freezeDeps() freeze.Deps {
	d := freeze.Deps{Config: p.gateCfg, Clock: p.clock, Key: p.key, Pacer: p.deps.Pacer,
		HoldFor: p.deps.FreezeHoldFor, Nonce: p.boot, Log: p.deps.Logger, Name: p.name}
	if step := p.deps.Knobs.FreezeStep; step != nil {
		k := p.key
		d.Knobs.BeforeStep = func(ev any) { step(k, ev) }
	}
	return d
}

// HandleFailure is the supervision of the partition actor's children. A
// failure of the freeze actor is the partition's own: its freeze died with
// it, and only the partition actor's restart (which opens frozen while a
// move targets it, freeze.Reopen) knows what its gate may let through
// then, so it escalates to the partitions supervisor. The fan-out actor is
// restarted as protoactor's default strategy does.
func (p *Actor) HandleFailure(sys *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason, msg any) {
	if p.freezer != nil && child.Equal(p.freezer) {
		sup.EscalateFailure(reason, msg)
		return
	}
	actor.DefaultSupervisorStrategy().HandleFailure(sys, sup, child, rs, reason, msg)
}

// ownerConfirmed is the answer of confirmOwner's leader read number
// read; confirmDue is its delay's timer firing.
type (
	ownerConfirmed struct {
		read          uint64
		owner, failed bool
	}
	confirmDue struct{}
)

// confirmOwner asks the leader, after a delay, whether this node still
// owns the partition: a reported freeze lapsed, and a flip at its HWM may
// have committed unseen by this replica. The read is a ReadIndex, so once
// it answers the local replica has any such flip and the supervisor hands
// the partition over.
func (p *Actor) confirmOwner(ctx actor.Context, after time.Duration) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	p.clock.AfterFunc(after, func() { root.Send(self, confirmDue{}) })
}

// readOwner starts the leader read on a goroutine that ends with the read,
// within RequestTimeout, or when the actor closes: close cancels it and
// waits (endOwnerReads), so the read never outlives the metastore the node
// closes after its partitions (Dragonboat reading a state machine that
// closes under it is a data race the race detector found at a mover's
// read). One read is out per confirmation, at most one a Move.RetryAfter.
func (p *Actor) readOwner(ctx actor.Context) {
	if p.log == nil {
		return
	}
	if p.readCancels == nil {
		p.readCancels = map[uint64]context.CancelFunc{}
	}
	p.readSeq++
	read, self, root, k, owners, me := p.readSeq, ctx.Self(), ctx.ActorSystem().Root, p.key, p.owners, p.deps.NodeID
	c, cancel := context.WithTimeout(context.Background(), p.deps.RequestTimeout)
	p.readCancels[read] = cancel
	p.reads.Go(func() {
		defer cancel()
		a, found, err := owners.LeaderAssignment(c, k.Incarnation, k.Partition)
		root.Send(self, ownerConfirmed{read: read, owner: err == nil && found && a.Owner == me, failed: err != nil})
	})
}

// endOwnerReads cancels the leader reads on their way and waits for them.
func (p *Actor) endOwnerReads() {
	for _, cancel := range p.readCancels {
		cancel()
	}
	p.readCancels = nil
	p.reads.Wait()
}

func (p *Actor) ownerConfirmed(ctx actor.Context, m ownerConfirmed) {
	delete(p.readCancels, m.read)
	if p.log == nil {
		return
	}
	if m.failed || !m.owner {
		p.deps.Logger.Warn("partition: a reported freeze lapsed and the leader does not confirm this node owns it; commits wait", "partition", p.name, "read_failed", m.failed)
	}
	p.step(ctx, freeze.OwnerConfirmed{Owner: m.owner, Err: m.failed})
}

// pipeline is what the freeze must know of the commit pipeline and the
// leases when a prepare may report.
func (p *Actor) pipeline() freeze.Partition {
	settling := p.syncing != nil || len(p.writing) > 0
	if p.deps.Knobs.ReportPastPipeline {
		settling = false
	}
	return freeze.Partition{Settling: settling, LeasesOut: p.table.inFlight()}
}

// settled tells a waiting prepare that the pipeline moved on (a write
// became visible or failed).
func (p *Actor) settled(ctx actor.Context) {
	if p.log == nil {
		return
	}
	p.step(ctx, freeze.Settled{Partition: p.pipeline()})
}

// pollFreeze is the lease poll's timer firing.
func (p *Actor) pollFreeze(ctx actor.Context, m freezePoll) {
	if p.log == nil {
		return
	}
	p.step(ctx, freeze.Poll{Token: m.token, Partition: p.pipeline()})
}

// gateWord is the freeze actor's word: a prepare armed (Close, which the
// gate takes with the pipeline as it is now), or a freeze lapsed or was
// released.
func (p *Actor) gateWord(ctx actor.Context, ev any) {
	if p.log == nil {
		return
	}
	if c, ok := ev.(freeze.Close); ok {
		c.Partition = p.pipeline()
		ev = c
	}
	p.step(ctx, ev)
}

// reportHandoff answers a prepare with the listing, read now: the pipeline
// has settled, so every batch that passed the gate is in it (rules F3, F4:
// the frontier is the in-memory one).
func (p *Actor) reportHandoff(ctx actor.Context, r freeze.Report) {
	ls := p.listing(0)
	p.step(ctx, freeze.Reported{Token: r.Token, HWM: ls.HWM, OK: ls.Status == messages.StatusOK})
	ctx.Send(r.Asker.(*actor.PID), &messages.HandoffResult{Status: messages.StatusOK, Token: r.Token, Listing: ls})
}

// listing reads the consumer position and the fan-out cursors, then the
// HWM and the segments' committed bytes (rule C7, listingReads): a listing
// never carries a position past what it copies. A partition of at most
// inline committed bytes has them read into the listing (inlineSegments).
func (p *Actor) listing(inline int) *messages.PartitionListing {
	if p.log == nil {
		return &messages.PartitionListing{Status: messages.StatusUnavailable, Err: "partition not open"}
	}
	out := listingReads{
		position: p.table.state,
		cursors:  p.cursorSidecars,
		log:      func() (storage.Listing, error) { return p.log.List(p.records.Now()) },
	}.read()
	if out.Status != messages.StatusOK {
		return out
	}
	out.Marker = p.moveMarker(out.Clock)
	p.inlineSegments(out, inline)
	return out
}

// listingReads are the three reads of a listing. Acks and fan-out copies
// move the position and the cursors while records keep landing, so each
// read only ever runs ahead of the ones before it: read in the order of
// rule C7 (position, cursors, then the log), what is listed first is at
// most what the HWM read after it bounds; in any other order a listing may
// carry a frontier or a cursor past the records it copies.
type listingReads struct {
	position func() (frontier int64, ackedAhead []int64)
	cursors  func() ([][]byte, error)
	log      func() (storage.Listing, error)
}

func (r listingReads) read() *messages.PartitionListing {
	frontier, ahead := r.position()
	cursors, err := r.cursors()
	if err != nil {
		return &messages.PartitionListing{Status: messages.StatusFailed, Err: err.Error()}
	}
	ls, err := r.log()
	if err != nil {
		return &messages.PartitionListing{Status: messages.StatusFailed, Err: err.Error()}
	}
	out := &messages.PartitionListing{Status: messages.StatusOK, HWM: ls.HWM, Clock: ls.Clock, Cursors: cursors,
		Position: messages.ConsumerPosition{Frontier: frontier, AckedAhead: ahead},
		Segments: make([]messages.SegmentInfo, len(ls.Segments))}
	for i, s := range ls.Segments {
		out.Segments[i] = messages.SegmentInfo{Name: s.Name, Base: s.Base, Size: s.Size, ModTime: s.ModTime}
	}
	return out
}

// inlineSegments reads the committed bytes of every segment of ls into
// it when they total at most max. Read here, in the actor that commits, no
// commit lands between the sizes listed and the bytes read; a read that
// comes back short leaves every segment without its bytes, and the
// destination reads them in chunks as before.
func (p *Actor) inlineSegments(ls *messages.PartitionListing, max int) {
	var total int64
	for _, sg := range ls.Segments {
		total += sg.Size
	}
	if max <= 0 || total > int64(max) {
		return
	}
	for i, sg := range ls.Segments {
		buf := make([]byte, sg.Size)
		if n, err := p.log.ReadChunk(sg.Name, 0, buf); err != nil || int64(n) != sg.Size {
			for j := range ls.Segments {
				ls.Segments[j].Data = nil
			}
			return
		}
		ls.Segments[i].Data = buf
	}
}

// moveMarker is the copy's move marker as a listing reports it, read once
// when the log opened (nothing rewrites it while the log is open).
func (p *Actor) moveMarker(now time.Time) *messages.MoveMarker {
	if p.marker == nil {
		return nil
	}
	m := p.marker.m
	at := m.DurableAt
	if at.IsZero() {
		at = p.marker.modTime
	}
	return &messages.MoveMarker{PromotedHWM: m.PromotedHWM, ForcePromoted: m.ForcePromoted, SourceNode: m.SourceNode,
		Durable: !m.DurableAt.IsZero(), InstallAgeMs: now.Sub(at).Milliseconds()}
}

// serveChunk answers a chunk read off the actor while fewer than
// MoveChunkReadsInFlight are out, so a move's reads run side by side and
// never wait in the mailbox behind the partition's commits. That is safe:
// Log.ReadChunk takes the log's own lock to bound the read by the committed
// size (rule C4), the bytes below it are never rewritten (a refused publish
// or an abort truncates only past it), and a log closed meanwhile answers
// ErrClosed. Each goroutine ends with its one read.
func (p *Actor) serveChunk(ctx actor.Context, m *messages.ReadChunk) {
	if p.log == nil || p.deps.Config.MoveChunkReadsInFlight == 0 {
		ctx.Respond(p.readChunk(m))
		return
	}
	if p.chunkReads == nil {
		p.chunkReads = make(chan struct{}, p.deps.Config.MoveChunkReadsInFlight)
	}
	select {
	case p.chunkReads <- struct{}{}:
	default:
		ctx.Respond(p.readChunk(m))
		return
	}
	l, limit, slots := p.log, p.deps.MoveChunkBytes, p.chunkReads
	sender, root := ctx.Sender(), ctx.ActorSystem().Root
	go func() {
		defer func() { <-slots }()
		ch := readChunk(l, m, limit)
		if sender != nil {
			root.Send(sender, ch)
		}
	}()
}

// readChunk reads committed bytes only (rule C4), at most MoveChunkBytes.
func (p *Actor) readChunk(m *messages.ReadChunk) *messages.Chunk {
	if p.log == nil {
		return &messages.Chunk{Status: messages.StatusUnavailable, Err: "partition not open"}
	}
	return readChunk(p.log, m, p.deps.MoveChunkBytes)
}

func readChunk(l *storage.Log, m *messages.ReadChunk, limit int) *messages.Chunk {
	n := m.Max
	if n <= 0 || n > limit {
		n = limit
	}
	buf := make([]byte, n)
	got, err := l.ReadChunk(m.Segment, m.Pos, buf)
	if err != nil {
		return &messages.Chunk{Status: messages.StatusFailed, Err: err.Error()}
	}
	return &messages.Chunk{Status: messages.StatusOK, Data: buf[:got]}
}

// handoff forwards a freeze request to the freeze actor, which answers
// it: prepare (rules F1-F5), re-arm (F6), fence (F9) or release. A fence
// carries the HWM as this actor has it.
func (p *Actor) handoff(ctx actor.Context, m *messages.Handoff) {
	if p.log == nil {
		ctx.Respond(&messages.HandoffResult{Status: messages.StatusUnavailable, Err: "partition not open"})
		return
	}
	req := freeze.Request{Handoff: m}
	if m.Op == messages.HandoffFence {
		req.LogHWM = p.log.HWM()
	}
	ctx.RequestWithCustomSender(p.freezeActor(ctx), req, ctx.Sender())
}

// askFreeze forwards a freeze.Ask to the freeze actor, or answers it: no
// freeze yet.
func (p *Actor) askFreeze(ctx actor.Context, m freeze.Ask) {
	if p.freezer == nil {
		ctx.Respond(freeze.Status{})
		return
	}
	ctx.RequestWithCustomSender(p.freezer, m, ctx.Sender())
}

// refuseStash answers every commit not yet written: refused by the
// freeze, nothing appended; the dispatcher retries them at the new owner.
func (p *Actor) refuseStash(ctx actor.Context) {
	for _, c := range p.stash {
		if c.sender != nil {
			ctx.Send(c.sender, frozenResult(p.key, c.m))
		}
	}
	p.stash = nil
}

func frozenResult(k messages.PartitionKey, m *messages.Commit) *messages.CommitResult {
	return &messages.CommitResult{Key: k, Seqs: seqsOf(m), Status: messages.StatusFrozen, Err: "partition frozen for a move"}
}

// publish makes a synced write visible, unless that would move the HWM a
// freeze reported (an invariant of rule F3: nothing can reach here while
// it holds, so a publish that does is a bug). Such a write is taken back
// instead: its frames are truncated, its commits fail and the dispatcher
// retries them at the new owner; it is logged and counted, never served.
func (p *Actor) publish(ctx actor.Context, b *storage.Batch) error {
	if err := p.pinnedRefusal(ctx); err != nil {
		return p.log.Abort(err)
	}
	return p.log.Publish(b)
}

// pinnedRefusal is the error, logged and counted, for making the awaiting
// batch visible while a freeze's reported HWM is pinned (by a publish, or
// by the flush of a partition that closes); nil when that is allowed.
func (p *Actor) pinnedRefusal(ctx actor.Context) error {
	if !p.step(ctx, freeze.Publish{Awaiting: len(p.writing) > 0}) {
		return nil
	}
	p.deps.Metrics.FrozenPublishRefused.Inc()
	p.deps.Logger.Error("publish refused under a reported freeze", "partition", p.name, "hwm", p.gate.HWM, "records", recordsIn(p.writing))
	return fmt.Errorf("partition %s: a publish would move the HWM past %d, reported under a freeze: %w", p.name, p.gate.HWM, ErrInvariant)
}

func recordsIn(reqs []commitReq) int {
	n := 0
	for _, c := range reqs {
		n += len(c.m.Records)
	}
	return n
}

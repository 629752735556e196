package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The source side of a move, in the partition actor: transfer listings,
// chunk reads and the handoff freeze (seed 000, rules C4, C7, F1-F6, F9).

// freezeGate is a partition's handoff freeze: while now < until, commits
// are refused (the dispatcher keeps them and retries at the new owner) and
// no new lease is handed out. It lapses on its own (rule F12).
//
// The order that makes the reported HWM final (rule F3): a prepare arms
// the gate, refuses every commit that has not been written yet, then waits
// until each batch already written (syncing, or durable and awaiting its
// commit frame) has become visible or failed. Only then, with the pipeline
// empty, does it read the transfer info and report the HWM. From that
// moment until the freeze lapses or is released the HWM must not move:
// pinned says so, and a publish that would move it is refused.
type freezeGate struct {
	token string
	until time.Time
	seq   uint64 // tokens issued by this actor
	// pending is the prepare waiting for its report; polling: a lease
	// poll of it is scheduled.
	pending *handoffWait
	polling bool
	// reported: the prepare of this token answered with hwm.
	reported bool
	hwm      int64
}

func (g *freezeGate) holds(now time.Time) bool { return g.token != "" && now.Before(g.until) }

// pinned reports whether the HWM must stay where the freeze reported it.
func (g *freezeGate) pinned(now time.Time) bool { return g.reported && g.holds(now) }

// handoffWait is a prepare waiting for leases out to come back (rule F2)
// and for the commit pipeline to settle (rule F3); also the partition's
// own message that polls the leases.
type handoffWait struct {
	sender   *actor.PID
	token    string
	deadline time.Time
}

// leaseDrainPoll is how often a prepare looks at the leases out again.
const leaseDrainPoll = 10 * time.Millisecond

func (p *partitionActor) frozen() bool { return p.freeze.holds(time.Now()) }

// listing reads the consumer position, then the HWM and the segments'
// committed bytes (rule C7): a listing never carries a position past what
// it copies.
func (p *partitionActor) listing() *messages.PartitionListing {
	if p.log == nil {
		return &messages.PartitionListing{Status: messages.StatusUnavailable, Err: "partition not open"}
	}
	frontier, ahead := p.table.state()
	ls, err := p.log.List(time.Now())
	if err != nil {
		return &messages.PartitionListing{Status: messages.StatusFailed, Err: err.Error()}
	}
	out := &messages.PartitionListing{Status: messages.StatusOK, HWM: ls.HWM, Clock: ls.Clock,
		Position: messages.ConsumerPosition{Frontier: frontier, AckedAhead: ahead},
		Segments: make([]messages.SegmentInfo, len(ls.Segments))}
	for i, s := range ls.Segments {
		out.Segments[i] = messages.SegmentInfo{Name: s.Name, Base: s.Base, Size: s.Size, ModTime: s.ModTime}
	}
	return out
}

// readChunk reads committed bytes only (rule C4), at most MoveChunkBytes.
func (p *partitionActor) readChunk(m *messages.ReadChunk) *messages.Chunk {
	if p.log == nil {
		return &messages.Chunk{Status: messages.StatusUnavailable, Err: "partition not open"}
	}
	n := m.Max
	if n <= 0 || n > p.cfg.MoveChunkBytes {
		n = p.cfg.MoveChunkBytes
	}
	buf := make([]byte, n)
	got, err := p.log.ReadChunk(m.Segment, m.Pos, buf)
	if err != nil {
		return &messages.Chunk{Status: messages.StatusFailed, Err: err.Error()}
	}
	return &messages.Chunk{Status: messages.StatusOK, Data: buf[:got]}
}

func (p *partitionActor) handoff(ctx actor.Context, m *messages.Handoff) {
	if p.log == nil {
		ctx.Respond(&messages.HandoffResult{Status: messages.StatusUnavailable, Err: "partition not open"})
		return
	}
	now := time.Now()
	gone := func(why string) {
		ctx.Respond(&messages.HandoffResult{Status: messages.StatusGone, Err: why})
	}
	switch m.Op {
	case messages.HandoffPrepare:
		p.prepareHandoff(ctx, now)
	case messages.HandoffRearm:
		// Presenting a token extends the freeze it names and never arms a
		// new one (rule F6).
		if m.Token == "" || m.Token != p.freeze.token || !p.freeze.holds(now) {
			gone("that freeze is no longer active")
			return
		}
		p.freeze.until = now.Add(p.cfg.Move.FreezeTTL)
		ctx.Respond(&messages.HandoffResult{Status: messages.StatusOK, Token: m.Token})
	case messages.HandoffFence:
		// rule F9: the freeze still holds and the HWM is the copy's.
		if m.Token == "" || m.Token != p.freeze.token || !p.freeze.holds(now) {
			gone("that freeze is no longer active")
			return
		}
		if hwm := p.log.HWM(); hwm != m.HWM {
			gone(fmt.Sprintf("high watermark moved: %d, the copy has %d", hwm, m.HWM))
			return
		}
		p.freeze.until = now.Add(p.cfg.Move.FreezeTTL)
		ctx.Respond(&messages.HandoffResult{Status: messages.StatusOK, Token: m.Token})
	case messages.HandoffRelease:
		if m.Token != "" && m.Token == p.freeze.token {
			p.freeze.token, p.freeze.pending, p.freeze.reported = "", nil, false
			p.notifier.notify(p.key.Topic) // consumes may resume here
		}
		ctx.Respond(&messages.HandoffResult{Status: messages.StatusOK})
	default:
		ctx.Respond(&messages.HandoffResult{Status: messages.StatusFailed, Err: fmt.Sprintf("unknown handoff op %d", m.Op)})
	}
}

// prepareHandoff arms a fresh freeze (rules F1, F5): commits not yet
// written are refused now, and the answer waits for the batches already
// written (rule F3) and up to LeaseDrainTimeout (or a quarter of the TTL)
// for leases out to be acked or released (rule F2).
func (p *partitionActor) prepareHandoff(ctx actor.Context, now time.Time) {
	p.freeze.seq++
	p.freeze.token = fmt.Sprintf("%x-%x", p.nonce, p.freeze.seq)
	p.freeze.until = now.Add(p.cfg.Move.FreezeTTL)
	// A poll scheduled for an earlier prepare is ignored by its token.
	p.freeze.reported, p.freeze.polling = false, false
	p.refuseStash(ctx)
	wait := min(p.cfg.LeaseDrainTimeout, p.cfg.Move.FreezeTTL/4)
	p.freeze.pending = &handoffWait{sender: ctx.Sender(), token: p.freeze.token, deadline: now.Add(wait)}
	p.report(ctx)
}

// refuseStash answers every commit not yet written: refused by the
// freeze, nothing appended; the dispatcher retries them at the new owner.
func (p *partitionActor) refuseStash(ctx actor.Context) {
	for _, c := range p.stash {
		if c.sender != nil {
			ctx.Send(c.sender, &messages.CommitResult{Key: p.key, Seqs: seqsOf(c.m), Status: messages.StatusFrozen, Err: "partition frozen for a move"})
		}
	}
	p.stash = nil
}

// handoffWait is the lease poll's timer firing.
func (p *partitionActor) handoffWait(ctx actor.Context, w handoffWait) {
	if w.token != p.freeze.token {
		return // a newer prepare took over; the old asker's fence will fail
	}
	p.freeze.polling = false
	p.report(ctx)
}

// report answers the pending prepare once nothing written is still on its
// way to visibility (synced and failCommits call it again) and no lease
// is out or its deadline passed. The transfer info is read then, in this
// actor, which is the partition's produce lock: every batch that passed
// the gate is in it, and no later one can land (rules F3, F4: the frontier
// is the in-memory one).
func (p *partitionActor) report(ctx actor.Context) {
	w := p.freeze.pending
	if w == nil || w.token != p.freeze.token || p.log == nil {
		return
	}
	settling := p.syncing != nil || len(p.writing) > 0 || len(p.awaiting) > 0
	if settling && (p.cfg.faults == nil || !p.cfg.faults.reportPastPipeline) {
		return
	}
	if p.table.inFlight() > 0 && time.Now().Before(w.deadline) {
		if !p.freeze.polling {
			p.freeze.polling = true
			self, root, again := ctx.Self(), ctx.ActorSystem().Root, *w
			time.AfterFunc(leaseDrainPoll, func() { root.Send(self, again) })
		}
		return
	}
	p.freeze.pending = nil
	ls := p.listing()
	if ls.Status == messages.StatusOK {
		p.freeze.reported, p.freeze.hwm = true, ls.HWM
	}
	ctx.Send(w.sender, &messages.HandoffResult{Status: messages.StatusOK, Token: w.token, Listing: ls})
}

// publish makes a synced write visible, unless that would move the HWM a
// freeze reported (an invariant of rule F3: nothing can reach here while
// it holds, so a publish that does is a bug). Such a write is taken back
// instead: its frames are truncated, its commits fail and the dispatcher
// retries them at the new owner; it is logged and counted, never served.
func (p *partitionActor) publish(b *storage.Batch) error {
	if err := p.pinnedRefusal(); err != nil {
		return p.log.Abort(err)
	}
	return p.log.Publish(b)
}

// pinnedRefusal is the error, logged and counted, for making the awaiting
// batch visible while a freeze's reported HWM is pinned (by a publish, or
// by the flush of a partition that closes); nil when that is allowed.
func (p *partitionActor) pinnedRefusal() error {
	if len(p.awaiting) == 0 || !p.freeze.pinned(time.Now()) {
		return nil
	}
	p.metrics.frozenPublishRefused.Inc()
	p.deps.log.Error("publish refused under a reported freeze", "partition", p.name, "hwm", p.freeze.hwm, "records", recordsIn(p.awaiting))
	return fmt.Errorf("partition %s: a publish would move the HWM past %d, reported under a freeze: %w", p.name, p.freeze.hwm, ErrInvariant)
}

func recordsIn(reqs []commitReq) int {
	n := 0
	for _, c := range reqs {
		n += len(c.m.Records)
	}
	return n
}

package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/messages"
)

// The source side of a move, in the partition actor: transfer listings,
// chunk reads and the handoff freeze (seed 000, rules C4, C7, F1-F6, F9).

// freezeGate is a partition's handoff freeze: while now < until, commits
// are refused (the dispatcher keeps them and retries at the new owner) and
// no new lease is handed out. It lapses on its own (rule F12).
type freezeGate struct {
	token string
	until time.Time
	seq   uint64 // tokens issued by this actor
}

func (g *freezeGate) holds(now time.Time) bool { return g.token != "" && now.Before(g.until) }

// handoffWait is the partition's own message while PrepareHandoff waits
// for leases out to come back (rule F2).
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
			p.freeze.token = ""
			p.notifier.notify(p.key.Topic) // consumes may resume here
		}
		ctx.Respond(&messages.HandoffResult{Status: messages.StatusOK})
	default:
		ctx.Respond(&messages.HandoffResult{Status: messages.StatusFailed, Err: fmt.Sprintf("unknown handoff op %d", m.Op)})
	}
}

// prepareHandoff arms a fresh freeze (rules F1, F5): stashed commits are
// refused now, and the answer waits up to LeaseDrainTimeout (or a quarter
// of the TTL) for leases out to be acked or released (rule F2).
func (p *partitionActor) prepareHandoff(ctx actor.Context, now time.Time) {
	p.freeze.seq++
	p.freeze.token = fmt.Sprintf("%x-%x", p.nonce, p.freeze.seq)
	p.freeze.until = now.Add(p.cfg.Move.FreezeTTL)
	for _, c := range p.stash {
		if c.sender != nil {
			ctx.Send(c.sender, &messages.CommitResult{Key: p.key, Seqs: seqsOf(c.m), Status: messages.StatusUnavailable, Err: "partition frozen for a move"})
		}
	}
	p.stash = nil
	wait := min(p.cfg.LeaseDrainTimeout, p.cfg.Move.FreezeTTL/4)
	p.handoffWait(ctx, handoffWait{sender: ctx.Sender(), token: p.freeze.token, deadline: now.Add(wait)})
}

// handoffWait answers a prepare once no lease is out or its deadline
// passed; the transfer info is read then, in this actor, so a commit in
// the pipeline is either visible in it or lands before a quiet pass
// (rules F3, F4: the frontier is the in-memory one).
func (p *partitionActor) handoffWait(ctx actor.Context, w handoffWait) {
	if w.token != p.freeze.token || p.log == nil {
		return // a newer prepare took over; the old asker's fence will fail
	}
	if p.table.inFlight() > 0 && time.Now().Before(w.deadline) {
		self, root := ctx.Self(), ctx.ActorSystem().Root
		time.AfterFunc(leaseDrainPoll, func() { root.Send(self, w) })
		return
	}
	ctx.Send(w.sender, &messages.HandoffResult{Status: messages.StatusOK, Token: w.token, Listing: p.listing()})
}

package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// deps are the node-wide things every actor may use. All of them are safe
// for concurrent use or immutable; no actor's state is in here.
type deps struct {
	cfg      Config
	log      *slog.Logger
	metrics  *nodeMetrics
	notifier *commitNotifier
}

// flushConsumerState is a partition's own timer message: write the
// consumer position if acks moved it.
type flushConsumerState struct{}

// partitionActor is the only code that touches one partition's log and
// consumer state: commits, reservations, acks, replay reads and stats all
// arrive as messages, one at a time.
type partitionActor struct {
	deps
	key  messages.PartitionKey
	dir  string
	name string

	log            *storage.Log
	table          *reservationTable
	committer      *storage.OffsetCommitter
	nonce          uint64
	flushScheduled bool
	dirty          bool
}

func newPartitionActor(d deps, key messages.PartitionKey, dir string) *partitionActor {
	return &partitionActor{deps: d, key: key, dir: dir, name: fmt.Sprintf("%s/%d", key.Topic, key.Partition)}
}

func (p *partitionActor) Receive(ctx actor.Context) {
	defer logPanic(p.deps.log, p.name)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.start()
	case *actor.Restarting, *actor.Stopping:
		p.close()
	case *messages.Commit:
		ctx.Respond(p.commit(m))
	case *messages.Reserve:
		ctx.Respond(p.reserve(m))
		p.scheduleFlush(ctx)
	case *messages.ReadAt:
		ctx.Respond(p.readAt(m))
	case *messages.Lease:
		ctx.Respond(p.lease(m))
		p.scheduleFlush(ctx)
	case *messages.GetStats:
		ctx.Respond(p.stats())
	case *messages.Retain:
		p.retain(m)
	case flushConsumerState:
		p.flush()
	}
}

// start opens (and so recovers) the log and restores the consumer position,
// clamped to what the log holds. A failure panics: the supervisor retries
// with back-off and gives up on a partition that keeps failing.
func (p *partitionActor) start() {
	l, err := storage.OpenLog(p.dir, p.cfg.Log)
	if err != nil {
		panic(fmt.Errorf("open partition %s: %w", p.name, err))
	}
	st, err := storage.LoadConsumerState(p.dir)
	if errors.Is(err, storage.ErrCorrupt) {
		// Every copy of the position is damaged: redeliver from the start
		// rather than skip anything (at-least-once).
		p.deps.log.Error("consumer state damaged; redelivering from the oldest record", "partition", p.name, "err", err)
	} else if err != nil {
		l.Close()
		panic(fmt.Errorf("load consumer state of %s: %w", p.name, err))
	}
	if c, clamped := storage.ClampConsumerState(st, l.HWM()); clamped {
		p.deps.log.Warn("consumer position past the log end; clamped", "partition", p.name, "frontier", st.Frontier, "hwm", l.HWM())
		st = c
	}
	committer, err := storage.NewOffsetCommitter(p.dir, p.cfg.Consumer)
	if err != nil {
		l.Close()
		panic(fmt.Errorf("consumer state of %s: %w", p.name, err))
	}
	p.log = l
	p.committer = committer
	p.table = newReservationTable(st.Frontier, st.AckedAhead)
	// A nonce must not repeat across restarts, or a handle from before the
	// restart could match a new lease of the same offset.
	p.nonce = uint64(time.Now().UnixNano())
}

// close writes the consumer position durably and closes the log.
func (p *partitionActor) close() {
	if p.log == nil {
		return
	}
	p.flush()
	if err := p.committer.FlushSync(); err != nil {
		p.deps.log.Error("flush consumer state", "partition", p.name, "err", err)
	}
	if err := p.log.Close(); err != nil {
		p.deps.log.Error("close partition log", "partition", p.name, "err", err)
	}
	p.log = nil
}

func (p *partitionActor) commit(m *messages.Commit) *messages.CommitResult {
	res := &messages.CommitResult{Key: p.key, Seqs: make([]uint64, len(m.Records))}
	for i, r := range m.Records {
		res.Seqs[i] = r.Seq
	}
	if p.log == nil {
		res.Status, res.Err = messages.StatusUnavailable, "partition not open"
		return res
	}
	entries := make([]storage.Entry, len(m.Records))
	for i, r := range m.Records {
		entries[i] = storage.Entry{Key: r.Key, Body: r.Body}
	}
	start := time.Now()
	first, err := p.log.Append(start, entries)
	p.metrics.commitSeconds.UpdateDuration(start)
	if err != nil {
		p.metrics.commitFailures.Inc()
		p.deps.log.Error("commit failed", "partition", p.name, "records", len(entries), "err", err)
		res.Status, res.Err = messages.StatusFailed, err.Error()
		if errors.Is(err, storage.ErrBroken) {
			// Only a reopen recovers a broken log: let the supervisor do it.
			panic(fmt.Errorf("partition %s: %w", p.name, err))
		}
		return res
	}
	p.metrics.commitRecords.Add(len(entries))
	res.FirstOffset = first
	p.notifier.notify(p.key.Topic)
	return res
}

func (p *partitionActor) limits(l messages.ConsumeLimits) reserveLimits {
	return reserveLimits{HWM: p.log.HWM(), Oldest: p.log.Oldest(), MaxInFlight: l.MaxInFlight, MaxAckedAhead: l.MaxAckedAhead, Visibility: l.Visibility}
}

// reserve leases the next deliverable record. A record that cannot be read
// (a damaged frame, or removed by retention meanwhile) is skipped so the
// head never sticks on it.
func (p *partitionActor) reserve(m *messages.Reserve) *messages.Reserved {
	if p.log == nil {
		return &messages.Reserved{Status: messages.StatusUnavailable, Err: "partition not open"}
	}
	now := time.Now()
	lim := p.limits(m.Limits)
	for {
		p.nonce++
		off, ok := p.table.reserve(now, lim, p.nonce)
		if !ok {
			return &messages.Reserved{Status: messages.StatusEmpty}
		}
		p.dirty = true
		recs, err := p.log.Read(off, 1, 1)
		if err != nil && !errors.Is(err, storage.ErrOutOfRange) {
			p.table.nack(now, off, p.nonce)
			return &messages.Reserved{Status: messages.StatusFailed, Err: err.Error()}
		}
		if len(recs) == 0 || recs[0].Offset != off || recs[0].Corrupt {
			p.deps.log.Warn("record cannot be read; skipped", "partition", p.name, "offset", off)
			p.metrics.corruptSkipped.Inc()
			p.table.skip(off)
			continue
		}
		p.metrics.consumed.Inc()
		r := recs[0]
		return &messages.Reserved{Status: messages.StatusOK, Delivery: messages.Delivery{
			Partition: p.key.Partition, Offset: r.Offset, Key: r.Key, Body: r.Body, Time: r.Time, Nonce: p.nonce}}
	}
}

func (p *partitionActor) readAt(m *messages.ReadAt) *messages.Reserved {
	if p.log == nil {
		return &messages.Reserved{Status: messages.StatusUnavailable, Err: "partition not open"}
	}
	if m.Offset >= p.log.HWM() {
		return &messages.Reserved{Status: messages.StatusEmpty}
	}
	recs, err := p.log.Read(m.Offset, 1, 1)
	if errors.Is(err, storage.ErrOutOfRange) || (err == nil && (len(recs) == 0 || recs[0].Corrupt)) {
		return &messages.Reserved{Status: messages.StatusGone}
	}
	if err != nil {
		return &messages.Reserved{Status: messages.StatusFailed, Err: err.Error()}
	}
	r := recs[0]
	return &messages.Reserved{Status: messages.StatusOK, Delivery: messages.Delivery{
		Partition: p.key.Partition, Offset: r.Offset, Key: r.Key, Body: r.Body, Time: r.Time}}
}

func (p *partitionActor) lease(m *messages.Lease) *messages.LeaseResult {
	if p.log == nil {
		return &messages.LeaseResult{Status: messages.StatusUnavailable, Err: "partition not open"}
	}
	now := time.Now()
	var out ackOutcome
	switch m.Action {
	case messages.LeaseAck:
		out = p.table.ack(now, m.Offset, m.Nonce, m.Limits.MaxAckedAhead)
		if out == ackDone {
			p.metrics.acked.Inc()
		}
	case messages.LeaseExtend:
		out = p.table.extend(now, m.Offset, m.Nonce, m.Limits.Visibility)
		if out == ackDone {
			p.metrics.extended.Inc()
		}
	case messages.LeaseNack:
		out = p.table.nack(now, m.Offset, m.Nonce)
		if out == ackDone {
			p.metrics.nacked.Inc()
		}
	}
	switch out {
	case ackDone:
		p.dirty = true
		if m.Action == messages.LeaseNack {
			p.notifier.notify(p.key.Topic)
		}
		return &messages.LeaseResult{Status: messages.StatusOK}
	case ackFull:
		return &messages.LeaseResult{Status: messages.StatusFull}
	default:
		return &messages.LeaseResult{Status: messages.StatusGone}
	}
}

// scheduleFlush arms the consumer-position timer once per interval: an idle
// partition costs no timer, and a busy one at most one write per interval.
func (p *partitionActor) scheduleFlush(ctx actor.Context) {
	if !p.dirty || p.flushScheduled {
		return
	}
	p.flushScheduled = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(p.cfg.ConsumerFlushInterval, func() { root.Send(self, flushConsumerState{}) })
}

func (p *partitionActor) flush() {
	p.flushScheduled = false
	if !p.dirty || p.log == nil {
		return
	}
	p.dirty = false
	frontier, ahead := p.table.state()
	p.committer.Update(storage.ConsumerState{Frontier: frontier, AckedAhead: ahead})
	if _, err := p.committer.Flush(time.Now()); err != nil {
		p.deps.log.Error("write consumer state", "partition", p.name, "err", err)
		p.dirty = true
	}
}

func (p *partitionActor) stats() *messages.PartitionStats {
	st := &messages.PartitionStats{Index: p.key.Partition}
	if p.log == nil {
		return st
	}
	ls, err := p.log.List(time.Now())
	if err != nil {
		return st
	}
	st.Segments = len(ls.Segments)
	st.OldestOffset = p.log.Oldest()
	st.NextOffset = ls.HWM
	st.HighWatermark = ls.HWM
	st.SizeBytes = ls.Bytes()
	if len(ls.Segments) > 0 {
		st.OldestSegmentAt = ls.Segments[0].ModTime.Unix()
	}
	st.InFlight = p.table.inFlight()
	return st
}

func (p *partitionActor) retain(m *messages.Retain) {
	if p.log == nil || m.MaxAge <= 0 {
		return
	}
	if _, err := p.log.Retain(time.Now(), m.MaxAge, 0); err != nil {
		p.deps.log.Error("retention", "partition", p.name, "err", err)
	}
}

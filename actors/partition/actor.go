package partition

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// flushConsumerState is a partition's own timer message: write the
// consumer position if acks moved it.
type flushConsumerState struct{}

// commitReq is a Commit and whom to answer.
type commitReq struct {
	m      *messages.Commit
	sender *actor.PID
	start  time.Time
	// already are the seqs of records the commit carried that the log
	// had committed before (alreadyIn): answered with it, not written.
	already []uint64
}

// synced reports that the fsync of a write finished, off the actor.
type synced struct {
	batch *storage.Batch
	err   error
}

// Actor is the only code that touches one partition's log and
// consumer state: commits, reservations, acks, replay reads and stats all
// arrive as messages, one at a time. The one exception is the fsync of a
// write, which runs on a goroutine of its own (kick) so that consumes are
// served meanwhile, through the node's SyncLane or Log.Sync; both are safe
// beside the actor's reads.
type Actor struct {
	deps *Deps
	key  messages.PartitionKey
	dir  string
	name string
	// marker is the copy's move marker, read at open; nil without one (a
	// damaged one reads as none: the asking sweep then quarantines).
	marker *openedMarker
	// owners answers the gate's ownership checks (freeze.ConfirmOwner).
	owners Owners
	// moving: a move targeted the partition when the supervisor started
	// or restarted this actor (the replica read at each production), so
	// it opens frozen (freeze.Reopen).
	moving bool
	// floor is the assignment's Floor when the actor was produced: a
	// partition re-created after its owner's disk was lost starts its log
	// there, and a copy of it from before the loss is set aside.
	floor int64

	// clock is Deps.Clock, steady Deps.Steady and records
	// LogConfig.Clock, each or the wall (Deps says which reads which).
	clock, steady, records clock.Clock

	log       *storage.Log
	table     *reservationTable
	committer *storage.OffsetCommitter
	// acks remembers the handles acked lately, so a retried ack answers
	// 204 again (ackMemory).
	acks ackMemory
	// held are the answers to acks applied and consumes leased but not
	// yet answered: each waits for the consumer state that holds its ack
	// or lease to be written (writeThrough), so a process that dies after
	// a 204 has the ack on disk, and one that dies after a delivery has
	// its lease there for the holder's next ack. One writeThrough is
	// queued for all of them (writeQueued), behind whatever the mailbox
	// held, so a burst costs one write. Bounded by the mailbox: each entry
	// is a request taken from it since the last write.
	held        []heldAnswer
	writeQueued bool
	// recent is flush's buffer of the newest acked handles (ackMemory.newest).
	recent []storage.AckedHandle
	// leases is flush's buffer of the leases out (reservationTable.leasesOut).
	leases []storage.Lease
	// boot tells this actor's freezes apart from those of its earlier
	// lives (freeze.Prepare, freeze.Reopen). Lease nonces are drawn
	// apart (leaseNonce).
	boot uint64
	// reads are the owner confirmations' leader reads on their way, and
	// readCancels their cancels by number (readSeq), dropped as each
	// answers (readOwner).
	reads       sync.WaitGroup
	readSeq     uint64
	readCancels map[uint64]context.CancelFunc
	// chunkReads holds a slot per chunk read served off the actor
	// (serveChunk); nil until the first.
	chunkReads chan struct{}
	// The commit pipeline: stash holds commits that arrived while a write
	// was syncing; writing are the commits of the write being synced (its
	// records and the commit frame that makes them visible, one write and
	// one fsync).
	stash, writing []commitReq
	syncing        *storage.Batch
	// syncer is the goroutine running syncing's fsync; close waits for it
	// before it syncs again and closes the log under it.
	syncer         sync.WaitGroup
	flushScheduled bool
	dirty          bool
	// gate is the handoff freeze's gate, decided by freeze.GateStep
	// (freeze.go); freezer is the freeze actor that opens and closes it,
	// nil until the first freeze.
	gate    freeze.Gate
	gateCfg freeze.Config
	freezer *actor.PID
	// maxServed is the highest offset delivered since the actor started; a
	// delivery at or below it is a redelivery (for the metric).
	maxServed int64
	// starved: a reserve found nothing to lease while records waited past
	// the frontier; the next ack or nack announces the partition again
	// (Deps.Notify), since a slot may have opened.
	starved bool
	// handover is set when the partition moved to another node and this
	// actor is about to stop: close checks the HWM against it.
	handover *handedOver
	// The fan-out of this partition to its topic's children
	// (fanout.go, actors/fanout):
	// links as the replica had them, the anchored cursors by child, the
	// fan-out actor (nil without links), and swept once the cursor files
	// of links detached while the actor was away were removed.
	links   []messages.ChildLink
	cursors map[string]storage.Cursor
	fanout  *actor.PID
	swept   bool
	// mine are this partition's figures in the topic's gauges.
	mine *partitionFigures
	// lastActive is when the actor last took a message other than its
	// rest check (steady clock); restTimer is that check's timer, nil
	// without Config.RestAfter; resting: the actor closed its door to
	// rest (rest.go), so its close keeps its figures in the gauges.
	lastActive time.Time
	restTimer  clock.Timer
	resting    bool
}

// handedOver tells a partition actor, right before the supervisor stops
// it, that ownership moved to another node whose copy ends at hwm. The
// actor answers it, so the supervisor knows it arrived before the stop.
type handedOver struct {
	to  string
	hwm int64
}

func newActor(d *Deps, key messages.PartitionKey, dir string, owners Owners, moving bool, links []messages.ChildLink) *Actor {
	return &Actor{deps: d, key: key, dir: dir, owners: owners, moving: moving, name: fmt.Sprintf("%s/%d", key.Topic, key.Partition),
		clock: clock.Or(d.Clock), steady: clock.Or(d.Steady), records: clock.Or(d.LogConfig.Clock), gateCfg: gateConfig(d), links: links}
}

// notify announces that the partition may have records to deliver.
func (p *Actor) notify() {
	if p.deps.Notify != nil {
		p.deps.Notify(p.key)
	}
}

func (p *Actor) Receive(ctx actor.Context) {
	defer supervise.LogPanic(p.deps.Logger, p.name)
	if _, check := ctx.Message().(restCheck); !check && p.restTimer != nil {
		p.lastActive = p.steady.Now()
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.start(ctx)
		// Before any commit: a link's cursor anchors at the HWM it found.
		p.setLinks(ctx, p.links)
		p.armRest(ctx, p.deps.Config.RestAfter)
		if p.deps.Config.RestAfter > 0 {
			ctx.Send(ctx.Parent(), opened{key: p.key, pid: ctx.Self()})
		}
	case restCheck:
		p.checkRest(ctx, m.survey)
	case *actor.Restarting, *actor.Stopping:
		p.close(ctx)
	case *messages.Commit:
		p.commit(ctx, m)
	case synced:
		p.synced(ctx, m)
	case *messages.Reserve:
		// The figures first: whoever gets the answer and reads the
		// backlog and leases gauges next finds them counting it.
		res := p.reserve(ctx, m)
		p.noteFigures()
		p.answerReserve(ctx, res)
		p.scheduleFlush(ctx)
	case *messages.ReadAt:
		ctx.Respond(p.readAt(m))
	case *messages.Lease:
		res := p.lease(m)
		p.noteFigures()
		p.answerLease(ctx, m, res)
		p.scheduleFlush(ctx)
	case writeThrough:
		p.writeThrough(ctx)
	case *messages.GetStats:
		ctx.Respond(p.stats())
	case *messages.ListPartition:
		ctx.Respond(p.listing(m.InlineBytes))
	case *messages.ReadChunk:
		p.serveChunk(ctx, m)
	case *messages.Handoff:
		p.handoff(ctx, m)
	case freezePoll:
		p.pollFreeze(ctx, m)
	case freeze.Close:
		p.gateWord(ctx, m)
	case freeze.Lapsed:
		p.gateWord(ctx, m)
	case freeze.Released:
		p.gateWord(ctx, m)
	case freeze.Ask:
		p.askFreeze(ctx, m)
	case confirmDue:
		p.readOwner(ctx)
	case ownerConfirmed:
		p.ownerConfirmed(ctx, m)
	case *messages.Retain:
		p.retain(m)
	case handedOver:
		p.handover = &m
		ctx.Respond(m)
	case flushConsumerState:
		p.flushScheduled = false
		p.flush()
	case fanout.Links:
		p.setLinks(ctx, m.Links)
	case *fanout.Read:
		p.fanoutRead(ctx, m)
	case fanout.Advance:
		p.fanoutAdvance(m)
	case fanout.Hello:
		p.helloFanout(ctx)
	}
}

// start opens (and so recovers) the log and restores the consumer position,
// clamped to what the log holds. A failure panics: the supervisor retries
// with back-off and gives up on a partition that keeps failing.
func (p *Actor) start(ctx actor.Context) {
	if p.deps.Opens != nil {
		p.deps.Opens <- struct{}{}
		defer func() { <-p.deps.Opens }()
	}
	if f := p.deps.Knobs.OpenPartition; f != nil {
		if err := f(p.key); err != nil {
			panic(fmt.Errorf("open partition %s: %w", p.name, err))
		}
	}
	// Under the guard (rule V9): no install or reclaim acts on the path
	// while the log is open.
	if err := p.deps.guard().open(p.key); err != nil {
		panic(err)
	}
	l, err := p.openLog()
	if err != nil {
		p.deps.guard().closed(p.key)
		panic(fmt.Errorf("open partition %s: %w", p.name, err))
	}
	st, err := storage.LoadConsumerState(p.dir)
	if errors.Is(err, storage.ErrCorrupt) {
		// Every copy of the position is damaged: redeliver from the start
		// rather than skip anything (at-least-once).
		p.deps.Logger.Error("consumer state damaged; redelivering from the oldest record", "partition", p.name, "err", err)
	} else if err != nil {
		l.Close()
		p.deps.guard().closed(p.key)
		panic(fmt.Errorf("load consumer state of %s: %w", p.name, err))
	}
	// Acked-ahead offsets at or past the HWM are dropped even when the
	// frontier needs no clamp: records appended there later are new.
	c, clamped := storage.ClampConsumerState(st, l.HWM())
	if clamped {
		p.deps.Logger.Warn("consumer position past the log end; clamped", "partition", p.name, "frontier", st.Frontier, "hwm", l.HWM())
	}
	st = c
	committer, err := storage.NewOffsetCommitter(p.dir, p.deps.Consumer)
	if err != nil {
		l.Close()
		p.deps.guard().closed(p.key)
		panic(fmt.Errorf("consumer state of %s: %w", p.name, err))
	}
	p.log = l
	p.committer = committer
	p.marker = readOpenedMarker(p.dir, p.deps.Logger)
	p.table = newReservationTable(st.Frontier, st.AckedAhead)
	if p.deps.Config.LeasePersistedMax > 0 {
		// The leases the last life wrote: their holders' acks, retried
		// against this life, find them.
		p.deps.Metrics.LeasesRestored.Add(p.table.restoreLeases(p.clock.Now(), st.Leases, p.deps.Config.LeaseRestoreSpanMax))
	}
	p.acks = newAckMemory(p.deps.Config.AckMemoryWindow, p.deps.Config.AckMemoryEntriesMax)
	// The handles the last life acked just before it ended: a consumer
	// whose ack answer died with that process retries it against this one.
	for _, h := range st.Recent {
		p.acks.remember(p.clock.Now(), h.Offset, h.Nonce)
	}
	p.mine = p.deps.Figures.open(p.key)
	p.noteFigures()
	p.maxServed = -1
	// A freeze token must not repeat across restarts: the steady clock,
	// never the node clock, whose fake in a test may read the same at
	// each start.
	p.boot = uint64(p.steady.Now().UnixNano())
	if p.moving {
		// A freeze this node held before it restarted may be what a flip
		// still on its way counts on: start frozen (freeze.Reopen). The
		// gate closes here, before any commit is taken; the freeze actor
		// it tells keeps the time, and tells the pacer (frozen without
		// asking: it counts all the same).
		p.step(ctx, freeze.Reopen{HWM: l.HWM(), Nonce: p.boot})
		p.deps.Logger.Info("partition opened under a move: frozen until the freeze lapses and the leader confirms the owner", "partition", p.name, "hwm", l.HWM())
	}
	if l.HWM() > st.Frontier+1 {
		// Records not yet acked are deliverable without any commit here (a
		// restart, or a move: leases do not survive either): say so, or a
		// node that believes the partition empty asks it only at its next
		// full scan.
		p.notify()
	}
}

// openLog opens the partition's log, a new one at the floor. A log that
// ends below the floor is a copy from before the partition was re-created
// (this node owned it before the lost one did): its offsets are ones
// consumers may have seen another record at since, so it is set aside for
// an operator, never served, and a new log starts at the floor.
func (p *Actor) openLog() (*storage.Log, error) {
	l, err := p.deps.Files.OpenLogFrom(p.dir, p.deps.LogConfig, p.floor)
	if err != nil || l.HWM() >= p.floor {
		return l, err
	}
	hwm := l.HWM()
	if err := l.Close(); err != nil {
		return nil, err
	}
	q, err := storage.Quarantine(p.dir)
	if err != nil {
		return nil, err
	}
	p.deps.Logger.Warn("a copy from before the partition was re-created is set aside", "partition", p.name, "hwm", hwm, "floor", p.floor, "set_aside", q)
	return p.deps.Files.OpenLogFrom(p.dir, p.deps.LogConfig, p.floor)
}

// openedMarker is a move marker and its file's modification time.
type openedMarker struct {
	m       storage.Marker
	modTime time.Time
}

func readOpenedMarker(dir string, log *slog.Logger) *openedMarker {
	m, err := storage.ReadMarker(dir)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		log.Error("move marker unreadable; the partition reports none", "dir", dir, "err", err)
		return nil
	}
	st, err := os.Stat(filepath.Join(dir, storage.MarkerFile))
	if err != nil {
		return &openedMarker{m: m}
	}
	return &openedMarker{m: m, modTime: st.ModTime()}
}

// close writes the consumer position durably and closes the log. A
// partition handed over to another node checks that it holds nothing past
// the HWM the new owner's copy ends at.
func (p *Actor) close(ctx actor.Context) {
	// A restart or a stop ends the freeze with the actor (a restarted one
	// opens frozen again if a move still targets it): the freeze actor
	// stops with it, answering a parked prepare and telling the pacer.
	p.endOwnerReads()
	if p.restTimer != nil {
		p.restTimer.Stop()
		p.restTimer = nil
	}
	if p.log == nil {
		return
	}
	if c := p.deps.Knobs.Closing; c != nil {
		c(p.key)
	}
	p.drainCommits(ctx)
	p.flush()
	if err := p.committer.FlushSync(); err != nil {
		p.deps.Logger.Error("flush consumer state", "partition", p.name, "err", err)
	}
	p.answerHeld(ctx)
	hwm := p.log.HWM()
	if !p.resting {
		// At rest the partition's backlog still counts in its topic's
		// gauge; the supervisor drops it if the partition leaves.
		p.deps.Figures.close(p.key)
	}
	if err := p.log.Close(); err != nil {
		p.deps.Logger.Error("close partition log", "partition", p.name, "err", err)
	}
	p.log = nil
	if h := p.handover; h != nil && hwm > h.hwm {
		p.setAside(h, hwm)
	}
	p.deps.guard().closed(p.key)
}

// setAside quarantines a handed-over copy that holds records past the HWM
// its move flipped at. Those records were committed here after the copy
// was taken (a freeze that lapsed, or a source promoted away from while it
// still served), so they exist nowhere else: the copy is renamed, never
// removed, and the offsets are logged for an operator.
func (p *Actor) setAside(h *handedOver, hwm int64) {
	p.deps.Metrics.HandoverSetAside.Inc()
	p.deps.Metrics.HandoverSetAsideRecs.Add(int(hwm - h.hwm))
	q, err := storage.Quarantine(p.dir)
	p.deps.Logger.Error("partition handed over holding records past the HWM its move flipped at; copy set aside",
		"partition", p.name, "new_owner", h.to, "flipped_at_hwm", h.hwm, "hwm", hwm,
		"records", hwm-h.hwm, "quarantine", q, "err", err)
}

// commit queues a commit. The partition writes what queued as one batch
// (its records and its commit frame) and syncs it on another goroutine, so
// the actor keeps serving consumes during the fsync and a busy partition
// pays one fsync per batch. A commit is answered once its batch is durable,
// read back and visible.
func (p *Actor) commit(ctx actor.Context, m *messages.Commit) {
	if p.log == nil {
		ctx.Respond(&messages.CommitResult{Key: p.key, Status: messages.StatusUnavailable, Err: "partition not open", Seqs: seqsOf(m)})
		return
	}
	if m.Expired(p.steady.Now()) {
		p.deps.Metrics.CommitsExpired.Inc()
		ctx.Respond(expiredResult(p.key, m))
		return
	}
	if p.step(ctx, freeze.Commit{}) {
		// rule F1: the dispatcher keeps the records and retries them; after
		// the flip they land at the new owner (rule K2).
		ctx.Respond(frozenResult(p.key, m))
		return
	}
	m, already := p.alreadyIn(m)
	if len(m.Records) == 0 {
		ctx.Respond(&messages.CommitResult{Key: p.key, Status: messages.StatusOK, FirstOffset: p.log.HWM(), Seqs: already})
		return
	}
	p.stash = append(p.stash, commitReq{m: m, sender: ctx.Sender(), start: p.steady.Now(), already: already})
	p.kick(ctx)
}

// alreadyIn takes out of m the records sent again (Again) that the log
// committed before, by their origin, and returns what is left to write
// with the seqs taken out. m is left as it was: a commit from this node's
// dispatcher is the dispatcher's too.
func (p *Actor) alreadyIn(m *messages.Commit) (*messages.Commit, []uint64) {
	if m.WAL == 0 {
		return m, nil
	}
	var already []uint64
	var rest []messages.CommitRecord
	for i, r := range m.Records {
		if !r.Again || !p.log.Committed(storage.Origin{WAL: m.WAL, Seq: r.Seq}) {
			if already != nil {
				rest = append(rest, r)
			}
			continue
		}
		if already == nil {
			rest = append(make([]messages.CommitRecord, 0, len(m.Records)), m.Records[:i]...)
		}
		already = append(already, r.Seq)
	}
	if already == nil {
		return m, nil
	}
	p.deps.Metrics.RecordsAlreadyCommitted.Add(len(already))
	left := *m
	left.Records = rest
	return &left, already
}

// expiredResult refuses, unwritten, a commit whose sender stopped waiting
// (Commit.NotAfter): it sends the records again, and writing them now
// would store them twice.
func expiredResult(k messages.PartitionKey, m *messages.Commit) *messages.CommitResult {
	return &messages.CommitResult{Key: k, Status: messages.StatusUnavailable, Err: "commit expired before it was written: its sender retries it", Seqs: seqsOf(m)}
}

// dropExpired refuses the stashed commits that expired while they waited
// for the write before them, and keeps the rest in order.
func (p *Actor) dropExpired(ctx actor.Context, now time.Time) {
	kept := p.stash[:0]
	for _, c := range p.stash {
		if !c.m.Expired(now) {
			kept = append(kept, c)
			continue
		}
		p.deps.Metrics.CommitsExpired.Inc()
		if c.sender != nil {
			ctx.Send(c.sender, expiredResult(p.key, c.m))
		}
	}
	clear(p.stash[len(kept):])
	p.stash = kept
}

func seqsOf(m *messages.Commit) []uint64 {
	seqs := make([]uint64, len(m.Records))
	for i, r := range m.Records {
		seqs[i] = r.Seq
	}
	return seqs
}

// kick starts the next write, of the stashed commits, unless one is
// syncing.
func (p *Actor) kick(ctx actor.Context) {
	if p.syncing != nil || p.log == nil || len(p.stash) == 0 {
		return
	}
	// The gate again, under the lock (rule F3): a commit that passed it
	// before a freeze was armed is refused with nothing appended.
	p.step(ctx, freeze.Write{})
	p.dropExpired(ctx, p.steady.Now())
	if len(p.stash) == 0 {
		return
	}
	var entries []storage.Entry
	for _, c := range p.stash {
		for _, r := range c.m.Records {
			entries = append(entries, storage.Entry{Key: r.Key, Body: r.Body, Origin: storage.Origin{WAL: c.m.WAL, Seq: r.Seq}})
		}
	}
	b, err := p.log.Write(p.records.Now(), entries)
	if errors.Is(err, storage.ErrInvalid) || errors.Is(err, storage.ErrTooLarge) {
		// Refused before any I/O: only these commits fail.
		p.answer(ctx, p.stash, err)
		p.stash = nil
		p.kick(ctx)
		return
	}
	p.writing, p.stash = p.stash, nil
	if err != nil {
		p.failCommits(ctx, err)
		return
	}
	p.syncing = b
	self, root, l, k, lane := ctx.Self(), ctx.ActorSystem().Root, p.log, p.key, p.deps.Lane
	hold := p.deps.Knobs.Synced
	p.syncer.Go(func() {
		var err error
		if lane != nil {
			// Ends when a sync that started after this write covers it, or
			// fails, or the lane closes (after every partition closed).
			err = lane.Sync(context.Background(), l)
		} else {
			err = l.Sync()
		}
		if hold != nil {
			hold(k)
		}
		root.Send(self, synced{batch: b, err: err})
	})
}

// synced finishes a write: read it back and publish it, which makes its
// batch visible; then start the next write.
func (p *Actor) synced(ctx actor.Context, m synced) {
	if m.batch != p.syncing {
		return // from before a restart: that log is closed
	}
	p.syncing = nil
	err := m.err
	if err != nil {
		err = p.log.Abort(err)
	} else {
		err = p.publish(ctx, m.batch)
	}
	if err != nil {
		p.failCommits(ctx, err)
		return
	}
	p.answer(ctx, p.writing, nil)
	p.writing = nil
	p.kick(ctx)
	p.settled(ctx)
}

// answer tells each commit its outcome. On success the records are
// visible, from the first offset of each commit on.
func (p *Actor) answer(ctx actor.Context, reqs []commitReq, err error) {
	if len(reqs) == 0 {
		return
	}
	first := p.log.HWM()
	for i := len(reqs) - 1; i >= 0; i-- {
		first -= int64(len(reqs[i].m.Records))
	}
	for _, c := range reqs {
		res := &messages.CommitResult{Key: p.key, Seqs: append(seqsOf(c.m), c.already...), FirstOffset: first}
		first += int64(len(c.m.Records))
		if err != nil {
			res.Status, res.Err = messages.StatusFailed, err.Error()
		} else {
			p.deps.Metrics.CommitSeconds.Update(clock.Since(p.steady, c.start).Seconds())
			p.deps.Metrics.CommitRecords.Add(len(c.m.Records))
		}
		if c.sender != nil {
			ctx.Send(c.sender, res)
		}
	}
	if err == nil {
		p.notify()
		p.wakeFanout(ctx)
		p.noteFigures()
	}
}

// noteFigures stores the partition's backlog and leases for the topic's
// gauges: two atomic stores, after every commit and lease change.
func (p *Actor) noteFigures() {
	if p.mine == nil || p.log == nil {
		return
	}
	p.mine.backlog.Store(p.table.unacked(p.log.HWM()))
	p.mine.leases.Store(int64(p.table.inFlight()))
	p.mine.bytes.Store(p.log.Bytes())
}

// failCommits answers every commit not yet visible: the log truncated their
// frames, and the dispatcher retries them. A broken log (the truncation
// failed) is reopened by restarting the actor.
func (p *Actor) failCommits(ctx actor.Context, err error) {
	p.deps.Metrics.CommitFailures.Inc()
	p.deps.Logger.Error("commit failed", "partition", p.name, "err", err)
	p.answer(ctx, p.writing, err)
	p.writing, p.syncing = nil, nil
	if errors.Is(err, storage.ErrBroken) {
		panic(fmt.Errorf("partition %s: %w", p.name, err))
	}
	p.kick(ctx)
	p.settled(ctx)
}

// drainCommits finishes the pipeline synchronously before the log closes:
// what is durable becomes visible and is answered; stashed commits are
// refused (the dispatcher retries them after the restart).
func (p *Actor) drainCommits(ctx actor.Context) {
	if b := p.syncing; b != nil {
		// Its synced message stays in the mailbox: the fsync is done again
		// here, and costs nothing more once the goroutine's is over.
		p.syncer.Wait()
		p.syncing = nil
		err := p.log.Sync()
		if err == nil {
			err = p.publish(ctx, b)
		}
		if err != nil {
			p.failCommits(ctx, err)
		} else {
			p.answer(ctx, p.writing, nil)
			p.writing = nil
		}
	}
	for _, c := range p.stash {
		if c.sender != nil {
			ctx.Send(c.sender, &messages.CommitResult{Key: p.key, Seqs: seqsOf(c.m), Status: messages.StatusUnavailable, Err: "partition closing"})
		}
	}
	p.stash = nil
}

func (p *Actor) limits(l messages.ConsumeLimits) reserveLimits {
	return reserveLimits{HWM: p.log.HWM(), Oldest: p.log.Oldest(), MaxInFlight: l.MaxInFlight, MaxAckedAhead: l.MaxAckedAhead, Visibility: l.Visibility}
}

// reserve leases the next deliverable record. A record that cannot be read
// (a damaged frame, or removed by retention meanwhile) is skipped so the
// head never sticks on it.
func (p *Actor) reserve(ctx actor.Context, m *messages.Reserve) *messages.Reserved {
	if p.log == nil {
		return &messages.Reserved{Status: messages.StatusUnavailable, Err: "partition not open"}
	}
	if p.step(ctx, freeze.Reserve{}) {
		return &messages.Reserved{Status: messages.StatusEmpty} // rule F1: consume pauses here only
	}
	now := p.clock.Now()
	lim := p.limits(m.Limits)
	for {
		nonce := leaseNonce()
		off, ok := p.table.reserve(now, lim, nonce)
		if !ok {
			// Records wait past the frontier while none could be leased
			// (max_in_flight, the acked-ahead set full, or all leased):
			// the next ack or nack announces the partition again.
			p.starved = lim.HWM > p.table.frontier+1
			return &messages.Reserved{Status: messages.StatusEmpty, ExpiresIn: p.expiresIn(now)}
		}
		p.dirty = true
		recs, err := p.log.Read(off, 1, 1)
		if err != nil && !errors.Is(err, storage.ErrOutOfRange) {
			p.table.nack(now, off, nonce)
			return &messages.Reserved{Status: messages.StatusFailed, Err: err.Error()}
		}
		if len(recs) == 0 || recs[0].Offset != off || recs[0].Corrupt {
			p.deps.Logger.Warn("record cannot be read; skipped", "partition", p.name, "offset", off)
			p.deps.Metrics.CorruptSkipped.Inc()
			p.table.skip(off)
			continue
		}
		p.deps.Metrics.Consumed.Inc()
		if off <= p.maxServed {
			p.deps.Metrics.Redelivered.Inc()
		}
		p.maxServed = max(p.maxServed, off)
		r := recs[0]
		return &messages.Reserved{Status: messages.StatusOK, Delivery: messages.Delivery{
			Partition: p.key.Partition, Offset: r.Offset, Key: r.Key, Body: r.Body, Time: r.Time, Nonce: nonce},
			More: p.table.deliverable(lim), ExpiresIn: p.expiresIn(now)}
	}
}

// expiresIn is how long until the earliest lease out expires (0: none), for
// the ready book of the node that asked (Reserved.ExpiresIn).
func (p *Actor) expiresIn(now time.Time) time.Duration {
	if at, ok := p.table.nextExpiry(); ok {
		return max(at.Sub(now), time.Nanosecond)
	}
	return 0
}

// leaseNonce draws the nonce of a lease's receipt handle: 64 random bits,
// never 0 (§10 refuses it). A counter would let a client who saw one
// handle name the next lease's, and a neighbour offset's, and settle
// another consumer's record; random nonces also never repeat for an offset
// across restarts, but by a 2^-64 chance. The actor draws it so that the
// reservation table stays pure.
func leaseNonce() uint64 {
	var b [8]byte
	for {
		rand.Read(b[:]) // never fails: it aborts the program first
		if n := binary.LittleEndian.Uint64(b[:]); n != 0 {
			return n
		}
	}
}

func (p *Actor) readAt(m *messages.ReadAt) *messages.Reserved {
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

func (p *Actor) lease(m *messages.Lease) *messages.LeaseResult {
	if p.log == nil {
		return &messages.LeaseResult{Status: messages.StatusUnavailable, Err: "partition not open"}
	}
	now := p.clock.Now()
	var out ackOutcome
	switch m.Action {
	case messages.LeaseAck:
		out = p.table.ack(now, m.Offset, m.Nonce, m.Limits.MaxAckedAhead)
		switch {
		case out == ackDone:
			p.deps.Metrics.Acked.Inc()
			p.acks.remember(now, m.Offset, m.Nonce)
		case out == ackGone && p.acks.acked(now, m.Offset, m.Nonce):
			// The same handle's ack took effect before and its answer
			// was lost: this is its retry, and it is done.
			p.deps.Metrics.AcksRepeated.Inc()
			return &messages.LeaseResult{Status: messages.StatusOK}
		}
	case messages.LeaseExtend:
		out = p.table.extend(now, m.Offset, m.Nonce, m.Limits.Visibility)
		if out == ackDone {
			p.deps.Metrics.Extended.Inc()
		}
	case messages.LeaseNack:
		out = p.table.nack(now, m.Offset, m.Nonce)
		if out == ackDone {
			p.deps.Metrics.Nacked.Inc()
		}
	}
	switch out {
	case ackDone:
		p.dirty = true
		if m.Action == messages.LeaseNack || p.starved {
			p.starved = false
			p.notify()
		}
		return &messages.LeaseResult{Status: messages.StatusOK}
	case ackFull:
		return &messages.LeaseResult{Status: messages.StatusFull}
	default:
		return &messages.LeaseResult{Status: messages.StatusGone}
	}
}

// writeThrough is a partition's own message: write the consumer state now
// and send the answers that wait for it (held).
type writeThrough struct{}

// heldAnswer is an answer that waits for the consumer state to be written.
type heldAnswer struct {
	to  *actor.PID
	res any
}

// answerLease answers an ack once the state that holds it is written, when
// the acked-ahead set is small enough for a write per burst
// (Config.AckWriteThroughEntriesMax); every other answer goes at once.
func (p *Actor) answerLease(ctx actor.Context, m *messages.Lease, res *messages.LeaseResult) {
	limit := p.deps.Config.AckWriteThroughEntriesMax
	if m.Action != messages.LeaseAck || res.Status != messages.StatusOK || ctx.Sender() == nil ||
		limit == 0 || len(p.table.ackedAhead) > limit {
		ctx.Respond(res)
		return
	}
	p.hold(ctx, res)
}

// answerReserve answers a delivery once the state that holds its lease is
// written, while the partition's leases fit in it
// (Config.LeasePersistedMax); every other answer goes at once.
func (p *Actor) answerReserve(ctx actor.Context, res *messages.Reserved) {
	limit := p.deps.Config.LeasePersistedMax
	if res.Status != messages.StatusOK || ctx.Sender() == nil || limit == 0 || p.table.inFlight() > limit {
		ctx.Respond(res)
		return
	}
	p.hold(ctx, res)
}

func (p *Actor) hold(ctx actor.Context, res any) {
	p.held = append(p.held, heldAnswer{to: ctx.Sender(), res: res})
	if !p.writeQueued {
		p.writeQueued = true
		ctx.Send(ctx.Self(), writeThrough{})
	}
}

// writeThrough writes the consumer state and sends the answers it holds. A
// failed write is logged by flush and retried by the timer; the answers go
// all the same, as they did before answers waited: the acks are applied and
// the leases granted, and the state is as durable as the flush timer makes
// it.
func (p *Actor) writeThrough(ctx actor.Context) {
	p.writeQueued = false
	p.flush()
	p.answerHeld(ctx)
}

func (p *Actor) answerHeld(ctx actor.Context) {
	for _, a := range p.held {
		ctx.Send(a.to, a.res)
	}
	clear(p.held)
	p.held = p.held[:0]
}

// scheduleFlush arms the consumer-position timer once per interval: an idle
// partition costs no timer, and a busy one at most one write per interval.
func (p *Actor) scheduleFlush(ctx actor.Context) {
	if !p.dirty || p.flushScheduled {
		return
	}
	p.flushScheduled = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	p.clock.AfterFunc(p.deps.Config.ConsumerFlushInterval, func() { root.Send(self, flushConsumerState{}) })
}

// flush writes the consumer state if an ack or nack changed it. The timer
// calls it (flushConsumerState), and so do writeThrough and close.
func (p *Actor) flush() {
	if !p.dirty || p.log == nil {
		return
	}
	p.dirty = false
	frontier, ahead := p.table.state()
	p.recent = p.acks.newest(p.recent[:0], p.deps.Config.AckMemoryPersistedMax)
	p.leases = p.table.leasesOut(p.leases[:0], p.clock.Now(), p.deps.Config.LeasePersistedMax)
	p.committer.Update(storage.ConsumerState{Frontier: frontier, AckedAhead: ahead, Recent: p.recent, Leases: p.leases})
	if _, err := p.committer.Flush(p.records.Now()); err != nil {
		p.deps.Logger.Error("write consumer state", "partition", p.name, "err", err)
		p.dirty = true
	}
}

func (p *Actor) stats() *messages.PartitionStats {
	st := &messages.PartitionStats{Index: p.key.Partition}
	if p.log == nil {
		return st
	}
	ls, err := p.log.List(p.records.Now())
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
	st.Cursors = p.cursorOffsets()
	return st
}

func (p *Actor) retain(m *messages.Retain) {
	if p.log == nil || m.MaxAge <= 0 {
		return
	}
	if _, err := p.log.Retain(p.records.Now(), m.MaxAge, 0); err != nil {
		p.deps.Logger.Error("retention", "partition", p.name, "err", err)
	}
}

package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// dispatch hands the dispatcher a record that is durable in the ingress WAL.
type dispatch struct {
	rec storage.WALRecord
}

// dispatchTick is the dispatcher's own timer: retry held commits, compact
// the WAL.
type dispatchTick struct{}

// commitDone is the outcome of one commit request, delivered back to the
// dispatcher in its own context.
type commitDone struct {
	key   messages.PartitionKey
	batch []storage.WALRecord
	res   *messages.CommitResult
	err   error
}

// partitionQueue holds the records accepted for one partition that are not
// committed yet. Up to MaxCommitsInFlight commits per partition are in
// flight: the partition writes the next batch together with the previous
// batch's commit frame, so a busy partition pays one fsync per batch, and
// whatever queues meanwhile is the next group commit.
type partitionQueue struct {
	recs     []storage.WALRecord // waiting to be sent, oldest first
	inFlight int
	// hold is set after a refused commit: nothing is sent until the next
	// tick, so a frozen or failed partition is retried about once a second.
	hold bool
	// failingSince is when commits to this partition started failing
	// without a success since; zero while they succeed.
	failingSince time.Time
}

// dispatcherActor commits every record of the ingress WAL at its
// partition's owner, retrying about once a second until it is committed,
// and only then releases it from the WAL.
type dispatcherActor struct {
	deps
	store *metastore.Store
	wal   *storage.WAL
	// ask sends a request to a partition's owner, here or on a peer.
	ask func(context.Context, messages.PartitionKey, any) (any, error)
	// isLocal reports whether this node owns a partition.
	isLocal func(messages.PartitionKey) bool
	// sibling names a partition of the same topic, other than k, whose
	// owner is alive; false when there is none.
	sibling func(messages.PartitionKey) (messages.PartitionKey, bool)
	// ownerOf reads a partition's owner from the local replica.
	ownerOf func(messages.PartitionKey) string
	// reported are the owners a backlog gauge was set for.
	reported map[string]bool
	queues   map[messages.PartitionKey]*partitionQueue
}

const dispatcherName = "dispatcher"

func (d *dispatcherActor) Receive(ctx actor.Context) {
	defer logPanic(d.deps.log, dispatcherName)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d.queues = map[messages.PartitionKey]*partitionQueue{}
		d.replay(ctx)
		d.scheduleTick(ctx)
	case *dispatch:
		d.enqueue(ctx, m.rec)
	case *commitDone:
		d.done(ctx, m)
	case dispatchTick:
		d.tick(ctx)
	case *actor.Stopping:
		// Persist what was released, so a graceful restart replays nothing
		// that is already committed.
		if err := d.wal.Compact(); err != nil {
			d.deps.log.Error("compact ingress WAL at stop", "err", err)
		}
	}
}

// replay queues every record the WAL still holds from before a restart.
func (d *dispatcherActor) replay(ctx actor.Context) {
	stats, err := d.wal.Replay(func(r storage.WALRecord) error {
		d.enqueue(ctx, r)
		return nil
	})
	if err != nil {
		// The WAL is the only copy of acknowledged records: do not serve
		// without it. The supervisor's failure stops the node's dispatch.
		panic(err)
	}
	if stats.Records > 0 || stats.Corrupt > 0 {
		d.deps.log.Info("ingress WAL replayed", "records", stats.Records, "corrupt_regions", stats.Corrupt, "lost", stats.Lost)
	}
	if stats.Corrupt > 0 || stats.Lost > 0 {
		d.deps.log.Error("ingress WAL had damaged records", "corrupt_regions", stats.Corrupt, "lost", stats.Lost)
	}
}

func (d *dispatcherActor) keyOf(r storage.WALRecord) (messages.PartitionKey, bool) {
	t, ok := d.store.Topic(r.Topic)
	if !ok || int(r.Partition) >= t.Partitions || r.Partition < 0 {
		return messages.PartitionKey{}, false
	}
	return messages.PartitionKey{Topic: r.Topic, Incarnation: t.Incarnation, Partition: int(r.Partition)}, true
}

func (d *dispatcherActor) enqueue(ctx actor.Context, r storage.WALRecord) {
	k, ok := d.keyOf(r)
	if !ok {
		// The topic was deleted after the produce: nobody can commit it.
		d.deps.log.Warn("dropping a record of a deleted topic", "topic", r.Topic, "seq", r.Seq)
		d.release(r.Seq)
		return
	}
	q := d.queues[k]
	if q == nil {
		q = &partitionQueue{}
		d.queues[k] = q
	}
	q.recs = append(q.recs, r)
	d.send(ctx, k, q)
}

// send starts commits of what queued for k while fewer than
// MaxCommitsInFlight are in flight.
func (d *dispatcherActor) send(ctx actor.Context, k messages.PartitionKey, q *partitionQueue) {
	for !q.hold && q.inFlight < d.maxInFlight(k) && len(q.recs) > 0 {
		n, bytes := 0, 0
		for n < len(q.recs) && n < d.cfg.MaxCommitBatchRecords {
			size := len(q.recs[n].Key) + len(q.recs[n].Body) + recordOverheadBytes
			if n > 0 && bytes+size > d.cfg.MaxCommitBatchBytes {
				break
			}
			bytes += size
			n++
		}
		batch := q.recs[:n:n]
		q.recs = q.recs[n:]
		c := &messages.Commit{Key: k, Records: make([]messages.CommitRecord, n)}
		for i, r := range batch {
			c.Records[i] = messages.CommitRecord{Seq: r.Seq, Key: r.Key, Body: r.Body}
		}
		q.inFlight++
		if d.isLocal(k) {
			// Sent now, from this actor, so batches reach the partition's
			// mailbox in order.
			f := ctx.RequestFuture(partitionPID(ctx.ActorSystem(), k), c, d.cfg.RequestTimeout)
			ctx.ReenterAfter(f, func(res interface{}, err error) {
				r, _ := res.(*messages.CommitResult)
				d.done(ctx, &commitDone{key: k, batch: batch, res: r, err: err})
			})
			continue
		}
		// A peer owns it: the request runs on its own goroutine (bounded by
		// RequestTimeout) and reports back here.
		self, root, ask := ctx.Self(), ctx.ActorSystem().Root, d.ask
		go func() {
			res, err := ask(context.Background(), k, c)
			r, _ := res.(*messages.CommitResult)
			root.Send(self, &commitDone{key: k, batch: batch, res: r, err: err})
		}()
	}
}

// maxInFlight is MaxCommitsInFlight for a partition owned here, where the
// mailbox keeps batches in order; one for a peer's, since two requests on
// their own goroutines could arrive in either order.
func (d *dispatcherActor) maxInFlight(k messages.PartitionKey) int {
	if d.isLocal(k) {
		return d.cfg.MaxCommitsInFlight
	}
	return 1
}

// done releases a committed batch from the WAL and sends more. A refused
// or unanswered commit goes back to the front of the queue and waits for
// the next tick: its outcome may be unknown (a timeout), and committing it
// again is at-least-once.
func (d *dispatcherActor) done(ctx actor.Context, m *commitDone) {
	q := d.queues[m.key]
	if q == nil {
		return
	}
	q.inFlight--
	if m.err != nil || m.res == nil || m.res.Status != messages.StatusOK {
		q.recs = append(append([]storage.WALRecord(nil), m.batch...), q.recs...)
		q.hold = true
		if q.failingSince.IsZero() {
			q.failingSince = time.Now()
		}
		return
	}
	q.failingSince = time.Time{}
	for _, r := range m.batch {
		d.release(r.Seq)
	}
	if len(q.recs) == 0 && q.inFlight == 0 {
		delete(d.queues, m.key)
		return
	}
	d.send(ctx, m.key, q)
}

func (d *dispatcherActor) release(seq uint64) {
	if err := d.wal.MarkCommitted(seq); err != nil {
		d.deps.log.Error("release WAL record", "seq", seq, "err", err)
	}
}

func (d *dispatcherActor) tick(ctx actor.Context) {
	for k, q := range d.queues {
		if t, ok := d.store.Topic(k.Topic); (!ok || t.Incarnation != k.Incarnation) && q.inFlight == 0 {
			for _, r := range q.recs {
				d.release(r.Seq)
			}
			delete(d.queues, k)
			continue
		}
		if d.reroute(ctx, k, q) {
			continue
		}
		q.hold = false
		d.send(ctx, k, q)
	}
	if err := d.wal.Compact(); err != nil {
		d.deps.log.Error("compact ingress WAL", "err", err)
	}
	d.reportBacklog()
	d.scheduleTick(ctx)
}

// reportBacklog sets, once a tick, how many records wait for each owner
// node; an owner with nothing waiting reads 0 rather than vanishing.
func (d *dispatcherActor) reportBacklog() {
	held := map[string]int{}
	for k, q := range d.queues {
		held[d.ownerOf(k)] += len(q.recs)
	}
	if d.reported == nil {
		d.reported = map[string]bool{}
	}
	for owner := range d.reported {
		if _, ok := held[owner]; !ok {
			held[owner] = 0
		}
	}
	for owner, n := range held {
		d.reported[owner] = true
		d.metrics.dispatcherBacklog(owner, n)
	}
}

// reroute sends what a partition holds to a live sibling partition once
// its commits have failed for RerouteGrace (its owner is down, or the
// partition is frozen for longer than a hand-off should take): accepted
// records keep flowing, at the price of their key's order (rule K3). A
// commit in flight is waited for: its outcome may still come.
func (d *dispatcherActor) reroute(ctx actor.Context, k messages.PartitionKey, q *partitionQueue) bool {
	if q.inFlight > 0 || q.failingSince.IsZero() || time.Since(q.failingSince) < d.cfg.RerouteGrace || len(q.recs) == 0 {
		return false
	}
	to, ok := d.sibling(k)
	if !ok {
		return false
	}
	d.deps.log.Warn("rerouting held records to a live sibling partition", "topic", k.Topic, "from", k.Partition, "to", to.Partition, "records", len(q.recs), "failing_for", time.Since(q.failingSince))
	recs := q.recs
	delete(d.queues, k)
	for _, r := range recs {
		r.Partition = int32(to.Partition)
		d.enqueue(ctx, r)
	}
	return true
}

func (d *dispatcherActor) scheduleTick(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(d.cfg.CommitRetryInterval, func() { root.Send(self, dispatchTick{}) })
}

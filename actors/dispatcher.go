package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/cluster/transport"
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
	key messages.PartitionKey
	// owner is the node the commit was sent to, as the replica read when
	// it was sent.
	owner string
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
	// frozenSince is when the partition started answering StatusFrozen,
	// with no other answer since; zero otherwise. Only a freeze that
	// outlasts RerouteGrace, or a dead owner, sends the records to a
	// sibling (rule K3): any other failure waits for the partition.
	frozenSince time.Time
	// tooLarge: the last commit exceeded the NATS max payload (the server
	// shrank since the node's start check). It fails the same way at every
	// partition, so the records wait here; tooLargeLogged says the error
	// was logged for this queue.
	tooLarge, tooLargeLogged bool
	// unknown are the records a commit of unknown outcome carried (a
	// timeout, not a refusal), each with the node it went to: that node
	// may still commit them, so they are never rerouted to a sibling while
	// it is a member of the cluster, dead or not (issue 15: a paused owner
	// marked dead commits the originals when it wakes). Only their commit
	// clears an entry: a later refusal says nothing of the earlier
	// attempt. At most one entry per record in recs or in flight.
	unknown map[uint64]string
	// unknownLogged says a withheld reroute was logged for this queue.
	unknownLogged bool
}

// owners is how the dispatcher reaches the owners of partitions (*router).
type owners interface {
	// ask sends a request to a partition's owner, here or on a peer.
	ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
	// isLocal reports whether this node serves a partition itself.
	isLocal(k messages.PartitionKey) bool
	// ownerOf reads a partition's owner from the local replica.
	ownerOf(k messages.PartitionKey) string
	// sibling names a partition of the same topic, other than k, whose
	// owner is alive; false when there is none.
	sibling(k messages.PartitionKey) (messages.PartitionKey, bool)
}

// dispatcherActor commits every record of the ingress WAL at its
// partition's owner, retrying about once a second until it is committed,
// and only then releases it from the WAL.
type dispatcherActor struct {
	deps
	store  replica
	wal    *storage.WAL
	owners owners
	// reported are the owners a backlog gauge was set for.
	reported map[string]bool
	// dropWarned are the topic incarnations whose dropped records were
	// logged, so a deleted topic's backlog is one warning, not one per
	// record; at most maxDropWarned, then forgotten (a repeated warning
	// costs less than a set that grows with every delete).
	dropWarned map[topicIncarnation]bool
	queues     map[messages.PartitionKey]*partitionQueue
	// clock is when retries and the reroute grace fall due.
	clock clock
	// remote are the commits in flight to peers, each on its own goroutine
	// bounded by RequestTimeout (router.ask), which releases what its
	// owner committed itself; the actor waits for them as it stops.
	remote sync.WaitGroup
	// local are the commits in flight to partitions of this node, whose
	// futures the actor waits for as it stops (their continuations never
	// run once it stopped).
	local map[*actor.Future]*commitDone
}

const dispatcherName = "dispatcher"

// maxDropWarned bounds dispatcherActor.dropWarned. It is no knob: past it a
// warning is logged again, nothing else changes.
const maxDropWarned = 1024

// topicIncarnation names one life of a topic; incarnation 0 is a record
// that does not know its own (written by an older node).
type topicIncarnation struct {
	topic       string
	incarnation uint64
}

// Why the dispatcher drops a record instead of committing it, the reason
// label of narad_wal_records_dropped_total.
const (
	// dropTopicDeleted: the topic incarnation the produce was validated
	// against is gone (deleted, perhaps recreated under the same name).
	dropTopicDeleted = "topic_deleted"
	// dropNoPartition: the incarnation is current but has no such
	// partition. Partitions never shrink, so only an older node's record
	// (incarnation 0) of a topic recreated with fewer partitions gets here.
	dropNoPartition = "no_partition"
)

func (d *dispatcherActor) Receive(ctx actor.Context) {
	defer logPanic(d.deps.log, dispatcherName)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d.clock = d.cfg.clockOrWall()
		d.queues = map[messages.PartitionKey]*partitionQueue{}
		d.local = map[*actor.Future]*commitDone{}
		d.replay(ctx)
		d.scheduleTick(ctx)
	case *dispatch:
		d.enqueue(ctx, m.rec)
	case *commitDone:
		d.done(ctx, m)
	case dispatchTick:
		d.tick(ctx)
	case *actor.Stopping:
		// A commit in flight is waited for, not cancelled (each is bounded
		// by RequestTimeout): one whose outcome was dropped here would be
		// replayed at the next start although committed, a duplicate after
		// a clean stop. What is not committed stays in the WAL.
		d.awaitLocal()
		d.remote.Wait()
		// Persist what was released, so a graceful restart replays nothing
		// that is already committed.
		if err := d.wal.Compact(); err != nil {
			d.deps.log.Error("compact ingress WAL at stop", "err", err)
		}
	}
}

// awaitLocal waits for the local commits in flight and releases what they
// committed.
func (d *dispatcherActor) awaitLocal() {
	for f, m := range d.local {
		res, err := f.Result()
		if r, _ := res.(*messages.CommitResult); err == nil && r != nil && r.Status == messages.StatusOK {
			d.releaseAll(m.batch)
		}
		delete(d.local, f)
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

// keyOf is the partition r commits to: its own topic incarnation's, never
// another's. A record with incarnation 0 predates incarnations in the WAL
// and takes the topic's current one. The reason is "" when there is one.
func (d *dispatcherActor) keyOf(r storage.WALRecord) (messages.PartitionKey, string) {
	t, ok := d.store.Topic(r.Topic)
	switch {
	case !ok, r.Incarnation != 0 && r.Incarnation != t.Incarnation:
		return messages.PartitionKey{}, dropTopicDeleted
	case int(r.Partition) >= t.Partitions, r.Partition < 0:
		return messages.PartitionKey{}, dropNoPartition
	}
	return messages.PartitionKey{Topic: r.Topic, Incarnation: t.Incarnation, Partition: int(r.Partition)}, ""
}

func (d *dispatcherActor) enqueue(ctx actor.Context, r storage.WALRecord) {
	k, why := d.keyOf(r)
	if why != "" {
		// Nobody may commit it: the contract deletes a topic's data with
		// it, and a recreated topic starts empty.
		d.drop(topicIncarnation{r.Topic, r.Incarnation}, why, []storage.WALRecord{r})
		return
	}
	// Pinned, so a record that took the current incarnation (one an older
	// node wrote) keeps it through retries and reroutes.
	r.Incarnation = k.Incarnation
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
	local := d.owners.isLocal(k)
	limit := d.cfg.MaxCommitBatchBytes
	if !local {
		// A peer's commit crosses NATS as one message, which the node
		// checked at start that the server carries at this size.
		limit = min(limit, d.cfg.MaxRemoteCommitBytes)
	}
	for !q.hold && q.inFlight < d.maxInFlight(k) && len(q.recs) > 0 {
		n, bytes := 0, 0
		for n < len(q.recs) && n < d.cfg.MaxCommitBatchRecords {
			size := len(q.recs[n].Key) + len(q.recs[n].Body) + recordOverheadBytes
			if n > 0 && bytes+size > limit {
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
		owner := d.owners.ownerOf(k)
		if local {
			// Sent now, from this actor, so batches reach the partition's
			// mailbox in order. A commit still in the mailbox (a partition
			// waiting for its open) when the future times out would land
			// beside its retry: the partition refuses it past NotAfter.
			now := time.Now()
			c.NotAfter = messages.CommitDeadline(now, now.Add(d.cfg.RequestTimeout))
			f := ctx.RequestFuture(partition.PID(ctx.ActorSystem(), k), c, d.cfg.RequestTimeout)
			d.local[f] = &commitDone{key: k, owner: owner, batch: batch}
			ctx.ReenterAfter(f, func(res interface{}, err error) {
				delete(d.local, f)
				r, _ := res.(*messages.CommitResult)
				d.done(ctx, &commitDone{key: k, owner: owner, batch: batch, res: r, err: err})
			})
			continue
		}
		// A peer owns it: the request runs on its own goroutine (bounded by
		// RequestTimeout) and reports back here.
		self, root, ask := ctx.Self(), ctx.ActorSystem().Root, d.owners.ask
		d.remote.Go(func() {
			res, err := ask(context.Background(), k, c)
			r, _ := res.(*messages.CommitResult)
			if err == nil && r != nil && r.Status == messages.StatusOK {
				// Here, not only in done: a stopping actor reads no more
				// messages, and this outcome must not be lost with them.
				d.releaseAll(batch)
			}
			root.Send(self, &commitDone{key: k, owner: owner, batch: batch, res: r, err: err})
		})
	}
}

// maxInFlight is MaxCommitsInFlight for a partition owned here, where the
// mailbox keeps batches in order; one for a peer's, since two requests on
// their own goroutines could arrive in either order.
func (d *dispatcherActor) maxInFlight(k messages.PartitionKey) int {
	if d.owners.isLocal(k) {
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
		d.failed(m, q, d.clock.Now())
		return
	}
	q.failingSince, q.frozenSince, q.tooLarge = time.Time{}, time.Time{}, false
	for _, r := range m.batch {
		d.release(r.Seq)
		delete(q.unknown, r.Seq)
	}
	if len(q.recs) == 0 && q.inFlight == 0 {
		delete(d.queues, m.key)
		return
	}
	d.send(ctx, m.key, q)
}

// failed records why a commit failed, which decides whether its records
// may ever leave their partition (reroute).
func (d *dispatcherActor) failed(m *commitDone, q *partitionQueue, now time.Time) {
	if q.failingSince.IsZero() {
		q.failingSince = now
	}
	if outcomeUnknown(m) {
		if q.unknown == nil {
			q.unknown = map[uint64]string{}
		}
		for _, r := range m.batch {
			q.unknown[r.Seq] = m.owner
		}
	}
	if m.err == nil && m.res != nil && m.res.Status == messages.StatusFrozen {
		if q.frozenSince.IsZero() {
			q.frozenSince = now
		}
	} else {
		q.frozenSince = time.Time{}
	}
	q.tooLarge = errors.Is(m.err, transport.ErrTooLarge)
	if !q.tooLarge {
		return
	}
	d.metrics.commitsTooLarge.Inc()
	if !q.tooLargeLogged {
		q.tooLargeLogged = true
		d.deps.log.Error("commit exceeds the NATS max payload: holding its records until it fits",
			"topic", m.key.Topic, "partition", m.key.Partition, "owner", d.owners.ownerOf(m.key), "records", len(m.batch), "err", m.err)
	}
}

// outcomeUnknown reports whether a failed commit may still have been, or
// may yet be, committed by the node it went to: anything but an answer of
// the partition or an error proving the request was not processed (no
// responders, not connected, too large to send, a 503 refusal, no actor to
// deliver it to). A timeout, a cancelled request, any other remote error,
// and an answer of the wrong type are unknown.
func outcomeUnknown(m *commitDone) bool {
	if m.err == nil {
		return m.res == nil
	}
	return !transport.NotProcessed(m.err) && !errors.Is(m.err, actor.ErrDeadLetter)
}

// drop releases records that will never be committed, as if committed, so
// the WAL's watermark passes them; counted, and logged once per topic
// incarnation.
func (d *dispatcherActor) drop(ti topicIncarnation, why string, recs []storage.WALRecord) {
	for _, r := range recs {
		d.release(r.Seq)
	}
	d.metrics.walRecordsDropped(why, len(recs))
	if d.dropWarned[ti] {
		return
	}
	if d.dropWarned == nil || len(d.dropWarned) >= maxDropWarned {
		d.dropWarned = map[topicIncarnation]bool{}
	}
	d.dropWarned[ti] = true
	d.deps.log.Warn("dropping ingress WAL records: their topic incarnation is gone or has no such partition",
		"topic", ti.topic, "incarnation", ti.incarnation, "reason", why, "records", len(recs), "first_seq", recs[0].Seq)
}

// releaseAll releases a committed batch. It only calls the WAL, so a
// commit's goroutine may call it too; releasing twice is harmless.
func (d *dispatcherActor) releaseAll(batch []storage.WALRecord) {
	for _, r := range batch {
		d.release(r.Seq)
	}
}

func (d *dispatcherActor) release(seq uint64) {
	if err := d.wal.MarkCommitted(seq); err != nil {
		d.deps.log.Error("release WAL record", "seq", seq, "err", err)
	}
}

func (d *dispatcherActor) tick(ctx actor.Context) {
	for k, q := range d.queues {
		// A queue outlives its topic incarnation when the delete came after
		// the enqueue; its owner refuses commits (no actor of that
		// incarnation: 503), and a reroute would find no sibling. A commit
		// in flight is waited for: it may land in the old incarnation,
		// never a newer one (the partition actors are named by it).
		if t, ok := d.store.Topic(k.Topic); (!ok || t.Incarnation != k.Incarnation) && q.inFlight == 0 {
			if len(q.recs) > 0 {
				d.drop(topicIncarnation{k.Topic, k.Incarnation}, dropTopicDeleted, q.recs)
			}
			delete(d.queues, k)
			continue
		}
		if d.reroute(ctx, k, q) || d.awaitsOwner(k, q) {
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
	held, unknown := map[string]int{}, map[string]int{}
	for k, q := range d.queues {
		held[d.owners.ownerOf(k)] += len(q.recs)
		for _, node := range q.unknown {
			unknown[node]++
		}
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
		d.setUnknownOutcome(owner, unknown[owner])
	}
	for node, n := range unknown {
		if _, ok := held[node]; !ok {
			d.reported[node] = true
			d.setUnknownOutcome(node, n)
		}
	}
}

// setUnknownOutcome sets narad_dispatcher_unknown_outcome_records: records
// whose commit to node has an unknown outcome, which wait for that node to
// answer or leave the cluster and are never rerouted meanwhile. An alert
// on it staying above 0 with the node dead says: remove the node (or
// bring it back) to release them.
func (d *dispatcherActor) setUnknownOutcome(node string, records int) {
	if node == "" {
		node = "unassigned"
	}
	d.metrics.set.GetOrCreateGauge(fmt.Sprintf(`narad_dispatcher_unknown_outcome_records{node=%q,destination=%q}`, d.metrics.node, node), nil).Set(float64(records))
}

// reroute sends what a partition holds to a live sibling partition, at the
// price of its key's order (rule K3), only when the partition will not take
// it soon: its owner is dead or gone (after RerouteGrace of failed commits),
// or it has answered frozen for RerouteGrace (a hand-off's freeze is far
// shorter). Any other failure (a paused owner, a timeout, a refusal, a
// commit too large to send) keeps the records waiting for their partition,
// so a partition a producer named is never overridden because a send
// failed. A commit in flight is waited for: its outcome may still come.
// Records a commit of unknown outcome carried stay even then, while the
// node it went to is a member (splitUnknown); it returns false while any
// stay, so they are retried at their partition.
func (d *dispatcherActor) reroute(ctx actor.Context, k messages.PartitionKey, q *partitionQueue) bool {
	if q.inFlight > 0 || q.failingSince.IsZero() || len(q.recs) == 0 || q.tooLarge {
		return false
	}
	now := d.clock.Now()
	why := ""
	switch {
	case !q.frozenSince.IsZero() && now.Sub(q.frozenSince) >= d.cfg.RerouteGrace:
		why = "frozen"
	case now.Sub(q.failingSince) >= d.cfg.RerouteGrace && d.ownerDead(k):
		why = "owner dead"
	default:
		return false
	}
	to, ok := d.owners.sibling(k)
	if !ok {
		return false
	}
	movable, pinned := d.splitUnknown(q)
	d.warnPinned(k, q, len(pinned), why)
	if len(movable) == 0 {
		return false
	}
	d.deps.log.Warn("rerouting held records to a live sibling partition", "topic", k.Topic, "from", k.Partition, "to", to.Partition,
		"records", len(movable), "failing_for", now.Sub(q.failingSince), "why", why, "owner", d.owners.ownerOf(k))
	if len(pinned) > 0 {
		q.recs = pinned
	} else {
		delete(d.queues, k)
	}
	for _, r := range movable {
		delete(q.unknown, r.Seq)
		r.Partition = int32(to.Partition)
		d.enqueue(ctx, r)
	}
	// Pinned records stay and are retried at their partition this tick.
	return len(pinned) == 0
}

// awaitsOwner reports whether q holds records of a commit of unknown
// outcome while its partition's owner reads dead: then nothing is resent
// until the owner reads alive again (or another node owns the partition,
// or the node is removed and reroute moves them). A paused owner reads
// every request queued for it when it wakes, so each resend meanwhile
// would be one more copy in the partition.
func (d *dispatcherActor) awaitsOwner(k messages.PartitionKey, q *partitionQueue) bool {
	if len(q.unknown) == 0 || !d.ownerDead(k) {
		return false
	}
	_, pinned := d.splitUnknown(q)
	d.warnPinned(k, q, len(pinned), "owner dead")
	return len(pinned) > 0
}

// warnPinned logs, once per queue, that records of a commit of unknown
// outcome are held for their owner; what an operator does about it.
func (d *dispatcherActor) warnPinned(k messages.PartitionKey, q *partitionQueue, pinned int, why string) {
	if pinned == 0 || q.unknownLogged {
		return
	}
	q.unknownLogged = true
	d.deps.log.Warn("holding records whose commit has an unknown outcome: their owner may still commit them, so they wait for it to answer or to be removed from the cluster",
		"topic", k.Topic, "partition", k.Partition, "records", pinned, "owner", d.owners.ownerOf(k), "why", why)
}

// splitUnknown parts q's records into those a sibling may take and those
// pinned to their partition: a commit of unknown outcome went to a node
// that is still a member (alive, paused or marked dead), which may commit
// them yet. Once that node is removed from the cluster it commits nothing
// the cluster sees, and its records move on.
func (d *dispatcherActor) splitUnknown(q *partitionQueue) (movable, pinned []storage.WALRecord) {
	for _, r := range q.recs {
		node, ok := q.unknown[r.Seq]
		if ok {
			if _, member := d.store.Member(node); member {
				pinned = append(pinned, r)
				continue
			}
		}
		movable = append(movable, r)
	}
	return movable, pinned
}

// ownerDead reports whether k's owner, as the local replica reads it, is
// dead or gone: no owner, an owner that is no member, or a dead member. A
// paused owner that is not marked dead yet is alive: its commits wait.
func (d *dispatcherActor) ownerDead(k messages.PartitionKey) bool {
	owner := d.owners.ownerOf(k)
	if owner == "" {
		return true
	}
	m, ok := d.store.Member(owner)
	return !ok || m.Status == messages.MemberDead
}

func (d *dispatcherActor) scheduleTick(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	d.clock.AfterFunc(d.cfg.CommitRetryInterval, func() { root.Send(self, dispatchTick{}) })
}

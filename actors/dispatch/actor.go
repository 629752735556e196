package dispatch

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// Name is the dispatcher's actor name under the node's root.
const Name = "dispatcher"

// RecordOverheadBytes is what a dispatcher counts per record on top of its
// key and body: more than a log frame's header, so its byte cap is safe.
const RecordOverheadBytes = 64

// Store is the local replica's reads the dispatcher makes: a record's
// topic incarnation and partitions, and whether an owner is a live member.
type Store interface {
	Topic(name string) (messages.Topic, bool)
	Member(id string) (messages.Member, bool)
}

// Owners is how the dispatcher reaches the owners of partitions (the
// node's router, its commits to a peer carried in commit groups).
type Owners interface {
	// Ask sends a request to a partition's owner, here or on a peer.
	Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
	// IsLocal reports whether this node serves a partition itself.
	IsLocal(k messages.PartitionKey) bool
	// OwnerOf reads a partition's owner from the local replica.
	OwnerOf(k messages.PartitionKey) string
	// Sibling names a partition of the same topic, other than k, whose
	// owner is alive; false when there is none.
	Sibling(k messages.PartitionKey) (messages.PartitionKey, bool)
}

// WAL is the node's ingress WAL as the dispatcher uses it (*storage.WAL):
// it replays it at start, releases what was committed, and compacts it.
type WAL interface {
	Replay(fn func(storage.WALRecord) error) (storage.WALReplayStats, error)
	MarkCommitted(seq uint64) error
	Compact() error
	// Origin names the record seq for its partition: the WAL life that
	// handed the seq out, and the seq.
	Origin(seq uint64) storage.Origin
}

// Deps is what the dispatcher needs of its node. Every field is set by the
// node before the spawn and only read afterwards.
type Deps struct {
	Config Config
	// RequestTimeout bounds one commit, to a local partition or a peer's.
	RequestTimeout time.Duration
	// MaxCommitBatchBytes and MaxRemoteCommitBytes cap one commit, to any
	// partition and to a peer's (the lower applies); the node's check of
	// its NATS server's max payload reads them too, so they stay in the
	// node's flat configuration.
	MaxCommitBatchBytes, MaxRemoteCommitBytes int
	Logger                                    *slog.Logger
	Store                                     Store
	Owners                                    Owners
	WAL                                       WAL
	// PartitionPID names the local actor of a partition this node serves.
	PartitionPID func(system *actor.ActorSystem, k messages.PartitionKey) *actor.PID
	// Doors are the local partitions' doors (partition.Running): each
	// local commit is counted in through its partition's, so the partition
	// does not rest under it, and one at rest is woken (Wake) before its
	// commits are sent. Nil sends to PartitionPID as is.
	Doors Doors
	// Clock times the retries and the reroute grace: the node clock
	// (actors/clock), a fake in tests. Steady sets a local commit its
	// NotAfter, which the partition checks on the same clock
	// (partition.Deps.Steady). Nil is the wall clock, for each.
	Clock, Steady clock.Clock
	Metrics       Metrics
	Knobs         Knobs
}

// Doors is what the dispatcher uses of the partitions' doors.
type Doors interface {
	// Enter counts a request in through k's door; leave counts it out
	// once answered. ok is false when the partition rests, or has no
	// actor here.
	Enter(k messages.PartitionKey) (leave func(), ok bool)
	// Resting reports whether k rests: a commit to it waits for a wake.
	// A partition with no door has no actor here: the commit goes to its
	// address as ever, a dead letter retried at the next tick.
	Resting(k messages.PartitionKey) bool
	// Wake is whom to ask to wake k, and the message that asks: its
	// answer, whatever it is, means the door was opened or will not be.
	Wake(system *actor.ActorSystem, k messages.PartitionKey) (*actor.PID, any)
}

// Knobs are a test's hooks into the dispatcher; zero in production.
type Knobs struct {
	// Handled is called once the outcome of a commit was handled (its
	// records released or queued again). A test on a fake clock waits for
	// it before moving the clock, so a tick never lands before the answer
	// it should retry.
	Handled func()
}

// partitionQueue holds the records accepted for one partition that are not
// committed yet. Up to MaxCommitsInFlight commits per partition are in
// flight: the partition stashes the second while the first syncs and
// writes it, with whatever else queued meanwhile, as its next group commit.
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
	// waking: a local partition's door was closed and its wake is on its
	// way; nothing is sent until it answers. woken: it answered, so a
	// door still closed is not woken again: the commit goes to the actor's
	// address, and a partition not served here refuses it as before.
	waking, woken bool
}

// Actor commits every record of the ingress WAL at its partition's owner,
// retrying about once a second until it is committed, and only then
// releases it from the WAL.
type Actor struct {
	deps Deps
	// reported are the owners a backlog gauge was set for.
	reported map[string]bool
	// dropWarned are the topic incarnations whose dropped records were
	// logged, so a deleted topic's backlog is one warning, not one per
	// record; at most maxDropWarned, then forgotten (a repeated warning
	// costs less than a set that grows with every delete).
	dropWarned map[topicIncarnation]bool
	queues     map[messages.PartitionKey]*partitionQueue
	// clock is when retries and the reroute grace fall due; steady is
	// Deps.Steady or the wall.
	clock, steady clock.Clock
	// remote are the commits in flight to peers, each on its own goroutine
	// bounded by RequestTimeout (Owners.Ask), which releases what its
	// owner committed itself; the actor waits for them as it stops.
	remote sync.WaitGroup
	// local are the commits in flight to partitions of this node, whose
	// futures the actor waits for as it stops (their continuations never
	// run once it stopped).
	local map[*actor.Future]*commitDone
	// replayedTo is the highest WAL sequence the start's replay enqueued.
	// A produce appended while the replay ran is read by it and also sent
	// as a Record, queued behind Started: that Record is skipped, or the
	// record would be committed twice.
	replayedTo uint64
}

// New is a dispatcher over deps; it replays the WAL once started.
func New(deps Deps) *Actor { return &Actor{deps: deps} }

// maxDropWarned bounds Actor.dropWarned. It is no knob: past it a
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
	// DropTopicDeleted: the topic incarnation the produce was validated
	// against is gone (deleted, perhaps recreated under the same name).
	DropTopicDeleted = "topic_deleted"
	// DropNoPartition: the incarnation is current but has no such
	// partition. Partitions never shrink, so only an older node's record
	// (incarnation 0) of a topic recreated with fewer partitions gets here.
	DropNoPartition = "no_partition"
)

func (d *Actor) Receive(ctx actor.Context) {
	defer supervise.LogPanic(d.deps.Logger, Name)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		d.clock, d.steady = clock.Or(d.deps.Clock), clock.Or(d.deps.Steady)
		d.queues = map[messages.PartitionKey]*partitionQueue{}
		d.local = map[*actor.Future]*commitDone{}
		d.replay(ctx)
		d.scheduleTick(ctx)
	case *Record:
		if m.Rec.Seq > d.replayedTo {
			d.enqueue(ctx, m.Rec)
		}
	case *Records:
		for _, r := range m.Recs {
			if r.Seq > d.replayedTo {
				d.enqueue(ctx, r)
			}
		}
	case *commitDone:
		d.handled(ctx, m)
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
		if err := d.deps.WAL.Compact(); err != nil {
			d.deps.Logger.Error("compact ingress WAL at stop", "err", err)
		}
	}
}

// awaitLocal waits for the local commits in flight and releases what they
// committed.
func (d *Actor) awaitLocal() {
	for f, m := range d.local {
		res, err := f.Result()
		if r, _ := res.(*messages.CommitResult); err == nil && r != nil && r.Status == messages.StatusOK {
			d.releaseAll(m.batch)
		}
		delete(d.local, f)
	}
}

// replay queues every record the WAL still holds from before a restart.
func (d *Actor) replay(ctx actor.Context) {
	stats, err := d.deps.WAL.Replay(func(r storage.WALRecord) error {
		// Before the enqueue, which may send it at once: it is one that
		// may be committed already (maybeCommitted).
		d.replayedTo = max(d.replayedTo, r.Seq)
		d.enqueue(ctx, r)
		return nil
	})
	if err != nil {
		// The WAL is the only copy of acknowledged records: do not serve
		// without it. The supervisor's failure stops the node's dispatch.
		panic(err)
	}
	if stats.Records > 0 || stats.Corrupt > 0 {
		d.deps.Logger.Info("ingress WAL replayed", "records", stats.Records, "corrupt_regions", stats.Corrupt, "lost", stats.Lost)
	}
	if stats.Corrupt > 0 || stats.Lost > 0 {
		d.deps.Logger.Error("ingress WAL had damaged records", "corrupt_regions", stats.Corrupt, "lost", stats.Lost)
	}
}

// keyOf is the partition r commits to: its own topic incarnation's, never
// another's. A record with incarnation 0 predates incarnations in the WAL
// and takes the topic's current one. The reason is "" when there is one.
func (d *Actor) keyOf(r storage.WALRecord) (messages.PartitionKey, string) {
	t, ok := d.deps.Store.Topic(r.Topic)
	switch {
	case !ok, r.Incarnation != 0 && r.Incarnation != t.Incarnation:
		return messages.PartitionKey{}, DropTopicDeleted
	case int(r.Partition) >= t.Partitions, r.Partition < 0:
		return messages.PartitionKey{}, DropNoPartition
	}
	return messages.PartitionKey{Topic: r.Topic, Incarnation: t.Incarnation, Partition: int(r.Partition)}, ""
}

func (d *Actor) enqueue(ctx actor.Context, r storage.WALRecord) {
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
func (d *Actor) send(ctx actor.Context, k messages.PartitionKey, q *partitionQueue) {
	local := d.deps.Owners.IsLocal(k)
	limit := d.deps.MaxCommitBatchBytes
	if !local {
		// A peer's commit crosses NATS as one message, which the node
		// checked at start that the server carries at this size.
		limit = min(limit, d.deps.MaxRemoteCommitBytes)
	}
	for !q.hold && q.inFlight < d.maxInFlight(k) && len(q.recs) > 0 {
		leave := func() {}
		if local && d.deps.Doors != nil {
			l, ok := d.deps.Doors.Enter(k)
			if !ok && !q.woken && d.deps.Doors.Resting(k) {
				// At rest: what queued waits, in order, for the wake.
				d.wake(ctx, k, q)
				return
			}
			if ok {
				leave = l
			}
		}
		// One commit names one WAL life: a batch ends where the queue
		// passes from records replayed from an earlier life to this one's.
		life := d.deps.WAL.Origin(q.recs[0].Seq).WAL
		n, bytes := 0, 0
		for n < len(q.recs) && n < d.deps.Config.MaxCommitBatchRecords {
			size := len(q.recs[n].Key) + len(q.recs[n].Body) + RecordOverheadBytes
			if n > 0 && (bytes+size > limit || d.deps.WAL.Origin(q.recs[n].Seq).WAL != life) {
				break
			}
			bytes += size
			n++
		}
		batch := q.recs[:n:n]
		q.recs = q.recs[n:]
		c := &messages.Commit{Key: k, WAL: life, Records: make([]messages.CommitRecord, n)}
		for i, r := range batch {
			c.Records[i] = messages.CommitRecord{Seq: r.Seq, Again: d.maybeCommitted(q, r.Seq), Key: r.Key, Body: r.Body}
		}
		owner := d.deps.Owners.OwnerOf(k)
		q.inFlight++
		if local {
			// Sent now, from this actor, so batches reach the partition's
			// mailbox in order. A commit still in the mailbox (a partition
			// waiting for its open) when the future times out would land
			// beside its retry: the partition refuses it past NotAfter.
			now := d.steady.Now()
			c.NotAfter = messages.CommitDeadline(now, now.Add(d.deps.RequestTimeout))
			f := ctx.RequestFuture(d.deps.PartitionPID(ctx.ActorSystem(), k), c, d.deps.RequestTimeout)
			d.local[f] = &commitDone{key: k, owner: owner, batch: batch}
			ctx.ReenterAfter(f, func(res interface{}, err error) {
				leave()
				delete(d.local, f)
				r, _ := res.(*messages.CommitResult)
				d.handled(ctx, &commitDone{key: k, owner: owner, batch: batch, res: r, err: err})
			})
			continue
		}
		// A peer owns it: the request runs on its own goroutine (bounded by
		// RequestTimeout) and reports back here.
		self, root, ask := ctx.Self(), ctx.ActorSystem().Root, d.deps.Owners.Ask
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

// wake asks the supervisor to wake k, whose door is closed, once at a
// time, and sends what queued for it once the wake answers.
func (d *Actor) wake(ctx actor.Context, k messages.PartitionKey, q *partitionQueue) {
	if q.waking {
		return
	}
	q.waking = true
	pid, msg := d.deps.Doors.Wake(ctx.ActorSystem(), k)
	ctx.ReenterAfter(ctx.RequestFuture(pid, msg, d.deps.RequestTimeout), func(any, error) {
		q.waking = false
		if d.queues[k] != q {
			return // dropped meanwhile (its topic deleted)
		}
		q.woken = true
		d.send(ctx, k, q)
		q.woken = false
	})
}

// maybeCommitted reports whether the record seq may be in its partition
// already: the start's replay read it (its commit may have landed before
// the crash, its release not), or a commit carrying it got no answer. Its
// partition looks these up rather than writing them blindly.
func (d *Actor) maybeCommitted(q *partitionQueue, seq uint64) bool {
	_, unanswered := q.unknown[seq]
	return seq <= d.replayedTo || unanswered
}

// maxInFlight is MaxCommitsInFlight for a partition owned here, where the
// mailbox keeps batches in order; one for a peer's, since two requests on
// their own goroutines could arrive in either order.
func (d *Actor) maxInFlight(k messages.PartitionKey) int {
	if d.deps.Owners.IsLocal(k) {
		return d.deps.Config.MaxCommitsInFlight
	}
	return 1
}

// handled is done, then the Handled knob.
func (d *Actor) handled(ctx actor.Context, m *commitDone) {
	d.done(ctx, m)
	if h := d.deps.Knobs.Handled; h != nil {
		h()
	}
}

// done releases a committed batch from the WAL and sends more. A refused
// or unanswered commit goes back to the front of the queue and waits for
// the next tick: its outcome may be unknown (a timeout), and committing it
// again is at-least-once.
func (d *Actor) done(ctx actor.Context, m *commitDone) {
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
func (d *Actor) failed(m *commitDone, q *partitionQueue, now time.Time) {
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
	d.deps.Metrics.CommitsTooLarge.Inc()
	if !q.tooLargeLogged {
		q.tooLargeLogged = true
		d.deps.Logger.Error("commit exceeds the NATS max payload: holding its records until it fits",
			"topic", m.key.Topic, "partition", m.key.Partition, "owner", d.deps.Owners.OwnerOf(m.key), "records", len(m.batch), "err", m.err)
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
func (d *Actor) drop(ti topicIncarnation, why string, recs []storage.WALRecord) {
	for _, r := range recs {
		d.release(r.Seq)
	}
	d.deps.Metrics.dropped(why, len(recs))
	if d.dropWarned[ti] {
		return
	}
	if d.dropWarned == nil || len(d.dropWarned) >= maxDropWarned {
		d.dropWarned = map[topicIncarnation]bool{}
	}
	d.dropWarned[ti] = true
	d.deps.Logger.Warn("dropping ingress WAL records: their topic incarnation is gone or has no such partition",
		"topic", ti.topic, "incarnation", ti.incarnation, "reason", why, "records", len(recs), "first_seq", recs[0].Seq)
}

// releaseAll releases a committed batch. It only calls the WAL, so a
// commit's goroutine may call it too; releasing twice is harmless.
func (d *Actor) releaseAll(batch []storage.WALRecord) {
	for _, r := range batch {
		d.release(r.Seq)
	}
}

func (d *Actor) release(seq uint64) {
	if err := d.deps.WAL.MarkCommitted(seq); err != nil {
		d.deps.Logger.Error("release WAL record", "seq", seq, "err", err)
	}
}

func (d *Actor) tick(ctx actor.Context) {
	for k, q := range d.queues {
		// A queue outlives its topic incarnation when the delete came after
		// the enqueue; its owner refuses commits (no actor of that
		// incarnation: 503), and a reroute would find no sibling. A commit
		// in flight is waited for: it may land in the old incarnation,
		// never a newer one (the partition actors are named by it).
		if t, ok := d.deps.Store.Topic(k.Topic); (!ok || t.Incarnation != k.Incarnation) && q.inFlight == 0 {
			if len(q.recs) > 0 {
				d.drop(topicIncarnation{k.Topic, k.Incarnation}, DropTopicDeleted, q.recs)
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
	if err := d.deps.WAL.Compact(); err != nil {
		d.deps.Logger.Error("compact ingress WAL", "err", err)
	}
	d.reportBacklog()
	d.scheduleTick(ctx)
}

func (d *Actor) scheduleTick(ctx actor.Context) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	d.clock.AfterFunc(d.deps.Config.CommitRetryInterval, func() { root.Send(self, dispatchTick{}) })
}

package actors

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"syscall"
	"time"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/dispatch"
	"github.com/naradmq/narad/actors/schema"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// maxRequestBytes caps a record's body at what one API request may carry
// (413). The HTTP handler refuses a larger body before Produce sees it;
// the check here holds for any other caller of Produce. A node whose
// Log.MaxBodyBytes is lower refuses such a record at the WAL (400).
const maxRequestBytes = api.MaxBodyBytes

// partitionForKey is the contract's FNV-1a 32 of the key, mod partitions.
func partitionForKey(key string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}

// Admit refuses every produce while this node's member record says it is
// being decommissioned (rule D6): its ingress WAL must only shrink, and
// clients retry on another node.
func (n *Node) Admit() error {
	if n.draining() {
		return fmt.Errorf("produce to %s: %w", n.cfg.NodeID, api.ErrDraining)
	}
	return nil
}

// Produce checks the record against its topic (partition, schema), then
// appends it to the ingress WAL, which returns once it is fsynced (group
// commit across producers), and hands it to the dispatcher. A crash after
// the append replays it from the WAL: duplicates, never a gap.
func (n *Node) Produce(ctx context.Context, rec api.Record) error {
	done, err := n.admitProduce()
	if err != nil {
		return err
	}
	defer done()
	t, wr, err := n.prepareRecord(rec)
	if err != nil {
		return err
	}
	seq, err := n.appendWAL(ctx, wr)
	return n.accepted(t, wr, seq, err, rec)
}

// ProduceBatch is Produce for records of one topic at once: each is
// checked alone, and the ingress WAL makes the ones that pass durable
// together (one group commit, AppendMany). errs[i] is recs[i]'s outcome,
// nil once it is durable. Admission (draining, stopping) refuses the whole
// batch.
func (n *Node) ProduceBatch(ctx context.Context, topic string, recs []api.Record) []error {
	errs := make([]error, len(recs))
	done, err := n.admitProduce()
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	defer done()
	topics := make([]messages.Topic, len(recs))
	wrs := make([]storage.WALRecord, 0, len(recs))
	at := make([]int, 0, len(recs))
	for i, rec := range recs {
		rec.Topic = topic
		var wr storage.WALRecord
		if topics[i], wr, errs[i] = n.prepareRecord(rec); errs[i] == nil {
			wrs = append(wrs, wr)
			at = append(at, i)
		}
	}
	if len(wrs) == 0 {
		return errs
	}
	seqs, werrs := n.appendWALMany(ctx, wrs)
	durable := make([]storage.WALRecord, 0, len(wrs))
	for j, i := range at {
		if errs[i] = n.walOutcome(topics[i], werrs[j]); errs[i] == nil {
			wrs[j].Seq = seqs[j]
			durable = append(durable, wrs[j])
		}
	}
	if len(durable) == 0 {
		return errs
	}
	// One message for the batch: Records takes them in order, as a
	// Record each would.
	n.system.Root.Send(n.dispatcher, &dispatch.Records{Recs: durable})
	t := topics[at[0]]
	if now, ok := n.store.Topic(t.Name); !ok || now.Incarnation != t.Incarnation {
		for _, i := range at {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("produce to %s: topic deleted while writing: %w", t.Name, ErrNotFound)
			}
		}
		return errs
	}
	for _, i := range at {
		if errs[i] == nil {
			n.metrics.produceSeconds.UpdateDuration(recs[i].ReceivedOr(time.Now()))
		}
	}
	return errs
}

// admitProduce refuses a produce while this node drains (rule D6), and
// otherwise counts it as one being answered until done: the drain service
// reads the flag, then this count, so a produce it did not count is
// refused here.
func (n *Node) admitProduce() (done func(), err error) {
	if err := n.Admit(); err != nil {
		return nil, err
	}
	n.producing.Add(1)
	if err := n.Admit(); err != nil {
		n.producing.Add(-1)
		return nil, err
	}
	return func() { n.producing.Add(-1) }, nil
}

// prepareRecord checks rec against its topic and this node's room, and
// returns the topic and the WAL record to append: its key (one made up
// for a keyless record) and partition (the key's, or the next whose owner
// is alive) chosen, pinned to the topic incarnation it was checked
// against.
func (n *Node) prepareRecord(rec api.Record) (messages.Topic, storage.WALRecord, error) {
	if f := n.cfg.faults; f != nil && f.produceAdmitted != nil {
		f.produceAdmitted(rec.Topic, rec.Body)
	}
	if len(rec.Body) > maxRequestBytes {
		return messages.Topic{}, storage.WALRecord{}, fmt.Errorf("produce to %s: body of %d bytes: %w", rec.Topic, len(rec.Body), ErrTooLarge)
	}
	t, ok := n.store.Topic(rec.Topic)
	if !ok {
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s: topic %w", rec.Topic, ErrNotFound)
	}
	if t.FanoutDelayMs > 0 {
		// Its records come from the parent only, each once the delay has
		// passed; a direct one would skip the delay.
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s: %w", t.Name, api.ErrDelayChild)
	}
	if rec.Partition >= t.Partitions {
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s/%d: %w", t.Name, rec.Partition, api.ErrNoSuchPartition)
	}
	if err := n.validate(t, rec.Body); err != nil {
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s: %w", t.Name, invalidBy(err))
	}
	if n.stopping.Load() {
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s: %w", t.Name, api.ErrStopping)
	}
	if held, _ := n.wal.Backlog(); held >= n.cfg.MaxBacklogRecords {
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s: %d records held: %w", t.Name, held, api.ErrBacklogFull)
	}
	key, partition := rec.Key, rec.Partition
	if key == "" {
		key = "key-" + strconv.FormatUint(n.keySeq.Add(1), 36)
	}
	if partition < 0 {
		partition = n.route.LivePartition(t, partitionForKey(key, t.Partitions))
	}
	// The incarnation validated against: the dispatcher commits the record
	// to it or to nothing, never to a topic recreated meanwhile.
	return t, storage.WALRecord{Topic: t.Name, Incarnation: t.Incarnation, Partition: int32(partition), Key: []byte(key), Body: rec.Body}, nil
}

// accepted finishes a produce whose WAL append returned seq and err: the
// error the client hears, or, once the record is durable, its hand-off to
// the dispatcher.
func (n *Node) accepted(t messages.Topic, wr storage.WALRecord, seq uint64, err error, rec api.Record) error {
	if err := n.walOutcome(t, err); err != nil {
		return err
	}
	wr.Seq = seq
	// Dispatched either way: the dispatcher releases the seq of a record it
	// drops.
	n.system.Root.Send(n.dispatcher, &dispatch.Record{Rec: wr})
	if now, ok := n.store.Topic(t.Name); !ok || now.Incarnation != t.Incarnation {
		// The topic was deleted while the record was written: it will never
		// be consumable, so the producer hears what the contract answers a
		// produce to a deleted topic, not 202.
		return fmt.Errorf("produce to %s: topic deleted while writing: %w", t.Name, ErrNotFound)
	}
	n.metrics.produceSeconds.UpdateDuration(rec.ReceivedOr(time.Now()))
	return nil
}

// walOutcome is the error a produce whose WAL append failed with err
// answers; nil once the record is durable.
func (n *Node) walOutcome(t messages.Topic, err error) error {
	switch {
	case err == nil:
		n.writes.succeeded(n.log)
		return nil
	case errors.Is(err, storage.ErrFull):
		return fmt.Errorf("produce to %s: %w", t.Name, api.ErrIngressFull)
	case errors.Is(err, storage.ErrTooLarge), errors.Is(err, storage.ErrInvalid):
		return fmt.Errorf("produce to %s: %w", t.Name, invalidBy(err))
	case errors.Is(err, syscall.ENOSPC):
		n.writes.failed(err, n.log)
		return fmt.Errorf("produce to %s: ingress WAL append: %v: %w", t.Name, err, api.ErrNoSpace)
	default:
		n.log.Error("ingress WAL append", "err", err)
		return fmt.Errorf("produce to %s: ingress WAL append: %w", t.Name, err)
	}
}

// validate checks a body against the topic's latest schema, if it has one.
func (n *Node) validate(t messages.Topic, body []byte) error {
	if len(t.Schemas) == 0 {
		return nil
	}
	s, err := n.schemas.Get(t.Incarnation, len(t.Schemas), t.Schemas[len(t.Schemas)-1])
	if err != nil {
		return err
	}
	return schema.Validate(s, body)
}

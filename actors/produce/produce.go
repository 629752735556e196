// Package produce is the node's side of a produce: a record checked
// against its topic (partition, schema, the node's room), appended to the
// ingress WAL, which answers once it is fsynced (group commit across
// producers), and handed to the dispatcher, which commits it to its
// partition's owner later. The client hears 202 once the record is
// durable here. Start at Intake.Produce. It knows no Node: Deps is what it
// asks of one, and the node embeds an *Intake, so its methods are the
// node's (api.Data's produce half). This is the hot path: no allocation
// or hop beyond the WAL's and the dispatcher's.
package produce

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"sync/atomic"
	"syscall"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/dispatch"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/schema"
	"github.com/naradmq/narad/actors/topics"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// PartitionForKey is the contract's FNV-1a 32 of the key, mod partitions.
func PartitionForKey(key string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}

// Config is the node's room for records not yet committed.
type Config struct {
	// NodeID names this node in a refusal.
	NodeID string
	// MaxBacklogRecords is how many accepted records may wait for their
	// owner before produce answers 503: the dispatcher holds them in memory.
	MaxBacklogRecords int64
}

// Validate reports a backlog that holds nothing.
func (c Config) Validate() error {
	if c.MaxBacklogRecords < 1 {
		return fmt.Errorf("MaxBacklogRecords %d must be positive: %w", c.MaxBacklogRecords, errs.ErrInvalid)
	}
	return nil
}

// Metrics are the produce path's series in the node's set.
type Metrics struct {
	// Seconds is a produce's latency, from the request's arrival to 202.
	Seconds *metrics.PrometheusHistogram
}

// NewMetrics registers the produce path's series of node in set.
func NewMetrics(set *metrics.Set, node string) Metrics {
	return Metrics{Seconds: set.GetOrCreatePrometheusHistogram(fmt.Sprintf(`narad_produce_seconds{node=%q}`, node))}
}

// Owners picks a partition whose owner is alive (the router).
type Owners interface {
	LivePartition(t messages.Topic, p int) int
}

// Backlog is the ingress WAL's count of records not yet committed.
type Backlog interface {
	Backlog() (records int64, bytes int64)
}

// Deps is what a produce needs of its node. The funcs are the node's own
// methods (the WAL as the node guards it, its verdict on its disk, its
// member record), handed over once at start.
type Deps struct {
	Config  Config
	Store   topics.Reader
	Owners  Owners
	Backlog Backlog
	// Append and AppendMany append to the ingress WAL and return once
	// the records are fsynced (or failed as a full disk would).
	Append     func(ctx context.Context, wr storage.WALRecord) (uint64, error)
	AppendMany func(ctx context.Context, wrs []storage.WALRecord) ([]uint64, []error)
	// WriteOK and WriteFailed tell the node's disk verdict how an append
	// went (a write that found no space, and the next that succeeded).
	WriteOK     func()
	WriteFailed func(err error)
	// Draining is true while this node's member record says it is being
	// decommissioned (rule D6).
	Draining func() bool
	// Stopping is set once the node's Stop began; Producing counts the
	// produces admitted and not yet answered, which the drain service
	// reads (rule D6). Both are the node's.
	Stopping  *atomic.Bool
	Producing *atomic.Int64
	// Root sends the durable records to Dispatcher.
	Root       *actor.RootContext
	Dispatcher *actor.PID
	// Admitted, when set (tests), runs once a record is admitted and
	// before it is appended; it may block to hold the produce there.
	Admitted func(topic string, body []byte)
	Metrics  Metrics
	Log      *slog.Logger
	// Clock stamps a produce's answer for its latency.
	Clock clock.Clock
}

// Intake is the produce path over Deps.
type Intake struct {
	deps    Deps
	schemas schema.Cache
	keySeq  atomic.Uint64 // suffix of generated keys
}

// New is the produce path over d.
func New(d Deps) *Intake { return &Intake{deps: d} }

// Admit refuses every produce while this node's member record says it is
// being decommissioned (rule D6): its ingress WAL must only shrink, and
// clients retry on another node.
func (p *Intake) Admit() error {
	if p.deps.Draining() {
		return fmt.Errorf("produce to %s: %w", p.deps.Config.NodeID, errs.ErrDraining)
	}
	return nil
}

// Produce checks the record against its topic (partition, schema), then
// appends it to the ingress WAL, which returns once it is fsynced (group
// commit across producers), and hands it to the dispatcher. A crash after
// the append replays it from the WAL: duplicates, never a gap.
func (p *Intake) Produce(ctx context.Context, rec api.Record) error {
	done, err := p.admitProduce()
	if err != nil {
		return err
	}
	defer done()
	t, wr, err := p.prepareRecord(rec)
	if err != nil {
		return err
	}
	seq, err := p.deps.Append(ctx, wr)
	return p.accepted(t, wr, seq, err, rec)
}

// ProduceBatch is Produce for records of one topic at once: each is
// checked alone, and the ingress WAL makes the ones that pass durable
// together (one group commit, AppendMany). Its i-th error is recs[i]'s,
// nil once it is durable. Admission (draining, stopping) refuses the whole
// batch.
func (p *Intake) ProduceBatch(ctx context.Context, topic string, recs []api.Record) []error {
	out := make([]error, len(recs))
	done, err := p.admitProduce()
	if err != nil {
		for i := range out {
			out[i] = err
		}
		return out
	}
	defer done()
	ts := make([]messages.Topic, len(recs))
	wrs := make([]storage.WALRecord, 0, len(recs))
	at := make([]int, 0, len(recs))
	for i, rec := range recs {
		rec.Topic = topic
		var wr storage.WALRecord
		if ts[i], wr, out[i] = p.prepareRecord(rec); out[i] == nil {
			wrs = append(wrs, wr)
			at = append(at, i)
		}
	}
	if len(wrs) == 0 {
		return out
	}
	seqs, werrs := p.deps.AppendMany(ctx, wrs)
	durable := make([]storage.WALRecord, 0, len(wrs))
	for j, i := range at {
		if out[i] = p.walOutcome(ts[i], werrs[j]); out[i] == nil {
			wrs[j].Seq = seqs[j]
			durable = append(durable, wrs[j])
		}
	}
	if len(durable) == 0 {
		return out
	}
	// One message for the batch: Records takes them in order, as a
	// Record each would.
	p.deps.Root.Send(p.deps.Dispatcher, &dispatch.Records{Recs: durable})
	t := ts[at[0]]
	if now, ok := p.deps.Store.Topic(t.Name); !ok || now.Incarnation != t.Incarnation {
		for _, i := range at {
			if out[i] == nil {
				out[i] = fmt.Errorf("produce to %s: topic deleted while writing: %w", t.Name, errs.ErrNotFound)
			}
		}
		return out
	}
	for _, i := range at {
		if out[i] == nil {
			p.deps.Metrics.Seconds.UpdateDuration(recs[i].ReceivedOr(p.deps.Clock.Now()))
		}
	}
	return out
}

// admitProduce refuses a produce while this node drains (rule D6), and
// otherwise counts it as one being answered until done: the drain service
// reads the flag, then this count, so a produce it did not count is
// refused here.
func (p *Intake) admitProduce() (done func(), err error) {
	if err := p.Admit(); err != nil {
		return nil, err
	}
	p.deps.Producing.Add(1)
	if err := p.Admit(); err != nil {
		p.deps.Producing.Add(-1)
		return nil, err
	}
	return func() { p.deps.Producing.Add(-1) }, nil
}

// prepareRecord checks rec against its topic and this node's room, and
// returns the topic and the WAL record to append: its key (one made up
// for a keyless record) and partition (the key's, or the next whose owner
// is alive) chosen, pinned to the topic incarnation it was checked
// against.
func (p *Intake) prepareRecord(rec api.Record) (messages.Topic, storage.WALRecord, error) {
	if f := p.deps.Admitted; f != nil {
		f(rec.Topic, rec.Body)
	}
	if len(rec.Body) > api.MaxBodyBytes {
		return messages.Topic{}, storage.WALRecord{}, fmt.Errorf("produce to %s: body of %d bytes: %w", rec.Topic, len(rec.Body), errs.ErrTooLarge)
	}
	t, ok := p.deps.Store.Topic(rec.Topic)
	if !ok {
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s: topic %w", rec.Topic, errs.ErrNotFound)
	}
	if t.FanoutDelayMs > 0 {
		// Its records come from the parent only, each once the delay has
		// passed; a direct one would skip the delay.
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s: %w", t.Name, errs.ErrDelayChild)
	}
	if rec.Partition >= t.Partitions {
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s/%d: %w", t.Name, rec.Partition, errs.ErrNoSuchPartition)
	}
	if err := p.validate(t, rec.Body); err != nil {
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s: %w", t.Name, errs.InvalidBy(err))
	}
	if p.deps.Stopping.Load() {
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s: %w", t.Name, errs.ErrStopping)
	}
	if held, _ := p.deps.Backlog.Backlog(); held >= p.deps.Config.MaxBacklogRecords {
		return t, storage.WALRecord{}, fmt.Errorf("produce to %s: %d records held: %w", t.Name, held, errs.ErrBacklogFull)
	}
	key, partition := rec.Key, rec.Partition
	if key == "" {
		key = "key-" + strconv.FormatUint(p.keySeq.Add(1), 36)
	}
	if partition < 0 {
		partition = p.deps.Owners.LivePartition(t, PartitionForKey(key, t.Partitions))
	}
	// The incarnation validated against: the dispatcher commits the record
	// to it or to nothing, never to a topic recreated meanwhile.
	return t, storage.WALRecord{Topic: t.Name, Incarnation: t.Incarnation, Partition: int32(partition), Key: []byte(key), Body: rec.Body}, nil
}

// accepted finishes a produce whose WAL append returned seq and err: the
// error the client hears, or, once the record is durable, its hand-off to
// the dispatcher.
func (p *Intake) accepted(t messages.Topic, wr storage.WALRecord, seq uint64, err error, rec api.Record) error {
	if err := p.walOutcome(t, err); err != nil {
		return err
	}
	wr.Seq = seq
	// Dispatched either way: the dispatcher releases the seq of a record it
	// drops.
	p.deps.Root.Send(p.deps.Dispatcher, &dispatch.Record{Rec: wr})
	if now, ok := p.deps.Store.Topic(t.Name); !ok || now.Incarnation != t.Incarnation {
		// The topic was deleted while the record was written: it will never
		// be consumable, so the producer hears what the contract answers a
		// produce to a deleted topic, not 202.
		return fmt.Errorf("produce to %s: topic deleted while writing: %w", t.Name, errs.ErrNotFound)
	}
	p.deps.Metrics.Seconds.UpdateDuration(rec.ReceivedOr(p.deps.Clock.Now()))
	return nil
}

// walOutcome is the error a produce whose WAL append failed with err
// answers; nil once the record is durable.
func (p *Intake) walOutcome(t messages.Topic, err error) error {
	switch {
	case err == nil:
		p.deps.WriteOK()
		return nil
	case errors.Is(err, storage.ErrFull):
		return fmt.Errorf("produce to %s: %w", t.Name, errs.ErrIngressFull)
	case errors.Is(err, storage.ErrTooLarge), errors.Is(err, storage.ErrInvalid):
		return fmt.Errorf("produce to %s: %w", t.Name, errs.InvalidBy(err))
	case errors.Is(err, syscall.ENOSPC):
		p.deps.WriteFailed(err)
		return fmt.Errorf("produce to %s: ingress WAL append: %v: %w", t.Name, err, errs.ErrNoSpace)
	default:
		p.deps.Log.Error("ingress WAL append", "err", err)
		return fmt.Errorf("produce to %s: ingress WAL append: %w", t.Name, err)
	}
}

// validate checks a body against the topic's latest schema, if it has one.
func (p *Intake) validate(t messages.Topic, body []byte) error {
	if len(t.Schemas) == 0 {
		return nil
	}
	s, err := p.schemas.Get(t.Incarnation, t.SchemaVersion(), t.Schemas[len(t.Schemas)-1])
	if err != nil {
		return err
	}
	return schema.Validate(s, body)
}

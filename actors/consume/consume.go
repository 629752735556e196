// Package consume is the node's side of the consume path: Consume (queue
// mode: a lease on the next deliverable record of any partition, asked
// where the ready book, actors/hints, believes records wait, and a long
// poll woken by commit notices), Replay (one record by offset, leasing
// nothing), Settle (ack, extend, nack) and their batch forms. Start at
// Leases.Consume. It knows no Node: Deps is what it asks of one, and the
// node embeds a *Leases, so its methods are the node's (api.Data).
package consume

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/hints"
	"github.com/naradmq/narad/actors/route"
	"github.com/naradmq/narad/actors/topics"
	"github.com/naradmq/narad/messages"
)

// Owners reaches a partition's owner, this node or a peer (the router).
type Owners interface {
	// Ask sends msg to the partition's actor, wherever it runs.
	Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
	// Local asks this node's own actor of the partition.
	Local(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
	// Owner names the node that owns the partition.
	Owner(k messages.PartitionKey) (string, error)
	// ReserveAny asks a peer owner to lease from the first of its
	// partitions in ra that has a record.
	ReserveAny(ctx context.Context, owner string, k messages.PartitionKey, ra *messages.ReserveAny) (*messages.Reserved, error)
}

// Config is how a consume waits and whom it asks first.
type Config struct {
	// NodeID is this node: its own partitions are asked first.
	NodeID string
	// MaxWait caps a long poll (Config.MaxConsumeWait of the node); the
	// node keeps it below its HTTP write timeout.
	MaxWait time.Duration
	// RotateEvery: one consume in this many asks the partitions in plain
	// rotation, the others this node's own first. Within 1..1024.
	RotateEvery int
	// MaxLongPolls caps the consumes that wait at once on this node
	// (Config.MaxConsumeLongPolls): each holds a connection and a
	// goroutine for up to MaxWait, so without a cap one client could hold
	// them all. A consume past it still looks once, and answers ErrBusy
	// only when it finds nothing and would wait. Within 1..1<<20.
	MaxLongPolls int
	// RescanInterval is how long a long poll sleeps without looking again
	// when no notice wakes it; FullScanInterval, how often it asks every
	// partition whatever the ready book believes. Each within 1ms..1min.
	RescanInterval, FullScanInterval time.Duration
}

// Validate reports the first setting out of range, named as the node's
// config names it.
func (c Config) Validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("%s %v %s: %w", field, v, why, errs.ErrInvalid)
	}
	switch {
	case c.MaxWait <= 0:
		return bad("MaxConsumeWait", c.MaxWait, "must be positive and below HTTPWriteTimeout")
	case c.MaxLongPolls < 1 || c.MaxLongPolls > maxLongPolls:
		return bad("MaxConsumeLongPolls", c.MaxLongPolls, fmt.Sprintf("must be within 1..%d", maxLongPolls))
	case c.RotateEvery < 1 || c.RotateEvery > 1024:
		return bad("ConsumeRotateEvery", c.RotateEvery, "must be within 1..1024")
	case c.RescanInterval < time.Millisecond || c.RescanInterval > time.Minute:
		return bad("ConsumeRescanInterval", c.RescanInterval, "must be within 1ms..1m")
	case c.FullScanInterval < time.Millisecond || c.FullScanInterval > time.Minute:
		return bad("ConsumeFullScanInterval", c.FullScanInterval, "must be within 1ms..1m")
	}
	return nil
}

// maxLongPolls bounds MaxLongPolls: more waiting consumes than a node has
// file descriptors to spare is a mistake, not a setting.
const maxLongPolls = 1 << 20

// Metrics are the consume path's series in the node's set.
type Metrics struct {
	// LeasedHere and LeasedThere count queue-mode consumes answered with
	// a record of a partition this node owns, or of a peer's (one NATS
	// round trip more, and so its ack): how well consumes stay local.
	LeasedHere, LeasedThere *metrics.Counter
	// LongPolls is the consumes waiting now; LongPollsRefused counts the
	// ones answered ErrBusy because MaxLongPolls were waiting.
	LongPolls        *metrics.Gauge
	LongPollsRefused *metrics.Counter
}

// NewMetrics registers the consume path's series of node in set.
func NewMetrics(set *metrics.Set, node string) Metrics {
	return Metrics{
		LeasedHere:       set.GetOrCreateCounter(fmt.Sprintf(`narad_consume_routed_total{node=%q,owner="local"}`, node)),
		LeasedThere:      set.GetOrCreateCounter(fmt.Sprintf(`narad_consume_routed_total{node=%q,owner="peer"}`, node)),
		LongPolls:        set.GetOrCreateGauge(fmt.Sprintf(`narad_consume_long_polls{node=%q}`, node), nil),
		LongPollsRefused: set.GetOrCreateCounter(fmt.Sprintf(`narad_consume_long_polls_refused_total{node=%q}`, node)),
	}
}

// Deps is what the consume path needs of its node.
type Deps struct {
	Config   Config
	Store    topics.Reader
	Owners   Owners
	Notifier *hints.Notifier
	Metrics  Metrics
	// Clock times a long poll. The node hands it the wall clock: a stepped
	// clock (the nemesis) would end polls early or hold them long.
	Clock clock.Clock
}

// Leases is the consume path over Deps.
type Leases struct {
	deps  Deps
	rotor atomic.Uint64 // rotating start of queue-mode scans
	// rotations counts queue-mode consumes apart from rotor, which picks
	// the start: one in RotateEvery asks in plain rotation.
	rotations atomic.Uint64
	// polls holds one token per consume waiting (Config.MaxLongPolls).
	polls chan struct{}
}

// New is the consume path over d.
func New(d Deps) *Leases {
	return &Leases{deps: d, polls: make(chan struct{}, d.Config.MaxLongPolls)}
}

// startPoll takes a long poll's token, or says the node has none left.
func (c *Leases) startPoll() bool {
	select {
	case c.polls <- struct{}{}:
		if g := c.deps.Metrics.LongPolls; g != nil {
			g.Inc()
		}
		return true
	default:
		if n := c.deps.Metrics.LongPollsRefused; n != nil {
			n.Inc()
		}
		return false
	}
}

// endPoll gives a long poll's token back.
func (c *Leases) endPoll() {
	<-c.polls
	if g := c.deps.Metrics.LongPolls; g != nil {
		g.Dec()
	}
}

// msDuration is a topic setting in milliseconds as a duration.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// limitsOf is a topic's consume settings as a partition applies them.
func limitsOf(t messages.Topic) messages.ConsumeLimits {
	return messages.ConsumeLimits{Visibility: msDuration(t.VisibilityTimeoutMs),
		MaxInFlight: t.MaxInFlightPerPartition, MaxAckedAhead: t.MaxAckedAheadPerPartition}
}

// Replay reads one record by offset, leasing nothing.
func (c *Leases) Replay(ctx context.Context, topic string, partition int, offset int64) (messages.Delivery, bool, error) {
	t, err := topics.PartitionOf(c.deps.Store, topic, partition)
	if err != nil {
		return messages.Delivery{}, false, fmt.Errorf("replay: %w", err)
	}
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: partition}
	res, err := c.deps.Owners.Ask(ctx, k, &messages.ReadAt{Offset: offset})
	if err != nil {
		return messages.Delivery{}, false, fmt.Errorf("replay %s/%d@%d: %w", topic, partition, offset, err)
	}
	rr, ok := res.(*messages.Reserved)
	if !ok {
		return messages.Delivery{}, false, fmt.Errorf("replay %s/%d@%d: answered %T: %w", topic, partition, offset, res, errs.ErrUnavailable)
	}
	switch rr.Status {
	case messages.StatusOK:
		return rr.Delivery, true, nil
	case messages.StatusEmpty:
		return messages.Delivery{}, false, nil
	case messages.StatusGone:
		return messages.Delivery{}, false, fmt.Errorf("replay %s/%d@%d: removed by retention: %w", topic, partition, offset, errs.ErrGone)
	case messages.StatusUnavailable:
		return messages.Delivery{}, false, fmt.Errorf("replay %s/%d@%d: %s: %w", topic, partition, offset, rr.Err, errs.ErrUnavailable)
	}
	return messages.Delivery{}, false, fmt.Errorf("replay %s/%d@%d: status %v: %s", topic, partition, offset, rr.Status, rr.Err)
}

// Consume is queue mode: it leases one record from a partition that has
// one, asking first those the ready book (actors/hints) believes have records,
// local ones first but in one consume of ConsumeRotateEvery (hints.Plan),
// at most one request per owner; and it
// waits for a commit to the topic at any owner (actors/hints) up to wait, at
// most MaxConsumeWait, looking again every ConsumeRescanInterval and asking
// every partition every ConsumeFullScanInterval (a lease that expires, a
// notice lost). A partition or owner that cannot be asked is
// skipped: another may have a record. A consume that would wait while
// MaxLongPolls others do answers ErrBusy at once instead.
func (c *Leases) Consume(ctx context.Context, topic string, only int, wait time.Duration) (messages.Delivery, bool, error) {
	t, err := topics.PartitionOf(c.deps.Store, topic, only)
	if err != nil {
		return messages.Delivery{}, false, fmt.Errorf("consume: %w", err)
	}
	now := c.deps.Clock.Now()
	c.deps.Notifier.Consuming(now)
	deadline := now.Add(min(max(wait, 0), c.deps.Config.MaxWait))
	limits := limitsOf(t)
	ti := hints.TopicIncarnation{Topic: t.Name, Incarnation: t.Incarnation}
	for first := true; ; first = false {
		woken := c.deps.Notifier.Wait(t.Name)
		full := first && wait <= 0 || only < 0 && c.deps.Notifier.Ready.FullScanDue(ti, t.Partitions, c.deps.Config.FullScanInterval)
		if d, ok := c.reserveAny(ctx, t, only, limits, full); ok {
			return d, true, nil
		}
		left := deadline.Sub(c.deps.Clock.Now())
		if left <= 0 {
			return messages.Delivery{}, false, nil
		}
		if first {
			if !c.startPoll() {
				return messages.Delivery{}, false, fmt.Errorf("consume %s: %d long polls wait on this node: %w",
					topic, cap(c.polls), errs.ErrBusy)
			}
			defer c.endPoll()
		}
		rescan := clock.NewAlarm(c.deps.Clock, min(left, c.deps.Config.RescanInterval))
		select {
		case <-woken:
		case <-rescan.C:
		case <-ctx.Done():
			rescan.Stop()
			return messages.Delivery{}, false, fmt.Errorf("consume %s: %w", topic, ctx.Err())
		}
		rescan.Stop()
	}
}

// reserveAny leases a record of partition only, or of any partition of t
// in the order hints.Plan gives (every partition when full), and returns
// the first leased.
func (c *Leases) reserveAny(ctx context.Context, t messages.Topic, only int, limits messages.ConsumeLimits, full bool) (messages.Delivery, bool) {
	ti := hints.TopicIncarnation{Topic: t.Name, Incarnation: t.Incarnation}
	if only >= 0 {
		k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: only}
		asked := c.deps.Notifier.Ready.Asking()
		res, err := c.deps.Owners.Ask(ctx, k, &messages.Reserve{Limits: limits})
		rr, ok := res.(*messages.Reserved)
		if err != nil || !ok {
			return messages.Delivery{}, false
		}
		c.observeReserved(ti, t.Partitions, only, asked, rr)
		return rr.Delivery, rr.Status == messages.StatusOK
	}
	parts, now, asked := c.deps.Notifier.Ready.Snapshot(ti, t.Partitions)
	owners := make([]string, t.Partitions)
	for p := range owners {
		owners[p], _ = c.deps.Owners.Owner(messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: p})
	}
	start := int(c.rotor.Add(1) % uint64(t.Partitions))
	localFirst := c.rotations.Add(1)%uint64(c.deps.Config.RotateEvery) != 0
	for _, g := range hints.Plan(parts, owners, c.deps.Config.NodeID, start, now, full, localFirst) {
		if d, ok := c.reserveFrom(ctx, t, g, limits, asked); ok {
			return d, true
		}
	}
	return messages.Delivery{}, false
}

// reserveFrom asks one owner's partitions of g in order (route.ReserveFirst):
// each partition actor in turn when they are local, one ReserveAny request
// when the owner is a peer. asked is the ready book's marks count when the
// consume took its snapshot.
func (c *Leases) reserveFrom(ctx context.Context, t messages.Topic, g hints.AskGroup, limits messages.ConsumeLimits, asked hints.Seq) (messages.Delivery, bool) {
	ti := hints.TopicIncarnation{Topic: t.Name, Incarnation: t.Incarnation}
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation}
	ra := &messages.ReserveAny{Partitions: g.Parts, Limits: limits}
	local := g.Owner == c.deps.Config.NodeID
	var rr *messages.Reserved
	if local {
		rr = route.ReserveFirst(ctx, k, ra, c.deps.Owners.Local)
	} else {
		var err error
		if rr, err = c.deps.Owners.ReserveAny(ctx, g.Owner, k, ra); err != nil {
			return messages.Delivery{}, false
		}
	}
	for p, expiresIn := range rr.Empty {
		c.deps.Notifier.Ready.Observe(ti, t.Partitions, p, asked, false, false, expiresIn)
	}
	if rr.Status != messages.StatusOK {
		return messages.Delivery{}, false
	}
	c.observeReserved(ti, t.Partitions, rr.Delivery.Partition, asked, rr)
	if local {
		c.deps.Metrics.LeasedHere.Inc()
	} else {
		c.deps.Metrics.LeasedThere.Inc()
	}
	return rr.Delivery, true
}

// observeReserved tells the ready book what a reserve of partition p found.
func (c *Leases) observeReserved(ti hints.TopicIncarnation, partitions, p int, asked hints.Seq, rr *messages.Reserved) {
	switch rr.Status {
	case messages.StatusOK:
		c.deps.Notifier.Ready.Observe(ti, partitions, p, asked, true, rr.More, rr.ExpiresIn)
	case messages.StatusEmpty:
		c.deps.Notifier.Ready.Observe(ti, partitions, p, asked, false, false, rr.ExpiresIn)
	}
}

// Settle acks, extends or nacks the lease h names. A handle naming a
// partition the topic does not have matches no lease.
func (c *Leases) Settle(ctx context.Context, topic string, h api.Handle, action messages.LeaseAction) error {
	t, ok := c.deps.Store.Topic(topic)
	if !ok {
		return fmt.Errorf("settle a lease of %s: topic %w", topic, errs.ErrNotFound)
	}
	if h.Partition >= t.Partitions {
		return fmt.Errorf("settle a lease of %s: partition %d: %w", topic, h.Partition, errs.ErrGone)
	}
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: h.Partition}
	res, err := c.deps.Owners.Ask(ctx, k, &messages.Lease{Action: action, Offset: h.Offset, Nonce: h.Nonce, Limits: limitsOf(t)})
	if err != nil {
		return fmt.Errorf("settle a lease of %s/%d: %w", topic, h.Partition, err)
	}
	lr, ok := res.(*messages.LeaseResult)
	if !ok {
		return fmt.Errorf("settle a lease of %s/%d: answered %T: %w", topic, h.Partition, res, errs.ErrUnavailable)
	}
	switch lr.Status {
	case messages.StatusOK:
		return nil
	case messages.StatusGone:
		return fmt.Errorf("settle a lease of %s/%d@%d: %w", topic, h.Partition, h.Offset, errs.ErrGone)
	case messages.StatusFull:
		return fmt.Errorf("settle a lease of %s/%d@%d: %w", topic, h.Partition, h.Offset, errs.ErrAckedAheadFull)
	}
	return fmt.Errorf("settle a lease of %s/%d: status %v: %w", topic, h.Partition, lr.Status, errs.ErrUnavailable)
}

// ConsumeBatch leases up to max records of the topic (of one partition
// when only >= 0): it waits up to wait for the first, as Consume does, and
// then takes at once what the partitions the ready book believes have
// records still hold, without waiting for more.
func (c *Leases) ConsumeBatch(ctx context.Context, topic string, only int, wait time.Duration, max int) ([]messages.Delivery, error) {
	first, ok, err := c.Consume(ctx, topic, only, wait)
	if err != nil || !ok {
		return nil, err
	}
	out := append(make([]messages.Delivery, 0, min(max, 64)), first)
	t, err := topics.PartitionOf(c.deps.Store, topic, only)
	if err != nil {
		return out, nil // deleted since: what was leased is the client's
	}
	limits := limitsOf(t)
	for len(out) < max && ctx.Err() == nil {
		d, ok := c.reserveAny(ctx, t, only, limits, false)
		if !ok {
			break
		}
		out = append(out, d)
	}
	return out, nil
}

// settleBatchParallel bounds the leases one SettleBatch settles at once:
// each is a request to its partition's owner, whose actor writes the
// consumer state once for all the acks its mailbox holds.
const settleBatchParallel = 64

// SettleBatch settles each handle with action, at most
// settleBatchParallel at once; errs[i] is hs[i]'s outcome.
func (c *Leases) SettleBatch(ctx context.Context, topic string, hs []api.Handle, action messages.LeaseAction) []error {
	errs := make([]error, len(hs))
	slots := make(chan struct{}, settleBatchParallel)
	var wg sync.WaitGroup
	for i, h := range hs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = c.Settle(ctx, topic, h, action)
		})
	}
	wg.Wait()
	return errs
}

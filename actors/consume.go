package actors

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/hints"
	"github.com/naradmq/narad/actors/route"
	"github.com/naradmq/narad/actors/topics"
	"github.com/naradmq/narad/messages"
)

// msDuration is a topic setting in milliseconds as a duration.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// limitsOf is a topic's consume settings as a partition applies them.
func limitsOf(t messages.Topic) messages.ConsumeLimits {
	return messages.ConsumeLimits{Visibility: msDuration(t.VisibilityTimeoutMs),
		MaxInFlight: t.MaxInFlightPerPartition, MaxAckedAhead: t.MaxAckedAheadPerPartition}
}

// Replay reads one record by offset, leasing nothing.
func (n *Node) Replay(ctx context.Context, topic string, partition int, offset int64) (messages.Delivery, bool, error) {
	t, err := topics.PartitionOf(n.store, topic, partition)
	if err != nil {
		return messages.Delivery{}, false, fmt.Errorf("replay: %w", err)
	}
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: partition}
	res, err := n.route.Ask(ctx, k, &messages.ReadAt{Offset: offset})
	if err != nil {
		return messages.Delivery{}, false, fmt.Errorf("replay %s/%d@%d: %w", topic, partition, offset, err)
	}
	rr, ok := res.(*messages.Reserved)
	if !ok {
		return messages.Delivery{}, false, fmt.Errorf("replay %s/%d@%d: answered %T: %w", topic, partition, offset, res, ErrUnavailable)
	}
	switch rr.Status {
	case messages.StatusOK:
		return rr.Delivery, true, nil
	case messages.StatusEmpty:
		return messages.Delivery{}, false, nil
	case messages.StatusGone:
		return messages.Delivery{}, false, fmt.Errorf("replay %s/%d@%d: removed by retention: %w", topic, partition, offset, ErrGone)
	case messages.StatusUnavailable:
		return messages.Delivery{}, false, fmt.Errorf("replay %s/%d@%d: %s: %w", topic, partition, offset, rr.Err, ErrUnavailable)
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
// skipped: another may have a record.
func (n *Node) Consume(ctx context.Context, topic string, only int, wait time.Duration) (messages.Delivery, bool, error) {
	t, err := topics.PartitionOf(n.store, topic, only)
	if err != nil {
		return messages.Delivery{}, false, fmt.Errorf("consume: %w", err)
	}
	now := time.Now()
	n.notifier.Consuming(now)
	deadline := now.Add(min(max(wait, 0), n.cfg.MaxConsumeWait))
	limits := limitsOf(t)
	ti := hints.TopicIncarnation{Topic: t.Name, Incarnation: t.Incarnation}
	for first := true; ; first = false {
		woken := n.notifier.Wait(t.Name)
		full := first && wait <= 0 || only < 0 && n.notifier.Ready.FullScanDue(ti, t.Partitions, n.cfg.ConsumeFullScanInterval)
		if d, ok := n.reserveAny(ctx, t, only, limits, full); ok {
			return d, true, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return messages.Delivery{}, false, nil
		}
		timer := time.NewTimer(min(left, n.cfg.ConsumeRescanInterval))
		select {
		case <-woken:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return messages.Delivery{}, false, fmt.Errorf("consume %s: %w", topic, ctx.Err())
		}
		timer.Stop()
	}
}

// reserveAny leases a record of partition only, or of any partition of t
// in the order hints.Plan gives (every partition when full), and returns
// the first leased.
func (n *Node) reserveAny(ctx context.Context, t messages.Topic, only int, limits messages.ConsumeLimits, full bool) (messages.Delivery, bool) {
	ti := hints.TopicIncarnation{Topic: t.Name, Incarnation: t.Incarnation}
	if only >= 0 {
		k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: only}
		asked := n.notifier.Ready.Asking()
		res, err := n.route.Ask(ctx, k, &messages.Reserve{Limits: limits})
		rr, ok := res.(*messages.Reserved)
		if err != nil || !ok {
			return messages.Delivery{}, false
		}
		n.observeReserved(ti, t.Partitions, only, asked, rr)
		return rr.Delivery, rr.Status == messages.StatusOK
	}
	parts, now, asked := n.notifier.Ready.Snapshot(ti, t.Partitions)
	owners := make([]string, t.Partitions)
	for p := range owners {
		owners[p], _ = n.route.Owner(messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: p})
	}
	start := int(n.rotor.Add(1) % uint64(t.Partitions))
	localFirst := n.rotations.Add(1)%uint64(n.cfg.ConsumeRotateEvery) != 0
	for _, g := range hints.Plan(parts, owners, n.cfg.NodeID, start, now, full, localFirst) {
		if d, ok := n.reserveFrom(ctx, t, g, limits, asked); ok {
			return d, true
		}
	}
	return messages.Delivery{}, false
}

// reserveFrom asks one owner's partitions of g in order (route.ReserveFirst):
// each partition actor in turn when they are local, one ReserveAny request
// when the owner is a peer. asked is the ready book's marks count when the
// consume took its snapshot.
func (n *Node) reserveFrom(ctx context.Context, t messages.Topic, g hints.AskGroup, limits messages.ConsumeLimits, asked hints.Seq) (messages.Delivery, bool) {
	ti := hints.TopicIncarnation{Topic: t.Name, Incarnation: t.Incarnation}
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation}
	ra := &messages.ReserveAny{Partitions: g.Parts, Limits: limits}
	local := g.Owner == n.cfg.NodeID
	var rr *messages.Reserved
	if local {
		rr = route.ReserveFirst(ctx, k, ra, n.route.Local)
	} else {
		var err error
		if rr, err = n.route.ReserveAny(ctx, g.Owner, k, ra); err != nil {
			return messages.Delivery{}, false
		}
	}
	for p, expiresIn := range rr.Empty {
		n.notifier.Ready.Observe(ti, t.Partitions, p, asked, false, false, expiresIn)
	}
	if rr.Status != messages.StatusOK {
		return messages.Delivery{}, false
	}
	n.observeReserved(ti, t.Partitions, rr.Delivery.Partition, asked, rr)
	if local {
		n.metrics.leasedHere.Inc()
	} else {
		n.metrics.leasedThere.Inc()
	}
	return rr.Delivery, true
}

// observeReserved tells the ready book what a reserve of partition p found.
func (n *Node) observeReserved(ti hints.TopicIncarnation, partitions, p int, asked hints.Seq, rr *messages.Reserved) {
	switch rr.Status {
	case messages.StatusOK:
		n.notifier.Ready.Observe(ti, partitions, p, asked, true, rr.More, rr.ExpiresIn)
	case messages.StatusEmpty:
		n.notifier.Ready.Observe(ti, partitions, p, asked, false, false, rr.ExpiresIn)
	}
}

// Settle acks, extends or nacks the lease h names. A handle naming a
// partition the topic does not have matches no lease.
func (n *Node) Settle(ctx context.Context, topic string, h api.Handle, action messages.LeaseAction) error {
	t, ok := n.store.Topic(topic)
	if !ok {
		return fmt.Errorf("settle a lease of %s: topic %w", topic, ErrNotFound)
	}
	if h.Partition >= t.Partitions {
		return fmt.Errorf("settle a lease of %s: partition %d: %w", topic, h.Partition, ErrGone)
	}
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: h.Partition}
	res, err := n.route.Ask(ctx, k, &messages.Lease{Action: action, Offset: h.Offset, Nonce: h.Nonce, Limits: limitsOf(t)})
	if err != nil {
		return fmt.Errorf("settle a lease of %s/%d: %w", topic, h.Partition, err)
	}
	lr, ok := res.(*messages.LeaseResult)
	if !ok {
		return fmt.Errorf("settle a lease of %s/%d: answered %T: %w", topic, h.Partition, res, ErrUnavailable)
	}
	switch lr.Status {
	case messages.StatusOK:
		return nil
	case messages.StatusGone:
		return fmt.Errorf("settle a lease of %s/%d@%d: %w", topic, h.Partition, h.Offset, ErrGone)
	case messages.StatusFull:
		return fmt.Errorf("settle a lease of %s/%d@%d: %w", topic, h.Partition, h.Offset, api.ErrAckedAheadFull)
	}
	return fmt.Errorf("settle a lease of %s/%d: status %v: %w", topic, h.Partition, lr.Status, ErrUnavailable)
}

// ConsumeBatch leases up to max records of the topic (of one partition
// when only >= 0): it waits up to wait for the first, as Consume does, and
// then takes at once what the partitions the ready book believes have
// records still hold, without waiting for more.
func (n *Node) ConsumeBatch(ctx context.Context, topic string, only int, wait time.Duration, max int) ([]messages.Delivery, error) {
	first, ok, err := n.Consume(ctx, topic, only, wait)
	if err != nil || !ok {
		return nil, err
	}
	out := append(make([]messages.Delivery, 0, min(max, 64)), first)
	t, err := topics.PartitionOf(n.store, topic, only)
	if err != nil {
		return out, nil // deleted since: what was leased is the client's
	}
	limits := limitsOf(t)
	for len(out) < max && ctx.Err() == nil {
		d, ok := n.reserveAny(ctx, t, only, limits, false)
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
func (n *Node) SettleBatch(ctx context.Context, topic string, hs []api.Handle, action messages.LeaseAction) []error {
	errs := make([]error, len(hs))
	slots := make(chan struct{}, settleBatchParallel)
	var wg sync.WaitGroup
	for i, h := range hs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[i] = n.Settle(ctx, topic, h, action)
		})
	}
	wg.Wait()
	return errs
}

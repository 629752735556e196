package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/messages"
)

// msDuration is a topic setting in milliseconds as a duration.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// limitsOf is a topic's consume settings as a partition applies them.
func limitsOf(t messages.Topic) messages.ConsumeLimits {
	return messages.ConsumeLimits{Visibility: msDuration(t.VisibilityTimeoutMs),
		MaxInFlight: t.MaxInFlightPerPartition, MaxAckedAhead: t.MaxAckedAheadPerPartition}
}

// partitionOf looks a topic up on the local replica and checks that it has
// partition (any, when partition < 0).
func (n *Node) partitionOf(topic string, partition int) (messages.Topic, error) {
	t, ok := n.store.Topic(topic)
	if !ok {
		return t, fmt.Errorf("topic %s: %w", topic, ErrNotFound)
	}
	if partition >= t.Partitions {
		return t, fmt.Errorf("topic %s, partition %d: %w", topic, partition, api.ErrNoSuchPartition)
	}
	return t, nil
}

// Replay reads one record by offset, leasing nothing.
func (n *Node) Replay(ctx context.Context, topic string, partition int, offset int64) (messages.Delivery, bool, error) {
	t, err := n.partitionOf(topic, partition)
	if err != nil {
		return messages.Delivery{}, false, fmt.Errorf("replay: %w", err)
	}
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: partition}
	res, err := n.route.ask(ctx, k, &messages.ReadAt{Offset: offset})
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

// pollRescan bounds how long a long poll sleeps without looking again: a
// lease that expires makes a record deliverable without any commit.
const pollRescan = 200 * time.Millisecond

// Consume is queue mode: it reserves one record from the first partition,
// in a rotating order, that has one, and waits for a commit to the topic
// (notify.go) up to wait, at most MaxConsumeWait. A partition that cannot
// be asked is skipped: another may have a record.
func (n *Node) Consume(ctx context.Context, topic string, only int, wait time.Duration) (messages.Delivery, bool, error) {
	t, err := n.partitionOf(topic, only)
	if err != nil {
		return messages.Delivery{}, false, fmt.Errorf("consume: %w", err)
	}
	deadline := time.Now().Add(min(max(wait, 0), n.cfg.MaxConsumeWait))
	limits := limitsOf(t)
	for {
		woken := n.notifier.wait(t.Name)
		if d, ok := n.reserveAny(ctx, t, only, limits); ok {
			return d, true, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return messages.Delivery{}, false, nil
		}
		timer := time.NewTimer(min(left, pollRescan))
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

// reserveAny asks partition only, or every partition of t from a rotating
// start, to lease a record, and returns the first leased.
func (n *Node) reserveAny(ctx context.Context, t messages.Topic, only int, limits messages.ConsumeLimits) (messages.Delivery, bool) {
	parts := []int{only}
	if only < 0 {
		start := int(n.rotor.Add(1) % uint64(t.Partitions))
		parts = make([]int, t.Partitions)
		for i := range parts {
			parts[i] = (start + i) % t.Partitions
		}
	}
	for _, p := range parts {
		k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: p}
		res, err := n.route.ask(ctx, k, &messages.Reserve{Limits: limits})
		if rr, ok := res.(*messages.Reserved); err == nil && ok && rr.Status == messages.StatusOK {
			return rr.Delivery, true
		}
	}
	return messages.Delivery{}, false
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
	res, err := n.route.ask(ctx, k, &messages.Lease{Action: action, Offset: h.Offset, Nonce: h.Nonce, Limits: limitsOf(t)})
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

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/naradmq/narad/bench/proc"
	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/messages"
)

// layout is the topics of one scale, each of perTopic partitions.
type layout struct {
	topics   []string
	perTopic int
}

func newLayout(n, perTopic int) layout {
	l := layout{perTopic: perTopic}
	for i := range n / perTopic {
		l.topics = append(l.topics, fmt.Sprintf("mem-%05d", i))
	}
	return l
}

func newBroker(base, password string, conns int) (*client.Broker, error) {
	return client.New(base, client.Options{Conns: conns, Timeout: requestTimeout, User: benchUser, Password: password})
}

// retry calls fn until it succeeds, fails for good, or ctx ends; a 409
// after a retry is the first attempt having made it.
func retry(ctx context.Context, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt > 1 && client.IsStatus(err, 409) {
			return nil
		}
		if !client.IsRetryable(err) && !errors.Is(err, errRefused) {
			return err
		}
		client.Sleep(ctx, client.Backoff(attempt, 20*time.Millisecond, time.Second))
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last answer: %v)", ctx.Err(), err)
		}
	}
}

// createTopics creates the layout's topics, conc at a time.
func createTopics(ctx context.Context, b *client.Broker, l layout, conc int) error {
	return proc.ForEach(ctx, l.topics, conc, func(ctx context.Context, name string) error {
		return retry(ctx, func() error {
			_, err := b.CreateTopic(ctx, messages.CreateTopicRequest{Name: name, Partitions: l.perTopic})
			return err
		})
	})
}

// consumeWait is the long poll of a consume: the record was acknowledged
// before, so it is there at once unless the partition is being opened.
const consumeWait = time.Second

// throughEach puts one record through every partition: one batch produce
// per topic (a record for each partition), then, per partition, a consume
// of that record and its ack. Every partition has then opened its log,
// written, delivered and settled once, and holds no lease.
func throughEach(ctx context.Context, b *client.Broker, l layout, conc int) error {
	return proc.ForEach(ctx, l.topics, conc, func(ctx context.Context, topic string) error {
		recs := make([]messages.BatchRecord, l.perTopic)
		for p := range recs {
			recs[p] = messages.BatchRecord{Partition: &p, Payload: json.RawMessage(fmt.Sprintf(`{"p":%d}`, p))}
		}
		err := retry(ctx, func() error {
			res, err := b.ProduceBatch(ctx, topic, recs)
			if err != nil {
				return err
			}
			// Only the refused ones again: each accepted one is in.
			var again []messages.BatchRecord
			var first messages.BatchResult
			for i, r := range res.Results {
				if r.Status != 202 {
					if len(again) == 0 {
						first = r
					}
					again = append(again, recs[i])
				}
			}
			if recs = again; len(recs) > 0 {
				return fmt.Errorf("produce batch to %s: %d refused, the first %d %s: %w", topic, len(again), first.Status, first.Error, errRefused)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for p := range l.perTopic {
			if err := consumeAndAck(ctx, b, topic, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// errRefused is a batch with records the node refused; retried.
var errRefused = errors.New("records refused")

func consumeAndAck(ctx context.Context, b *client.Broker, topic string, p int) error {
	for {
		m, err := b.Consume(ctx, topic, client.ConsumeOptions{Wait: consumeWait, Partition: &p})
		switch {
		case err != nil && !client.IsRetryable(err):
			return err
		case err == nil && m != nil:
			return retry(ctx, func() error { return b.Ack(ctx, topic, m.ReceiptHandle) })
		}
		if ctx.Err() != nil {
			return fmt.Errorf("consume %s/%d: %w (last answer: %v)", topic, p, ctx.Err(), err)
		}
	}
}

package actors

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/messages"
)

// BenchmarkNodeWritePass is the storage write pass end to end on one node:
// one record produced to each of its partitions (100 per topic), timed until
// every partition's HWM moved, with each partition's own fsync ("alone",
// the baseline) and through the node's SyncLane ("lane"). Each runs on a
// node of its own, created before the timer:
//
//	go test ./actors -run '^$' -bench NodeWritePass -benchtime 1x | go run ./bench/ratio -base alone
func BenchmarkNodeWritePass(b *testing.B) {
	const perTopic = 100
	for _, partitions := range []int{100, 5000, 10000} {
		for _, lane := range []bool{false, true} {
			name := "alone"
			if lane {
				name = "lane"
			}
			b.Run(fmt.Sprintf("partitions=%d/%s", partitions, name), func(b *testing.B) {
				tn := newTestNode(b, func(c *Config) {
					c.SyncLane.Disabled = !lane
					c.RequestTimeout = time.Minute
				})
				ctx := context.Background()
				topics := partitions / perTopic
				for i := range topics {
					if _, err := tn.n.CreateTopic(ctx, messages.CreateTopicRequest{Name: fmt.Sprintf("t%d", i), Partitions: perTopic}); err != nil {
						b.Fatal(err)
					}
				}
				waitHWMs(b, tn.n, topics, perTopic, 0)
				var hwm int64
				for b.Loop() {
					hwm++
					produceToEach(b, tn.n, topics, perTopic)
					waitHWMs(b, tn.n, topics, perTopic, hwm)
				}
			})
		}
	}
}

// produceToEach produces one record to every partition, 64 at a time.
func produceToEach(b *testing.B, n *Node, topics, perTopic int) {
	work := make(chan api.Record)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for range 64 {
		wg.Go(func() {
			for r := range work {
				r.Received = time.Now()
				if err := n.Produce(context.Background(), r); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
				}
			}
		})
	}
	for t := range topics {
		for p := range perTopic {
			work <- api.Record{Topic: fmt.Sprintf("t%d", t), Partition: p, Body: []byte("one record for every partition")}
		}
	}
	close(work)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// waitHWMs polls until every partition serves and has an HWM of at least hwm.
func waitHWMs(b *testing.B, n *Node, topics, perTopic int, hwm int64) {
	deadline := time.Now().Add(5 * time.Minute)
	for t := 0; t < topics; {
		st, err := n.PartitionStats(context.Background(), fmt.Sprintf("t%d", t), -1)
		if err != nil {
			b.Fatal(err)
		}
		done := len(st) == perTopic
		for _, p := range st {
			done = done && p.HighWatermark >= hwm
		}
		if done {
			t++
			continue
		}
		if time.Now().After(deadline) {
			b.Fatalf("topic t%d: partitions not at HWM %d after 5 minutes", t, hwm)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

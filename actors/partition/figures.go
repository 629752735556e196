package partition

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/messages"
)

// Figures are the figures an operator watches per topic, summed over
// the topic's partitions on this node at scrape time:
// narad_topic_backlog_records{node,topic} (records not yet acked, leased
// or not) and narad_topic_leases{node,topic} (leases out). Per topic, not
// per partition: 30,000 partitions would flood a TSDB. Each partition
// actor stores its own figures in atomics as they change (no lock on the
// commit or ack path); the gauges' callbacks read them under the lock.
type Figures struct {
	node    string
	set     *metrics.Set
	mu      sync.Mutex
	byTopic map[string]map[messages.PartitionKey]*partitionFigures
}

// partitionFigures are one partition's figures, written by its actor only.
type partitionFigures struct {
	backlog, leases, bytes atomic.Int64
}

// NewFigures makes the node's book over its series set, node its label,
// with the node-wide gauge of the bytes its partition logs hold on disk
// (narad_partitions_disk_bytes).
func NewFigures(set *metrics.Set, node string) *Figures {
	f := &Figures{node: node, set: set, byTopic: map[string]map[messages.PartitionKey]*partitionFigures{}}
	set.GetOrCreateGauge(fmt.Sprintf(`narad_partitions_disk_bytes{node=%q}`, node), func() float64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		var n int64
		for _, parts := range f.byTopic {
			for _, p := range parts {
				n += p.bytes.Load()
			}
		}
		return float64(n)
	})
	return f
}

func (f *Figures) names(topic string) (backlog, leases string) {
	return fmt.Sprintf(`narad_topic_backlog_records{node=%q,topic=%q}`, f.node, topic),
		fmt.Sprintf(`narad_topic_leases{node=%q,topic=%q}`, f.node, topic)
}

// open registers k's figures, and the topic's gauges with its first
// partition on this node. A nil book (rigs) hands out figures nobody reads.
func (f *Figures) open(k messages.PartitionKey) *partitionFigures {
	pf := &partitionFigures{}
	if f == nil {
		return pf
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := f.byTopic[k.Topic]
	if parts == nil {
		parts = map[messages.PartitionKey]*partitionFigures{}
		f.byTopic[k.Topic] = parts
		backlog, leases := f.names(k.Topic)
		topic := k.Topic
		f.set.GetOrCreateGauge(backlog, func() float64 { return f.sum(topic, func(p *partitionFigures) int64 { return p.backlog.Load() }) })
		f.set.GetOrCreateGauge(leases, func() float64 { return f.sum(topic, func(p *partitionFigures) int64 { return p.leases.Load() }) })
	}
	parts[k] = pf
	return pf
}

// close forgets k's figures, and the topic's gauges with its last
// partition here (a topic moved away or deleted leaves no series behind).
func (f *Figures) close(k messages.PartitionKey) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	parts := f.byTopic[k.Topic]
	delete(parts, k)
	if len(parts) == 0 && parts != nil {
		delete(f.byTopic, k.Topic)
		backlog, leases := f.names(k.Topic)
		f.set.UnregisterMetric(backlog)
		f.set.UnregisterMetric(leases)
	}
}

func (f *Figures) sum(topic string, get func(*partitionFigures) int64) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n int64
	for _, p := range f.byTopic[topic] {
		n += get(p)
	}
	return float64(n)
}

package fanout

import (
	"fmt"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/messages"
)

// Metrics are the node's series the fan-out sets. The node registers the
// counters with the rest of its series and makes the Lags over its own
// set and name (so the names and node label are the node's, and the
// dashboards' and alerts' series do not change); the fan-out only sets
// them.
type Metrics struct {
	// Copied counts parent records the children committed; Failures the
	// copies (or reads) that failed and backed off; Skipped the records
	// retention removed before any copy, which the retention floor makes
	// an operator's matter.
	Copied, Failures, Skipped *metrics.Counter
	// Panics counts fan-out actors that panicked and were restarted.
	Panics *metrics.Counter
	// Lags is the node's lag gauges, one per link; the partition actor
	// forgets a link's share when it drops the link's cursor.
	Lags *Lags
}

// Lags is each link's lag on this node (records the parent holds past
// the cursor), summed over the node's partitions of the parent into one
// gauge per link: narad_fanout_lag_records{node,parent,child}. No
// per-partition series: 30,000 partitions would flood a TSDB. A nil Lags
// sets nothing (rigs without gauges).
type Lags struct {
	node string
	reg  *metrics.Set
	mu   sync.Mutex
	lag  map[lagKey]map[int]int64 // by parent partition
}

type lagKey struct {
	parent, child string
	incarnation   uint64
}

// NewLags is the lag gauges of node, registered in reg. One per node:
// two would each sum their own share into the same gauges.
func NewLags(node string, reg *metrics.Set) *Lags {
	return &Lags{node: node, reg: reg, lag: map[lagKey]map[int]int64{}}
}

func (g *Lags) gaugeName(k lagKey) string {
	return fmt.Sprintf(`narad_fanout_lag_records{node=%q,parent=%q,child=%q}`, g.node, k.parent, k.child)
}

// Set records partition p's lag behind link l and sets the link's gauge.
func (g *Lags) Set(p messages.PartitionKey, l messages.ChildLink, lag int64) {
	if g == nil {
		return
	}
	k := lagKey{parent: p.Topic, child: l.Name, incarnation: p.Incarnation}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.lag[k]
	if m == nil {
		m = map[int]int64{}
		g.lag[k] = m
	}
	if old, ok := m[p.Partition]; ok && old == lag {
		return
	}
	m[p.Partition] = lag
	var sum int64
	for _, v := range m {
		sum += v
	}
	g.reg.GetOrCreateGauge(g.gaugeName(k), nil).Set(float64(sum))
}

// Forget takes partition p's share out of child's gauge, and the gauge
// away with the last share.
func (g *Lags) Forget(p messages.PartitionKey, child string) {
	if g == nil {
		return
	}
	k := lagKey{parent: p.Topic, child: child, incarnation: p.Incarnation}
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.lag[k]
	if m == nil {
		return
	}
	delete(m, p.Partition)
	if len(m) == 0 {
		delete(g.lag, k)
		g.reg.UnregisterMetric(g.gaugeName(k))
		return
	}
	var sum int64
	for _, v := range m {
		sum += v
	}
	g.reg.GetOrCreateGauge(g.gaugeName(k), nil).Set(float64(sum))
}

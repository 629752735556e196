package metastore

import (
	"errors"
	"fmt"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/messages"
)

// Proposal outcome labels of narad_metastore_proposals_total: the result
// code of an applied proposal, "unavailable" for an unknown outcome and
// "error" for one refused before it was proposed.
var resultLabels = [...]string{
	messages.ResultOK:       "ok",
	messages.ResultExists:   "exists",
	messages.ResultNotFound: "not_found",
	messages.ResultRefused:  "refused",
	messages.ResultInvalid:  "invalid",
}

const (
	labelUnavailable = "unavailable"
	labelError       = "error"
)

// proposalBuckets span a proposal's life: ~30 µs applied in memory, a few
// ms with fsync, up to ProposalTimeout (5 s) when the leader is gone. The
// library's default buckets start at 5 ms and would lump every healthy
// proposal into one bucket.
var proposalBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// storeMetrics are the Store's series. Everything is GetOrCreate*, so
// several Stores in one process (narad dev, tests) share the series instead
// of panicking on a duplicate name; the applied-index gauges carry the node
// id so that they do not collide.
type storeMetrics struct {
	node      string
	latency   *metrics.PrometheusHistogram
	proposals map[uint64]map[string]*metrics.Counter
	applied   map[uint64]*metrics.Gauge
}

func newStoreMetrics(set *metrics.Set, node string, shards []uint64) *storeMetrics {
	if set == nil {
		set = metrics.GetDefaultSet()
	}
	m := &storeMetrics{
		node:      node,
		latency:   set.GetOrCreatePrometheusHistogramExt("narad_metastore_proposal_seconds", proposalBuckets),
		proposals: make(map[uint64]map[string]*metrics.Counter, len(shards)),
		applied:   make(map[uint64]*metrics.Gauge, len(shards)),
	}
	labels := append(resultLabels[:], labelUnavailable, labelError)
	for _, shard := range shards {
		m.proposals[shard] = make(map[string]*metrics.Counter, len(labels))
		for _, l := range labels {
			m.proposals[shard][l] = set.GetOrCreateCounter(fmt.Sprintf(`narad_metastore_proposals_total{shard="%d",result="%s"}`, shard, l))
		}
		m.applied[shard] = set.GetOrCreateGauge(fmt.Sprintf(`narad_metastore_applied_index{node=%q,shard="%d"}`, node, shard), nil)
	}
	return m
}

// observeProposal counts one proposal: code when err is nil.
func (m *storeMetrics) observeProposal(shard uint64, code messages.ResultCode, err error, took time.Duration) {
	m.latency.Update(took.Seconds())
	label := labelError
	switch {
	case errors.Is(err, ErrUnavailable):
		label = labelUnavailable
	case err == nil && int(code) >= 0 && int(code) < len(resultLabels):
		label = resultLabels[code]
	}
	if c := m.proposals[shard][label]; c != nil {
		c.Inc()
	}
}

func (m *storeMetrics) setApplied(shard, index uint64) {
	if g := m.applied[shard]; g != nil {
		g.Set(float64(index))
	}
}

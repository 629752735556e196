package transport

import (
	"fmt"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

// Reasons of narad_nats_request_errors_total: the outcome of one failed
// Request (not of each attempt; retries are narad_nats_request_retries_total).
const (
	reasonTimeout      = "timeout"
	reasonNoResponders = "no_responders"
	reasonNotConnected = "not_connected"
	reasonRemote       = "remote"
	reasonTooLarge     = "too_large"
	reasonClosed       = "closed"
	reasonCutOff       = "cut_off"
	reasonError        = "error"
)

var reasons = []string{reasonTimeout, reasonNoResponders, reasonNotConnected, reasonRemote,
	reasonTooLarge, reasonClosed, reasonCutOff, reasonError}

// requestBuckets span a request's life: ~50 µs on loopback, a few ms across
// a LAN or behind a group commit, up to RequestTimeout (5 s). The library's
// default buckets start at 5 ms and would lump every healthy request into one.
var requestBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// serviceMetrics are one (node, service) pair's series. The node label is
// this transport's node id (the caller for request series, the server for
// handled_total), so several nodes in one process (narad dev, tests) keep
// apart. Everything is GetOrCreate*: a second transport with the same node
// id shares the series instead of panicking.
type serviceMetrics struct {
	latency *metrics.PrometheusHistogram
	errors  map[string]*metrics.Counter
	retries *metrics.Counter
	handled *metrics.Counter
}

func newServiceMetrics(set *metrics.Set, node, service string) *serviceMetrics {
	l := fmt.Sprintf(`node=%q,service=%q`, node, service)
	m := &serviceMetrics{
		latency: set.GetOrCreatePrometheusHistogramExt(`narad_nats_request_seconds{`+l+`}`, requestBuckets),
		errors:  make(map[string]*metrics.Counter, len(reasons)),
		retries: set.GetOrCreateCounter(`narad_nats_request_retries_total{` + l + `}`),
		handled: set.GetOrCreateCounter(`narad_nats_handled_total{` + l + `}`),
	}
	for _, r := range reasons {
		m.errors[r] = set.GetOrCreateCounter(fmt.Sprintf(`narad_nats_request_errors_total{%s,reason=%q}`, l, r))
	}
	return m
}

// observe records one finished Request, which took took.
func (m *serviceMetrics) observe(took time.Duration, reason string) {
	m.latency.Update(took.Seconds())
	if reason != "" {
		m.errors[reason].Inc()
	}
}

// metricsCache maps service label -> *serviceMetrics for one transport, so
// the hot path does not format series names.
type metricsCache struct {
	node string
	set  *metrics.Set
	m    sync.Map
}

func (c *metricsCache) get(service string) *serviceMetrics {
	if v, ok := c.m.Load(service); ok {
		return v.(*serviceMetrics)
	}
	v, _ := c.m.LoadOrStore(service, newServiceMetrics(c.set, c.node, service))
	return v.(*serviceMetrics)
}

// setOrDefault is set, or the process-wide default set when nil.
func setOrDefault(set *metrics.Set) *metrics.Set {
	if set == nil {
		return metrics.GetDefaultSet()
	}
	return set
}

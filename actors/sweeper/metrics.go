package sweeper

import (
	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/sweep"
)

// Metrics are the node's series the sweeper sets. The node registers them
// with the rest of its series (so their names and node label are the
// node's, and the dashboards' and alerts' series do not change); the
// sweeper only sets them.
type Metrics struct {
	// QuarantinedCopies, QuarantinedBytes and OrphanTopicDirs are the
	// book's gauges (rules S7, S8), set from each inventory: the copies
	// set aside, their bytes, and the topic directories without a marker.
	QuarantinedCopies, QuarantinedBytes, OrphanTopicDirs *metrics.Gauge
	// Reclaimed counts the bytes the sweep removed since the node started;
	// the book reads it back for the members listing.
	Reclaimed *metrics.Counter
	// Judged is the counter of the copies judged with a verdict: one
	// series per verdict, made on first use.
	Judged func(sweep.Action) *metrics.Counter
}

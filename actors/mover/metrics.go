package mover

import (
	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/move"
)

// Metrics are the node's series the runner and its workers set. The node
// registers them with the rest of its series (so their names and node
// label are the node's, and the dashboards' and alerts' series do not
// change); the mover only sets them.
type Metrics struct {
	// InFlight is the moves this node runs as their destination; Done
	// counts those that flipped.
	InFlight *metrics.Gauge
	Done     *metrics.Counter
	// Bytes counts the bytes copied; NonConverged the cutovers that froze
	// the source without the catch-up converging.
	Bytes, NonConverged *metrics.Counter
	// Seconds and FreezeSeconds are a flipped move's whole time and its
	// freeze's; LastFreeze is the latest freeze's; Passes its copy passes.
	Seconds, FreezeSeconds, Passes *metrics.PrometheusHistogram
	LastFreeze                     *metrics.Gauge
	// PhaseSeconds is the time a move spent in each phase of its worker,
	// by move.Phase, observed as it leaves the phase.
	PhaseSeconds [move.Blocked + 1]*metrics.PrometheusHistogram
	// InstallNotWhole counts installs that did not leave their copy at
	// the partition's path whole (issue 26); StagingSetAside the staging
	// copies a move that ended without its flip set aside (rules X6, X9).
	InstallNotWhole, StagingSetAside *metrics.Counter
	// Blocked moves the gauge of the moves blocked for reason by delta.
	Blocked func(reason string, delta float64)
}

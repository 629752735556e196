package controller

import "github.com/VictoriaMetrics/metrics"

// Metrics are the node's series the controller sets. The node registers
// them with the rest of its series (so their names and node label are the
// node's, and the dashboards' and alerts' series do not change); the
// controller only sets them.
type Metrics struct {
	// Placed counts the partitions the controller placed
	// (narad_controller_placed_partitions_total); Promoted the non-voters
	// it promoted (narad_controller_promotions_total).
	Placed, Promoted *metrics.Counter
	// CreateGroups and CreatesGrouped count the create groups committed
	// and the creates they carried (their ratio is the mean group size).
	CreateGroups, CreatesGrouped *metrics.Counter
	// HeartbeatAge sets how long ago, on this leader's clock, a member's
	// heartbeat last moved (narad_member_heartbeat_age_seconds{member}).
	HeartbeatAge func(member string, seconds float64)
	// MovesBlocked sets narad_moves_blocked{reason} as the leader counts
	// it: the moves with a dead source or destination (rule T5).
	MovesBlocked func(reason string, n float64)
	// DecommissionBlocked is the gauge narad_decommission_blocked{node,
	// reason} of a draining member, made on first use (rule D7).
	DecommissionBlocked func(member, reason string) *metrics.Gauge
}

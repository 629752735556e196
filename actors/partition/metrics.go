package partition

import "github.com/VictoriaMetrics/metrics"

// Metrics are the node's series the partition actors set. The node
// registers them with the rest of its series (so their names and node
// label are the node's, and the dashboards' and alerts' series do not
// change); the partitions only set them.
type Metrics struct {
	CommitSeconds *metrics.PrometheusHistogram
	CommitRecords *metrics.Counter
	// CommitsExpired counts commits a partition refused unwritten because
	// their sender had stopped waiting (Commit.NotAfter): each would have
	// been stored twice.
	CommitsExpired                                                 *metrics.Counter
	CommitFailures                                                 *metrics.Counter
	Consumed, Acked, Nacked, Extended, Redelivered, CorruptSkipped *metrics.Counter
	// FrozenPublishRefused, HandoverSetAside and HandoverSetAsideRecs are
	// invariant breaks on a move's source: a publish refused because the
	// freeze had reported its HWM, and handed-over partitions that held
	// records past the HWM their move flipped at (set aside).
	FrozenPublishRefused, HandoverSetAside, HandoverSetAsideRecs *metrics.Counter
	// AcksRepeated counts retried acks of a handle already acked through
	// it, answered 204 from the partition's memory (ackMemory).
	AcksRepeated *metrics.Counter
	// LeasesRestored counts leases a partition's previous life wrote and
	// its next one brought back at open (restoreLeases).
	LeasesRestored *metrics.Counter
	// RecordsAlreadyCommitted counts records a commit carried again (Again)
	// that the log had committed (storage.Log.Committed): answered as
	// committed, not written twice.
	RecordsAlreadyCommitted *metrics.Counter
	// Rests counts partitions that closed to rest, idle (rest.go); their
	// wakes are the opens that follow.
	Rests *metrics.Counter
}

package actors

import (
	"fmt"
	"io"
	"runtime"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/consume"
	"github.com/naradmq/narad/actors/controller"
	"github.com/naradmq/narad/actors/debugfaults"
	"github.com/naradmq/narad/actors/dispatch"
	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/actors/mover"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/actors/produce"
	"github.com/naradmq/narad/actors/route"
	"github.com/naradmq/narad/actors/startup"
	"github.com/naradmq/narad/actors/sweep"
	"github.com/naradmq/narad/actors/sweeper"
)

// Metrics are registered with GetOrCreate so that several nodes in one
// process (tests, `narad dev --nodes 3`) share them without panicking; a
// node label keeps them apart.
type nodeMetrics struct {
	// set holds every series of this node and no other's: the node's
	// /metrics writes it (beside the process-wide default set), so the
	// nodes of one process (narad dev, tests) each export their own.
	set           *metrics.Set
	node          string
	commitSeconds *metrics.PrometheusHistogram
	commitRecords *metrics.Counter
	// commitsExpired counts commits a partition refused unwritten because
	// their sender had stopped waiting (Commit.NotAfter): each would have
	// been stored twice.
	commitsExpired *metrics.Counter
	commitFailures *metrics.Counter
	consumed       *metrics.Counter
	acked          *metrics.Counter
	// acksRepeated counts retried acks answered 204 because the same
	// handle's first ack had taken effect (its answer was lost).
	acksRepeated *metrics.Counter
	// leasesRestored counts leases a restarted partition brought back
	// from its consumer state, so a holder's retried ack still finds them.
	leasesRestored *metrics.Counter
	// partitionRests counts partitions that rested, idle (issue 50).
	partitionRests *metrics.Counter
	// commitsAlreadyIn counts records a commit sent again (a WAL replay, a
	// resend after a lost answer) that their partition had committed
	// already and answered without writing them twice.
	commitsAlreadyIn *metrics.Counter
	nacked           *metrics.Counter
	extended         *metrics.Counter
	redelivered      *metrics.Counter
	corruptSkipped   *metrics.Counter
	actorRestarts    *metrics.Counter
	partitionFailed  *metrics.Counter
	httpPanics       *metrics.Counter
	// faultsInjected counts the failures a debug fault switch made up
	// (actors/debugfaults), by storage.FaultMode.
	faultsInjected debugfaults.Injected
	// noticesLost counts commit notices not sent or not understood
	// (actors/hints): each one may delay a peer's long poll until its rescan.
	noticesLost *metrics.Counter
	// startup is a start's series (actors/startup): caught up, and
	// registered, through a peer.
	startup startup.Metrics
	// produce and consume are the data path's series (actors/produce,
	// actors/consume), registered with the node's so that a scrape shows
	// them from the start.
	produce       produce.Metrics
	consume       consume.Metrics
	beatsWithheld *metrics.Counter
	placed        *metrics.Counter
	// createGroups and createsGrouped: the topic creates committed and the
	// groups they went in (their ratio is the mean group size).
	createGroups   *metrics.Counter
	createsGrouped *metrics.Counter
	promoted       *metrics.Counter
	// commitsTooLarge counts dispatcher commits refused before sending as
	// larger than the NATS max payload: their records wait, never rerouted.
	commitsTooLarge *metrics.Counter
	// fanoutCopied counts parent records the children committed;
	// fanoutFailures counts copies (or reads) that failed and backed off;
	// fanoutSkipped counts records retention removed before any copy
	// (actors/fanout), which the retention floor makes an operator's
	// matter. The fan-out actors set them through fanoutMetrics.
	fanoutCopied, fanoutFailures, fanoutSkipped *metrics.Counter
	// fanoutPanics counts fan-out actors that panicked and were restarted.
	fanoutPanics *metrics.Counter
	// Moves, on the destination.
	movesInFlight *metrics.Gauge
	// Freeze pacing on a move's source (rule B5).
	partitionsFrozen *metrics.Gauge
	movesHeld        *metrics.Gauge
	movesDone        *metrics.Counter
	moveBytes        *metrics.Counter
	nonConverged     *metrics.Counter
	moveSeconds      *metrics.PrometheusHistogram
	freezeSeconds    *metrics.PrometheusHistogram
	// phaseSeconds is the time a move spent in each phase of its worker,
	// by move.Phase, observed as it leaves the phase: where a moved
	// partition's time goes (issue 27).
	phaseSeconds [move.Blocked + 1]*metrics.PrometheusHistogram
	// moveGroups and moveGroupItems count the move groups this node sent
	// to sources and the requests they carried (actors/route, movegroup.go).
	moveGroups, moveGroupItems *metrics.Counter
	// commitGroups and commitGroupItems count the commit groups this node
	// sent and the commits they carried.
	commitGroups, commitGroupItems *metrics.Counter
	movePasses                     *metrics.PrometheusHistogram
	lastFreeze                     *metrics.Gauge
	// Invariant breaks on a move's source: a publish refused because the
	// freeze had reported its HWM, and handed-over partitions that held
	// records past the HWM their move flipped at (set aside).
	frozenPublishRefused *metrics.Counter
	// installNotWhole counts installs that did not leave their copy at
	// the partition's path whole (issue 26); the move does not flip.
	installNotWhole      *metrics.Counter
	handoverSetAside     *metrics.Counter
	handoverSetAsideRecs *metrics.Counter
	// stagingSetAside counts staging copies a move that ended without
	// its flip set aside instead of removing (rules X6, X9).
	stagingSetAside *metrics.Counter
	// workerRestarts and workersStopped count the move workers the
	// runner's supervision restarted and gave up on.
	workerRestarts, workersStopped *metrics.Counter
	// Copies set aside (rule S8) and topic directories without a marker
	// (rule S7), as of the node's last inventory (the sweeper's book,
	// actors/sweeper); bytes the stale-copy sweep reclaimed. The sweeper
	// sets them through sweeperMetrics.
	quarantinedCopies *metrics.Gauge
	quarantinedBytes  *metrics.Gauge
	orphanTopicDirs   *metrics.Gauge
	sweepReclaimed    *metrics.Counter
}

// buildInfo exports narad_build_info, always 1, whose labels say which
// binary the node runs: a rolling upgrade shows as two versions side by
// side until it is done.
// moveStepBuckets are the bounds, in seconds, of the histograms of a
// move's phases and of its freeze: fine from 1 ms to 100 ms, where a bulk
// move's frozen window lives and its goal (40 ms at p99, issue 46) is read,
// then coarse up to the minutes a large or blocked move can take.
var moveStepBuckets = []float64{.001, .002, .005, .01, .015, .02, .025, .03, .035, .04, .05, .06, .08, .1,
	.15, .2, .3, .5, .75, 1, 2, 5, 10, 30, 60, 120, 300}

func (m *nodeMetrics) buildInfo(version string) {
	if version == "" {
		version = "unknown"
	}
	m.set.GetOrCreateGauge(fmt.Sprintf(`narad_build_info{node=%q,version=%q,goversion=%q}`, m.node, version, runtime.Version()), func() float64 { return 1 })
}

func newNodeMetrics(node string) *nodeMetrics {
	name := func(base string) string { return fmt.Sprintf(`%s{node=%q}`, base, node) }
	set := metrics.NewSet()
	m := &nodeMetrics{
		set:              set,
		node:             node,
		commitSeconds:    set.GetOrCreatePrometheusHistogram(name("narad_commit_seconds")),
		commitRecords:    set.GetOrCreateCounter(name("narad_commit_records_total")),
		commitsExpired:   set.GetOrCreateCounter(name("narad_commits_expired_total")),
		commitFailures:   set.GetOrCreateCounter(name("narad_commit_failures_total")),
		consumed:         set.GetOrCreateCounter(name("narad_consume_total")),
		acked:            set.GetOrCreateCounter(name("narad_ack_total")),
		acksRepeated:     set.GetOrCreateCounter(name("narad_acks_repeated_total")),
		leasesRestored:   set.GetOrCreateCounter(name("narad_leases_restored_total")),
		partitionRests:   set.GetOrCreateCounter(name("narad_partition_rests_total")),
		commitsAlreadyIn: set.GetOrCreateCounter(name("narad_commit_records_already_committed_total")),
		nacked:           set.GetOrCreateCounter(name("narad_nack_total")),
		extended:         set.GetOrCreateCounter(name("narad_extend_total")),
		redelivered:      set.GetOrCreateCounter(name("narad_redeliveries_total")),
		corruptSkipped:   set.GetOrCreateCounter(name("narad_corrupt_records_skipped_total")),
		actorRestarts:    set.GetOrCreateCounter(name("narad_actor_restarts_total")),
		partitionFailed:  set.GetOrCreateCounter(name("narad_partitions_failed_total")),
		httpPanics:       set.GetOrCreateCounter(name("narad_http_panics_total")),
		noticesLost:      set.GetOrCreateCounter(name("narad_commit_notices_lost_total")),
		startup:          startup.NewMetrics(set, node),
		produce:          produce.NewMetrics(set, node),
		consume:          consume.NewMetrics(set, node),
		beatsWithheld:    set.GetOrCreateCounter(name("narad_heartbeats_withheld_total")),
		placed:           set.GetOrCreateCounter(name("narad_controller_placed_partitions_total")),
		createGroups:     set.GetOrCreateCounter(name("narad_controller_create_groups_total")),
		createsGrouped:   set.GetOrCreateCounter(name("narad_controller_creates_total")),
		promoted:         set.GetOrCreateCounter(name("narad_controller_promotions_total")),
		commitsTooLarge:  set.GetOrCreateCounter(name("narad_dispatcher_commits_too_large_total")),
		fanoutCopied:     set.GetOrCreateCounter(name("narad_fanout_copied_records_total")),
		fanoutFailures:   set.GetOrCreateCounter(name("narad_fanout_copy_failures_total")),
		fanoutSkipped:    set.GetOrCreateCounter(name("narad_fanout_records_lost_to_retention_total")),
		fanoutPanics:     set.GetOrCreateCounter(name("narad_fanout_actor_panics_total")),
		movesInFlight:    set.GetOrCreateGauge(name("narad_moves_in_flight"), nil),
		movesDone:        set.GetOrCreateCounter(name("narad_moves_done_total")),
		partitionsFrozen: set.GetOrCreateGauge(name("narad_partitions_frozen"), nil),
		movesHeld:        set.GetOrCreateGauge(name("narad_moves_held"), nil),
		moveBytes:        set.GetOrCreateCounter(name("narad_move_bytes_copied_total")),
		nonConverged:     set.GetOrCreateCounter(name("narad_move_nonconverged_cutovers_total")),
		moveSeconds:      set.GetOrCreatePrometheusHistogram(name("narad_move_seconds")),
		moveGroups:       set.GetOrCreateCounter(name("narad_move_groups_total")),
		moveGroupItems:   set.GetOrCreateCounter(name("narad_move_group_requests_total")),
		commitGroups:     set.GetOrCreateCounter(name("narad_commit_groups_total")),
		commitGroupItems: set.GetOrCreateCounter(name("narad_commit_group_commits_total")),
		freezeSeconds:    set.GetOrCreatePrometheusHistogramExt(name("narad_move_freeze_seconds"), moveStepBuckets),
		// Passes per move: 1 to the seed's bound of 20 catch-up passes.
		movePasses: set.GetOrCreatePrometheusHistogramExt(name("narad_move_passes"), []float64{1, 2, 3, 5, 8, 13, 20}),
		lastFreeze: set.GetOrCreateGauge(name("narad_move_last_freeze_seconds"), nil),

		frozenPublishRefused: set.GetOrCreateCounter(name("narad_freeze_publish_refused_total")),
		installNotWhole:      set.GetOrCreateCounter(name("narad_move_install_not_whole_total")),
		handoverSetAside:     set.GetOrCreateCounter(name("narad_handover_set_aside_total")),
		handoverSetAsideRecs: set.GetOrCreateCounter(name("narad_handover_set_aside_records_total")),
		stagingSetAside:      set.GetOrCreateCounter(name("narad_move_staging_set_aside_total")),
		workerRestarts:       set.GetOrCreateCounter(name("narad_move_worker_restarts_total")),
		workersStopped:       set.GetOrCreateCounter(name("narad_move_workers_stopped_total")),

		quarantinedCopies: set.GetOrCreateGauge(name("narad_quarantined_copies"), nil),
		quarantinedBytes:  set.GetOrCreateGauge(name("narad_quarantined_bytes"), nil),
		orphanTopicDirs:   set.GetOrCreateGauge(name("narad_orphan_topic_dirs"), nil),
		sweepReclaimed:    set.GetOrCreateCounter(name("narad_sweep_reclaimed_bytes_total")),
	}
	for ph := range m.phaseSeconds {
		m.phaseSeconds[ph] = set.GetOrCreatePrometheusHistogramExt(fmt.Sprintf(`narad_move_phase_seconds{node=%q,phase=%q}`, node, move.Phase(ph)), moveStepBuckets)
	}
	m.faultsInjected = debugfaults.NewInjected(set, node)
	return m
}

// heartbeatAge records, on the metadata leader, how long ago a member's
// heartbeat last moved.
func (m *nodeMetrics) heartbeatAge(member string, seconds float64) {
	m.set.GetOrCreateGauge(fmt.Sprintf(`narad_member_heartbeat_age_seconds{node=%q,member=%q}`, m.node, member), nil).Set(seconds)
}

// movesBlocked moves narad_moves_blocked{reason} by delta.
func (m *nodeMetrics) movesBlocked(reason string, delta float64) {
	m.set.GetOrCreateGauge(fmt.Sprintf(`narad_moves_blocked{node=%q,reason=%q}`, m.node, reason), nil).Add(delta)
}

// movesBlockedSet sets narad_moves_blocked{reason} as the metadata leader
// counts it (moves with a dead source or destination).
func (m *nodeMetrics) movesBlockedSet(reason string, n float64) {
	m.set.GetOrCreateGauge(fmt.Sprintf(`narad_moves_blocked{node=%q,reason=%q}`, m.node, reason), nil).Set(n)
}

// fanoutMetrics is the handle the fan-out actors set the node's series
// through, with the node's lag gauges (narad_fanout_lag_records) over its
// set: the names stay the node's. Made once per node (newFanoutDeps).
func (m *nodeMetrics) fanoutMetrics() fanout.Metrics {
	return fanout.Metrics{Copied: m.fanoutCopied, Failures: m.fanoutFailures, Skipped: m.fanoutSkipped,
		Panics: m.fanoutPanics, Lags: fanout.NewLags(m.node, m.set)}
}

// decommissionBlocked is narad_decommission_blocked{node,reason}, node
// being the draining member (rule D7).
func (m *nodeMetrics) decommissionBlocked(member, reason string) *metrics.Gauge {
	return m.set.GetOrCreateGauge(fmt.Sprintf(`narad_decommission_blocked{node=%q,reason=%q}`, member, reason), nil)
}

// controllerMetrics is the handle the controller sets the node's series
// through: they stay registered here, in the node's set, under the names
// the dashboards and alerts read.
func (m *nodeMetrics) controllerMetrics() controller.Metrics {
	return controller.Metrics{Placed: m.placed, Promoted: m.promoted, CreateGroups: m.createGroups, CreatesGrouped: m.createsGrouped,
		HeartbeatAge: m.heartbeatAge, MovesBlocked: m.movesBlockedSet, DecommissionBlocked: m.decommissionBlocked}
}

// moverMetrics is the handle the move runner and its workers set the
// node's series through: they stay registered here, in the node's set,
// under the names the dashboards and alerts read.
func (m *nodeMetrics) moverMetrics() mover.Metrics {
	return mover.Metrics{InFlight: m.movesInFlight, Done: m.movesDone, Bytes: m.moveBytes, NonConverged: m.nonConverged,
		Seconds: m.moveSeconds, FreezeSeconds: m.freezeSeconds, Passes: m.movePasses, LastFreeze: m.lastFreeze,
		PhaseSeconds: m.phaseSeconds, InstallNotWhole: m.installNotWhole, StagingSetAside: m.stagingSetAside, Blocked: m.movesBlocked}
}

// partitionMetrics is the handle the partition actors set the node's
// series through (actors/partition): they stay registered here, under the
// names the dashboards and alerts read.
func (m *nodeMetrics) partitionMetrics() partition.Metrics {
	return partition.Metrics{CommitSeconds: m.commitSeconds, CommitRecords: m.commitRecords, CommitsExpired: m.commitsExpired,
		CommitFailures: m.commitFailures, Consumed: m.consumed, Acked: m.acked, Nacked: m.nacked, Extended: m.extended,
		Redelivered: m.redelivered, CorruptSkipped: m.corruptSkipped, FrozenPublishRefused: m.frozenPublishRefused,
		HandoverSetAside: m.handoverSetAside, HandoverSetAsideRecs: m.handoverSetAsideRecs, AcksRepeated: m.acksRepeated,
		LeasesRestored: m.leasesRestored, RecordsAlreadyCommitted: m.commitsAlreadyIn, Rests: m.partitionRests}
}

// groupMetrics is the handle the router's request groups (actors/route)
// count through: the series stay registered here, in the node's set.
func (m *nodeMetrics) groupMetrics() *route.GroupMetrics {
	return &route.GroupMetrics{CommitGroups: m.commitGroups, CommitGroupItems: m.commitGroupItems,
		MoveGroups: m.moveGroups, MoveGroupItems: m.moveGroupItems}
}

// sweeperMetrics is the handle the sweeper sets the node's series through:
// they stay registered here, in the node's set, under the names the
// dashboards and alerts read.
func (m *nodeMetrics) sweeperMetrics() sweeper.Metrics {
	return sweeper.Metrics{QuarantinedCopies: m.quarantinedCopies, QuarantinedBytes: m.quarantinedBytes,
		OrphanTopicDirs: m.orphanTopicDirs, Reclaimed: m.sweepReclaimed, Judged: m.sweepJudged}
}

// sweepJudged counts the copies the sweep judged, by verdict.
func (m *nodeMetrics) sweepJudged(a sweep.Action) *metrics.Counter {
	return m.set.GetOrCreateCounter(fmt.Sprintf(`narad_sweep_copies_judged_total{node=%q,verdict=%q}`, m.node, a))
}

// heartbeatWithheld counts heartbeats not sent because NATS did not answer
// this node: a rising count means the node is about to be marked dead.
func (m *nodeMetrics) heartbeatWithheld() { m.beatsWithheld.Inc() }

// dispatchMetrics is the dispatcher's handle on the node's series
// (actors/dispatch makes its gauges over the node's set and name).
func (m *nodeMetrics) dispatchMetrics() dispatch.Metrics {
	return dispatch.Metrics{Set: m.set, Node: m.node, CommitsTooLarge: m.commitsTooLarge}
}

// counters registers counters of the node's set whose values are read at
// scrape time: each base name in names with the value read at that index
// of read's answer (read once per scrape, for all of them).
func (m *nodeMetrics) counters(names []string, read func() []uint64) {
	m.set.RegisterMetricsWriter(func(w io.Writer) {
		for i, v := range read() {
			metrics.WriteCounterUint64(w, fmt.Sprintf(`%s{node=%q}`, names[i], m.node), v)
		}
	})
}

// gauge registers a gauge of the node's set whose value is read from fn
// at scrape time.
func (m *nodeMetrics) gauge(base string, fn func() float64) {
	m.set.GetOrCreateGauge(fmt.Sprintf(`%s{node=%q}`, base, m.node), fn)
}

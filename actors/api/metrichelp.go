package api

// metricHelp is the HELP text of every series the node exports, by family
// (the metrics library writes "# HELP name" with no text). An operator
// reading /metrics, or a dashboard's tooltip, learns from it what a series
// counts; TestEveryMetricTheCodeExportsHasHelp keeps it complete.
var metricHelp = map[string]string{
	// Produce and commit.
	"narad_produce_seconds":                    "Time from a produce request to its 202 (the record fsynced in the ingress WAL).",
	"narad_commit_seconds":                     "Time a commit waits in a partition before its records are durable and visible.",
	"narad_commit_records_total":               "Records committed into partition logs on this node.",
	"narad_commit_failures_total":              "Partition commits that failed (the dispatcher retries them).",
	"narad_wal_backlog_records":                "Records in the ingress WAL not yet committed to their partition.",
	"narad_wal_backlog_bytes":                  "Bytes in the ingress WAL not yet committed to their partition.",
	"narad_wal_records_dropped_total":          "WAL records dropped without a commit, by reason (topic deleted, no partition).",
	"narad_dispatcher_backlog_records":         "WAL records waiting for each destination node.",
	"narad_dispatcher_commits_too_large_total": "Commits refused before sending because they exceeded the transport's limit.",
	"narad_dispatcher_unknown_outcome_records": "Records whose commit outcome is unknown, held for their owner rather than resent.",
	"narad_disk_full":                          "1 while this node's last WAL write found no space left on the disk.",
	// Consume and ack.
	"narad_consume_total":                 "Records leased to consumers.",
	"narad_consume_routed_total":          "Consumes this node answered, by where the leased record's owner was (local or peer).",
	"narad_ack_total":                     "Leases acked.",
	"narad_nack_total":                    "Leases nacked (the record is delivered again).",
	"narad_extend_total":                  "Leases extended.",
	"narad_redeliveries_total":            "Records delivered again after a lease expired, a nack or a restart.",
	"narad_corrupt_records_skipped_total": "Records skipped because their frame failed its checksum.",
	"narad_commit_notices_lost_total":     "Commit notices to peers that could not be sent (a long poll then waits for its next full scan).",
	"narad_topic_backlog_records":         "Records of the topic's partitions on this node that no consumer has acked yet (leased or not).",
	"narad_topic_leases":                  "Leases out on the topic's partitions on this node.",
	// Fan-out.
	"narad_fanout_copied_records_total":            "Parent records committed to a fan-out child by this node.",
	"narad_fanout_copy_failures_total":             "Fan-out copies or reads that failed and backed off.",
	"narad_fanout_records_lost_to_retention_total": "Parent records removed by retention before any fan-out copy.",
	"narad_fanout_actor_panics_total":              "Fan-out actors that panicked and were restarted.",
	"narad_fanout_lag_records":                     "Records of the parent's partitions on this node not yet copied to the child, per link.",
	"narad_staging_disk_bytes":                     "Bytes of the copies moves are staging on this node's disk (not those set aside).",
	// Node.
	"narad_partitions_owned":          "Partitions this node serves.",
	"narad_partitions_disk_bytes":     "Bytes the logs of the partitions this node serves hold on disk.",
	"narad_partitions_failed_total":   "Partition actors stopped after repeated failures.",
	"narad_actor_restarts_total":      "Partition actor restarts after a panic.",
	"narad_http_panics_total":         "HTTP handler panics answered 500.",
	"narad_http_requests_total":       "HTTP requests, by route and status.",
	"narad_heartbeats_withheld_total": "Heartbeats this node withheld (it could not write to its disk).",
	// Controller and members.
	"narad_member_heartbeat_age_seconds":       "Seconds since the controller last saw each member's heartbeat.",
	"narad_controller_placed_partitions_total": "Partitions the controller placed on a node.",
	"narad_controller_promotions_total":        "Copies the controller promoted because their source was dead.",
	"narad_decommission_blocked":               "1 while a draining node's decommission is blocked, by reason.",
	// Moves.
	"narad_moves_in_flight":                  "Moves this node runs as the destination.",
	"narad_moves_held":                       "Moves whose freeze the source's pacer holds back.",
	"narad_moves_done_total":                 "Moves finished with a flip.",
	"narad_moves_blocked":                    "Moves blocked, by reason.",
	"narad_partitions_frozen":                "Partitions frozen for a handoff on this node.",
	"narad_move_bytes_copied_total":          "Bytes a move copied to this node.",
	"narad_move_seconds":                     "Time a move took, start to flip.",
	"narad_move_freeze_seconds":              "Time a partition stayed frozen for a move's handoff.",
	"narad_move_phase_seconds":               "Time a move spent in each phase of its worker (phase label), counted as it left the phase.",
	"narad_move_last_freeze_seconds":         "The last move's freeze, in seconds.",
	"narad_move_passes":                      "Copy passes a move needed.",
	"narad_move_nonconverged_cutovers_total": "Moves that cut over without converging within the pass limits.",
	"narad_move_staging_set_aside_total":     "Staged copies set aside rather than reused.",
	"narad_move_worker_restarts_total":       "Move worker restarts after a panic.",
	"narad_move_workers_stopped_total":       "Move workers stopped after repeated failures.",
	"narad_freeze_publish_refused_total":     "Batches refused because a freeze fenced them (rule F3's guard).",
	"narad_handover_set_aside_total":         "Handed-over copies set aside because they held records past the flipped HWM.",
	"narad_move_install_not_whole_total":     "Installs that did not leave their copy whole at the partition's path; the move does not flip.",
	"narad_handover_set_aside_records_total": "Records in handed-over copies set aside.",
	// Stale copies and quarantine.
	"narad_quarantined_copies":          "Copies of partitions set aside in quarantine on this node.",
	"narad_quarantined_bytes":           "Bytes of copies set aside in quarantine on this node.",
	"narad_orphan_topic_dirs":           "Topic directories no topic of the metastore names.",
	"narad_sweep_copies_judged_total":   "Stale copies the sweep judged, by verdict.",
	"narad_sweep_reclaimed_bytes_total": "Bytes the stale-copy sweep reclaimed.",
	// Metastore and Raft.
	"narad_metastore_proposal_seconds": "Time a metastore proposal took to commit.",
	"narad_metastore_proposals_total":  "Metastore proposals, by outcome.",
	"narad_metastore_applied_index":    "The last Raft index each shard's replica applied.",
	"narad_raft_leader":                "1 where this node leads the shard.",
	"narad_raft_term":                  "The shard's Raft term as this node knows it.",
	// NATS transport.
	"narad_nats_handled_total":         "Requests this node's NATS services handled.",
	"narad_nats_handler_panics_total":  "NATS service handler panics.",
	"narad_nats_request_errors_total":  "NATS requests to peers that failed.",
	"narad_nats_request_retries_total": "NATS requests to peers retried.",
	"narad_nats_request_seconds":       "Time a NATS request to a peer took.",
}

package actors

import (
	"log/slog"

	"github.com/naradmq/narad/actors/hints"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/storage"
)

// deps are the node-wide things every actor may use. All of them are safe
// for concurrent use or immutable; no actor's state is in here. The
// partition actors take theirs as partition.Deps (partitionDeps).
type deps struct {
	cfg      Config
	log      *slog.Logger
	metrics  *nodeMetrics
	notifier *hints.Notifier
	// pacer paces the freezes this node arms as a move's source (rule B5,
	// pacing.go: the pacer actor); nil paces nothing.
	pacer *pacer
	// lane batches the fsyncs of every partition's writes (nil when
	// Config.SyncLane.Disabled: each partition fsyncs its own log).
	lane *storage.SyncLane
	// files bounds the active segment files the node's partitions hold
	// open (nil in rigs: each log holds its own).
	files *storage.Files
	// guards is the node's topic open guard (storage.Guards, rules V9,
	// V10, S6): every open, install, rename back and reclaim of a
	// partition's directory runs under its topic's lock.
	guards *storage.Guards
	// running is the set of partitions the partitions supervisor runs an
	// actor for (partition.Running), which the move workers read (K7).
	running *partition.Running
}

// guard is the node's topic open guard over its data dir, as a move's
// install and rename back use it (actors/partition/guard.go).
func (d deps) guard() partition.Guard {
	return partition.Guard{Guards: d.guards, DataDir: d.cfg.DataDir, Log: d.log}
}

package actors

import (
	"log/slog"

	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/actors/produce"
	"github.com/naradmq/narad/actors/route"
)

// The node's side of its partitions (actors/partition): what the
// partitions supervisor and its partition actors get of the node, and the
// router as the fan-out actors' route (a *route.Router is a fanout.Route).

// partitionDeps is what d's node hands its partitions supervisor: the
// partition config and the node-wide settings it reads, the node's
// series, guard, notices and pacer, and the fan-out's deps (fd) and the
// topic figures (figures; nil in rigs). Opens, the bound on the logs
// opening at once, is the caller's to set (nil bounds nothing: rigs).
func partitionDeps(d deps, fd fanout.Deps, figures *partition.Figures) partition.Deps {
	cfg := d.cfg
	pd := partition.Deps{Config: cfg.Partition, NodeID: cfg.NodeID, DataDir: cfg.DataDir, LogConfig: cfg.Log,
		Consumer: cfg.Consumer, RequestTimeout: cfg.RequestTimeout, MoveTick: cfg.MoveTick, MoveChunkBytes: cfg.MoveChunkBytes,
		FreezeTTL: cfg.Move.FreezeTTL, ConfirmRetry: cfg.Move.RetryAfter, FreezeHoldFor: cfg.freezeHold(),
		Logger: d.log, Clock: cfg.clockOrWall(), Steady: cfg.steadyOrWall(), Pacer: d.pacer.pidOrNil(), Lane: d.lane, Files: d.files,
		Guards: d.guards, Running: d.running, Fanout: fd, Figures: figures}
	if d.metrics != nil {
		pd.Metrics = d.metrics.partitionMetrics()
	}
	if d.notifier != nil {
		pd.Notify = d.notifier.Notify
	}
	if f := cfg.faults; f != nil {
		pd.Knobs = f.partition
	}
	return pd
}

// newFanoutDeps is what the node's fan-out actors get of it, made once per
// node (its lag gauges sum every partition's share), r its router.
func newFanoutDeps(cfg Config, log *slog.Logger, m *nodeMetrics, r *route.Router) fanout.Deps {
	d := fanout.Deps{Config: cfg.Fanout, RequestTimeout: cfg.RequestTimeout, Logger: log, Route: r,
		PartitionOf: produce.PartitionForKey, Metrics: m.fanoutMetrics(), Clock: cfg.steadyOrWall()}
	if cfg.faults != nil {
		d.Knobs = cfg.faults.fanout
	}
	return d
}

package actors

import (
	"github.com/naradmq/narad/actors/dispatch"
	"github.com/naradmq/narad/actors/partition"
)

// newDispatchDeps is what the dispatcher gets of its node: d's config,
// logger and series, the replica, the ingress WAL and o for the owners
// (the router with its commit groups, route.GroupedOwners).
func newDispatchDeps(d deps, store dispatch.Store, wal dispatch.WAL, o dispatch.Owners) dispatch.Deps {
	return dispatch.Deps{Config: d.cfg.Dispatch, RequestTimeout: d.cfg.RequestTimeout,
		MaxCommitBatchBytes: d.cfg.MaxCommitBatchBytes, MaxRemoteCommitBytes: d.cfg.MaxRemoteCommitBytes,
		Logger: d.log, Store: store, Owners: o, WAL: wal, PartitionPID: partition.PID, Doors: d.running,
		Clock: d.cfg.clockOrWall(), Steady: d.cfg.steadyOrWall(), Metrics: d.metrics.dispatchMetrics()}
}

package actors

import (
	"os"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/mover"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/actors/route"
	"github.com/naradmq/narad/messages"
)

// newMoverDeps is what the move runner and its workers (actors/mover) get
// of node n: the fields of its Config they share with other actors, its
// store, its router's move groups as their source, its topic guards, the
// partitions supervisor and the sweeper, the series it registered and the
// test knobs. The flip and install batchers are made over them here; the
// node closes them once the runner stopped.
func newMoverDeps(n *Node, partitions, sweeper *actor.PID) mover.Deps {
	d := mover.Deps{NodeID: n.cfg.NodeID, DataDir: n.cfg.DataDir, LogConfig: n.cfg.Log, RequestTimeout: n.cfg.RequestTimeout,
		Tick: n.cfg.MoveTick, DeadTimeout: n.cfg.Membership.DeadTimeout, Move: n.cfg.Move, ChunkBytes: n.cfg.MoveChunkBytes,
		Config: n.cfg.Mover, Logger: n.log, Store: n.store, Source: route.NewMoveGroups(n.route, n.cfg.groupConfig(), n.metrics.groupMetrics()),
		Dirs: guardedDirs{d: n.deps, topics: n.store}, Guards: n.guards, Running: n.deps.running, Partitions: partitions, Sweeper: sweeper,
		Metrics: n.metrics.moverMetrics(), Clock: n.cfg.steadyOrWall()}
	if f := n.cfg.faults; f != nil {
		d.Knobs = f.mover
	}
	d.Flips = mover.NewFlipBatcher(n.cfg.Mover, d.Clock, n.cfg.RequestTimeout, n.store.FlipMany)
	d.Installs = mover.NewInstallBatcher(d)
	return d
}

// guardedDirs are the acts of a move on a partition's directory, under its
// topic's open guard as the partitions supervisor's own (partition.Guard):
// the preparation of the topic directory, and the rename back of an
// install.
type guardedDirs struct {
	d      deps
	topics partition.TopicRecords
}

func (g guardedDirs) Prepare(k messages.PartitionKey) error {
	return g.d.guard().PrepareTopicDir(g.topics, k)
}

func (g guardedDirs) Reclaim(k messages.PartitionKey, reclaim func(path string) (bool, error)) (bool, error) {
	return g.d.guard().ReclaimUnderGuard(k, reclaim)
}

func (g guardedDirs) RenameBack(k messages.PartitionKey, installed os.FileInfo) error {
	return g.d.guard().RenameBackUnderGuard(k, installed)
}

// Package mover moves partitions onto this node (seed 000 "Owner and
// target", seed 003's bulk moves): the move runner, one per node, and a
// move worker per partition targeted here, which copies the partition
// from its owner, freezes it, installs the copy and flips the ownership.
//
// Start with Runner (runner.go): every MoveTick, and at each change of the
// local replica, it scans the partitions targeted at this node and starts
// a worker for each (rules R1-R4, B7), stops the worker of a move gone,
// keeps what a move's workers must not forget across their restarts
// (workerCarry, rule V4), and gives the stale-copy sweeper its turn
// (sweeper.Due, rule R5). The worker (worker.go) decides nothing itself:
// move.Step (package actors/move) takes each event and returns the
// effects; Effects (effects.go) carries them out, through small ports,
// and its outcomes come back as events. The worker is Effects' edge (each
// I/O on a goroutine of its own, its timers on Deps.Clock); its ports are
// the source and the metastore (ports.go) and the staging copy on disk
// (copy.go: the copy passes, the install with its consumer position,
// cursor sidecars in sidecars.go and marker). The move simulator
// (actors/move/sim) runs the same Effects over ports onto its model, so
// read effects.go to learn what a move does, and copy.go for how a copy
// lands on disk. The flips and installs of moves that finish together
// share their Raft entries and syncs through the node's batchers
// (flipbatch.go, installbatch.go over batch.go).
//
// The package knows no Node, no router and no partition actor: what it
// needs of its node comes in Deps (its own Store, Source and TopicDirs
// interfaces, the node's topic guards, the partitions supervisor and
// sweeper PIDs, the Metrics the node registered, Knobs for tests). The
// root package actors builds the Deps (moverdeps.go), adapts its router's
// move groups as the Source, answers DropEarlier in its partitions
// supervisor, and asks the runner for its moves' progress (GetProgress).
package mover

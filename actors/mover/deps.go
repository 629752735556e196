package mover

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// Deps is what the runner and its workers need of their node. Every field
// is set by the node before the runner is spawned and only read
// afterwards; one Deps serves the runner and all of its workers.
type Deps struct {
	// NodeID is this node, the destination of every move it runs.
	NodeID string
	// DataDir holds the partitions and their staging copies; LogConfig is
	// how their logs are laid out.
	DataDir   string
	LogConfig storage.LogConfig
	// RequestTimeout bounds each request to the source, the leader or the
	// partitions supervisor, and each catch-up barrier.
	RequestTimeout time.Duration
	// Tick is the runner's tick and the workers' (the node's MoveTick,
	// rule R1), which the partitions supervisor retries on too.
	Tick time.Duration
	// DeadTimeout is how long a member goes without a heartbeat before
	// the leader marks it dead: the force-promote gate's clock (rule P2).
	DeadTimeout time.Duration
	// Clock is the runner's and the workers' time: the ticks, the
	// workers' timers, the freeze's deadlines and rule P2's gate, measured
	// from when each worker started, and the batchers' windows; nil is
	// the wall clock. It must be monotonic and never stepped, or a step
	// forward would pass the gate early (rule P2) and move a freeze's
	// deadline: the node hands its steady clock (moverdeps.go), never the
	// node clock that the nemesis steps (actors/debugfaults).
	Clock clock.Clock
	// Move is the seed's move constants, which move.Step decides by (the
	// source reads FreezeTTL too).
	Move move.Config
	// ChunkBytes bounds one chunk read of a copy (the node's
	// MoveChunkBytes, which the source serves by too).
	ChunkBytes int
	Config     Config
	Logger     *slog.Logger
	Store      Store
	Source     Source
	// Dirs acts on a partition's directory under its topic's guard;
	// Guards is that guard, which a batch of installs holds for its
	// topics (rule V9).
	Dirs   TopicDirs
	Guards *storage.Guards
	// Flips batches the workers' flips; nil: each proposes its own.
	// Installs batches their installs; nil: each installs alone.
	Flips    *FlipBatcher
	Installs *InstallBatcher
	// Running says whether the partitions supervisor runs an actor for a
	// partition (partition.Running): a worker asks the supervisor to drop
	// an earlier ownership's state (rule K7) only of one it runs. Nil
	// asks every time.
	Running interface {
		Has(k messages.PartitionKey) bool
	}
	// Partitions is the partitions supervisor, which a worker asks to
	// drop an earlier ownership's state around its install (messages.DropEarlier,
	// rule K7); nil in rigs without one. Sweeper hears every
	// SweepEveryTicks'th tick (sweeper.Due, rule R5); nil in rigs without
	// a sweep.
	Partitions, Sweeper *actor.PID
	Metrics             Metrics
	Knobs               Knobs
}

// Store is the metastore as the runner and its workers use it: the local
// replica to find moves, the leaders to confirm them, and the flip.
// *metastore.Store is one.
type Store interface {
	Topic(name string) (messages.Topic, bool)
	Member(id string) (messages.Member, bool)
	Assignment(incarnation uint64, partition int) (messages.Assignment, bool)
	TargetedAt(node string) []messages.Assignment
	// AssignmentsVersion moves whenever any assignment changes.
	AssignmentsVersion() uint64
	// Changed is closed at the replica's next change.
	Changed() <-chan struct{}
	LeaderMembers(ctx context.Context) ([]messages.Member, error)
	LeaderAssignment(ctx context.Context, incarnation uint64, partition int) (messages.Assignment, bool, error)
	// CatchUp returns once the local replica applied everything the
	// leaders had committed when it was called.
	CatchUp(ctx context.Context) error
	// Flip is a compare-and-swap of a partition's owner.
	Flip(ctx context.Context, c messages.Flip) (messages.AssignResult, error)
}

// Source is how a move reaches the partition's owner, its source: its
// freeze and listings through Ask, which may carry a request in a group
// with others to the same node, or AskAlone, which never waits for one
// (the final listing and the fence of a freeze); its bytes through
// ReadChunk. The node's router, through its move groups, is one.
type Source interface {
	Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
	AskAlone(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
	ReadChunk(ctx context.Context, k messages.PartitionKey, rc messages.ReadChunk) ([]byte, error)
}

// TopicDirs are the acts on a partition's directory that run under its
// topic's open guard, as the node's partitions supervisor runs its own
// (rules V9, V10).
type TopicDirs interface {
	// Prepare makes the topic's directory belong to k's incarnation, only
	// while the local replica's record still names it (rule V10).
	Prepare(k messages.PartitionKey) error
	// RenameBack takes a move's install off the partition's path back to
	// staging, only while the path still names installed, the directory
	// the install put there (rule V9).
	RenameBack(k messages.PartitionKey, installed os.FileInfo) error
	// Reclaim runs reclaim on k's path under the topic's guard, only while
	// the topic directory's marker names k's incarnation and no log is
	// open there (rule S6), and answers its outcome; refused, it runs
	// nothing and answers false.
	Reclaim(k messages.PartitionKey, reclaim func(path string) (bool, error)) (bool, error)
}

// Knobs are test hooks; zero in production.
type Knobs struct {
	// Pass runs on a worker's I/O goroutine before each copy pass (final:
	// under the freeze); it may block to hold a move in a phase, until ctx
	// ends (the worker stopped), and an error it returns fails the pass as
	// a listing lost on the way would.
	Pass func(ctx context.Context, k messages.PartitionKey, final bool) error
	// Flip runs on a worker's I/O goroutine right before it proposes the
	// flip; it may block until ctx ends.
	Flip func(ctx context.Context, k messages.PartitionKey)
	// Verify runs on a worker's I/O goroutine as it verifies its copy at
	// hwm before the fence: read is false when the copy was staged at hwm
	// and is untouched since, so it is not read again.
	Verify func(k messages.PartitionKey, hwm int64, read bool)
	// Listed runs on a worker's I/O goroutine after a pass's listing
	// arrived and before its chunks are read (hwm: the listing's); it may
	// block until ctx ends.
	Listed func(ctx context.Context, k messages.PartitionKey, hwm int64)
	// TrustFence breaks rule F9 on purpose: a fence is taken as accepted
	// as soon as it is sent, so the install and the flip go on without the
	// source's word that its freeze still holds at the copy's HWM. Only
	// the simulator sets it (actors/move/sim, Breaks.F9), to show that its
	// kept seed finds a fault in this package's effect code.
	TrustFence bool
}

package partition

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// ErrInvariant is an invariant the code should make impossible, caught
// where it would have broken (logged at error and counted): a publish
// past a freeze's reported HWM. Its text is the root package's
// actors.ErrInvariant's, which a client may read in an answer.
var ErrInvariant = errors.New("invariant broken")

// Deps are the node-wide things the partitions supervisor and its
// partition actors use. All of them are safe for concurrent use or
// immutable; no actor's state is in here. The node fills them in once,
// before the supervisor's spawn.
type Deps struct {
	Config Config
	// NodeID, DataDir, LogConfig, Consumer, RequestTimeout, MoveTick and
	// MoveChunkBytes are the node's settings of the same names (the root
	// Config's Log is LogConfig), which other parts of the node read too.
	NodeID         string
	DataDir        string
	LogConfig      storage.LogConfig
	Consumer       storage.ConsumerConfig
	RequestTimeout time.Duration
	// MoveTick spaces the supervisor's retries of a failed preparation.
	MoveTick time.Duration
	// MoveChunkBytes bounds one chunk a move's destination reads.
	MoveChunkBytes int
	// FreezeTTL and ConfirmRetry are the move's (move.Config's FreezeTTL
	// and RetryAfter): the gate's TTL and how soon it asks the leader
	// again after a lapse (freeze.Config); FreezeHoldFor is how long a
	// paced prepare waits at the source, already capped by the node at
	// half of RequestTimeout.
	FreezeTTL, ConfirmRetry, FreezeHoldFor time.Duration
	Logger                                 *slog.Logger
	// Clock is what a partition's decisions read (the freeze, leases, the
	// consumer-flush timer): the node clock (actors/clock); tests hand a
	// fake one. Nil is the wall clock.
	Clock clock.Clock
	// Steady is the node's steady clock (actors/clock): the supervisor's
	// retries and change passes, a commit's deadline (another node set it on its own clock),
	// a commit's latency, and the token that tells this actor's freezes
	// from an earlier life's. Nil is the wall clock. The records' times
	// come from LogConfig.Clock.
	Steady  clock.Clock
	Metrics Metrics
	// Notify announces that partition k may have records to deliver (the
	// node's commit notices); nil announces nothing (rigs).
	Notify func(k messages.PartitionKey)
	// Pacer paces the freezes this node arms as a move's source (rule
	// B5, freeze.PacerActor); nil paces nothing.
	Pacer *actor.PID
	// Lane batches the fsyncs of every partition's writes (nil when the
	// node's SyncLane is disabled: each partition fsyncs its own log).
	Lane *storage.SyncLane
	// Mailboxes runs the partition actors' mailboxes; nil is protoactor's
	// default (a goroutine a run).
	Mailboxes actor.Dispatcher
	// Running is the set of partitions the supervisor runs an actor for,
	// which it keeps and the node's move workers read (rule K7); nil in
	// rigs.
	Running *Running
	// Files bounds the active segment files the node's partitions hold
	// open (nil in rigs: each log holds its own).
	Files *storage.Files
	// Guards is the node's topic open guard (storage.Guards, rules V9,
	// V10, S6): every open, install, rename back and reclaim of a
	// partition's directory runs under its topic's lock.
	Guards *storage.Guards
	// Opens holds a token per partition opening its log
	// (the node's MaxParallelPartitionOpens); nil bounds nothing (rigs).
	Opens chan struct{}
	// Fanout is what the fan-out actors get of the node (actors/fanout:
	// the router as their route, their series, the lag gauges); zero in
	// rigs without fan-out.
	Fanout fanout.Deps
	// Figures sums each topic's backlog and leases into its gauges; nil
	// in rigs.
	Figures *Figures
	Knobs   Knobs
}

// guard is the node's open guard over its data dir.
func (d *Deps) guard() Guard { return Guard{Guards: d.Guards, DataDir: d.DataDir, Log: d.Logger} }

// Owners is the leader's read of an assignment, which a partition whose
// reported freeze lapsed asks before it takes commits again.
type Owners interface {
	LeaderAssignment(ctx context.Context, incarnation uint64, partition int) (messages.Assignment, bool, error)
}

// Store is what the supervisor reads of the metastore's local replica,
// and the leader reads its partitions ask.
type Store interface {
	TopicRecords
	Assignment(incarnation uint64, partition int) (messages.Assignment, bool)
	// AppendOwnedBy is the assignments node owns, unsorted, appended to
	// buf.
	AppendOwnedBy(node string, buf []messages.Assignment) []messages.Assignment
	// MarkOwners and OwnerChangesSince follow ownership change by change
	// between whole passes.
	MarkOwners(c *metastore.OwnerCursor)
	OwnerChangesSince(c *metastore.OwnerCursor, buf []messages.Assignment) ([]messages.Assignment, bool)
	// TopicsVersion moves whenever a topic record (its fan-out links among
	// them) may have changed, and not with heartbeats; its Existing not
	// with the creates of topics without a parent.
	TopicsVersion() metastore.TopicsVersion
	// Changed is closed at the replica's next change.
	Changed() <-chan struct{}
	Owners
}

// Knobs are failures and holds a test injects into the partition actors;
// zero in production.
type Knobs struct {
	// OpenPartition runs as a partition actor opens its log; an error
	// makes the open fail as a damaged disk would.
	OpenPartition func(messages.PartitionKey) error
	// Closing runs as a partition actor with an open log closes, before
	// its consumer state is flushed: it may block, as a close waiting for
	// a slow disk's syncs does.
	Closing func(k messages.PartitionKey)
	// Synced runs on a partition's sync goroutine after a write's fsync
	// and before the actor hears of it, so before the batch is published:
	// it may block to hold a batch between its write and its publish.
	Synced func(k messages.PartitionKey)
	// FreezeStep runs in a partition's freeze actor before each event its
	// hold steps; it may panic, as a bug would, to show that the failure
	// is the partition's own (freeze.Knobs).
	FreezeStep func(k messages.PartitionKey, ev any)
	// ReportPastPipeline makes a prepare report without waiting for the
	// batches already written: rule F3 broken on purpose, so a test can
	// watch the publish guard catch what F3 prevents.
	ReportPastPipeline bool
	// WholePass runs as the supervisor begins a pass over every partition
	// the node owns (reconcileWhole), so a test can count them.
	WholePass func()
}

// logPanic logs a panic of the actor who with its stack, then panics
// again so that the supervisor restarts the actor: a panic is never
// hidden.
func logPanic(log *slog.Logger, who string) {
	if r := recover(); r != nil {
		log.Error("actor panicked", "actor", who, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		panic(r)
	}
}

func keyString(k messages.PartitionKey) string {
	return fmt.Sprintf("%s/%d", k.Topic, k.Partition)
}

package actors

import (
	"context"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// The metastore as the actors see it: a few small roles, each the methods
// one kind of use needs. *metastore.Store has every role; Node, the
// composition root, hands each actor the store typed as the roles it uses,
// so an actor can be tested against a fake of just those (see
// partitions_test.go) and a reader cannot propose by accident.

// replica is stale reads of the local replica: point lookups and small
// scans, answered from memory, which may lag the shard leaders by
// milliseconds. Every decision taken on them is checked again by a
// compare-and-set, or by the node the request reaches.
type replica interface {
	routeReader
	Topics() []messages.Topic
	Members() []messages.Member
	Assignments(incarnation uint64, partitions int) []messages.Assignment
	OwnedBy(node string) []messages.Assignment
	TargetedAt(node string) []messages.Assignment
	// AssignmentsVersion moves whenever any assignment changes.
	AssignmentsVersion() uint64
}

// planReads are the local replica's reads a planning round is built
// from, each costing the moves or the round's budget, not the cluster's
// partitions.
type planReads interface {
	// Moving lists every assignment with a target (the moves planned or
	// in flight).
	Moving() []messages.Assignment
	// OwnedCount is how many partitions node owns, moving or not.
	OwnedCount(node string) int
	// FirstSettled is up to k of the partitions node owns with no target,
	// in no particular order.
	FirstSettled(node string, k int) []messages.PartitionKey
	// TopicParent is the incarnation and fan-out parent of a listed topic.
	TopicParent(name string) (incarnation uint64, parent string, ok bool)
}

// watcher tells when the local replica changed.
type watcher interface {
	// Changed is closed at the replica's next change.
	Changed() <-chan struct{}
}

// leaderReads are linearizable reads, through the shards' leaders.
type leaderReads interface {
	LeaderMembers(ctx context.Context) ([]messages.Member, error)
	LeaderAssignment(ctx context.Context, incarnation uint64, partition int) (messages.Assignment, bool, error)
	// CatchUp returns once the local replica applied everything the
	// leaders had committed when it was called.
	CatchUp(ctx context.Context) error
}

// assignCommands propose to the assignment shards.
type assignCommands interface {
	SetTarget(ctx context.Context, c messages.SetTarget) (messages.AssignResult, error)
	// SetTargetMany is many SetTargets in an entry per shard, an outcome
	// each, in order.
	SetTargetMany(ctx context.Context, cs []messages.SetTarget) []metastore.TargetOutcome
	// Flip is a compare-and-swap of a partition's owner.
	Flip(ctx context.Context, c messages.Flip) (messages.AssignResult, error)
	PutAssignments(ctx context.Context, as []messages.Assignment) error
	DeleteAssignments(ctx context.Context, incarnation uint64, partitions int) error
}

// metaCommands propose topics and member changes to the metadata shard.
type metaCommands interface {
	CreateTopic(ctx context.Context, t messages.Topic) (messages.Topic, error)
	DeleteTopic(ctx context.Context, name string) (messages.Topic, error)
	AlterTopic(ctx context.Context, a messages.AlterTopic) (messages.Topic, error)
	SetMemberStatusIf(ctx context.Context, c messages.SetMemberStatus) (messages.MetaResult, error)
	SetMemberRole(ctx context.Context, id, role string) error
	RemoveMember(ctx context.Context, id string) (messages.Member, error)
}

// raftAdmin is the Raft side of the metastore: who leads, and the voters
// and non-voters of each shard.
type raftAdmin interface {
	ReplicaID() uint64
	Shards() []uint64
	Leader(shard uint64) (replicaID uint64, ok bool)
	RaftMembership(ctx context.Context, shard uint64) (metastore.RaftMembership, error)
	PromoteToVoter(ctx context.Context, replicaID uint64, raftAddr string) error
	RemoveReplica(ctx context.Context, replicaID uint64) error
	TransferAllLeadership(ctx context.Context, away uint64) error
}

// partitionsStore is what the partitions supervisor reads: which
// partitions this node owns, and when that may have changed.
type partitionsStore interface {
	replica
	// AppendOwnedBy is OwnedBy unsorted, appended to buf.
	AppendOwnedBy(node string, buf []messages.Assignment) []messages.Assignment
	// MarkOwners and OwnerChangesSince follow ownership change by change
	// between whole passes.
	MarkOwners(c *metastore.OwnerCursor)
	OwnerChangesSince(c *metastore.OwnerCursor, buf []messages.Assignment) ([]messages.Assignment, bool)
	// MetaVersion moves whenever a topic record (its fan-out links among
	// them) may have changed.
	MetaVersion() uint64
	watcher
	ownerReader
}

// ownerReader is what a partition's freeze gate asks after a reported
// freeze lapsed: the leader's assignment, read linearizably, after which
// the local replica has applied every flip committed before the read.
type ownerReader interface {
	LeaderAssignment(ctx context.Context, incarnation uint64, partition int) (messages.Assignment, bool, error)
}

// moveStore is what the runner and its workers use: the replica to find
// moves, the leaders to confirm them, and the flip.
type moveStore interface {
	replica
	watcher
	leaderReads
	Flip(ctx context.Context, c messages.Flip) (messages.AssignResult, error)
}

// controllerStore is what the controller uses, which is every role but the
// watch: it is the one writer of topics, placements and liveness.
type controllerStore interface {
	replica
	planReads
	watcher
	leaderReads
	assignCommands
	metaCommands
	raftAdmin
}

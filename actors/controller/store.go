package controller

import (
	"context"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// The metastore as the controller uses it, in the roles of the root
// package's roles.go cut down to the methods the controller calls: a test
// fakes only what its pass reads and proposes, and the controller cannot
// flip an owner (rule O2: it writes targets; a destination flips).
// *metastore.Store has every role.

// Replica is stale reads of the local replica, answered from memory. Every
// decision taken on them is checked again by a compare-and-set.
type Replica interface {
	Topic(name string) (messages.Topic, bool)
	Member(id string) (messages.Member, bool)
	Topics() []messages.Topic
	Members() []messages.Member
	Assignments(incarnation uint64, partitions int) []messages.Assignment
	OwnedBy(node string) []messages.Assignment
	TargetedAt(node string) []messages.Assignment
}

// PlanReads are the local replica's reads a planning round is built from,
// each costing the moves or the round's budget, not the cluster's
// partitions.
type PlanReads interface {
	// Moving lists every assignment with a target (the moves planned or
	// in flight).
	Moving() []messages.Assignment
	// OwnedCount is how many partitions node owns, moving or not.
	OwnedCount(node string) int
	// FirstSettled is up to k of the partitions node owns with no target,
	// in no particular order.
	FirstSettled(node string, k int) []messages.PartitionKey
	// CurrentParent is whether the topic created as incarnation is listed
	// (not deleted or recreated since), and its fan-out parent.
	CurrentParent(incarnation uint64) (parent string, current bool)
}

// LeaderReads are linearizable reads, through the shards' leaders.
type LeaderReads interface {
	LeaderMembers(ctx context.Context) ([]messages.Member, error)
	// CatchUp returns once the local replica applied everything the
	// leaders had committed when it was called (rule L4's barrier).
	CatchUp(ctx context.Context) error
}

// AssignCommands propose to the assignment shards: placements, their
// deletion, and targets.
type AssignCommands interface {
	SetTarget(ctx context.Context, c messages.SetTarget) (messages.AssignResult, error)
	// SetTargetMany is many SetTargets in an entry per shard, an outcome
	// each, in order.
	SetTargetMany(ctx context.Context, cs []messages.SetTarget) []metastore.TargetOutcome
	// RecreateMany gives a lost member's partitions to live nodes, empty,
	// in an entry per shard, an outcome each, in order.
	RecreateMany(ctx context.Context, cs []messages.Recreate) []metastore.RecreateOutcome
	PutAssignments(ctx context.Context, as []messages.Assignment) error
	DeleteAssignments(ctx context.Context, incarnation uint64, partitions int) error
}

// MetaCommands propose topics and member changes to the metadata shard.
type MetaCommands interface {
	CreateTopic(ctx context.Context, t messages.Topic) (messages.Topic, error)
	DeleteTopic(ctx context.Context, name string) (messages.Topic, error)
	AlterTopic(ctx context.Context, a messages.AlterTopic) (messages.Topic, error)
	SetMemberStatusIf(ctx context.Context, c messages.SetMemberStatus) (messages.MetaResult, error)
	SetMemberRole(ctx context.Context, id, role string) error
	RemoveMember(ctx context.Context, id string) (messages.Member, error)
}

// RaftAdmin is the Raft side of the metastore: who leads, and the voters
// and non-voters of each shard.
type RaftAdmin interface {
	ReplicaID() uint64
	Shards() []uint64
	Leader(shard uint64) (replicaID uint64, ok bool)
	RaftMembership(ctx context.Context, shard uint64) (metastore.RaftMembership, error)
	PromoteToVoter(ctx context.Context, replicaID uint64, raftAddr string) error
	RemoveReplica(ctx context.Context, replicaID uint64) error
	TransferAllLeadership(ctx context.Context, away uint64) error
}

// Store is every role the controller uses: it is the one writer of topics,
// placements, targets and liveness. Changed (closed at the replica's next
// change) drives its watch.
type Store interface {
	Replica
	PlanReads
	LeaderReads
	AssignCommands
	MetaCommands
	RaftAdmin
	Changed() <-chan struct{}
}

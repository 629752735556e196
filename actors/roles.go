package actors

import (
	"context"

	"github.com/naradmq/narad/actors/route"
	"github.com/naradmq/narad/messages"
)

// The metastore as the actors see it: a few small roles, each the methods
// one kind of use needs. *metastore.Store has every role; Node, the
// composition root, hands each actor the store typed as the roles it uses,
// so an actor can be tested against a fake of just those (see
// partitions_test.go) and a reader cannot propose by accident. The
// controller (actors/controller) declares the roles it uses itself
// (controller.Store).

// replica is stale reads of the local replica: point lookups and small
// scans, answered from memory, which may lag the shard leaders by
// milliseconds. Every decision taken on them is checked again by a
// compare-and-set, or by the node the request reaches.
type replica interface {
	route.Reader
	Topics() []messages.Topic
	Members() []messages.Member
	Assignments(incarnation uint64, partitions int) []messages.Assignment
	OwnedBy(node string) []messages.Assignment
	TargetedAt(node string) []messages.Assignment
	// AssignmentsVersion moves whenever any assignment changes.
	AssignmentsVersion() uint64
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

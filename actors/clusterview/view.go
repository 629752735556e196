// Package clusterview is what an operator asks of the whole cluster: the
// members listing with each member's quarantine figures, the moves listing
// with its progress and summary, the abort of one move, and the
// quarantine's listing and release. Each answers from the local replica
// and gathers the rest from every member at once over NATS, within half
// of the caller's budget, so that one member that hangs costs the answer
// its share, not the answer (askEach, FanOutBudget).
//
// Start with View (this file): its Deps say what it needs of the node.
// Then members.go and moves.go, the listings; summary.go, the moves'
// summary; quarantine.go, the services and admin verbs over the copies set
// aside, whose book is the sweeper's (actors/sweeper).
package clusterview

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Replica is what the listings and the abort read and propose through the
// node's metastore replica.
type Replica interface {
	Members() []messages.Member
	Member(id string) (messages.Member, bool)
	OwnedBy(node string) []messages.Assignment
	Moving() []messages.Assignment
	Topic(name string) (messages.Topic, bool)
	LeaderAssignment(ctx context.Context, incarnation uint64, partition int) (messages.Assignment, bool, error)
	SetTarget(ctx context.Context, c messages.SetTarget) (messages.AssignResult, error)
	// ClusterVersion and LeaderMembers read the cluster version and the
	// members for the version listing; SetClusterVersion finalizes.
	ClusterVersion() int
	LeaderMembers(ctx context.Context) ([]messages.Member, error)
	SetClusterVersion(ctx context.Context, v int) error
	// Shards and LeaderOf name the Raft shards, the metadata shard
	// first, and who leads each as this replica knows it.
	Shards() []uint64
	LeaderOf(shard uint64) (replicaID, term uint64, ok bool)
}

// Deps is what a View needs of its node. Every field is set before the
// first call and only read afterwards.
type Deps struct {
	NodeID string
	// RequestTimeout bounds one ask of a peer, and a gather of them all.
	RequestTimeout time.Duration
	Replica        Replica
	Logger         *slog.Logger
	// NATS reaches the other members; nil answers for this node alone.
	NATS *transport.Transport
	// Request asks one of this node's actors and waits for its answer.
	Request func(ctx context.Context, pid *actor.PID, msg any) (any, error)
	// Mover, Pacer and Sweeper are the actors asked: the move runner for
	// its workers' progress, the freeze pacer for its figures, the
	// sweeper for the quarantine.
	Mover, Pacer, Sweeper *actor.PID
	// MovesDone and MoveBytes are this node's counters as a move's
	// destination, which the summary adds up.
	MovesDone, MoveBytes *metrics.Counter
	// Clock reads what is left of a caller's budget. The wall clock: it
	// is measured against context deadlines (nil is the wall clock).
	Clock clock.Clock
}

// View answers the cluster-wide listings and verbs. Safe for concurrent
// use: it holds nothing but its Deps.
type View struct{ d Deps }

// New is the view of the node d describes.
func New(d Deps) *View {
	d.Clock = clock.Or(d.Clock)
	return &View{d: d}
}

// ServeMoves registers the services the other members gather a moves
// listing from: each destination's progress, and each node's counts for
// the summary. The quarantine's are served with the admin verbs
// (ServeQuarantine).
func (v *View) ServeMoves() error {
	return errors.Join(v.serveMoves(), v.serveMoveCounts())
}

// FanOutBudget is how long a request to every member may take: half of
// what is left of the caller's budget, at most RequestTimeout, so that a
// member that hangs costs the answer its share, not the answer.
func (v *View) FanOutBudget(ctx context.Context) time.Duration {
	budget := v.d.RequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, dl.Sub(v.d.Clock.Now())/2)
	}
	return budget
}

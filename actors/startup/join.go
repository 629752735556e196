package startup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// joinRetry is how long a joiner waits before it asks the join verb
// again when nobody answered or the outcome is unknown.
const joinRetry = 500 * time.Millisecond

// JoinStore is what the join verb reads and proposes on a member's
// replica, and what a joiner reads of its own.
type JoinStore interface {
	Members() []messages.Member
	ReplicaID() uint64
	AllocateReplicaID(ctx context.Context) (uint64, error)
	RaftMembership(ctx context.Context, shard uint64) (metastore.RaftMembership, error)
	AddNonVoter(ctx context.Context, replicaID uint64, raftAddr string) error
}

// Join is both sides of the join verb (narad.<cluster>.admin.join): a
// joiner asks it to be admitted with a replica id (or to be given one),
// and a member that is ready answers it by adding the joiner's replicas
// as non-voters.
type Join struct {
	// NodeID, RaftAddr and DataDir are this node's.
	NodeID, RaftAddr, DataDir string
	// NATS is the node's connection; nil until dialled (Dial), or without
	// NATS, when a join cannot reach the cluster.
	NATS *transport.Transport
	// Dial connects the node's NATS transport, serving nothing yet, for a
	// joiner that must ask for its replica id before its metastore
	// opens; nil without NATS.
	Dial func(ctx context.Context) (*transport.Transport, error)
	// Store is the node's replica; nil while a joiner settles its id.
	Store JoinStore
	// Ready is whether this node serves: only a ready member admits.
	Ready func() bool
	Log   *slog.Logger
	// Clock paces a joiner's asks: the wall clock in a node.
	Clock clock.Clock
}

// Admit adds a joining node's replicas to every shard as non-voters. It
// is idempotent, so a joining node retries until it is answered. A request
// without a replica id is answered with a fresh one (allocateReplica),
// admitting nothing yet: the joiner keeps it, opens its metastore with it
// and asks again with it.
func (j Join) Admit(ctx context.Context, _ string, in messages.JoinRequest) (messages.JoinReply, error) {
	if !j.Ready() {
		// The verb is registered just before the node reads ready; a
		// member that is ready answers the joiner's retry.
		return messages.JoinReply{}, transport.Errorf(transport.StatusUnavailable, "%s is not ready", j.NodeID)
	}
	if in.NodeID == "" || in.RaftAddr == "" {
		return messages.JoinReply{}, transport.Errorf(400, "join needs node_id and raft_addr")
	}
	if in.ReplicaID == 0 {
		return j.allocateReplica(ctx, in)
	}
	why, err := j.refuseReplica(ctx, in)
	if err != nil {
		return messages.JoinReply{}, transport.Errorf(transport.StatusTimeout, "join of %s: %v", in.NodeID, err)
	}
	if why != "" {
		return messages.JoinReply{}, transport.Errorf(409, "%s", why)
	}
	if err := j.Store.AddNonVoter(ctx, in.ReplicaID, in.RaftAddr); err != nil {
		if errors.Is(err, metastore.ErrRefused) || errors.Is(err, metastore.ErrInvalid) {
			return messages.JoinReply{}, transport.Errorf(409, "replica id %d cannot join: %v", in.ReplicaID, err)
		}
		return messages.JoinReply{}, transport.Errorf(transport.StatusTimeout, "join of %s: %v", in.NodeID, err)
	}
	j.Log.Info("admitted a node as a non-voter", "joining", in.NodeID, "replica", in.ReplicaID, "raft", in.RaftAddr)
	return messages.JoinReply{Admitted: true, ReplicaID: in.ReplicaID}, nil
}

// Request asks the running cluster to admit this node with its replica
// id (which came from src). A refusal says what to do about it.
func (j Join) Request(ctx context.Context, src Source) error {
	_, err := j.ask(ctx, messages.JoinRequest{NodeID: j.NodeID, ReplicaID: j.Store.ReplicaID(), RaftAddr: j.RaftAddr})
	var refused *joinRefusal
	if errors.As(err, &refused) {
		return fmt.Errorf("join refused: %s; %s: %w", refused.why, src.remedy(), errs.ErrInvalid)
	}
	return err
}

// joinRefusal is the join verb's final refusal, in the member's words.
type joinRefusal struct{ why string }

func (r *joinRefusal) Error() string { return "join refused: " + r.why }
func (r *joinRefusal) Unwrap() error { return errs.ErrInvalid }

// ask sends req to the join verb, retrying while nobody answers or the
// outcome is unknown, until ctx ends: admitted when req names a replica
// id, else answered with one. A refusal (the replica id was used before or
// is taken, the address is taken; 400 from a member too old to allocate)
// is final.
func (j Join) ask(ctx context.Context, req messages.JoinRequest) (messages.JoinReply, error) {
	if j.NATS == nil {
		return messages.JoinReply{}, fmt.Errorf("join needs NATS to reach the cluster: %w", errs.ErrInvalid)
	}
	for {
		var rep messages.JoinReply
		err := transport.RequestAdminJSON(ctx, j.NATS, "join", req, &rep)
		var re *transport.RemoteError
		switch {
		case err == nil && (rep.Admitted || req.ReplicaID == 0 && rep.ReplicaID != 0):
			return rep, nil
		case errors.As(err, &re) && (re.Status == 409 || re.Status == 400):
			return messages.JoinReply{}, &joinRefusal{why: re.Msg}
		}
		j.Log.Warn("join: not admitted yet; retrying", "err", err)
		if clock.Sleep(ctx, j.Clock, joinRetry) != nil {
			return messages.JoinReply{}, fmt.Errorf("join: %w", ctx.Err())
		}
	}
}

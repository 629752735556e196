// Package decommission is a node's side of decommission as rebalance
// (seed 000, rules D1-D8): the verb that marks a member draining, and the
// drain service the controller asks before it removes one.
//
// Marking a member draining takes it out of the planner's receivers while
// it stays a live owner, so the planner sheds its partitions; once it owns
// nothing, has handed its ingress WAL to the owners and is no move's
// target, the controller (actors/controller: its decommission pass)
// removes it from the Raft configuration behind the guards, then drops its
// member record. Start with Drain.Decommission; the controller's half is
// actors/controller/decommission.go.
package decommission

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/naradmq/narad/actors/controller"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Replica is what the verbs read and propose through the node's metastore
// replica.
type Replica interface {
	OwnedBy(node string) []messages.Assignment
	Member(id string) (messages.Member, bool)
	LeaderMembers(ctx context.Context) ([]messages.Member, error)
	RaftMembership(ctx context.Context, shard uint64) (metastore.RaftMembership, error)
	SetDraining(ctx context.Context, id string, draining bool) error
	ForgetMember(ctx context.Context, id string) (messages.Member, error)
	ClusterVersion() int
}

// Deps is what a Drain needs of its node. Every field is set before the
// first call and only read afterwards.
type Deps struct {
	// NodeID is this node's member id: the one whose flag Draining reads.
	NodeID  string
	Replica Replica
	Logger  *slog.Logger
	// WALBacklog is the records the ingress WAL holds for their owners.
	WALBacklog func() int64
	// Producing is the produce calls admitted and not yet answered.
	Producing func() int64
}

// Drain is the node's decommission verbs and drain service. Safe for
// concurrent use: it holds nothing but its Deps.
type Drain struct{ d Deps }

// New is the drain side of the node d describes.
func New(d Deps) *Drain { return &Drain{d: d} }

// Verdict is the verb's answer: how many partitions the member owns, and
// why it can never leave ("" when it can).
type Verdict struct {
	OwnedPartitions int
	Refusal         string
}

// Decommission judges whether member id can ever leave (rule D8) and,
// unless dryRun or refused, marks it draining: the planner then moves its
// partitions off. Errors are errs.ErrNotFound for an unknown member and
// errs.ErrUnavailable when the metastore cannot answer.
func (s *Drain) Decommission(ctx context.Context, id string, dryRun bool) (Verdict, error) {
	v := Verdict{OwnedPartitions: len(s.d.Replica.OwnedBy(id))}
	members, err := s.d.Replica.LeaderMembers(ctx)
	if err != nil {
		return v, fmt.Errorf("decommission %s: read the members: %w: %w", id, errs.ErrUnavailable, err)
	}
	if !slices.ContainsFunc(members, func(m messages.Member) bool { return m.ID == id }) {
		return v, fmt.Errorf("decommission %s: member %w", id, errs.ErrNotFound)
	}
	rm, err := s.d.Replica.RaftMembership(ctx, metastore.MetaShard)
	if err != nil {
		return v, fmt.Errorf("decommission %s: read the voters: %w: %w", id, errs.ErrUnavailable, err)
	}
	if why := controller.DecommissionVerdict(id, members, controller.RaftView{Voters: rm.Voters, NonVoters: rm.NonVoters}, v.OwnedPartitions); why != "" {
		v.Refusal = "decommission cannot complete: " + why
		return v, nil
	}
	if dryRun {
		return v, nil
	}
	if err := s.d.Replica.SetDraining(ctx, id, true); err != nil {
		return v, fmt.Errorf("decommission %s: set the drain flag: %w: %w", id, errs.ErrUnavailable, err)
	}
	s.d.Logger.Warn("audit cluster.member.decommission", "member", id, "owned_partitions", v.OwnedPartitions)
	return v, nil
}

// ForgetVerdict is the forget verb's answer: the partitions the member
// owns (each re-created empty elsewhere), why it may not be forgotten
// ("" when it may), and what its removal from Raft waits for ("" when
// nothing).
type ForgetVerdict struct {
	Partitions int
	Refusal    string
	Removal    string
}

// Forget forgets dead member id, whose disk is lost for good: unless
// dryRun or refused, it marks the member lost, and the controller
// re-creates its partitions empty on live nodes (each log from a floor
// above every offset the lost copy handed out) and removes it behind the
// voter guards without its ingress WAL's hand-off. Every record only it
// held is gone, so a forget that is not a dry run needs acceptDataLoss
// (errs.ErrInvalid without). Errors are errs.ErrNotFound for an unknown
// member and errs.ErrUnavailable when the metastore cannot answer.
func (s *Drain) Forget(ctx context.Context, id string, dryRun, acceptDataLoss bool) (ForgetVerdict, error) {
	v := ForgetVerdict{Partitions: len(s.d.Replica.OwnedBy(id))}
	members, err := s.d.Replica.LeaderMembers(ctx)
	if err != nil {
		return v, fmt.Errorf("forget %s: read the members: %w: %w", id, errs.ErrUnavailable, err)
	}
	i := slices.IndexFunc(members, func(m messages.Member) bool { return m.ID == id })
	if i < 0 {
		return v, fmt.Errorf("forget %s: member %w", id, errs.ErrNotFound)
	}
	rm, err := s.d.Replica.RaftMembership(ctx, metastore.MetaShard)
	if err != nil {
		return v, fmt.Errorf("forget %s: read the voters: %w: %w", id, errs.ErrUnavailable, err)
	}
	if v.Refusal = ForgetRefusal(members[i], members, s.d.Replica.ClusterVersion()); v.Refusal != "" {
		return v, nil
	}
	// Its partitions go now; its vote only behind the voter guards, which
	// may wait for a node to join. Judged as a member that owns nothing.
	if why := controller.DecommissionVerdict(id, members, controller.RaftView{Voters: rm.Voters, NonVoters: rm.NonVoters}, 0); why != "" {
		v.Removal = "it stays in the Raft configuration until a node joins: " + why
	}
	if dryRun {
		return v, nil
	}
	if !acceptDataLoss {
		return v, fmt.Errorf("forget %s: every record only it held is lost; say so to go on: %w", id, errs.ErrInvalid)
	}
	if _, err := s.d.Replica.ForgetMember(ctx, id); err != nil {
		if errors.Is(err, metastore.ErrRefused) {
			v.Refusal = "the member is alive again: decommission it instead"
			return v, nil
		}
		return v, fmt.Errorf("forget %s: %w: %w", id, errs.ErrUnavailable, err)
	}
	s.d.Logger.Warn("audit cluster.member.forget", "member", id, "partitions_recreated_empty", v.Partitions, "data_loss_accepted", true)
	return v, nil
}

// ForgetRefusal says why member m may not be forgotten ("" when it may):
// only a dead member, only once every member reads the floors its
// re-created partitions start at, and only with a live member to take
// them. It is pure, as DecommissionVerdict is.
func ForgetRefusal(m messages.Member, members []messages.Member, clusterVersion int) string {
	if m.Status != messages.MemberDead {
		return "the member is alive: decommission it instead, which moves its partitions with their records"
	}
	if clusterVersion < messages.ClusterVersionLostDisk {
		return fmt.Sprintf("the cluster is at version %d: finalize version %d first (narad cluster version --finalize)", clusterVersion, messages.ClusterVersionLostDisk)
	}
	for _, o := range members {
		if o.ID != m.ID && o.Status == messages.MemberAlive && !o.Draining && !o.Leaving {
			return ""
		}
	}
	return "no other live member can take its partitions"
}

// CancelDecommission clears the drain flag; the planner may then give the
// node partitions again. A refusal of the metastore's is returned with its
// sentinel for the caller to name in its own terms.
func (s *Drain) CancelDecommission(ctx context.Context, id string) error {
	if _, ok := s.d.Replica.Member(id); !ok {
		return fmt.Errorf("cancel decommission of %s: member %w", id, errs.ErrNotFound)
	}
	if err := s.d.Replica.SetDraining(ctx, id, false); err != nil {
		return fmt.Errorf("cancel decommission of %s: %w", id, err)
	}
	s.d.Logger.Warn("audit cluster.member.decommission.cancel", "member", id)
	return nil
}

// Draining reports whether this node's member record says it is being
// decommissioned: it then refuses client produce (rule D6).
func (s *Drain) Draining() bool {
	m, ok := s.d.Replica.Member(s.d.NodeID)
	return ok && m.Draining
}

// Serve answers the controller's question before a removal
// (controller.DrainService) over t: does this node refuse produce, and has
// its ingress WAL handed every accepted record to its owner (rule D6)?
func (s *Drain) Serve(t *transport.Transport) error {
	return transport.HandleJSON(t, controller.DrainService, func(context.Context, string, struct{}) (controller.DrainStatus, error) {
		return s.Status(), nil
	})
}

// Status is what the drain service answers. Backlog counts the records
// the ingress WAL holds for their owners and the produce calls not yet
// answered: an append waiting for its fsync is not in the WAL's backlog
// yet, and a produce admitted before the flag may still append and answer
// 202. The flag is read first: a produce counted after that read reads the
// flag after it too, and is refused.
func (s *Drain) Status() controller.DrainStatus {
	refusing := s.Draining()
	producing := s.d.Producing()
	held := s.d.WALBacklog()
	return controller.DrainStatus{Refusing: refusing, Backlog: held + producing}
}

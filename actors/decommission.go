package actors

import (
	"context"
	"fmt"
	"slices"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/controller"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Decommission as rebalance (seed 000, rules D1-D8): marking a member
// draining takes it out of the planner's receivers while it stays a live
// owner, so the planner sheds its partitions; once it owns nothing, has
// handed its ingress WAL to the owners and is no move's target, the
// controller (actors/controller: its decommission pass) removes it from the
// Raft configuration behind the guards, then drops its member record. The
// node's side is here: the verb that marks a member draining, and the drain
// service the controller asks before a removal.

// Decommission judges whether member id can ever leave (rule D8) and,
// unless dryRun or refused, marks it draining: the planner then moves its
// partitions off. Errors are ErrNotFound for an unknown member and
// ErrUnavailable when the metastore cannot answer.
func (n *Node) Decommission(ctx context.Context, id string, dryRun bool) (api.DecommissionVerdict, error) {
	v := api.DecommissionVerdict{OwnedPartitions: len(n.store.OwnedBy(id))}
	members, err := n.store.LeaderMembers(ctx)
	if err != nil {
		return v, fmt.Errorf("decommission %s: read the members: %w: %w", id, ErrUnavailable, err)
	}
	if !slices.ContainsFunc(members, func(m messages.Member) bool { return m.ID == id }) {
		return v, fmt.Errorf("decommission %s: member %w", id, ErrNotFound)
	}
	rm, err := n.store.RaftMembership(ctx, metastore.MetaShard)
	if err != nil {
		return v, fmt.Errorf("decommission %s: read the voters: %w: %w", id, ErrUnavailable, err)
	}
	if why := controller.DecommissionVerdict(id, members, controller.RaftView{Voters: rm.Voters, NonVoters: rm.NonVoters}, v.OwnedPartitions); why != "" {
		v.Refusal = "decommission cannot complete: " + why
		return v, nil
	}
	if dryRun {
		return v, nil
	}
	if err := n.store.SetDraining(ctx, id, true); err != nil {
		return v, fmt.Errorf("decommission %s: set the drain flag: %w: %w", id, ErrUnavailable, err)
	}
	n.log.Warn("audit cluster.member.decommission", "member", id, "owned_partitions", v.OwnedPartitions)
	return v, nil
}

// CancelDecommission clears the drain flag; the planner may then give the
// node partitions again.
func (n *Node) CancelDecommission(ctx context.Context, id string) error {
	if _, ok := n.store.Member(id); !ok {
		return fmt.Errorf("cancel decommission of %s: member %w", id, ErrNotFound)
	}
	if err := n.store.SetDraining(ctx, id, false); err != nil {
		return fmt.Errorf("cancel decommission of %s: %w", id, fromMetastore(err))
	}
	n.log.Warn("audit cluster.member.decommission.cancel", "member", id)
	return nil
}

// draining reports whether this node's member record says it is being
// decommissioned: it then refuses client produce (rule D6).
func (n *Node) draining() bool {
	m, ok := n.store.Member(n.cfg.NodeID)
	return ok && m.Draining
}

// serveDrain answers the controller's question before a removal
// (controller.DrainService): does this node refuse produce, and has its
// ingress WAL handed every accepted record to its owner (rule D6)?
func (n *Node) serveDrain() error {
	return transport.HandleJSON(n.nats, controller.DrainService, func(context.Context, string, struct{}) (controller.DrainStatus, error) {
		return n.drainStatus(), nil
	})
}

// drainStatus is what the drain service answers. Backlog counts the
// records the ingress WAL holds for their owners and the produce calls
// not yet answered: an append waiting for its fsync is not in the WAL's
// backlog yet, and a produce admitted before the flag may still append
// and answer 202. The flag is read first: a produce counted after that
// read reads the flag after it too, and is refused.
func (n *Node) drainStatus() controller.DrainStatus {
	refusing := n.draining()
	producing := n.producing.Load()
	held, _ := n.wal.Backlog()
	return controller.DrainStatus{Refusing: refusing, Backlog: int64(held) + producing}
}

package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Decommission as rebalance (seed 000, rules D1-D8): marking a member
// draining takes it out of the planner's receivers while it stays a live
// owner, so the planner sheds its partitions; once it owns nothing, has
// handed its ingress WAL to the owners and is no move's target, the
// controller removes it from the Raft configuration behind the guards,
// then drops its member record.

// MinVoters is the fewest voters a removal may leave (rule D2): three
// survive one failure.
const MinVoters = 3

// raftView is the metadata shard's Raft configuration as the decommission
// rules need it.
type raftView struct {
	Voters, NonVoters map[uint64]string
}

// decommissionVerdict says whether draining member id can ever complete
// (rule D8): "" when it can, else why not. It is pure: a function of the
// members, the Raft configuration and what the member owns.
func decommissionVerdict(id string, members []messages.Member, rv raftView, owned int) string {
	i := slices.IndexFunc(members, func(m messages.Member) bool { return m.ID == id })
	if i < 0 {
		return "not a member"
	}
	me := members[i]
	if owned > 0 && me.Status != messages.MemberAlive {
		return "the member is dead and owns partitions: they cannot be moved off it"
	}
	receivers := 0
	for _, m := range members {
		if m.ID != id && m.Status == messages.MemberAlive && !m.Draining && !m.Leaving {
			receivers++
		}
	}
	if receivers == 0 {
		return "no other live member can take its partitions"
	}
	if _, voter := rv.Voters[me.ReplicaID]; !voter {
		return "" // a non-voter leaves without the voter guards (rule D3)
	}
	// Voters after the removal, counting the non-voters that can be
	// promoted first (alive, not draining, not leaving).
	alive := map[uint64]bool{}
	promotable := 0
	for _, m := range members {
		ok := m.Status == messages.MemberAlive && !m.Draining && !m.Leaving
		alive[m.ReplicaID] = m.Status == messages.MemberAlive
		if _, nv := rv.NonVoters[m.ReplicaID]; nv && ok {
			promotable++
		}
	}
	left := len(rv.Voters) - 1 + promotable
	if left < MinVoters {
		return fmt.Sprintf("too few voters: %d would be left, the minimum is %d", left, MinVoters)
	}
	aliveLeft := promotable
	for r := range rv.Voters {
		if r != me.ReplicaID && alive[r] {
			aliveLeft++
		}
	}
	if 2*aliveLeft <= left {
		return fmt.Sprintf("no live majority: %d of %d voters left would be alive", aliveLeft, left)
	}
	return ""
}

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
	if why := decommissionVerdict(id, members, raftView{Voters: rm.Voters, NonVoters: rm.NonVoters}, v.OwnedPartitions); why != "" {
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

// drainService answers the controller's question before a removal: does
// this node refuse produce, and has its ingress WAL handed every accepted
// record to its owner (rule D6)?
const drainService = "drain"

type drainStatus struct {
	Refusing bool  `json:"refusing"`
	Backlog  int64 `json:"backlog"`
}

func (n *Node) serveDrain() error {
	return transport.HandleJSON(n.nats, drainService, func(context.Context, string, struct{}) (drainStatus, error) {
		return n.drainStatus(), nil
	})
}

// drainStatus is what the drain service answers. Backlog counts the
// records the ingress WAL holds for their owners and the produce calls
// not yet answered: an append waiting for its fsync is not in the WAL's
// backlog yet, and a produce admitted before the flag may still append
// and answer 202. The flag is read first: a produce counted after that
// read reads the flag after it too, and is refused.
func (n *Node) drainStatus() drainStatus {
	refusing := n.draining()
	producing := n.producing.Load()
	held, _ := n.wal.Backlog()
	return drainStatus{Refusing: refusing, Backlog: int64(held) + producing}
}

// decommissionPass is the controller's part (rules D2-D7), on the metadata
// leader each rebalance pass: for each draining member that owns nothing,
// clear moves aimed at it, check its WAL, then remove it from Raft behind
// the guards and drop its record. One step per member per pass.
func (a *controllerActor) decommissionPass(ctx context.Context) {
	members := a.store.Members()
	blocked := map[string]string{}
	for _, m := range members {
		if !m.Draining {
			continue
		}
		if why := a.decommissionStep(ctx, m, members); why != "" {
			blocked[m.ID] = why
		}
	}
	a.reportBlocked(blocked)
}

// decommissionStep advances one draining member and says why it cannot
// go further now ("" when it made progress or is done).
func (a *controllerActor) decommissionStep(ctx context.Context, m messages.Member, members []messages.Member) string {
	if len(a.store.OwnedBy(m.ID)) > 0 {
		return "partitions_left" // the planner is shedding them
	}
	// Moves aimed at a leaving node are cleared, except those whose source
	// is dead or gone: it may hold the only live copy (rules D4, D5).
	for _, as := range a.store.TargetedAt(m.ID) {
		src, ok := a.store.Member(as.Owner)
		if !ok || src.Status == messages.MemberDead {
			a.deps.log.Error("decommission waits: the draining node is the target of a move whose source is dead", "member", m.ID, "topic", as.Topic, "partition", as.Partition)
			return "move_target"
		}
		if _, err := a.store.SetTarget(ctx, messages.SetTarget{Incarnation: as.Incarnation, Partition: as.Partition, Owner: as.Owner, From: m.ID, To: ""}); err != nil {
			return "move_target"
		}
	}
	if len(a.store.TargetedAt(m.ID)) > 0 {
		return "move_target"
	}
	if why := a.walHandedOff(ctx, m); why != "" {
		return why
	}
	rm, err := a.store.RaftMembership(ctx, metastore.MetaShard)
	if err != nil {
		return "raft_unavailable"
	}
	if _, voter := rm.Voters[m.ReplicaID]; voter {
		if why := a.voterMayLeave(ctx, m, members, rm); why != "" {
			return why
		}
	}
	if m.ReplicaID == a.store.ReplicaID() {
		// A node cannot remove itself while it leads (rule D2): hand the
		// leaderships over; the next leader's controller removes it.
		if err := a.store.TransferAllLeadership(ctx, m.ReplicaID); err != nil {
			return "leadership_transfer"
		}
		return ""
	}
	if err := a.store.RemoveReplica(ctx, m.ReplicaID); err != nil {
		a.deps.log.Warn("decommission: remove from raft", "member", m.ID, "err", err)
		return "raft_removal"
	}
	if _, err := a.store.RemoveMember(ctx, m.ID); err != nil && !errors.Is(err, metastore.ErrNotFound) {
		a.deps.log.Warn("decommission: remove the member record", "member", m.ID, "err", err)
		return "member_removal"
	}
	a.deps.log.Warn("decommission complete: the member left the cluster", "member", m.ID, "replica", m.ReplicaID)
	return ""
}

// walHandedOff asks the draining node whether it refuses produce and its
// ingress WAL is empty (rule D6).
func (a *controllerActor) walHandedOff(ctx context.Context, m messages.Member) string {
	if a.nats == nil {
		return ""
	}
	var st drainStatus
	rctx, cancel := context.WithTimeout(ctx, a.cfg.RequestTimeout)
	defer cancel()
	if err := transport.RequestJSON(rctx, a.nats, m.ID, drainService, struct{}{}, &st); err != nil {
		return "unreachable"
	}
	if !st.Refusing || st.Backlog > 0 {
		return "wal_backlog"
	}
	return ""
}

// voterMayLeave applies the voter guards (rule D2): never below
// MinVoters (a non-voter is promoted first when there is one), and the
// voters left alive a strict majority; dead draining voters go first.
func (a *controllerActor) voterMayLeave(ctx context.Context, m messages.Member, members []messages.Member, rm metastore.RaftMembership) string {
	if len(rm.Voters)-1 < MinVoters {
		replica, addr, ok := pickPromotion(rm.Voters, rm.NonVoters, members, len(rm.Voters)+1)
		if !ok {
			return "too_few_voters"
		}
		if err := a.store.PromoteToVoter(ctx, replica, addr); err != nil {
			return "too_few_voters"
		}
		for _, o := range members {
			if o.ReplicaID == replica {
				a.store.SetMemberRole(ctx, o.ID, messages.RoleVoter)
			}
		}
		return "promoting"
	}
	aliveLeft := 0
	for r := range rm.Voters {
		if r == m.ReplicaID {
			continue
		}
		for _, o := range members {
			if o.ReplicaID == r && o.Status == messages.MemberAlive {
				aliveLeft++
			}
		}
	}
	if 2*aliveLeft <= len(rm.Voters)-1 {
		return "no_live_majority"
	}
	if m.Status == messages.MemberAlive {
		for _, o := range members {
			if _, v := rm.Voters[o.ReplicaID]; v && o.Draining && o.Status == messages.MemberDead {
				return "dead_draining_voter_first"
			}
		}
	}
	return ""
}

// reportBlocked sets narad_decommission_blocked{node,reason} and logs
// each reason once (rule D7).
func (a *controllerActor) reportBlocked(now map[string]string) {
	for id, why := range a.decomBlocked {
		if now[id] != why {
			a.metrics.set.GetOrCreateGauge(fmt.Sprintf(`narad_decommission_blocked{node=%q,reason=%q}`, id, why), nil).Set(0)
		}
	}
	for id, why := range now {
		a.metrics.set.GetOrCreateGauge(fmt.Sprintf(`narad_decommission_blocked{node=%q,reason=%q}`, id, why), nil).Set(1)
		if a.decomBlocked[id] != why && why != "partitions_left" && why != "promoting" {
			a.deps.log.Warn("decommission cannot progress", "member", id, "reason", why)
		}
	}
	a.decomBlocked = now
}

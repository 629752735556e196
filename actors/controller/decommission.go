package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

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

// RaftView is the metadata shard's Raft configuration as the decommission
// rules need it.
type RaftView struct {
	Voters, NonVoters map[uint64]string
}

// DecommissionVerdict says whether draining member id can ever complete
// (rule D8): "" when it can, else why not. It is pure: a function of the
// members, the Raft configuration and what the member owns. The node asks
// it before it marks a member draining (decommission.Drain), so that a
// decommission this pass could never finish is refused up front.
func DecommissionVerdict(id string, members []messages.Member, rv RaftView, owned int) string {
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

// DrainService is the service through which the controller asks a
// draining node, before its removal, whether it refuses produce and its
// ingress WAL has handed every accepted record to its owner (rule D6). The
// node serves it (actors/decommission: Drain.Serve); the answer is a
// DrainStatus.
const DrainService = "drain"

// DrainStatus is the drain service's answer.
type DrainStatus struct {
	Refusing bool  `json:"refusing"`
	Backlog  int64 `json:"backlog"`
}

// decommissionPass is the controller's part (rules D2-D7), on the metadata
// leader each rebalance pass: for each draining member that owns nothing,
// clear moves aimed at it, check its WAL, then remove it from Raft behind
// the guards and drop its record. One step per member per pass.
func (a *Actor) decommissionPass(ctx context.Context) {
	members := a.d.Store.Members()
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
func (a *Actor) decommissionStep(ctx context.Context, m messages.Member, members []messages.Member) string {
	// A lost member (an operator said its disk is gone: ForgetMember) is
	// no copy of anything while it stays dead: its partitions are
	// re-created empty elsewhere, moves aimed at it are cleared whatever
	// their source, and it has no ingress WAL left to hand off.
	lost := m.Lost && m.Status == messages.MemberDead
	if owned := a.d.Store.OwnedBy(m.ID); len(owned) > 0 {
		if lost {
			return a.recreate(ctx, m, owned, members)
		}
		return "partitions_left" // the planner is shedding them
	}
	// Moves aimed at a leaving node are cleared, except those whose source
	// is dead or gone: it may hold the only live copy (rules D4, D5).
	for _, as := range a.d.Store.TargetedAt(m.ID) {
		src, ok := a.d.Store.Member(as.Owner)
		if (!ok || src.Status == messages.MemberDead) && !lost {
			a.d.Logger.Error("decommission waits: the draining node is the target of a move whose source is dead", "member", m.ID, "topic", as.Topic, "partition", as.Partition)
			return "move_target"
		}
		if _, err := a.d.Store.SetTarget(ctx, messages.SetTarget{Incarnation: as.Incarnation, Partition: as.Partition, Owner: as.Owner, From: m.ID, To: ""}); err != nil {
			return "move_target"
		}
	}
	if len(a.d.Store.TargetedAt(m.ID)) > 0 {
		return "move_target"
	}
	rm, err := a.d.Store.RaftMembership(ctx, metastore.MetaShard)
	if err != nil {
		return "raft_unavailable"
	}
	// Once its removal began, the node is not asked again: RemoveReplica
	// removes it from the metadata shard first, and only after this check
	// passed; the node then leaves and closes its NATS connection. Asked
	// again after a removal cut short (a later shard's change timed out),
	// it would answer nothing, and the rest of its removal would wait for
	// it as "unreachable" forever.
	if !rm.Removed[m.ReplicaID] && !lost {
		if why := a.walHandedOff(ctx, m); why != "" {
			return why
		}
	}
	if _, voter := rm.Voters[m.ReplicaID]; voter {
		if why := a.voterMayLeave(ctx, m, members, rm); why != "" {
			return why
		}
	}
	if m.ReplicaID == a.d.Store.ReplicaID() {
		// A node cannot remove itself while it leads (rule D2): hand the
		// leaderships over; the next leader's controller removes it.
		if err := a.d.Store.TransferAllLeadership(ctx, m.ReplicaID); err != nil {
			return "leadership_transfer"
		}
		return ""
	}
	if err := a.d.Store.RemoveReplica(ctx, m.ReplicaID); err != nil {
		a.d.Logger.Warn("decommission: remove from raft", "member", m.ID, "err", err)
		return "raft_removal"
	}
	if _, err := a.d.Store.RemoveMember(ctx, m.ID); err != nil && !errors.Is(err, metastore.ErrNotFound) {
		a.d.Logger.Warn("decommission: remove the member record", "member", m.ID, "err", err)
		return "member_removal"
	}
	a.d.Logger.Warn("decommission complete: the member left the cluster", "member", m.ID, "replica", m.ReplicaID)
	return ""
}

// recreate gives every partition lost member m still owns to the live
// receivers, empty, the least loaded first (see messages.Recreate): the
// records only m held are gone, and each partition's log starts above
// every offset m could have handed out. It says why it could not ("" when
// every re-creation applied).
func (a *Actor) recreate(ctx context.Context, m messages.Member, owned []messages.Assignment, members []messages.Member) string {
	load := map[string]int{}
	var receivers []string
	for _, o := range members {
		if o.ID != m.ID && o.Status == messages.MemberAlive && !o.Draining && !o.Leaving {
			receivers = append(receivers, o.ID)
			load[o.ID] = a.d.Store.OwnedCount(o.ID)
		}
	}
	if len(receivers) == 0 {
		return "no_receiver"
	}
	slices.SortFunc(owned, func(x, y messages.Assignment) int {
		return cmp.Or(cmp.Compare(x.Incarnation, y.Incarnation), cmp.Compare(x.Partition, y.Partition))
	})
	items := make([]messages.Recreate, len(owned))
	for i, as := range owned {
		to := slices.MinFunc(receivers, func(x, y string) int { return cmp.Or(cmp.Compare(load[x], load[y]), cmp.Compare(x, y)) })
		load[to]++
		items[i] = messages.Recreate{Incarnation: as.Incarnation, Partition: as.Partition, From: m.ID, To: to}
	}
	done, failed := 0, 0
	for _, out := range a.d.Store.RecreateMany(ctx, items) {
		switch {
		case out.Err != nil:
			failed++
		case out.Result.Code == messages.ResultOK:
			done++
		}
	}
	a.d.Logger.Warn("re-created a lost member's partitions empty on live nodes: the records only it held are gone",
		"member", m.ID, "recreated", done, "failed", failed, "receivers", len(receivers))
	if failed > 0 {
		return "recreate_failed"
	}
	return ""
}

// walHandedOff asks the draining node whether it refuses produce and its
// ingress WAL is empty (rule D6).
func (a *Actor) walHandedOff(ctx context.Context, m messages.Member) string {
	if a.d.NATS == nil {
		return ""
	}
	var st DrainStatus
	rctx, cancel := context.WithTimeout(ctx, a.d.RequestTimeout)
	defer cancel()
	if err := transport.RequestJSON(rctx, a.d.NATS, m.ID, DrainService, struct{}{}, &st); err != nil {
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
func (a *Actor) voterMayLeave(ctx context.Context, m messages.Member, members []messages.Member, rm metastore.RaftMembership) string {
	if len(rm.Voters)-1 < MinVoters {
		replica, addr, ok := pickPromotion(rm.Voters, rm.NonVoters, members, len(rm.Voters)+1)
		if !ok {
			return "too_few_voters"
		}
		if err := a.d.Store.PromoteToVoter(ctx, replica, addr); err != nil {
			return "too_few_voters"
		}
		for _, o := range members {
			if o.ReplicaID == replica {
				a.d.Store.SetMemberRole(ctx, o.ID, messages.RoleVoter)
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
func (a *Actor) reportBlocked(now map[string]string) {
	for id, why := range a.decomBlocked {
		if now[id] != why {
			a.d.Metrics.DecommissionBlocked(id, why).Set(0)
		}
	}
	for id, why := range now {
		a.d.Metrics.DecommissionBlocked(id, why).Set(1)
		if a.decomBlocked[id] != why && why != "partitions_left" && why != "promoting" {
			a.d.Logger.Warn("decommission cannot progress", "member", id, "reason", why)
		}
	}
	a.decomBlocked = now
}

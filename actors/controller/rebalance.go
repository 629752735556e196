package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/planner"
	"github.com/naradmq/narad/messages"
)

// The controller's rebalance pass (seed 000 "Move planner", "Target
// failure mid-move"): clear the targets of moves aimed at dead or removed
// nodes (rule T1), then top the moves in flight up with the planner's
// picks (rules L1-L3, L5, D1). It runs on the metadata leader, in the
// controller actor (one pass at a time: the planning mutex of rule L4),
// after a ReadIndex barrier, at most every RebalanceInterval.

func (a *Actor) rebalance(now time.Time) {
	every := a.d.Config.RebalanceInterval
	if a.busy {
		every = a.d.Config.RebalanceBusyInterval
	}
	if now.Sub(a.lastPlan) < every {
		return
	}
	a.lastPlan = now
	ctx, cancel := context.WithTimeout(context.Background(), a.d.Timeout)
	defer cancel()
	// The barrier gets a heartbeat interval at most: the controller is one
	// actor, and a shard without a leader must not hold the asks queued
	// behind this pass (topic creates, decommissions) for the whole
	// ControllerTimeout; the next pass tries again.
	bctx, bcancel := context.WithTimeout(ctx, a.d.Membership.HeartbeatInterval)
	err := a.d.Store.CatchUp(bctx)
	bcancel()
	if err != nil { // rule L4: plan on the latest state
		a.d.Logger.Warn("rebalance: barrier", "err", err)
		return
	}
	members := a.d.Store.Members()
	byID := make(map[string]messages.Member, len(members))
	a.busy = false
	for _, m := range members {
		a.busy = a.busy || m.Leaving || m.Draining
		byID[m.ID] = m
	}
	// The round's input comes from the owner and target indexes: the moves
	// in flight, each node's count, and only as many of each node's settled
	// partitions as the round can move. A rebuild from every partition's
	// placement cost tens of milliseconds a pass at 30,000 partitions, every
	// RebalanceBusyInterval of a hand-off (issue 27).
	inRaft := a.raftConfig(ctx)
	blocked := map[string]float64{"source_dead": 0, "target_dead": 0}
	incoming, leavingFrom := map[string]int{}, map[string]int{}
	inFlight := 0
	for _, as := range a.d.Store.Moving() {
		if a.targetLeaving(ctx, as, byID) || a.targetGone(ctx, as, byID, now, inRaft) {
			continue // its slot is free for this pass (rules B4, B11, T1)
		}
		a.busy = true
		a.noteBlocked(as, byID, blocked)
		inFlight++
		incoming[as.Target]++
		leavingFrom[as.Owner]++
	}
	for reason, n := range blocked {
		a.d.Metrics.MovesBlocked(reason, n)
	}
	defer a.decommissionPass(ctx)
	if !a.d.Config.Rebalance {
		return // moves are planned by hand; dead targets are still cleared
	}
	in := planner.Input{InFlight: inFlight, MaxInFlight: a.d.MaxInFlightMoves}
	budget := a.d.MaxInFlightMoves - inFlight
	parents := newParentPlacement(a.d.Store)
	for _, m := range members {
		n := planner.Node{ID: m.ID, Alive: m.Status == messages.MemberAlive, Draining: m.Draining, Leaving: m.Leaving,
			Incoming: incoming[m.ID], Settled: max(0, a.d.Store.OwnedCount(m.ID)-leavingFrom[m.ID])}
		if n.Alive && budget > 0 {
			n.Owned = a.settledRefs(m.ID, budget, parents)
		}
		in.Nodes = append(in.Nodes, n)
	}
	moves := planner.Plan(in)
	a.busy = a.busy || len(moves) > 0
	a.setTargets(ctx, moves)
}

// settledRefs is up to k of the partitions node owns with no move planned,
// as the planner takes them: a partition of a topic this replica no longer
// lists (deleted, its assignments not yet) is left where it is, and a
// fan-out child's names the node of its parent's partition to avoid (rule
// L6).
func (a *Actor) settledRefs(node string, k int, parents *parentPlacement) []planner.Ref {
	var refs []planner.Ref
	for _, key := range a.d.Store.FirstSettled(node, k) {
		parent, current := a.d.Store.CurrentParent(key.Incarnation)
		if !current {
			continue
		}
		refs = append(refs, planner.Ref{Topic: key.Topic, Incarnation: key.Incarnation, Partition: key.Partition,
			Avoid: parents.avoid(parent, key.Partition)})
	}
	return refs
}

// setTargets proposes the planned moves in one SetTargets entry per
// assignment shard: each is a compare-and-swap of its own, so their order
// does not matter. A round of 512 picks was 512 entries, 64 proposed at a
// time, before a hand-off's moves could start (issue 27).
func (a *Actor) setTargets(ctx context.Context, moves []planner.Move) {
	if len(moves) == 0 {
		return
	}
	targets := make([]messages.SetTarget, len(moves))
	for i, mv := range moves {
		targets[i] = messages.SetTarget{Incarnation: mv.Incarnation, Partition: mv.Partition, Owner: mv.From, From: "", To: mv.To}
	}
	var planned, failed int
	for i, o := range a.d.Store.SetTargetMany(ctx, targets) {
		mv := moves[i]
		switch {
		case o.Err != nil:
			failed++
			a.d.Logger.Warn("rebalance: set target", "topic", mv.Topic, "partition", mv.Partition, "to", mv.To, "err", o.Err)
		case o.Result.Code == messages.ResultOK:
			planned++
			a.d.Logger.Debug("move planned", "topic", mv.Topic, "partition", mv.Partition, "from", mv.From, "to", mv.To)
		}
	}
	a.d.Logger.Info("moves planned", "planned", planned, "failed", failed, "picks", len(moves))
}

// targetLeaving clears the target of a move aimed at a node that is
// leaving (rule B11: a leaving node is never a target, so nodes that stop
// together do not take each other's partitions) and reports whether it
// did. The change of eligibility drops the move whether or not it
// started (rule B4): the source still owns the partition, and the
// destination's worker stops as for an abort.
func (a *Actor) targetLeaving(ctx context.Context, as messages.Assignment, members map[string]messages.Member) bool {
	if m, ok := members[as.Target]; !ok || !m.Leaving || !a.clearTarget(ctx, as, "leaving") {
		return false
	}
	a.d.Logger.Info("move dropped: its destination is leaving", "topic", as.Topic, "partition", as.Partition, "owner", as.Owner, "target", as.Target)
	return true
}

// clearTarget clears as's target with a compare-and-swap and reports
// whether it did; a refusal (the move ended or changed meanwhile) or an
// error is logged, and the next pass looks again.
func (a *Actor) clearTarget(ctx context.Context, as messages.Assignment, why string) bool {
	r, err := a.d.Store.SetTarget(ctx, messages.SetTarget{Incarnation: as.Incarnation, Partition: as.Partition, Owner: as.Owner, From: as.Target, To: ""})
	if err != nil || r.Code != messages.ResultOK {
		a.d.Logger.Warn("rebalance: clear the target of a "+why+" destination", "topic", as.Topic, "partition", as.Partition, "target", as.Target, "code", r.Code, "err", err)
		return false
	}
	return true
}

// targetGone clears the target of a move whose destination is no longer a
// member, has been dead longer than DeadTargetAbortAfter on this leader's
// own clock, or is out of the Raft configuration while dead or draining
// (rule T1), and reports whether it did. inRaft reads the configuration,
// only for a destination that is dead or draining.
func (a *Actor) targetGone(ctx context.Context, as messages.Assignment, members map[string]messages.Member, now time.Time, inRaft func(messages.Member) bool) bool {
	m, ok := members[as.Target]
	d := planner.Destination{Member: ok, Dead: m.Status == messages.MemberDead, Draining: m.Draining, InRaft: true}
	if a.tracker != nil {
		d.DeadFor = a.tracker.DeadFor(as.Target, now)
	}
	if ok && (d.Dead || d.Draining) {
		d.InRaft = inRaft(m)
	}
	if !planner.TargetGone(d, a.d.Config.DeadTargetAbortAfter) || !a.clearTarget(ctx, as, "dead") {
		return false
	}
	a.d.Logger.Error("move cleared: its destination is dead, gone or out of the Raft configuration", "topic", as.Topic, "partition", as.Partition, "owner", as.Owner, "target", as.Target)
	return true
}

// raftConfig reads the metadata shard's Raft configuration once per pass,
// and only when asked: most passes have no dead or draining destination.
// A failed read counts every destination in it: nothing is cleared on a
// guess, and the next pass reads again.
func (a *Actor) raftConfig(ctx context.Context) func(messages.Member) bool {
	var rm *metastore.RaftMembership
	failed := false
	return func(m messages.Member) bool {
		if rm == nil && !failed {
			r, err := a.d.Store.RaftMembership(ctx, metastore.MetaShard)
			if err != nil {
				failed = true
				a.d.Logger.Warn("rebalance: read the Raft configuration", "err", err)
			} else {
				rm = &r
			}
		}
		if rm == nil {
			return true
		}
		_, voter := rm.Voters[m.ReplicaID]
		_, waiting := rm.NonVoters[m.ReplicaID]
		return voter || waiting
	}
}

// noteBlocked counts a move whose source or destination reads dead (rule
// T5) and logs it at error once per leadership.
func (a *Actor) noteBlocked(as messages.Assignment, members map[string]messages.Member, counts map[string]float64) {
	for _, side := range []struct{ id, reason string }{{as.Owner, "source_dead"}, {as.Target, "target_dead"}} {
		if m, ok := members[side.id]; ok && m.Status != messages.MemberDead {
			continue
		}
		counts[side.reason]++
		key := fmt.Sprintf("%s/%d/%d:%s", as.Topic, as.Incarnation, as.Partition, side.reason)
		if a.loggedBlocked == nil {
			a.loggedBlocked = map[string]bool{}
		}
		if !a.loggedBlocked[key] {
			a.loggedBlocked[key] = true
			a.d.Logger.Error("move blocked", "topic", as.Topic, "partition", as.Partition, "owner", as.Owner, "target", as.Target, "reason", side.reason)
		}
	}
}

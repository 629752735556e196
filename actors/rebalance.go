package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/naradmq/narad/cluster/planner"
	"github.com/naradmq/narad/messages"
)

// The controller's rebalance pass (seed 000 "Move planner", "Target
// failure mid-move"): clear the targets of moves aimed at dead or removed
// nodes (rule T1), then top the moves in flight up with the planner's
// picks (rules L1-L3, L5, D1). It runs on the metadata leader, in the
// controller actor (one pass at a time: the planning mutex of rule L4),
// after a ReadIndex barrier, at most every RebalanceInterval.

func (a *controllerActor) rebalance(now time.Time) {
	if now.Sub(a.lastPlan) < a.cfg.RebalanceInterval {
		return
	}
	a.lastPlan = now
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.ControllerTimeout)
	defer cancel()
	if err := a.store.CatchUp(ctx); err != nil { // rule L4: plan on the latest state
		a.deps.log.Warn("rebalance: barrier", "err", err)
		return
	}
	members := a.store.Members()
	byID := make(map[string]messages.Member, len(members))
	pms := make([]planner.Member, 0, len(members))
	for _, m := range members {
		byID[m.ID] = m
		pms = append(pms, planner.Member{ID: m.ID, Alive: m.Status == messages.MemberAlive, Draining: m.Draining, Leaving: m.Leaving})
	}
	var placements []planner.Placement
	blocked := map[string]float64{"source_dead": 0, "target_dead": 0}
	for _, t := range a.store.Topics() {
		for _, as := range a.store.Assignments(t.Incarnation, t.Partitions) {
			if as.Target != "" && a.targetGone(ctx, as, byID, now) {
				continue // its slot is free for this pass (rule T1)
			}
			if as.Target != "" {
				a.noteBlocked(as, byID, blocked)
			}
			placements = append(placements, planner.Placement{
				Ref:   planner.Ref{Topic: as.Topic, Incarnation: as.Incarnation, Partition: as.Partition},
				Owner: as.Owner, Target: as.Target})
		}
	}
	for reason, n := range blocked {
		a.metrics.movesBlockedSet(reason, n)
	}
	defer a.decommissionPass(ctx)
	if !a.cfg.Rebalance {
		return // moves are planned by hand; dead targets are still cleared
	}
	for _, mv := range planner.Plan(planner.NewInput(pms, placements, a.cfg.MaxInFlightMoves)) {
		r, err := a.store.SetTarget(ctx, messages.SetTarget{Incarnation: mv.Incarnation, Partition: mv.Partition, Owner: mv.From, From: "", To: mv.To})
		switch {
		case err != nil:
			a.deps.log.Warn("rebalance: set target", "topic", mv.Topic, "partition", mv.Partition, "to", mv.To, "err", err)
		case r.Code == messages.ResultOK:
			a.deps.log.Info("move planned", "topic", mv.Topic, "partition", mv.Partition, "from", mv.From, "to", mv.To)
		}
	}
}

// targetGone clears the target of a move whose destination is no longer a
// member, or has been dead longer than DeadTargetAbortAfter on this
// leader's own clock (rule T1), and reports whether it did.
func (a *controllerActor) targetGone(ctx context.Context, as messages.Assignment, members map[string]messages.Member, now time.Time) bool {
	m, ok := members[as.Target]
	var deadFor time.Duration
	if a.tracker != nil {
		deadFor = a.tracker.DeadFor(as.Target, now)
	}
	if !planner.TargetGone(ok, m.Status == messages.MemberDead, deadFor, a.cfg.DeadTargetAbortAfter) {
		return false
	}
	r, err := a.store.SetTarget(ctx, messages.SetTarget{Incarnation: as.Incarnation, Partition: as.Partition, Owner: as.Owner, From: as.Target, To: ""})
	if err != nil || r.Code != messages.ResultOK {
		a.deps.log.Warn("rebalance: clear the target of a dead destination", "topic", as.Topic, "partition", as.Partition, "target", as.Target, "err", err)
		return false
	}
	a.deps.log.Error("move cleared: its destination is dead or gone", "topic", as.Topic, "partition", as.Partition, "owner", as.Owner, "target", as.Target)
	return true
}

// noteBlocked counts a move whose source or destination reads dead (rule
// T5) and logs it at error once per leadership.
func (a *controllerActor) noteBlocked(as messages.Assignment, members map[string]messages.Member, counts map[string]float64) {
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
			a.deps.log.Error("move blocked", "topic", as.Topic, "partition", as.Partition, "owner", as.Owner, "target", as.Target, "reason", side.reason)
		}
	}
}

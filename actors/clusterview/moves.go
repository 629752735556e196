package clusterview

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/naradmq/narad/actors/mover"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Moves is every partition with a target in the local replica, by topic
// then partition: what GET /v1/cluster/moves and the admin "moves" verb
// answer. A target of an earlier incarnation of a topic name is left out:
// that topic is gone. With detail, each destination is asked for its
// workers' progress (a request per destination). The admin verb adds the
// summary when asked (MovesWithSummary); the /v1 answer has none.
func (v *View) Moves(ctx context.Context, detail bool) messages.MoveList {
	out := messages.MoveList{Moves: []messages.MoveInfo{}}
	for _, a := range v.d.Replica.Moving() {
		if t, ok := v.d.Replica.Topic(a.Topic); ok && t.Incarnation == a.Incarnation {
			mv := messages.MoveInfo{Topic: a.Topic, Partition: a.Partition, From: a.Owner, To: a.Target,
				FromStatus: v.sideStatus(a.Owner), ToStatus: v.sideStatus(a.Target)}
			mv.Blocked = movesBlockedReasons(mv.FromStatus, mv.ToStatus)
			out.Moves = append(out.Moves, mv)
		}
	}
	slices.SortFunc(out.Moves, func(a, b messages.MoveInfo) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	if detail {
		v.addProgress(ctx, out.Moves)
	}
	return out
}

// MovesWithSummary is Moves with its summary line (summary.go): the admin
// "moves" verb's answer when the request asks for the summary.
func (v *View) MovesWithSummary(ctx context.Context, detail bool) messages.MoveList {
	out := v.Moves(ctx, detail)
	sum := v.moveSummary(ctx, len(out.Moves))
	out.Summary = &sum
	return out
}

// movesBlockedReasons says why a move might need an abort (rule T5).
func movesBlockedReasons(from, to string) []string {
	var out []string
	if from == "dead" || from == "not_a_member" {
		out = append(out, "source_dead")
	}
	switch to {
	case "dead":
		out = append(out, "target_dead")
	case "not_a_member":
		out = append(out, "target_not_member")
	}
	return out
}

// addProgress asks each destination for its workers' progress (its
// "moves" service, or this node's runner) and attaches it to the moves.
func (v *View) addProgress(ctx context.Context, moves []messages.MoveInfo) {
	byNode := map[string][]messages.MoveProgress{}
	for _, mv := range moves {
		if _, asked := byNode[mv.To]; asked {
			continue
		}
		byNode[mv.To] = v.progressOf(ctx, mv.To)
	}
	for i := range moves {
		for _, p := range byNode[moves[i].To] {
			if p.Topic == moves[i].Topic && p.Partition == moves[i].Partition {
				moves[i].Progress = &p
			}
		}
	}
}

// progressOf is node id's report of the moves it runs; nil when it
// cannot be asked.
func (v *View) progressOf(ctx context.Context, id string) []messages.MoveProgress {
	if id == v.d.NodeID || v.d.NATS == nil {
		res, err := v.d.Request(ctx, v.d.Mover, mover.GetProgress{})
		if err != nil {
			return nil
		}
		return res.([]messages.MoveProgress)
	}
	ctx, cancel := context.WithTimeout(ctx, v.d.RequestTimeout)
	defer cancel()
	var out []messages.MoveProgress
	if err := transport.RequestJSON(ctx, v.d.NATS, id, movesService, struct{}{}, &out); err != nil {
		return nil
	}
	return out
}

// movesService answers a node's move progress to its peers.
const movesService = "moves"

func (v *View) serveMoves() error {
	return transport.HandleJSON(v.d.NATS, movesService, func(ctx context.Context, _ string, _ struct{}) ([]messages.MoveProgress, error) {
		res, err := v.d.Request(ctx, v.d.Mover, mover.GetProgress{})
		if err != nil {
			return nil, transport.Errorf(transport.StatusTimeout, "move progress: %v", err)
		}
		return res.([]messages.MoveProgress), nil
	})
}

// AbortMove gives up on the move of one partition (rules T3, T4): the same
// compare-and-set that clears a target, then a leader read of the outcome.
// Aborted when the move to that target is gone and the owner unchanged;
// refused, naming owner and target, otherwise (with target set, also when
// the move now targets another node); unknown when the outcome could not
// be read back. Audited in the log either way.
func (v *View) AbortMove(ctx context.Context, topic string, partition int, target string) messages.AbortOutcome {
	log := v.d.Logger
	t, ok := v.d.Replica.Topic(topic)
	if !ok || partition < 0 || partition >= t.Partitions {
		return messages.AbortOutcome{Result: messages.AbortNotFound, Reason: "no such topic or partition"}
	}
	a, found, err := v.d.Replica.LeaderAssignment(ctx, t.Incarnation, partition)
	if err != nil || !found {
		log.Warn("audit cluster.move.abort", "topic", topic, "partition", partition, "outcome", "unknown", "err", err)
		return messages.AbortOutcome{Result: messages.AbortUnknown, Reason: "the partition's assignment could not be read from the leader"}
	}
	out := messages.AbortOutcome{Owner: a.Owner, Target: a.Target}
	switch {
	case a.Target == "":
		out.Result, out.Reason = messages.AbortNoMove, "the partition has no move to abort"
		return out
	case target != "" && a.Target != target:
		out.Result, out.Reason = messages.AbortRefused, fmt.Sprintf("the move now targets %s, not %s", a.Target, target)
		return out
	}
	target = a.Target
	_, cerr := v.d.Replica.SetTarget(ctx, messages.SetTarget{Incarnation: t.Incarnation, Partition: partition, Owner: a.Owner, From: target, To: ""})
	// The answer is read back from the leader whatever the proposal said:
	// it changes nothing when the leader's assignment no longer matched.
	after, found, err := v.d.Replica.LeaderAssignment(ctx, t.Incarnation, partition)
	if err != nil || !found {
		log.Warn("audit cluster.move.abort", "topic", topic, "partition", partition, "target", target, "outcome", "unknown", "err", errors.Join(cerr, err))
		out.Result, out.Reason = messages.AbortUnknown, "the abort's outcome could not be read back from the leader"
		return out
	}
	out.Owner, out.Target = after.Owner, after.Target
	if after.Owner == a.Owner && after.Target != target {
		log.Warn("audit cluster.move.abort", "topic", topic, "partition", partition, "owner", after.Owner, "target", target, "outcome", "aborted")
		out.Result = messages.Aborted
		return out
	}
	log.Warn("audit cluster.move.abort", "topic", topic, "partition", partition, "owner", after.Owner, "target", after.Target, "outcome", "refused")
	out.Result, out.Reason = messages.AbortRefused, fmt.Sprintf("owner %s, target %q", after.Owner, after.Target)
	return out
}

package actors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/mover"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Moves is every partition with a target in the local replica, by topic
// then partition: what GET /v1/cluster/moves and the admin "moves" verb
// answer. A target of an earlier incarnation of a topic name is left out:
// that topic is gone. With detail, each destination is asked for its
// workers' progress (a request per destination). The admin verb adds the
// summary when asked (movesWithSummary); the /v1 answer has none.
func (n *Node) Moves(ctx context.Context, detail bool) messages.MoveList {
	out := messages.MoveList{Moves: []messages.MoveInfo{}}
	for _, a := range n.store.Moving() {
		if t, ok := n.store.Topic(a.Topic); ok && t.Incarnation == a.Incarnation {
			mv := messages.MoveInfo{Topic: a.Topic, Partition: a.Partition, From: a.Owner, To: a.Target,
				FromStatus: n.sideStatus(a.Owner), ToStatus: n.sideStatus(a.Target)}
			mv.Blocked = movesBlockedReasons(mv.FromStatus, mv.ToStatus)
			out.Moves = append(out.Moves, mv)
		}
	}
	slices.SortFunc(out.Moves, func(a, b messages.MoveInfo) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	if detail {
		n.addProgress(ctx, out.Moves)
	}
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
func (n *Node) addProgress(ctx context.Context, moves []messages.MoveInfo) {
	byNode := map[string][]messages.MoveProgress{}
	for _, mv := range moves {
		if _, asked := byNode[mv.To]; asked {
			continue
		}
		byNode[mv.To] = n.progressOf(ctx, mv.To)
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
func (n *Node) progressOf(ctx context.Context, id string) []messages.MoveProgress {
	if id == n.cfg.NodeID || n.nats == nil {
		res, err := n.request(ctx, n.mover, mover.GetProgress{})
		if err != nil {
			return nil
		}
		return res.([]messages.MoveProgress)
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	var out []messages.MoveProgress
	if err := transport.RequestJSON(ctx, n.nats, id, movesService, struct{}{}, &out); err != nil {
		return nil
	}
	return out
}

// movesService answers a node's move progress to its peers.
const movesService = "moves"

func (n *Node) serveMoves() error {
	return errors.Join(transport.HandleJSON(n.nats, movesService, func(ctx context.Context, _ string, _ struct{}) ([]messages.MoveProgress, error) {
		res, err := n.request(ctx, n.mover, mover.GetProgress{})
		if err != nil {
			return nil, transport.Errorf(transport.StatusTimeout, "move progress: %v", err)
		}
		return res.([]messages.MoveProgress), nil
	}), n.serveMoveCounts())
}

// AbortMove gives up on the move of one partition (rules T3, T4): the same
// compare-and-set that clears a target, then a leader read of the outcome.
// Aborted when the move to that target is gone and the owner unchanged;
// refused, naming owner and target, otherwise (with target set, also when
// the move now targets another node); unknown when the outcome could not
// be read back. Audited in the log either way.
func (n *Node) AbortMove(ctx context.Context, topic string, partition int, target string) api.AbortOutcome {
	t, ok := n.store.Topic(topic)
	if !ok || partition < 0 || partition >= t.Partitions {
		return api.AbortOutcome{Result: api.AbortNotFound, Reason: "no such topic or partition"}
	}
	a, found, err := n.store.LeaderAssignment(ctx, t.Incarnation, partition)
	if err != nil || !found {
		n.log.Warn("audit cluster.move.abort", "topic", topic, "partition", partition, "outcome", "unknown", "err", err)
		return api.AbortOutcome{Result: api.AbortUnknown, Reason: "the partition's assignment could not be read from the leader"}
	}
	out := api.AbortOutcome{Owner: a.Owner, Target: a.Target}
	switch {
	case a.Target == "":
		out.Result, out.Reason = api.AbortNoMove, "the partition has no move to abort"
		return out
	case target != "" && a.Target != target:
		out.Result, out.Reason = api.AbortRefused, fmt.Sprintf("the move now targets %s, not %s", a.Target, target)
		return out
	}
	target = a.Target
	_, cerr := n.store.SetTarget(ctx, messages.SetTarget{Incarnation: t.Incarnation, Partition: partition, Owner: a.Owner, From: target, To: ""})
	// The answer is read back from the leader whatever the proposal said:
	// it changes nothing when the leader's assignment no longer matched.
	after, found, err := n.store.LeaderAssignment(ctx, t.Incarnation, partition)
	if err != nil || !found {
		n.log.Warn("audit cluster.move.abort", "topic", topic, "partition", partition, "target", target, "outcome", "unknown", "err", errors.Join(cerr, err))
		out.Result, out.Reason = api.AbortUnknown, "the abort's outcome could not be read back from the leader"
		return out
	}
	out.Owner, out.Target = after.Owner, after.Target
	if after.Owner == a.Owner && after.Target != target {
		n.log.Warn("audit cluster.move.abort", "topic", topic, "partition", partition, "owner", after.Owner, "target", target, "outcome", "aborted")
		out.Result = api.Aborted
		return out
	}
	n.log.Warn("audit cluster.move.abort", "topic", topic, "partition", partition, "owner", after.Owner, "target", after.Target, "outcome", "refused")
	out.Result, out.Reason = api.AbortRefused, fmt.Sprintf("owner %s, target %q", after.Owner, after.Target)
	return out
}

// movesWithSummary is Moves with its summary line (moves_summary.go): the
// admin "moves" verb's answer when the request asks for the summary.
func (n *Node) movesWithSummary(ctx context.Context, detail bool) messages.MoveList {
	out := n.Moves(ctx, detail)
	sum := n.moveSummary(ctx, len(out.Moves))
	out.Summary = &sum
	return out
}

package actors

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/naradmq/narad/messages"
)

// abortMove gives up on the move of one partition (rules T3, T4): the same
// compare-and-set that clears a target, then a leader read of the outcome.
// 202 when the move to that target is gone and the owner unchanged; 409
// naming owner and target otherwise (with target set, also when the move
// now targets another node); 404 for an unknown topic or partition; 503
// when the outcome could not be read back. Audited in the log either way.
func (n *Node) abortMove(ctx context.Context, in messages.AbortMoveRequest) (int, messages.AbortMoveReply) {
	out := messages.AbortMoveReply{Topic: in.Topic, Partition: in.Partition}
	t, ok := n.store.Topic(in.Topic)
	if !ok || in.Partition < 0 || in.Partition >= t.Partitions {
		out.Result, out.Error = "not_found", "no such topic or partition"
		return http.StatusNotFound, out
	}
	a, found, err := n.store.LeaderAssignment(ctx, t.Incarnation, in.Partition)
	if err != nil || !found {
		out.Result, out.Error = "unknown", "the partition's assignment could not be read from the leader"
		n.log.Warn("audit cluster.move.abort", "topic", in.Topic, "partition", in.Partition, "outcome", "unknown", "err", err)
		return http.StatusServiceUnavailable, out
	}
	out.Owner, out.Target = a.Owner, a.Target
	target := in.Target
	switch {
	case a.Target == "":
		out.Result, out.Error = "no_move", "the partition has no move to abort"
		return http.StatusConflict, out
	case target != "" && a.Target != target:
		out.Result, out.Error = "refused", fmt.Sprintf("the move now targets %s, not %s", a.Target, target)
		return http.StatusConflict, out
	}
	target = a.Target
	_, cerr := n.store.SetTarget(ctx, messages.SetTarget{Incarnation: t.Incarnation, Partition: in.Partition, Owner: a.Owner, From: target, To: ""})
	// The answer is read back from the leader whatever the proposal said:
	// it changes nothing when the leader's assignment no longer matched.
	after, found, err := n.store.LeaderAssignment(ctx, t.Incarnation, in.Partition)
	if err != nil || !found {
		out.Result, out.Error = "unknown", "the abort's outcome could not be read back from the leader"
		n.log.Warn("audit cluster.move.abort", "topic", in.Topic, "partition", in.Partition, "target", target, "outcome", "unknown", "err", errors.Join(cerr, err))
		return http.StatusServiceUnavailable, out
	}
	out.Owner, out.Target = after.Owner, after.Target
	if after.Owner == a.Owner && after.Target != target {
		out.Result = "aborted"
		n.log.Warn("audit cluster.move.abort", "topic", in.Topic, "partition", in.Partition, "owner", after.Owner, "target", target, "outcome", "aborted")
		return http.StatusAccepted, out
	}
	out.Result, out.Error = "refused", fmt.Sprintf("owner %s, target %q", after.Owner, after.Target)
	n.log.Warn("audit cluster.move.abort", "topic", in.Topic, "partition", in.Partition, "owner", after.Owner, "target", after.Target, "outcome", "refused")
	return http.StatusConflict, out
}

func (n *Node) abortMoveHTTP(w http.ResponseWriter, r *http.Request) {
	p, err := strconv.Atoi(r.PathValue("partition"))
	if err != nil || p < 0 {
		writeError(w, http.StatusBadRequest, "invalid partition")
		return
	}
	status, out := n.abortMove(r.Context(), messages.AbortMoveRequest{Topic: r.PathValue("topic"), Partition: p, Target: r.URL.Query().Get("target")})
	writeJSON(w, status, out)
}

// Package admin is the operators' verbs over NATS request/reply
// (narad.<cluster>.admin.<verb>, the JSON bodies of messages/admin.go,
// which `narad cluster` decodes too): one node of the queue group answers
// each request, from its local replica, so they work with the stock
// `nats req` CLI. Start at Verbs.Serve. It knows no Node: the node builds
// Verbs over its replica and its cluster verbs (the ones the HTTP API
// calls); the join verb is actors/startup's, the quarantine's the node's.
package admin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/topics"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Store is what the verbs read of the local replica.
type Store interface {
	Topics() []messages.Topic
	Assignments(incarnation uint64, partitions int) []messages.Assignment
	Members() []messages.Member
	Shards() []uint64
	Leader(shard uint64) (replicaID uint64, ok bool)
	LeaderOf(shard uint64) (replicaID uint64, term uint64, ok bool)
	RaftRole(shard uint64) string
}

// Verbs answers the admin verbs of one node.
type Verbs struct {
	// Cluster names the cluster, NodeID this node, in the status verb.
	Cluster, NodeID string
	Store           Store
	// Nodes is the node's cluster verbs, the ones the HTTP API calls.
	Nodes api.Cluster
	// MovesSummary is the moves with the summary the "moves" verb answers
	// when asked for one.
	MovesSummary func(ctx context.Context, detail bool) messages.MoveList
	// Blocked asks the controller why each draining member's
	// decommission waits.
	Blocked func(ctx context.Context) (map[string]string, error)
	// Ready is whether this node serves.
	Ready func() bool
}

// Serve registers the verbs on t but "status" (ServeStatus) and the ones
// other packages answer.
func (v Verbs) Serve(t *transport.Transport) error {
	return errors.Join(
		transport.HandleAdminJSON(t, "members", func(ctx context.Context, _ string, _ struct{}) (messages.AdminMemberList, error) {
			return v.members(ctx), nil
		}),
		transport.HandleAdminJSON(t, "moves", func(ctx context.Context, _ string, in messages.MovesRequest) (messages.MoveList, error) {
			if in.Summary {
				return v.MovesSummary(ctx, in.Detail), nil
			}
			return v.Nodes.Moves(ctx, in.Detail), nil
		}),
		transport.HandleAdminJSON(t, "decommission", v.decommission),
		transport.HandleAdminJSON(t, "forget", v.forget),
		transport.HandleAdminJSON(t, "moves-abort", v.abortMove),
		transport.HandleAdminJSON(t, "topics", func(context.Context, string, struct{}) (messages.AdminTopicList, error) {
			return v.topics(), nil
		}),
		transport.HandleAdminJSON(t, "version", func(ctx context.Context, _ string, _ struct{}) (messages.ClusterVersionInfo, error) {
			return versionAnswer(v.Nodes.ClusterVersion(ctx))
		}),
		transport.HandleAdminJSON(t, "version-finalize", func(ctx context.Context, _ string, in messages.FinalizeClusterVersion) (messages.ClusterVersionInfo, error) {
			return versionAnswer(v.Nodes.FinalizeClusterVersion(ctx, in.Version))
		}),
	)
}

// versionAnswer is the "version" and "version-finalize" verbs' answer: a
// refusal (a member that does not read the version yet) is a 409 with its
// reason, an unknown outcome a 503.
func versionAnswer(info messages.ClusterVersionInfo, err error) (messages.ClusterVersionInfo, error) {
	switch {
	case err == nil:
		return info, nil
	case errors.Is(err, errs.ErrConflict), errors.Is(err, errs.ErrInvalid):
		return info, transport.Errorf(409, "%v", err)
	}
	return info, transport.Errorf(transport.StatusUnavailable, "control plane temporarily unavailable")
}

// ServeStatus registers the "status" verb. It reads only the replica, so
// a node that is still starting answers it too, with ready false, and
// `narad cluster status` says something during a cold start.
func (v Verbs) ServeStatus(t *transport.Transport) error {
	return transport.HandleAdminJSON(t, "status", func(context.Context, string, struct{}) (messages.AdminStatus, error) {
		return v.Status(), nil
	})
}

// Status answers the "status" verb from the local replica and this
// node's view of each shard's Raft state.
func (v Verbs) Status() messages.AdminStatus {
	st := messages.AdminStatus{Cluster: v.Cluster, AnsweredBy: v.NodeID, Ready: v.Ready(), Topics: len(v.Store.Topics())}
	metaLeader, metaKnown := v.Store.Leader(metastore.MetaShard)
	for _, m := range v.Store.Members() {
		st.Members++
		if m.Status == messages.MemberAlive {
			st.Alive++
		}
		if metaKnown && m.ReplicaID == metaLeader {
			st.MetadataLeader = m.ID
		}
	}
	for _, sh := range v.Store.Shards() {
		s := messages.ShardStatus{Shard: sh, Role: v.Store.RaftRole(sh)}
		if id, term, ok := v.Store.LeaderOf(sh); ok {
			s.Leader, s.Term = id, term
		}
		st.Shards = append(st.Shards, s)
	}
	return st
}

// members answers the "members" verb: the cluster's Members, plus what
// only the member records and the controller know.
func (v Verbs) members(ctx context.Context) messages.AdminMemberList {
	records := v.Store.Members()
	var blocked map[string]string
	for _, m := range records {
		if m.Draining {
			// Only the controller knows; without an answer the column
			// stays empty rather than the listing failing.
			if b, err := v.Blocked(ctx); err == nil {
				blocked = b
			}
			break
		}
	}
	byID := make(map[string]int, len(records))
	for i, m := range records {
		byID[m.ID] = i
	}
	out := messages.AdminMemberList{Members: []messages.AdminMemberInfo{}}
	for _, m := range v.Nodes.Members(ctx) {
		e := messages.AdminMemberInfo{MemberInfo: m}
		if i, ok := byID[m.ID]; ok {
			e.Leaving, e.Role, e.RaftAddr, e.Lost = records[i].Leaving, records[i].Role, records[i].RaftAddr, records[i].Lost
		}
		e.DecommissionBlocked = blocked[m.ID]
		out.Members = append(out.Members, e)
	}
	return out
}

// topics lists the topics of the local replica by name.
func (v Verbs) topics() messages.AdminTopicList {
	out := messages.AdminTopicList{Topics: []messages.AdminTopicInfo{}}
	for _, t := range v.Store.Topics() {
		e := messages.AdminTopicInfo{TopicInfo: topics.Info(t), Incarnation: t.Incarnation, Owners: map[string]int{}}
		as := v.Store.Assignments(t.Incarnation, t.Partitions)
		for _, a := range as {
			e.Owners[a.Owner]++
		}
		e.Unplaced = t.Partitions - len(as)
		out.Topics = append(out.Topics, e)
	}
	slices.SortFunc(out.Topics, func(a, b messages.AdminTopicInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// decommission answers the "decommission" verb: a reply for a
// decommission started, judged or cancelled; a refusal carries the
// transport status that says what happened.
func (v Verbs) decommission(ctx context.Context, _ string, in messages.DecommissionRequest) (messages.DecommissionReply, error) {
	if in.Cancel {
		err := v.Nodes.CancelDecommission(ctx, in.ID)
		switch {
		case errors.Is(err, errs.ErrNotFound):
			return messages.DecommissionReply{}, transport.Errorf(404, "member %s not found", in.ID)
		case err != nil:
			return messages.DecommissionReply{}, transport.Errorf(transport.StatusTimeout, "%v", err)
		}
		return messages.DecommissionReply{Member: in.ID, Verdict: "cancelled"}, nil
	}
	verdict, err := v.Nodes.Decommission(ctx, in.ID, in.DryRun)
	out := verdict.Reply(in.ID, in.DryRun)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		return out, transport.Errorf(404, "member not found")
	case err != nil:
		return out, transport.Errorf(transport.StatusUnavailable, "control plane temporarily unavailable")
	case verdict.Refusal != "" && !in.DryRun:
		return out, transport.Errorf(409, "%s", verdict.Refusal)
	}
	return out, nil
}

// forget answers the "forget" verb: the verdict on a member forgotten or
// judged; a refusal carries the transport status that says what happened.
func (v Verbs) forget(ctx context.Context, _ string, in messages.ForgetRequest) (messages.ForgetReply, error) {
	verdict, err := v.Nodes.Forget(ctx, in.ID, in.DryRun, in.AcceptDataLoss)
	out := verdict.Reply(in.ID, in.DryRun)
	switch {
	case errors.Is(err, errs.ErrNotFound):
		return out, transport.Errorf(404, "member %s not found", in.ID)
	case errors.Is(err, errs.ErrInvalid):
		return out, transport.Errorf(400, "forgetting member %s loses every record only it held: pass --accept-data-loss to go on, or --dry-run to see what it would do", in.ID)
	case err != nil:
		return out, transport.Errorf(transport.StatusUnavailable, "control plane temporarily unavailable")
	case verdict.Refusal != "" && !in.DryRun:
		return out, transport.Errorf(409, "forget cannot go on: %s", verdict.Refusal)
	}
	return out, nil
}

// abortMove answers the "moves-abort" verb: the reply when the move was
// aborted, else a refusal whose status says why (404 no such partition,
// 409 no move or another target, 503 outcome unknown).
func (v Verbs) abortMove(ctx context.Context, _ string, in messages.AbortMoveRequest) (messages.AbortMoveReply, error) {
	o := v.Nodes.AbortMove(ctx, in.Topic, in.Partition, in.Target)
	out := messages.AbortMoveReply{Topic: in.Topic, Partition: in.Partition, Owner: o.Owner, Target: o.Target,
		Result: string(o.Result), Error: o.Reason}
	if o.Result == api.Aborted {
		return out, nil
	}
	return out, transport.Errorf(api.AbortStatus(o.Result), "%s", abortText(out))
}

// abortText is an abort refusal in one line.
func abortText(r messages.AbortMoveReply) string {
	return fmt.Sprintf("abort of %s/%d: %s: %s (owner %s, target %q)", r.Topic, r.Partition, r.Result, r.Error, r.Owner, r.Target)
}

package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/startup"
	"github.com/naradmq/narad/actors/topics"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Admin verbs over NATS request/reply (narad.<cluster>.admin.<verb>, the
// JSON bodies of messages/admin.go, which `narad cluster` decodes too): one
// node of the queue group answers each request, from its local replica, so
// they work with the stock `nats req` CLI.

// statusView answers the "status" verb from the local replica and this
// node's view of each shard's Raft state.
func (n *Node) statusView() messages.AdminStatus {
	st := messages.AdminStatus{Cluster: n.cfg.Cluster, AnsweredBy: n.cfg.NodeID, Ready: n.ready.Load(), Topics: len(n.store.Topics())}
	metaLeader, metaKnown := n.store.Leader(metastore.MetaShard)
	for _, m := range n.store.Members() {
		st.Members++
		if m.Status == messages.MemberAlive {
			st.Alive++
		}
		if metaKnown && m.ReplicaID == metaLeader {
			st.MetadataLeader = m.ID
		}
	}
	for _, sh := range n.store.Shards() {
		s := messages.ShardStatus{Shard: sh, Role: n.store.RaftRole(sh)}
		if id, term, ok := n.store.LeaderOf(sh); ok {
			s.Leader, s.Term = id, term
		}
		st.Shards = append(st.Shards, s)
	}
	return st
}

// adminMembersView answers the "members" verb: Members, plus what only
// the member records and the controller know.
func (n *Node) adminMembersView(ctx context.Context) messages.AdminMemberList {
	records := n.store.Members()
	var blocked map[string]string
	for _, m := range records {
		if m.Draining {
			// Only the controller knows; without an answer the column
			// stays empty rather than the listing failing.
			rep, err := n.askController(ctx, messages.ControllerRequest{DecommissionBlocked: true})
			if err == nil {
				blocked = rep.Blocked
			}
			break
		}
	}
	byID := make(map[string]int, len(records))
	for i, m := range records {
		byID[m.ID] = i
	}
	out := messages.AdminMemberList{Members: []messages.AdminMemberInfo{}}
	for _, v := range n.Members(ctx) {
		e := messages.AdminMemberInfo{MemberInfo: v}
		if i, ok := byID[v.ID]; ok {
			e.Leaving, e.Role, e.RaftAddr = records[i].Leaving, records[i].Role, records[i].RaftAddr
		}
		e.DecommissionBlocked = blocked[v.ID]
		out.Members = append(out.Members, e)
	}
	return out
}

// adminTopicsView lists the topics of the local replica by name.
func (n *Node) adminTopicsView() messages.AdminTopicList {
	out := messages.AdminTopicList{Topics: []messages.AdminTopicInfo{}}
	for _, t := range n.store.Topics() {
		e := messages.AdminTopicInfo{TopicInfo: topics.Info(t), Incarnation: t.Incarnation, Owners: map[string]int{}}
		as := n.store.Assignments(t.Incarnation, t.Partitions)
		for _, a := range as {
			e.Owners[a.Owner]++
		}
		e.Unplaced = t.Partitions - len(as)
		out.Topics = append(out.Topics, e)
	}
	slices.SortFunc(out.Topics, func(a, b messages.AdminTopicInfo) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// connectNATS connects the node's transport and serves the ping its
// heartbeat sends itself and the status verb; the rest is served once the
// actors run (serveNATS).
// A joiner that asks for its replica id has connected already (dialNATS).
func (n *Node) connectNATS(ctx context.Context) error {
	if n.nats == nil {
		if err := n.dialNATS(ctx); err != nil {
			return err
		}
	}
	t := n.nats
	// The status verb reads only the replica, open by now: a node that is
	// still starting answers it too, with ready false, so that `narad
	// cluster status` says something during a cold start.
	return errors.Join(
		t.Handle(pingService, func(context.Context, string, []byte) ([]byte, error) { return nil, nil }),
		transport.HandleAdminJSON(t, "status", func(context.Context, string, struct{}) (messages.AdminStatus, error) {
			return n.statusView(), nil
		}),
	)
}

// dialNATS connects the node's transport, serving nothing yet.
func (n *Node) dialNATS(ctx context.Context) error {
	t, err := transport.Connect(ctx, transport.Config{Cluster: n.cfg.Cluster, NodeID: n.cfg.NodeID, Metrics: n.metrics.set,
		URLs: []string{n.cfg.NATSURL}, RequestTimeout: n.cfg.RequestTimeout, Auth: n.cfg.NATSAuth}, n.log)
	if err != nil {
		return fmt.Errorf("connect to nats %s: %w", n.cfg.NATSURL, err)
	}
	n.nats = t
	// A server too small for the partition protocol is refused before this
	// node registers, so a refused node never shows as a member.
	return n.checkPayload()
}

// joiner is the join verb's two sides over this node as it is now: its
// NATS connection and replica appear during the start.
func (n *Node) joiner() startup.Join {
	j := startup.Join{NodeID: n.cfg.NodeID, RaftAddr: n.raftAddr, DataDir: n.cfg.DataDir, NATS: n.nats,
		Ready: n.ready.Load, Log: n.log, Clock: clock.Wall{}}
	if n.cfg.NATSURL != "" {
		j.Dial = func(ctx context.Context) (*transport.Transport, error) {
			err := n.dialNATS(ctx)
			return n.nats, err
		}
	}
	if n.store != nil {
		j.Store = n.store
	}
	return j
}

// peers is a restart's way around the shard leaders (actors/startup),
// over this node's connection and replica.
func (n *Node) peers() startup.Peers {
	return startup.Peers{NodeID: n.cfg.NodeID, NATS: n.nats, Store: n.store, RequestTimeout: n.cfg.RequestTimeout, Clock: clock.Wall{}}
}

// serveAdmin registers the admin verbs, and the node services the
// quarantine verbs gather from.
func (n *Node) serveAdmin(t *transport.Transport) error {
	return errors.Join(
		transport.HandleAdminJSON(t, "members", func(ctx context.Context, _ string, _ struct{}) (messages.AdminMemberList, error) {
			return n.adminMembersView(ctx), nil
		}),
		transport.HandleAdminJSON(t, "moves", func(ctx context.Context, _ string, in messages.MovesRequest) (messages.MoveList, error) {
			if in.Summary {
				return n.movesWithSummary(ctx, in.Detail), nil
			}
			return n.Moves(ctx, in.Detail), nil
		}),
		transport.HandleAdminJSON(t, "decommission", n.adminDecommission),
		transport.HandleAdminJSON(t, "moves-abort", n.adminAbortMove),
		transport.HandleAdminJSON(t, "topics", func(context.Context, string, struct{}) (messages.AdminTopicList, error) {
			return n.adminTopicsView(), nil
		}),
		transport.HandleAdminJSON(t, "join", n.joiner().Admit),
		transport.HandleAdminJSON(t, "quarantine", n.adminQuarantine),
		transport.HandleAdminJSON(t, "quarantine-release", n.adminQuarantineRelease),
		n.serveQuarantine(),
	)
}

// adminDecommission answers the "decommission" verb: a reply for a
// decommission started, judged or cancelled; a refusal carries the
// transport status that says what happened.
func (n *Node) adminDecommission(ctx context.Context, _ string, in messages.DecommissionRequest) (messages.DecommissionReply, error) {
	if in.Cancel {
		err := n.CancelDecommission(ctx, in.ID)
		switch {
		case errors.Is(err, ErrNotFound):
			return messages.DecommissionReply{}, transport.Errorf(404, "member %s not found", in.ID)
		case err != nil:
			return messages.DecommissionReply{}, transport.Errorf(transport.StatusTimeout, "%v", err)
		}
		return messages.DecommissionReply{Member: in.ID, Verdict: "cancelled"}, nil
	}
	v, err := n.Decommission(ctx, in.ID, in.DryRun)
	out := v.Reply(in.ID, in.DryRun)
	switch {
	case errors.Is(err, ErrNotFound):
		return out, transport.Errorf(404, "member not found")
	case err != nil:
		return out, transport.Errorf(transport.StatusUnavailable, "control plane temporarily unavailable")
	case v.Refusal != "" && !in.DryRun:
		return out, transport.Errorf(409, "%s", v.Refusal)
	}
	return out, nil
}

// adminAbortMove answers the "moves-abort" verb: the reply when the move
// was aborted, else a refusal whose status says why (404 no such
// partition, 409 no move or another target, 503 outcome unknown).
func (n *Node) adminAbortMove(ctx context.Context, _ string, in messages.AbortMoveRequest) (messages.AbortMoveReply, error) {
	o := n.AbortMove(ctx, in.Topic, in.Partition, in.Target)
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

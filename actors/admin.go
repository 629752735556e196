package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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

// adminMembersView answers the "members" verb: membersView, plus what only
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
	for _, v := range n.membersView() {
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
		e := messages.AdminTopicInfo{TopicInfo: topicOf(t, "standalone"), Incarnation: t.Incarnation, Owners: map[string]int{}}
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

// admit adds a joining node's replicas to every shard as non-voters. It is
// idempotent, so a joining node retries until it is answered.
func (n *Node) admit(ctx context.Context, _ string, in messages.JoinRequest) (messages.JoinReply, error) {
	if !n.ready.Load() {
		// This node may be the one joining: a ready member answers instead.
		return messages.JoinReply{}, transport.Errorf(transport.StatusUnavailable, "%s is not ready", n.cfg.NodeID)
	}
	if in.NodeID == "" || in.ReplicaID == 0 || in.RaftAddr == "" {
		return messages.JoinReply{}, transport.Errorf(400, "join needs node_id, replica_id and raft_addr")
	}
	if err := n.store.AddNonVoter(ctx, in.ReplicaID, in.RaftAddr); err != nil {
		if errors.Is(err, metastore.ErrRefused) || errors.Is(err, metastore.ErrInvalid) {
			return messages.JoinReply{}, transport.Errorf(409, "join of %s refused: %v", in.NodeID, err)
		}
		return messages.JoinReply{}, transport.Errorf(transport.StatusTimeout, "join of %s: %v", in.NodeID, err)
	}
	n.log.Info("admitted a node as a non-voter", "joining", in.NodeID, "replica", in.ReplicaID, "raft", in.RaftAddr)
	return messages.JoinReply{Admitted: true}, nil
}

// requestJoin asks the running cluster to admit this node, retrying while
// nobody answers or the outcome is unknown, until ctx ends. A refusal (the
// replica id was used before, the address is taken) is final.
func (n *Node) requestJoin(ctx context.Context) error {
	if n.nats == nil {
		return fmt.Errorf("join needs NATS to reach the cluster: %w", ErrInvalid)
	}
	req := messages.JoinRequest{NodeID: n.cfg.NodeID, ReplicaID: n.store.ReplicaID(), RaftAddr: n.raftAddr}
	for {
		var rep messages.JoinReply
		err := transport.RequestAdminJSON(ctx, n.nats, "join", req, &rep)
		var re *transport.RemoteError
		switch {
		case err == nil && rep.Admitted:
			return nil
		case errors.As(err, &re) && re.Status == 409:
			return fmt.Errorf("join refused: %s: %w", re.Msg, ErrInvalid)
		}
		n.log.Warn("join: not admitted yet; retrying", "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("join: %w", ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// connectNATS connects the node's transport and serves the admin verbs.
func (n *Node) connectNATS(ctx context.Context) error {
	t, err := transport.Connect(ctx, transport.Config{Cluster: n.cfg.Cluster, NodeID: n.cfg.NodeID, URLs: []string{n.cfg.NATSURL}}, n.log)
	if err != nil {
		return fmt.Errorf("connect to nats %s: %w", n.cfg.NATSURL, err)
	}
	n.nats = t
	// A server too small for the partition protocol is refused before this
	// node registers, so a refused node never shows as a member.
	if err := n.checkPayload(); err != nil {
		return err
	}
	if err := t.Handle(pingService, func(context.Context, string, []byte) ([]byte, error) { return nil, nil }); err != nil {
		return err
	}
	if err := transport.HandleAdminJSON(t, "members", func(ctx context.Context, _ string, _ struct{}) (messages.AdminMemberList, error) {
		return n.adminMembersView(ctx), nil
	}); err != nil {
		return err
	}
	if err := transport.HandleAdminJSON(t, "moves", func(ctx context.Context, _ string, in messages.MovesRequest) (messages.MoveList, error) {
		out := n.movesView()
		if in.Detail {
			n.addProgress(ctx, out.Moves)
		}
		return out, nil
	}); err != nil {
		return err
	}
	if err := transport.HandleAdminJSON(t, "decommission", func(ctx context.Context, _ string, in messages.DecommissionRequest) (messages.DecommissionReply, error) {
		if in.Cancel {
			if _, ok := n.store.Member(in.ID); !ok {
				return messages.DecommissionReply{}, transport.Errorf(404, "member %s not found", in.ID)
			}
			if err := n.store.SetDraining(ctx, in.ID, false); err != nil {
				return messages.DecommissionReply{}, transport.Errorf(transport.StatusTimeout, "cancel decommission of %s: %v", in.ID, err)
			}
			n.log.Warn("audit cluster.member.decommission.cancel", "member", in.ID)
			return messages.DecommissionReply{Member: in.ID, Verdict: "cancelled"}, nil
		}
		status, out := n.startDecommission(ctx, in.ID, in.DryRun)
		if status == 204 || status == 200 {
			if status == 204 {
				out.Verdict = "draining"
			}
			return out, nil
		}
		return out, transport.Errorf(status, "%s", out.Reason)
	}); err != nil {
		return err
	}
	if err := transport.HandleAdminJSON(t, "moves-abort", func(ctx context.Context, _ string, in messages.AbortMoveRequest) (messages.AbortMoveReply, error) {
		status, out := n.abortMove(ctx, in)
		if status == 202 {
			return out, nil
		}
		return out, transport.Errorf(status, "%s", abortText(out))
	}); err != nil {
		return err
	}
	if err := transport.HandleAdminJSON(t, "topics", func(context.Context, string, struct{}) (messages.AdminTopicList, error) {
		return n.adminTopicsView(), nil
	}); err != nil {
		return err
	}
	if err := transport.HandleAdminJSON(t, "join", n.admit); err != nil {
		return err
	}
	return transport.HandleAdminJSON(t, "status", func(context.Context, string, struct{}) (messages.AdminStatus, error) {
		return n.statusView(), nil
	})
}

// abortText is an abort refusal in one line.
func abortText(r messages.AbortMoveReply) string {
	return fmt.Sprintf("abort of %s/%d: %s: %s (owner %s, target %q)", r.Topic, r.Partition, r.Result, r.Error, r.Owner, r.Target)
}

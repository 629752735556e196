package actors

import (
	"context"
	"fmt"

	"github.com/naradmq/narad/cluster/transport"
)

// Admin verbs over NATS request/reply (narad.<cluster>.admin.<verb>, JSON
// bodies): one node of the queue group answers each request, from its
// local replica, so they work with the stock `nats req` CLI.

// shardStatus is one metastore shard as this node sees it.
type shardStatus struct {
	Shard  uint64 `json:"shard"`
	Leader uint64 `json:"leader_replica,omitempty"`
}

// statusReply answers the "status" verb.
type statusReply struct {
	Cluster    string        `json:"cluster"`
	AnsweredBy string        `json:"answered_by"`
	Ready      bool          `json:"ready"`
	Members    int           `json:"members"`
	Alive      int           `json:"alive"`
	Topics     int           `json:"topics"`
	Shards     []shardStatus `json:"shards"`
}

func (n *Node) statusView() statusReply {
	st := statusReply{Cluster: n.cfg.Cluster, AnsweredBy: n.cfg.NodeID, Ready: n.ready.Load(), Topics: len(n.store.Topics())}
	for _, m := range n.store.Members() {
		st.Members++
		if m.Status == "alive" {
			st.Alive++
		}
	}
	for _, sh := range n.store.Shards() {
		s := shardStatus{Shard: sh}
		if id, ok := n.store.Leader(sh); ok {
			s.Leader = id
		}
		st.Shards = append(st.Shards, s)
	}
	return st
}

// connectNATS connects the node's transport and serves the admin verbs.
func (n *Node) connectNATS(ctx context.Context) error {
	t, err := transport.Connect(ctx, transport.Config{Cluster: n.cfg.Cluster, NodeID: n.cfg.NodeID, URLs: []string{n.cfg.NATSURL}}, n.log)
	if err != nil {
		return fmt.Errorf("connect to nats %s: %w", n.cfg.NATSURL, err)
	}
	n.nats = t
	if err := transport.HandleAdminJSON(t, "members", func(context.Context, string, struct{}) (membersReply, error) {
		return membersReply{n.membersView()}, nil
	}); err != nil {
		return err
	}
	return transport.HandleAdminJSON(t, "status", func(context.Context, string, struct{}) (statusReply, error) {
		return n.statusView(), nil
	})
}

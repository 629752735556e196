package actors

import (
	"context"
	"errors"
	"fmt"

	"github.com/naradmq/narad/actors/admin"
	"github.com/naradmq/narad/actors/startup"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// The node's NATS connection and what it serves on it before and after
// its actors run: the ping its heartbeat sends itself, the admin verbs
// (actors/admin), the join verb and a restart's services (actors/startup).

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
	// The status verb reads only the replica, open by now.
	return errors.Join(
		t.Handle(pingService, func(context.Context, string, []byte) ([]byte, error) { return nil, nil }),
		n.adminVerbs().ServeStatus(t),
	)
}

// dialNATS connects the node's transport, serving nothing yet.
func (n *Node) dialNATS(ctx context.Context) error {
	t, err := transport.Connect(ctx, transport.Config{Cluster: n.cfg.Cluster, NodeID: n.cfg.NodeID, Metrics: n.metrics.set,
		URLs: []string{n.cfg.NATSURL}, RequestTimeout: n.cfg.RequestTimeout, MaxAdminTimeout: n.cfg.MaxAdminTimeout, Auth: n.cfg.NATSAuth, Clock: n.cfg.steadyOrWall()}, n.log)
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
		Ready: n.ready.Load, Log: n.log, Clock: n.cfg.steadyOrWall()}
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
	return startup.Peers{NodeID: n.cfg.NodeID, NATS: n.nats, Store: n.store, RequestTimeout: n.cfg.RequestTimeout,
		Metrics: n.metrics.startup, Log: n.log, Clock: n.cfg.steadyOrWall()}
}

// adminVerbs is the admin verbs over this node (actors/admin).
func (n *Node) adminVerbs() admin.Verbs {
	return admin.Verbs{Cluster: n.cfg.Cluster, NodeID: n.cfg.NodeID, Store: n.store, Nodes: n, MovesSummary: n.movesWithSummary,
		Blocked: func(ctx context.Context) (map[string]string, error) {
			rep, err := n.askController(ctx, messages.ControllerRequest{DecommissionBlocked: true})
			return rep.Blocked, err
		}, Ready: n.ready.Load}
}

// serveAdmin registers the admin verbs, the join verb, and the node
// services the quarantine verbs gather from.
func (n *Node) serveAdmin(t *transport.Transport) error {
	return errors.Join(
		n.adminVerbs().Serve(t),
		transport.HandleAdminJSON(t, "join", n.joiner().Admit),
		transport.HandleAdminJSON(t, "quarantine", n.adminQuarantine),
		transport.HandleAdminJSON(t, "quarantine-release", n.adminQuarantineRelease),
		n.serveQuarantine(),
	)
}

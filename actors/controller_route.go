package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/naradmq/narad/actors/controller"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// controllerService is the transport service through which a node reaches
// the controller on the metadata leader.
const controllerService = "controller"

// Waits between asks while the metadata leadership is unknown or moving:
// an election takes a few hundred milliseconds.
const (
	controllerRetryFirst = 20 * time.Millisecond
	controllerRetryMax   = 500 * time.Millisecond
)

// askController sends req to the controller wherever the metadata leader
// is, asking again while leadership is unknown or moving, within
// ControllerTimeout. Errors are the metastore's sentinels: ErrExists,
// ErrNotFound and ErrInvalid are refusals; ErrUnavailable is either "no
// leader answered" or an unknown outcome.
func (n *Node) askController(ctx context.Context, req messages.ControllerRequest) (messages.ControllerReply, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ControllerTimeout)
	defer cancel()
	wait := controllerRetryFirst
	for {
		rep, err := n.askControllerOnce(ctx, req)
		if !errors.Is(err, controller.ErrNotLeader) {
			return rep, err
		}
		select {
		case <-ctx.Done():
			return rep, fmt.Errorf("no metadata leader answered within %s: %w", n.cfg.ControllerTimeout, metastore.ErrUnavailable)
		case <-time.After(wait):
		}
		wait = min(2*wait, controllerRetryMax)
	}
}

func (n *Node) askControllerOnce(ctx context.Context, req messages.ControllerRequest) (messages.ControllerReply, error) {
	leader, ok := n.store.Leader(metastore.MetaShard)
	if !ok {
		return messages.ControllerReply{}, controller.ErrNotLeader
	}
	if leader == n.store.ReplicaID() || n.nats == nil {
		return n.localController(ctx, req)
	}
	node := ""
	for _, m := range n.store.Members() {
		if m.ReplicaID == leader {
			node = m.ID
		}
	}
	if node == "" {
		return messages.ControllerReply{}, controller.ErrNotLeader // the leader has not registered yet
	}
	var rep messages.ControllerReply
	err := transport.RequestJSON(ctx, n.nats, node, controllerService, req, &rep)
	var re *transport.RemoteError
	switch {
	case err == nil:
		return rep, nil
	case errors.As(err, &re) && re.Status == 409:
		return rep, fmt.Errorf("%s: %w", re.Msg, metastore.ErrExists)
	case errors.As(err, &re) && re.Status == 404:
		return rep, fmt.Errorf("%s: %w", re.Msg, metastore.ErrNotFound)
	case errors.As(err, &re) && re.Status == 400:
		return rep, fmt.Errorf("%s: %w", re.Msg, metastore.ErrInvalid)
	case transport.NotProcessed(err):
		// Surely not done (a follower answered, nobody serves the
		// subject yet): ask the leader as it is now.
		return rep, fmt.Errorf("%w (%v)", controller.ErrNotLeader, err)
	}
	return rep, fmt.Errorf("controller on %s: %w: %w", node, metastore.ErrUnavailable, err)
}

// localController asks this node's controller actor.
func (n *Node) localController(ctx context.Context, req messages.ControllerRequest) (messages.ControllerReply, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(n.cfg.ControllerTimeout)
	}
	res, err := n.system.Root.RequestFuture(n.controller, &controller.Ask{Deadline: deadline, Req: req}, time.Until(deadline)).Result()
	if err != nil {
		return messages.ControllerReply{}, fmt.Errorf("controller: %w: %w", metastore.ErrUnavailable, err)
	}
	ans := res.(controller.Answer)
	return ans.Reply, ans.Err
}

// serveController answers peers' controller requests from the local
// controller, with the status that tells the asker what happened: 503
// nothing was done (not the leader), 409/404/400 refused, 504 unknown.
func (n *Node) serveController() error {
	return transport.HandleJSON(n.nats, controllerService, func(ctx context.Context, from string, in messages.ControllerRequest) (messages.ControllerReply, error) {
		rep, err := n.localController(ctx, in)
		switch {
		case err == nil:
			return rep, nil
		case errors.Is(err, controller.ErrNotLeader):
			return rep, transport.Errorf(transport.StatusUnavailable, "%s does not lead the metadata shard", n.cfg.NodeID)
		case errors.Is(err, metastore.ErrExists):
			return rep, transport.Errorf(409, "%v", err)
		case errors.Is(err, metastore.ErrNotFound):
			return rep, transport.Errorf(404, "%v", err)
		case errors.Is(err, metastore.ErrInvalid), errors.Is(err, ErrInvalid):
			return rep, transport.Errorf(400, "%v", err)
		}
		return rep, transport.Errorf(transport.StatusTimeout, "%v", err)
	})
}

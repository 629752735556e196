package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Service is the transport service through which a node reaches the
// controller on the metadata leader.
const Service = "controller"

// Waits between asks while the metadata leadership is unknown or moving:
// an election takes a few hundred milliseconds.
const (
	clientRetryFirst = 20 * time.Millisecond
	clientRetryMax   = 500 * time.Millisecond
)

// ClientReplica is what the client reads of the local metastore replica
// to find the metadata leader's node.
type ClientReplica interface {
	Leader(shard uint64) (replicaID uint64, ok bool)
	ReplicaID() uint64
	Members() []messages.Member
}

// ClientDeps is what a Client needs of its node. Every field is set
// before the first ask and only read afterwards.
type ClientDeps struct {
	// NodeID names this node in the service's refusals.
	NodeID string
	// Timeout bounds one ask, forwarding and retries included (the
	// node's ControllerTimeout).
	Timeout time.Duration
	Replica ClientReplica
	// NATS reaches the controller on another node; nil asks the local
	// controller whoever leads.
	NATS *transport.Transport
	// Root and Local are the actor system and this node's controller.
	Root  *actor.RootContext
	Local *actor.PID
	// Clock paces the retries and bounds a local ask without a deadline.
	// The wall clock: the waits run against context deadlines, which a
	// stepped clock would not move (nil is the wall clock).
	Clock clock.Clock
}

// Client sends a node's requests to the controller wherever the metadata
// leader is (Ask), and answers peers' requests from the local controller
// (Serve). Safe for concurrent use.
type Client struct{ d ClientDeps }

// NewClient is the client of the node d describes.
func NewClient(d ClientDeps) *Client {
	d.Clock = clock.Or(d.Clock)
	return &Client{d: d}
}

// Ask sends req to the controller wherever the metadata leader is, asking
// again while leadership is unknown or moving, within Timeout. Errors are
// the metastore's sentinels: ErrExists, ErrNotFound and ErrInvalid are
// refusals; ErrUnavailable is either "no leader answered" or an unknown
// outcome.
func (c *Client) Ask(ctx context.Context, req messages.ControllerRequest) (messages.ControllerReply, error) {
	ctx, cancel := context.WithTimeout(ctx, c.d.Timeout)
	defer cancel()
	wait := clientRetryFirst
	for {
		rep, err := c.askOnce(ctx, req)
		if !errors.Is(err, ErrNotLeader) {
			return rep, err
		}
		if clock.Sleep(ctx, c.d.Clock, wait) != nil {
			return rep, fmt.Errorf("no metadata leader answered within %s: %w", c.d.Timeout, metastore.ErrUnavailable)
		}
		wait = min(2*wait, clientRetryMax)
	}
}

func (c *Client) askOnce(ctx context.Context, req messages.ControllerRequest) (messages.ControllerReply, error) {
	leader, ok := c.d.Replica.Leader(metastore.MetaShard)
	if !ok {
		return messages.ControllerReply{}, ErrNotLeader
	}
	if leader == c.d.Replica.ReplicaID() || c.d.NATS == nil {
		return c.local(ctx, req)
	}
	node := ""
	for _, m := range c.d.Replica.Members() {
		if m.ReplicaID == leader {
			node = m.ID
		}
	}
	if node == "" {
		return messages.ControllerReply{}, ErrNotLeader // the leader has not registered yet
	}
	var rep messages.ControllerReply
	err := transport.RequestJSON(ctx, c.d.NATS, node, Service, req, &rep)
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
		return rep, fmt.Errorf("%w (%v)", ErrNotLeader, err)
	}
	return rep, fmt.Errorf("controller on %s: %w: %w", node, metastore.ErrUnavailable, err)
}

// local asks this node's controller actor.
func (c *Client) local(ctx context.Context, req messages.ControllerRequest) (messages.ControllerReply, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = c.d.Clock.Now().Add(c.d.Timeout)
	}
	res, err := c.d.Root.RequestFuture(c.d.Local, &Ask{Deadline: deadline, Req: req}, deadline.Sub(c.d.Clock.Now())).Result()
	if err != nil {
		return messages.ControllerReply{}, fmt.Errorf("controller: %w: %w", metastore.ErrUnavailable, err)
	}
	ans := res.(Answer)
	return ans.Reply, ans.Err
}

// Serve answers peers' controller requests from the local controller,
// with the status that tells the asker what happened: 503 nothing was
// done (not the leader), 409/404/400 refused, 504 unknown.
func (c *Client) Serve() error {
	return transport.HandleJSON(c.d.NATS, Service, func(ctx context.Context, from string, in messages.ControllerRequest) (messages.ControllerReply, error) {
		rep, err := c.local(ctx, in)
		switch {
		case err == nil:
			return rep, nil
		case errors.Is(err, ErrNotLeader):
			return rep, transport.Errorf(transport.StatusUnavailable, "%s does not lead the metadata shard", c.d.NodeID)
		case errors.Is(err, metastore.ErrExists):
			return rep, transport.Errorf(409, "%v", err)
		case errors.Is(err, metastore.ErrNotFound):
			return rep, transport.Errorf(404, "%v", err)
		case errors.Is(err, metastore.ErrInvalid), errors.Is(err, errs.ErrInvalid):
			return rep, transport.Errorf(400, "%v", err)
		}
		return rep, transport.Errorf(transport.StatusTimeout, "%v", err)
	})
}

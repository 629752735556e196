package route

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// GroupConfig bounds a node's request groups: the node's Config fields of
// the same names, checked there (at most MaxCommitGroupItems and
// MaxMoveGroupItems).
type GroupConfig struct {
	// CommitGroupMaxItems bounds a commit group; CommitGroupsInFlight the
	// commit groups out to one owner.
	CommitGroupMaxItems, CommitGroupsInFlight int
	// MoveGroupMaxItems bounds a move group; MoveGroupsInFlight the move
	// groups out to one source.
	MoveGroupMaxItems, MoveGroupsInFlight int
}

// GroupMetrics are the node's series of the groups it sends: each group
// sent, and the requests it carried (narad_commit_groups_total,
// narad_commit_group_commits_total, narad_move_groups_total,
// narad_move_group_requests_total).
type GroupMetrics struct {
	CommitGroups, CommitGroupItems *metrics.Counter
	MoveGroups, MoveGroupItems     *metrics.Counter
}

// peerGroups carries partition requests that wait for the same peer in one
// request of a group service, and hands each caller its own answer. The
// move workers' listings, re-arms and releases use it (MoveGroups), and so
// do the dispatcher's commits to a peer owner (GroupedOwners).
//
// It batches without a timer: a request goes at once when fewer than
// inFlight groups are out to its peer, and otherwise waits for the next
// group, which takes every request waiting then (up to maxItems). One
// caller alone pays nothing; a thousand pay a few round trips between them.
//
// Each request is still judged alone: its answer is exactly what it alone
// would have got (its own error status included), and a group's failure
// fails each of its requests as one request's failure would, which its
// caller retries as it would have.
type peerGroups struct {
	r *Router
	// maxItems bounds a group; inFlight the groups out to one peer.
	maxItems, inFlight int
	// groupable says whether a request may travel in a group; post sends
	// one group and answers each of its requests, in order.
	groupable func(messages.PartitionRequest) bool
	post      func(owner string, reqs []messages.PartitionRequest) (messages.MoveGroupReply, error)
	// counted is told the size of each group sent; nil counts nothing.
	counted func(items int)

	mu    sync.Mutex
	lanes map[string]*groupLane // by peer node
}

// groupLane is one peer's requests: those waiting for a group, and how
// many groups are out. A lane's sender goroutines end when it is empty.
type groupLane struct {
	waiting []*groupCall
	sending int
}

// groupCall is one request waiting in a lane; done is closed once rep or
// err is set.
type groupCall struct {
	ctx  context.Context
	req  messages.PartitionRequest
	rep  messages.PartitionReply
	err  error
	done chan struct{}
}

func newPeerGroups(r *Router, maxItems, inFlight int, groupable func(messages.PartitionRequest) bool,
	post func(string, []messages.PartitionRequest) (messages.MoveGroupReply, error)) *peerGroups {
	return &peerGroups{r: r, maxItems: maxItems, inFlight: inFlight, groupable: groupable, post: post, lanes: map[string]*groupLane{}}
}

// ask is Router.Ask, through a group when msg may travel in one to a peer
// (not when ctx is marked alone).
func (g *peerGroups) ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	req := requestOf(k, msg)
	owner, err := g.r.Owner(k)
	if err != nil || owner == g.r.Self || !g.groupable(req) || ctx.Value(aloneKey{}) != nil {
		return g.r.Ask(ctx, k, msg)
	}
	c := &groupCall{ctx: ctx, req: req, done: make(chan struct{})}
	g.enqueue(owner, c)
	select {
	case <-c.done:
	case <-ctx.Done():
		// The group still carries it: every groupable request may be
		// asked again, as after any request whose answer was lost.
		return nil, fmt.Errorf("%T to %s at %s: %w: %w", msg, k.Topic, owner, ctx.Err(), errs.ErrUnavailable)
	}
	if c.err != nil {
		return nil, fmt.Errorf("%T to %s at %s: %w: %w", msg, k.Topic, owner, c.err, errs.ErrUnavailable)
	}
	return replyOf(c.rep, msg, k, owner)
}

// enqueue puts c in its peer's lane and starts a sender when fewer than
// inFlight run.
func (g *peerGroups) enqueue(owner string, c *groupCall) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.lanes[owner]
	if l == nil {
		l = &groupLane{}
		g.lanes[owner] = l
	}
	l.waiting = append(l.waiting, c)
	if l.sending < g.inFlight {
		l.sending++
		go g.send(owner, l)
	}
}

// send carries the lane's waiting requests to owner, a group at a time,
// until none waits.
func (g *peerGroups) send(owner string, l *groupLane) {
	for {
		g.mu.Lock()
		n := min(len(l.waiting), g.maxItems)
		if n == 0 {
			l.sending--
			if l.sending == 0 && g.lanes[owner] == l {
				delete(g.lanes, owner)
			}
			g.mu.Unlock()
			return
		}
		batch := l.waiting[:n:n]
		l.waiting = l.waiting[n:]
		g.mu.Unlock()
		g.carry(owner, batch)
	}
}

// carry sends one group and answers each of its calls. A request whose
// caller gave up meanwhile is left out. A peer that does not serve the
// group service (an older binary: no responders) or a group whose request
// or reply was too large gets each request alone.
func (g *peerGroups) carry(owner string, calls []*groupCall) {
	live := calls[:0:0]
	for _, c := range calls {
		if err := c.ctx.Err(); err != nil {
			c.err = err
			close(c.done)
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	reqs := make([]messages.PartitionRequest, len(live))
	for i, c := range live {
		reqs[i] = c.req
	}
	if g.counted != nil {
		g.counted(len(live))
	}
	out, err := g.post(owner, reqs)
	if err != nil && (errors.Is(err, transport.ErrNoResponders) || errors.Is(err, transport.ErrTooLarge)) {
		g.alone(owner, live)
		return
	}
	if err == nil && len(out.Items) != len(live) {
		err = fmt.Errorf("group to %s: %d answers to %d requests", owner, len(out.Items), len(live))
	}
	for i, c := range live {
		switch {
		case err != nil:
			c.err = err
		case out.Items[i].Status != 0:
			c.err = transport.Errorf(out.Items[i].Status, "%s", out.Items[i].Err)
		default:
			c.rep = out.Items[i].Reply
		}
		close(c.done)
	}
}

// alone sends each call as a request of its own, side by side.
func (g *peerGroups) alone(owner string, calls []*groupCall) {
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			defer close(c.done)
			c.rep, c.err = g.r.remote(c.ctx, owner, c.req, g.r.Timeout)
		})
	}
	wg.Wait()
}

// requestGroup sends one group's body to owner's service under the node's
// request timeout and decodes the reply, one item per request.
func (r *Router) requestGroup(owner, service string, body []byte) (messages.MoveGroupReply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), r.Timeout)
	defer cancel()
	raw, err := r.NATS.Request(ctx, owner, service, body)
	if err != nil {
		return messages.MoveGroupReply{}, err
	}
	var out messages.MoveGroupReply
	if err := json.Unmarshal(raw, &out); err != nil {
		return messages.MoveGroupReply{}, fmt.Errorf("%s reply from %s: %w", service, owner, err)
	}
	return out, nil
}

// serveGroup answers a peer's group: each item goes to its local partition
// actor, all at once, each bounded by wait when positive, and each answer
// or error lands in its place.
func (r *Router) serveGroup(ctx context.Context, items []messages.PartitionRequest, wait bool) messages.MoveGroupReply {
	out := messages.MoveGroupReply{Items: make([]messages.MoveGroupItem, len(items))}
	var wg sync.WaitGroup
	for i, it := range items {
		wg.Go(func() {
			ictx := ctx
			if wait && r.GroupWait > 0 {
				var cancel context.CancelFunc
				ictx, cancel = context.WithTimeout(ctx, r.GroupWait)
				defer cancel()
			}
			rep, err := r.ServePartition(ictx, it)
			if err != nil {
				status := transport.StatusInternal
				if re, ok := errors.AsType[*transport.RemoteError](err); ok {
					status = re.Status
				}
				out.Items[i] = messages.MoveGroupItem{Status: status, Err: err.Error()}
				return
			}
			out.Items[i].Reply = rep
		})
	}
	wg.Wait()
	return out
}

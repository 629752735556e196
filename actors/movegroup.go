package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Moves between the same two nodes travel together (issue 27). A
// destination runs hundreds of move workers against one source at a time;
// each asked its own listings, re-arms, fences and releases, one NATS round
// trip and one handler on each side per request. moveGroups carries the
// requests that are waiting for the same source in one request of the
// moveGroupService, and the source answers them all in one reply.
//
// It batches without a timer: a request goes at once when fewer than
// MoveGroupsInFlight groups are out to its source, and otherwise waits for
// the next group, which takes every request waiting then (up to
// MoveGroupMaxItems). One worker alone pays nothing; a thousand pay a few
// round trips between them.
//
// Each partition is still judged alone: an item's answer is exactly what
// its request alone would have got (its own error status included), and a
// group's failure fails each of its requests as one request's failure
// would, which its worker retries. A prepare never travels in a group: the
// source's pacing may hold it for FreezeHoldFor (rule B5), and a group
// waits for its slowest item; nor do the final listing and the fence of a
// freeze (alone). Chunk reads keep their own raw service.

// aloneKey marks a context whose request goes alone, never waiting for a
// group: the final listing and the fence of a freeze, which every write to
// the partition waits for (a group answers when its slowest item does,
// and the hand-off's measured freeze grew by a fifth in groups).
type aloneKey struct{}

// alone marks ctx's request to go alone (aloneKey).
func alone(ctx context.Context) context.Context { return context.WithValue(ctx, aloneKey{}, true) }

// moveGroupService answers a MoveGroup.
const moveGroupService = "movegroup"

// moveGroups is the sourceClient of a node's move workers.
type moveGroups struct {
	r *router
	// maxItems and inFlight are Config.MoveGroupMaxItems and
	// Config.MoveGroupsInFlight.
	maxItems, inFlight int
	// metrics counts the groups sent and the requests they carried; nil
	// in rigs.
	metrics *nodeMetrics

	mu    sync.Mutex
	lanes map[string]*groupLane // by source node
}

// groupLane is one source's requests: those waiting for a group, and how
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

func newMoveGroups(r *router, c Config, m *nodeMetrics) *moveGroups {
	return &moveGroups{r: r, maxItems: c.MoveGroupMaxItems, inFlight: c.MoveGroupsInFlight, metrics: m, lanes: map[string]*groupLane{}}
}

// ask is router.ask, through a group when the request may travel in one
// and its owner is a peer.
func (g *moveGroups) ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	req := requestOf(k, msg)
	owner, err := g.r.owner(k)
	if err != nil || owner == g.r.self || !req.Groupable() || ctx.Value(aloneKey{}) != nil {
		return g.r.ask(ctx, k, msg)
	}
	c := &groupCall{ctx: ctx, req: req, done: make(chan struct{})}
	g.enqueue(owner, c)
	select {
	case <-c.done:
	case <-ctx.Done():
		// The group still carries it: every groupable request may be
		// asked again, as after any request whose answer was lost.
		return nil, fmt.Errorf("%T to %s at %s: %w: %w", msg, k.Topic, owner, ctx.Err(), ErrUnavailable)
	}
	if c.err != nil {
		return nil, fmt.Errorf("%T to %s at %s: %w: %w", msg, k.Topic, owner, c.err, ErrUnavailable)
	}
	return replyOf(c.rep, msg, k, owner)
}

func (g *moveGroups) readChunk(ctx context.Context, k messages.PartitionKey, rc messages.ReadChunk) ([]byte, error) {
	return g.r.readChunk(ctx, k, rc)
}

// enqueue puts c in its source's lane and starts a sender when fewer than
// inFlight run.
func (g *moveGroups) enqueue(owner string, c *groupCall) {
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
func (g *moveGroups) send(owner string, l *groupLane) {
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
// caller gave up meanwhile is left out. A source that does not serve
// groups (an older binary: no responders) or a group whose reply was too
// large gets each request alone.
func (g *moveGroups) carry(owner string, calls []*groupCall) {
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
	in := messages.MoveGroup{Items: make([]messages.PartitionRequest, len(live))}
	for i, c := range live {
		in.Items[i] = c.req
	}
	if g.metrics != nil {
		g.metrics.moveGroups.Inc()
		g.metrics.moveGroupItems.Add(len(live))
	}
	out, err := g.request(owner, in)
	if err != nil && (errors.Is(err, transport.ErrNoResponders) || errors.Is(err, transport.ErrTooLarge)) {
		g.alone(owner, live)
		return
	}
	if err == nil && len(out.Items) != len(live) {
		err = fmt.Errorf("move group to %s: %d answers to %d requests", owner, len(out.Items), len(live))
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

// request sends one group under the node's request timeout.
func (g *moveGroups) request(owner string, in messages.MoveGroup) (messages.MoveGroupReply, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return messages.MoveGroupReply{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.r.timeout)
	defer cancel()
	raw, err := g.r.nats.Request(ctx, owner, moveGroupService, body)
	if err != nil {
		return messages.MoveGroupReply{}, err
	}
	var out messages.MoveGroupReply
	if err := json.Unmarshal(raw, &out); err != nil {
		return messages.MoveGroupReply{}, fmt.Errorf("move group reply from %s: %w", owner, err)
	}
	return out, nil
}

// alone sends each call as a request of its own, side by side.
func (g *moveGroups) alone(owner string, calls []*groupCall) {
	var wg sync.WaitGroup
	for _, c := range calls {
		wg.Go(func() {
			defer close(c.done)
			c.rep, c.err = g.r.remote(c.ctx, owner, c.req)
		})
	}
	wg.Wait()
}

// serveMoveGroup answers a peer's MoveGroup: each item goes to its local
// partition actor, all at once, each bounded by groupWait, and each answer
// or error lands in its place. A group of anything but listings and non-prepare handoffs, or of
// more than maxMoveGroupItems, is refused whole.
func (r *router) serveMoveGroup(ctx context.Context, _ string, body []byte) ([]byte, error) {
	var in messages.MoveGroup
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, transport.Errorf(transport.StatusBadRequest, "move group: %v", err)
	}
	if len(in.Items) == 0 || len(in.Items) > maxMoveGroupItems {
		return nil, transport.Errorf(transport.StatusBadRequest, "move group of %d items, want 1 to %d", len(in.Items), maxMoveGroupItems)
	}
	for i, it := range in.Items {
		if !it.Groupable() {
			return nil, transport.Errorf(transport.StatusBadRequest, "move group item %d is no listing or handoff that may travel in a group", i)
		}
	}
	out := messages.MoveGroupReply{Items: make([]messages.MoveGroupItem, len(in.Items))}
	var wg sync.WaitGroup
	for i, it := range in.Items {
		wg.Go(func() {
			ictx := ctx
			if r.groupWait > 0 {
				var cancel context.CancelFunc
				ictx, cancel = context.WithTimeout(ctx, r.groupWait)
				defer cancel()
			}
			rep, err := r.servePartition(ictx, it)
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
	return json.Marshal(out)
}

// maxMoveGroupItems is the most items a source takes in one group, the
// bound of Config.MoveGroupMaxItems.
const maxMoveGroupItems = 1024

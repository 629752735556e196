package route

import (
	"context"
	"encoding/json"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// Moves between the same two nodes travel together (issue 27). A
// destination runs hundreds of move workers against one source at a time;
// each asked its own listings, re-arms, fences and releases, one NATS round
// trip and one handler on each side per request. MoveGroups carries the
// requests that are waiting for the same source in one request of the
// moveGroupService (the lanes of peergroups.go, GroupConfig's
// MoveGroupsInFlight groups out to a source, up to MoveGroupMaxItems each),
// and the source answers them all in one reply, each partition alone. A
// prepare never travels in a group: the source's pacing may hold it for
// FreezeHoldFor (rule B5), and a group waits for its slowest item; nor do
// the final listing and the fence of a freeze (the worker's AskAlone).
// Chunk reads keep their own raw service.

// aloneKey marks a context whose request goes alone, never waiting for a
// group: the worker's AskAlone.
type aloneKey struct{}

// alone marks ctx's request to go alone (aloneKey).
func alone(ctx context.Context) context.Context { return context.WithValue(ctx, aloneKey{}, true) }

// moveGroupService answers a MoveGroup.
const moveGroupService = "movegroup"

// MoveGroups is the mover.Source of a node's move workers (actors/mover):
// the move group service's lanes (peerGroups), and chunk reads alone. It
// stays here, beside the router and the dispatcher's commit groups, whose
// peerGroups it shares.
type MoveGroups struct {
	*peerGroups
	// metrics counts the groups sent and the requests they carried; nil
	// in rigs.
	metrics *GroupMetrics
}

// NewMoveGroups is r's move groups of c's bounds, counted in m (nil counts
// nothing).
func NewMoveGroups(r *Router, c GroupConfig, m *GroupMetrics) *MoveGroups {
	g := &MoveGroups{metrics: m}
	g.peerGroups = newPeerGroups(r, c.MoveGroupMaxItems, c.MoveGroupsInFlight, messages.PartitionRequest.Groupable, g.request)
	g.counted = func(items int) {
		if g.metrics != nil {
			g.metrics.MoveGroups.Inc()
			g.metrics.MoveGroupItems.Add(items)
		}
	}
	return g
}

// Ask is a request to k's owner, in a group with others to the same node
// when it may travel in one.
func (g *MoveGroups) Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	return g.ask(ctx, k, msg)
}

// AskAlone is a request to k's owner that never waits for a group.
func (g *MoveGroups) AskAlone(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	return g.ask(alone(ctx), k, msg)
}

// ReadChunk reads a chunk of k's segment from its owner.
func (g *MoveGroups) ReadChunk(ctx context.Context, k messages.PartitionKey, rc messages.ReadChunk) ([]byte, error) {
	return g.r.ReadChunk(ctx, k, rc)
}

// request sends one group of move requests as JSON.
func (g *MoveGroups) request(owner string, reqs []messages.PartitionRequest) (messages.MoveGroupReply, error) {
	body, err := json.Marshal(messages.MoveGroup{Items: reqs})
	if err != nil {
		return messages.MoveGroupReply{}, err
	}
	return g.r.requestGroup(owner, moveGroupService, body)
}

// serveMoveGroup answers a peer's MoveGroup: each item goes to its local
// partition actor, all at once, each bounded by GroupWait, and each answer
// or error lands in its place. A group of anything but listings and non-prepare handoffs, or of
// more than MaxMoveGroupItems, is refused whole.
func (r *Router) serveMoveGroup(ctx context.Context, _ string, body []byte) ([]byte, error) {
	var in messages.MoveGroup
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, transport.Errorf(transport.StatusBadRequest, "move group: %v", err)
	}
	if len(in.Items) == 0 || len(in.Items) > MaxMoveGroupItems {
		return nil, transport.Errorf(transport.StatusBadRequest, "move group of %d items, want 1 to %d", len(in.Items), MaxMoveGroupItems)
	}
	for i, it := range in.Items {
		if !it.Groupable() {
			return nil, transport.Errorf(transport.StatusBadRequest, "move group item %d is no listing or handoff that may travel in a group", i)
		}
	}
	out := r.serveGroup(ctx, in.Items, true)
	return json.Marshal(out)
}

// MaxMoveGroupItems is the most items a source takes in one group, the
// bound of the node's Config.MoveGroupMaxItems.
const MaxMoveGroupItems = 1024

package actors

import (
	"context"
	"encoding/json"

	"github.com/naradmq/narad/actors/dispatch"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// The dispatcher's commits to a peer owner travel together (issue 28). One
// commit is in flight per partition owned by a peer, so under a steady
// load each found about one record waiting and paid a NATS round trip, a
// handler and a goroutine of its own on both nodes. commitGroups carries
// the commits waiting for the same owner in one request of the commit
// group service (peerGroups: no timer, a commit goes at once while fewer
// than CommitGroupsInFlight groups are out); the owner hands each to its
// partition actor, all at once, and answers each alone, so a partition
// frozen, gone or slow (past MoveGroupWaitFor: 504, unknown, retried)
// touches only its own commit. Records keep their order: still one commit
// in flight per partition.

// commitGroupService answers a CommitGroup.
const commitGroupService = "commitgroup"

// maxCommitGroupItems is the most commits an owner takes in one group, the
// bound of Config.CommitGroupMaxItems.
const maxCommitGroupItems = 1024

// owners is how the dispatcher reaches the owners of partitions (*router,
// groupedOwners; dispatchOwners hands it to actors/dispatch).
type owners interface {
	// ask sends a request to a partition's owner, here or on a peer.
	ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
	// isLocal reports whether this node serves a partition itself.
	isLocal(k messages.PartitionKey) bool
	// ownerOf reads a partition's owner from the local replica.
	ownerOf(k messages.PartitionKey) string
	// sibling names a partition of the same topic, other than k, whose
	// owner is alive; false when there is none.
	sibling(k messages.PartitionKey) (messages.PartitionKey, bool)
}

// dispatchOwners adapts the root's owners to dispatch.Owners.
type dispatchOwners struct{ o owners }

func (d dispatchOwners) Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	return d.o.ask(ctx, k, msg)
}
func (d dispatchOwners) IsLocal(k messages.PartitionKey) bool   { return d.o.isLocal(k) }
func (d dispatchOwners) OwnerOf(k messages.PartitionKey) string { return d.o.ownerOf(k) }
func (d dispatchOwners) Sibling(k messages.PartitionKey) (messages.PartitionKey, bool) {
	return d.o.sibling(k)
}

// groupedOwners is the dispatcher's owners: the router, with the commits
// to a peer carried in commit groups.
type groupedOwners struct {
	*router
	commits *peerGroups
}

func (o groupedOwners) ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	return o.commits.ask(ctx, k, msg)
}

func newCommitGroups(r *router, c Config, m *nodeMetrics) *peerGroups {
	isCommit := func(req messages.PartitionRequest) bool { return req.Commit != nil }
	g := newPeerGroups(r, c.CommitGroupMaxItems, c.CommitGroupsInFlight, isCommit, func(owner string, reqs []messages.PartitionRequest) (messages.MoveGroupReply, error) {
		return r.commitGroup(owner, reqs)
	})
	if m != nil {
		g.counted = func(items int) {
			m.commitGroups.Inc()
			m.commitGroupItems.Add(items)
		}
	}
	return g
}

// commitGroup sends one group of commits in their wire form.
func (r *router) commitGroup(owner string, reqs []messages.PartitionRequest) (messages.MoveGroupReply, error) {
	body, err := messages.EncodeCommitGroup(reqs)
	if err != nil {
		return messages.MoveGroupReply{}, err
	}
	return r.requestGroup(owner, commitGroupService, body)
}

// serveCommitGroup answers a peer's CommitGroup: each commit goes to its
// local partition actor, all at once, and each answer lands in its place.
// A group that does not decode, or of more than maxCommitGroupItems, is
// refused whole.
func (r *router) serveCommitGroup(ctx context.Context, _ string, body []byte) ([]byte, error) {
	items, err := messages.DecodeCommitGroup(body)
	if err != nil {
		return nil, transport.Errorf(transport.StatusBadRequest, "commit group: %v", err)
	}
	if len(items) == 0 || len(items) > maxCommitGroupItems {
		return nil, transport.Errorf(transport.StatusBadRequest, "commit group of %d items, want 1 to %d", len(items), maxCommitGroupItems)
	}
	return json.Marshal(r.serveGroup(ctx, items, true))
}

// newDispatchDeps is what the dispatcher gets of its node: d's config,
// logger and series, the replica, the ingress WAL and o for the owners.
func newDispatchDeps(d deps, store dispatch.Store, wal dispatch.WAL, o owners) dispatch.Deps {
	return dispatch.Deps{Config: d.cfg.Dispatch, RequestTimeout: d.cfg.RequestTimeout,
		MaxCommitBatchBytes: d.cfg.MaxCommitBatchBytes, MaxRemoteCommitBytes: d.cfg.MaxRemoteCommitBytes,
		Logger: d.log, Store: store, Owners: dispatchOwners{o}, WAL: wal, PartitionPID: partition.PID,
		Clock: d.cfg.clockOrWall(), Metrics: d.metrics.dispatchMetrics()}
}

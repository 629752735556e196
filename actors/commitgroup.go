package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

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

// commitGroupService answers a commit group, in either form: the binary
// one (messages.EncodeCommits, its first byte messages.CommitWireVersion)
// with a binary answer, or the JSON one of nodes older than issue 45
// (messages.EncodeCommitGroup) with a JSON answer.
const commitGroupService = "commitgroup"

// olderPeerRecheck is how long a peer that refused the binary form is sent
// the JSON one before it is tried again: a rolling upgrade replaces it
// within minutes.
const olderPeerRecheck = time.Minute

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
	forms := &commitForms{r: r, older: map[string]time.Time{}}
	g := newPeerGroups(r, c.CommitGroupMaxItems, c.CommitGroupsInFlight, isCommit, forms.post)
	if m != nil {
		g.counted = func(items int) {
			m.commitGroups.Inc()
			m.commitGroupItems.Add(items)
		}
	}
	return g
}

// commitForms sends each group in the binary form, unless its peer refused
// that form lately (a node older than issue 45 answers it 400 as
// malformed): then in the JSON form, at once and until olderPeerRecheck.
type commitForms struct {
	r     *router
	mu    sync.Mutex
	older map[string]time.Time // peer: when to try the binary form again
}

func (f *commitForms) post(owner string, reqs []messages.PartitionRequest) (messages.MoveGroupReply, error) {
	f.mu.Lock()
	until, older := f.older[owner]
	if older && time.Now().After(until) {
		delete(f.older, owner)
		older = false
	}
	f.mu.Unlock()
	if !older {
		out, err := f.r.commits(owner, reqs)
		if re, ok := errors.AsType[*transport.RemoteError](err); !ok || re.Status != transport.StatusBadRequest {
			return out, err
		}
		f.mu.Lock()
		f.older[owner] = time.Now().Add(olderPeerRecheck)
		f.mu.Unlock()
	}
	return f.r.commitGroup(owner, reqs)
}

// commits sends one group of commits in the binary form.
func (r *router) commits(owner string, reqs []messages.PartitionRequest) (messages.MoveGroupReply, error) {
	body, err := messages.EncodeCommits(reqs)
	if err != nil {
		return messages.MoveGroupReply{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	raw, err := r.nats.Request(ctx, owner, commitGroupService, body)
	if err != nil {
		return messages.MoveGroupReply{}, err
	}
	out, err := messages.DecodeCommitReplies(raw)
	if err != nil {
		return messages.MoveGroupReply{}, fmt.Errorf("%s reply from %s: %w", commitGroupService, owner, err)
	}
	return out, nil
}

// commitGroup sends one group of commits in the JSON form.
func (r *router) commitGroup(owner string, reqs []messages.PartitionRequest) (messages.MoveGroupReply, error) {
	body, err := messages.EncodeCommitGroup(reqs)
	if err != nil {
		return messages.MoveGroupReply{}, err
	}
	return r.requestGroup(owner, commitGroupService, body)
}

// serveCommitGroup answers a peer's commit group, in the form it came in:
// each commit goes to its local partition actor, all at once, and each
// answer lands in its place. A group that does not decode, or of more than
// maxCommitGroupItems, is refused whole.
func (r *router) serveCommitGroup(ctx context.Context, _ string, body []byte) ([]byte, error) {
	binary := len(body) > 0 && body[0] == messages.CommitWireVersion
	var items []messages.PartitionRequest
	var err error
	if binary {
		items, err = messages.DecodeCommits(body)
	} else {
		items, err = messages.DecodeCommitGroup(body)
	}
	if err != nil {
		return nil, transport.Errorf(transport.StatusBadRequest, "commit group: %v", err)
	}
	if len(items) == 0 || len(items) > maxCommitGroupItems {
		return nil, transport.Errorf(transport.StatusBadRequest, "commit group of %d items, want 1 to %d", len(items), maxCommitGroupItems)
	}
	out := r.serveGroup(ctx, items, true)
	if binary {
		return messages.EncodeCommitReplies(out)
	}
	return json.Marshal(out)
}

// newDispatchDeps is what the dispatcher gets of its node: d's config,
// logger and series, the replica, the ingress WAL and o for the owners.
func newDispatchDeps(d deps, store dispatch.Store, wal dispatch.WAL, o owners) dispatch.Deps {
	return dispatch.Deps{Config: d.cfg.Dispatch, RequestTimeout: d.cfg.RequestTimeout,
		MaxCommitBatchBytes: d.cfg.MaxCommitBatchBytes, MaxRemoteCommitBytes: d.cfg.MaxRemoteCommitBytes,
		Logger: d.log, Store: store, Owners: dispatchOwners{o}, WAL: wal, PartitionPID: partition.PID,
		Clock: d.cfg.clockOrWall(), Metrics: d.metrics.dispatchMetrics()}
}

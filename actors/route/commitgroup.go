package route

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// The dispatcher's commits to a peer owner travel together (issue 28). One
// commit is in flight per partition owned by a peer, so under a steady
// load each found about one record waiting and paid a NATS round trip, a
// handler and a goroutine of its own on both nodes. GroupedOwners carries
// the commits waiting for the same owner in one request of the commit
// group service (peerGroups: no timer, a commit goes at once while fewer
// than GroupConfig.CommitGroupsInFlight groups are out); the owner hands
// each to its partition actor, all at once, and answers each alone, so a
// partition frozen, gone or slow (past Router.GroupWait: 504, unknown,
// retried) touches only its own commit. Records keep their order: still
// one commit in flight per partition.

// commitGroupService answers a commit group, in either form: the binary
// one (messages.EncodeCommits, its first byte messages.CommitWireVersion)
// with a binary answer, or the JSON one of nodes older than issue 45
// (messages.EncodeCommitGroup) with a JSON answer.
const commitGroupService = "commitgroup"

// olderPeerRecheck is how long a peer that refused the binary form is sent
// the JSON one before it is tried again: a rolling upgrade replaces it
// within minutes.
const olderPeerRecheck = time.Minute

// MaxCommitGroupItems is the most commits an owner takes in one group, the
// bound of the node's Config.CommitGroupMaxItems.
const MaxCommitGroupItems = 1024

// GroupedOwners is the dispatcher's owners (dispatch.Owners): the router,
// with the commits to a peer carried in commit groups.
type GroupedOwners struct {
	*Router
	commits *peerGroups
}

// NewGroupedOwners is r with its commits to a peer in commit groups of c's
// bounds, counted in m (nil counts nothing).
func NewGroupedOwners(r *Router, c GroupConfig, m *GroupMetrics) GroupedOwners {
	return GroupedOwners{r, newCommitGroups(r, c, m)}
}

// Ask is Router.Ask, a commit to a peer in a commit group.
func (o GroupedOwners) Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	return o.commits.ask(ctx, k, msg)
}

func newCommitGroups(r *Router, c GroupConfig, m *GroupMetrics) *peerGroups {
	isCommit := func(req messages.PartitionRequest) bool { return req.Commit != nil }
	forms := &commitForms{r: r, older: map[string]time.Time{}}
	g := newPeerGroups(r, c.CommitGroupMaxItems, c.CommitGroupsInFlight, isCommit, forms.post)
	if m != nil {
		g.counted = func(items int) {
			m.CommitGroups.Inc()
			m.CommitGroupItems.Add(items)
		}
	}
	return g
}

// commitForms sends each group in the binary form, unless its peer refused
// that form lately (a node older than issue 45 answers it 400 as
// malformed): then in the JSON form, at once and until olderPeerRecheck.
type commitForms struct {
	r     *Router
	mu    sync.Mutex
	older map[string]time.Time // peer: when to try the binary form again
}

func (f *commitForms) post(owner string, reqs []messages.PartitionRequest) (messages.MoveGroupReply, error) {
	f.mu.Lock()
	until, older := f.older[owner]
	if older && f.r.now().After(until) {
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
		f.older[owner] = f.r.now().Add(olderPeerRecheck)
		f.mu.Unlock()
	}
	return f.r.commitGroup(owner, reqs)
}

// commits sends one group of commits in the binary form.
func (r *Router) commits(owner string, reqs []messages.PartitionRequest) (messages.MoveGroupReply, error) {
	body, err := messages.EncodeCommits(reqs)
	if err != nil {
		return messages.MoveGroupReply{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.Timeout)
	defer cancel()
	raw, err := r.NATS.Request(ctx, owner, commitGroupService, body)
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
func (r *Router) commitGroup(owner string, reqs []messages.PartitionRequest) (messages.MoveGroupReply, error) {
	body, err := messages.EncodeCommitGroup(reqs)
	if err != nil {
		return messages.MoveGroupReply{}, err
	}
	return r.requestGroup(owner, commitGroupService, body)
}

// serveCommitGroup answers a peer's commit group, in the form it came in:
// each commit goes to its local partition actor, all at once, and each
// answer lands in its place. A group that does not decode, or of more than
// MaxCommitGroupItems, is refused whole.
func (r *Router) serveCommitGroup(ctx context.Context, _ string, body []byte) ([]byte, error) {
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
	if len(items) == 0 || len(items) > MaxCommitGroupItems {
		return nil, transport.Errorf(transport.StatusBadRequest, "commit group of %d items, want 1 to %d", len(items), MaxCommitGroupItems)
	}
	out := r.serveGroup(ctx, items, true)
	if binary {
		return messages.EncodeCommitReplies(out)
	}
	return json.Marshal(out)
}

package actors

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/naradmq/narad/actors/sweeper"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// The node's side of the quarantine: the NATS services and admin verbs
// that list and release the copies set aside. The book itself, and every
// walk and release, are the sweeper's (actors/sweeper); this node asks it
// by message, each ask bounded by RequestTimeout.

// The node services the "quarantine" verbs and the members listing gather
// from: each member answers for its own data dir.
const (
	quarantineCountsService  = "quarantine-counts"
	quarantineListService    = "quarantine-list"
	quarantineReleaseService = "quarantine-release"
)

func (n *Node) serveQuarantine() error {
	return errors.Join(
		transport.HandleJSON(n.nats, quarantineCountsService, func(ctx context.Context, _ string, _ struct{}) (messages.QuarantineCounts, error) {
			c, _ := n.quarantineCounts(ctx)
			return c, nil
		}),
		transport.HandleJSON(n.nats, quarantineListService, func(ctx context.Context, _ string, _ struct{}) (messages.NodeQuarantine, error) {
			return n.localQuarantine(ctx)
		}),
		transport.HandleJSON(n.nats, quarantineReleaseService, func(ctx context.Context, _ string, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
			return n.releaseLocal(ctx, in)
		}),
	)
}

// quarantineCounts is this node's share of the members listing, from the
// sweeper's last inventory; false before it took one, or when the sweeper
// did not answer.
func (n *Node) quarantineCounts(ctx context.Context) (messages.QuarantineCounts, bool) {
	res, err := n.request(ctx, n.sweeper, sweeper.QuarantineAsk{})
	a, ok := res.(sweeper.QuarantineCountsAnswer)
	if err != nil || !ok {
		return messages.QuarantineCounts{}, false
	}
	return a.Counts, a.Taken
}

// localQuarantine lists this node's copies set aside from a fresh
// inventory: an operator asked, and the last one may be a sweep old.
func (n *Node) localQuarantine(ctx context.Context) (messages.NodeQuarantine, error) {
	res, err := n.request(ctx, n.sweeper, sweeper.QuarantineAsk{Fresh: true})
	if err != nil {
		return messages.NodeQuarantine{}, transport.Errorf(transport.StatusUnavailable, "%s: the sweeper did not answer: %v", n.cfg.NodeID, err)
	}
	a := res.(sweeper.QuarantineListAnswer)
	return a.List, a.Err
}

// releaseLocal removes one copy set aside in this node's data dir, or
// says what it would remove (a dry run): the sweeper does it, under the
// topic's guard and off its mailbox, and answers once its inventory no
// longer lists the copy.
func (n *Node) releaseLocal(ctx context.Context, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	res, err := n.request(ctx, n.sweeper, sweeper.QuarantineRelease{Req: in})
	if err != nil {
		return messages.QuarantineReleaseReply{Node: n.cfg.NodeID, Path: in.Path, DryRun: in.DryRun},
			transport.Errorf(transport.StatusTimeout, "release on %s: the sweeper did not answer: %v; list its copies to see whether it happened", n.cfg.NodeID, err)
	}
	a := res.(sweeper.QuarantineReleaseAnswer)
	return a.Reply, a.Err
}

// adminQuarantine answers the "quarantine" verb: one member's listing, or
// every member's not marked dead, asked at once within the caller's
// budget; a member that gives none is named in Errors.
func (n *Node) adminQuarantine(ctx context.Context, _ string, in messages.QuarantineRequest) (messages.QuarantineList, error) {
	var ids []string
	if in.Node != "" {
		if _, ok := n.store.Member(in.Node); !ok {
			return messages.QuarantineList{}, transport.Errorf(404, "member %s not found", in.Node)
		}
		ids = []string{in.Node}
	} else {
		for _, m := range n.store.Members() {
			if m.ID == n.cfg.NodeID || m.Status != messages.MemberDead {
				ids = append(ids, m.ID)
			}
		}
	}
	out := messages.QuarantineList{Nodes: []messages.NodeQuarantine{}}
	var others []string
	for _, id := range ids {
		if id != n.cfg.NodeID {
			others = append(others, id)
			continue
		}
		l, err := n.localQuarantine(ctx)
		if err != nil {
			out.Errors = map[string]string{id: err.Error()}
			continue
		}
		out.Nodes = append(out.Nodes, l)
	}
	answers, errs := askMembers[messages.NodeQuarantine](ctx, n.nats, others, quarantineListService, struct{}{}, n.fanOutBudget(ctx))
	for _, id := range others {
		if l, ok := answers[id]; ok {
			out.Nodes = append(out.Nodes, l)
			continue
		}
		if out.Errors == nil {
			out.Errors = map[string]string{}
		}
		out.Errors[id] = errs[id].Error()
	}
	slices.SortFunc(out.Nodes, func(a, b messages.NodeQuarantine) int { return strings.Compare(a.Node, b.Node) })
	if in.Node != "" && len(out.Nodes) == 0 {
		return out, transport.Errorf(transport.StatusUnavailable, "no listing from %s: %s", in.Node, out.Errors[in.Node])
	}
	return out, nil
}

// adminQuarantineRelease answers the "quarantine-release" verb: the
// member named removes the copy (or says what it would remove) itself.
func (n *Node) adminQuarantineRelease(ctx context.Context, _ string, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	switch {
	case in.Node == "" || in.Path == "":
		return messages.QuarantineReleaseReply{}, transport.Errorf(400, "a release needs node and path")
	case in.Node == n.cfg.NodeID:
		return n.releaseLocal(ctx, in)
	}
	if _, ok := n.store.Member(in.Node); !ok {
		return messages.QuarantineReleaseReply{}, transport.Errorf(404, "member %s not found", in.Node)
	}
	if n.nats == nil {
		return messages.QuarantineReleaseReply{}, transport.Errorf(transport.StatusUnavailable, "%s cannot reach %s without NATS", n.cfg.NodeID, in.Node)
	}
	var out messages.QuarantineReleaseReply
	err := transport.RequestJSON(ctx, n.nats, in.Node, quarantineReleaseService, in, &out)
	if re, ok := errors.AsType[*transport.RemoteError](err); ok {
		return out, re // the member's own refusal, status and words
	}
	if err != nil {
		// The outcome is unknown on a timeout: the operator lists again.
		return out, transport.Errorf(transport.StatusTimeout, "release on %s: %v; list its copies to see whether it happened", in.Node, err)
	}
	return out, nil
}

// fanOutBudget is how long a request to every member may take: half of
// what is left of the caller's budget, at most RequestTimeout, so that a
// member that hangs costs the answer its share, not the answer.
func (n *Node) fanOutBudget(ctx context.Context) time.Duration {
	budget := n.cfg.RequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl)/2)
	}
	return budget
}

// askMembers sends in to service on each of ids at once and waits for
// them all, for at most budget: the answers of those that answered, and
// why each other did not.
func askMembers[Out any](ctx context.Context, t *transport.Transport, ids []string, service string, in any, budget time.Duration) (map[string]Out, map[string]error) {
	answers, errs := map[string]Out{}, map[string]error{}
	if len(ids) == 0 {
		return answers, errs
	}
	if t == nil {
		for _, id := range ids {
			errs[id] = fmt.Errorf("%s: no NATS to ask it over", id)
		}
		return answers, errs
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	type answer struct {
		id  string
		out Out
		err error
	}
	// One request per member, each ending with ctx at the latest.
	ch := make(chan answer, len(ids))
	for _, id := range ids {
		go func() {
			var out Out
			err := transport.RequestJSON(ctx, t, id, service, in, &out)
			ch <- answer{id, out, err}
		}()
	}
	for range ids {
		a := <-ch
		if a.err != nil {
			errs[a.id] = a.err
			continue
		}
		answers[a.id] = a.out
	}
	return answers, errs
}

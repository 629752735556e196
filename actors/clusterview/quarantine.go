package clusterview

import (
	"context"
	"errors"
	"slices"
	"strings"

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

// ServeQuarantine registers the services through which the other members
// gather this node's quarantine: its counts, its listing and a release.
func (v *View) ServeQuarantine() error {
	return errors.Join(
		transport.HandleJSON(v.d.NATS, quarantineCountsService, func(ctx context.Context, _ string, _ struct{}) (messages.QuarantineCounts, error) {
			c, _ := v.quarantineCounts(ctx)
			return c, nil
		}),
		transport.HandleJSON(v.d.NATS, quarantineListService, func(ctx context.Context, _ string, _ struct{}) (messages.NodeQuarantine, error) {
			return v.localQuarantine(ctx)
		}),
		transport.HandleJSON(v.d.NATS, quarantineReleaseService, func(ctx context.Context, _ string, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
			return v.releaseLocal(ctx, in)
		}),
	)
}

// quarantineCounts is this node's share of the members listing, from the
// sweeper's last inventory; false before it took one, or when the sweeper
// did not answer.
func (v *View) quarantineCounts(ctx context.Context) (messages.QuarantineCounts, bool) {
	res, err := v.d.Request(ctx, v.d.Sweeper, sweeper.QuarantineAsk{})
	a, ok := res.(sweeper.QuarantineCountsAnswer)
	if err != nil || !ok {
		return messages.QuarantineCounts{}, false
	}
	return a.Counts, a.Taken
}

// localQuarantine lists this node's copies set aside from a fresh
// inventory: an operator asked, and the last one may be a sweep old.
func (v *View) localQuarantine(ctx context.Context) (messages.NodeQuarantine, error) {
	res, err := v.d.Request(ctx, v.d.Sweeper, sweeper.QuarantineAsk{Fresh: true})
	if err != nil {
		return messages.NodeQuarantine{}, transport.Errorf(transport.StatusUnavailable, "%s: the sweeper did not answer: %v", v.d.NodeID, err)
	}
	a := res.(sweeper.QuarantineListAnswer)
	return a.List, a.Err
}

// releaseLocal removes one copy set aside in this node's data dir, or
// says what it would remove (a dry run): the sweeper does it, under the
// topic's guard and off its mailbox, and answers once its inventory no
// longer lists the copy.
func (v *View) releaseLocal(ctx context.Context, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	res, err := v.d.Request(ctx, v.d.Sweeper, sweeper.QuarantineRelease{Req: in})
	if err != nil {
		return messages.QuarantineReleaseReply{Node: v.d.NodeID, Path: in.Path, DryRun: in.DryRun},
			transport.Errorf(transport.StatusTimeout, "release on %s: the sweeper did not answer: %v; list its copies to see whether it happened", v.d.NodeID, err)
	}
	a := res.(sweeper.QuarantineReleaseAnswer)
	return a.Reply, a.Err
}

// Quarantine answers the "quarantine" verb: one member's listing, or
// every member's not marked dead, asked at once within the caller's
// budget; a member that gives none is named in Errors.
func (v *View) Quarantine(ctx context.Context, _ string, in messages.QuarantineRequest) (messages.QuarantineList, error) {
	self := v.d.NodeID
	var ids []string
	if in.Node != "" {
		if _, ok := v.d.Replica.Member(in.Node); !ok {
			return messages.QuarantineList{}, transport.Errorf(404, "member %s not found", in.Node)
		}
		ids = []string{in.Node}
	} else {
		for _, m := range v.d.Replica.Members() {
			if m.ID == self || m.Status != messages.MemberDead {
				ids = append(ids, m.ID)
			}
		}
	}
	out := messages.QuarantineList{Nodes: []messages.NodeQuarantine{}}
	var others []string
	for _, id := range ids {
		if id != self {
			others = append(others, id)
			continue
		}
		l, err := v.localQuarantine(ctx)
		if err != nil {
			out.Errors = map[string]string{id: err.Error()}
			continue
		}
		out.Nodes = append(out.Nodes, l)
	}
	answers, errs := askEach[messages.NodeQuarantine](ctx, v.d.NATS, others, quarantineListService, struct{}{}, v.FanOutBudget(ctx))
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

// QuarantineRelease answers the "quarantine-release" verb: the member
// named removes the copy (or says what it would remove) itself.
func (v *View) QuarantineRelease(ctx context.Context, _ string, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	switch {
	case in.Node == "" || in.Path == "":
		return messages.QuarantineReleaseReply{}, transport.Errorf(400, "a release needs node and path")
	case in.Node == v.d.NodeID:
		return v.releaseLocal(ctx, in)
	}
	if _, ok := v.d.Replica.Member(in.Node); !ok {
		return messages.QuarantineReleaseReply{}, transport.Errorf(404, "member %s not found", in.Node)
	}
	if v.d.NATS == nil {
		return messages.QuarantineReleaseReply{}, transport.Errorf(transport.StatusUnavailable, "%s cannot reach %s without NATS", v.d.NodeID, in.Node)
	}
	var out messages.QuarantineReleaseReply
	err := transport.RequestJSON(ctx, v.d.NATS, in.Node, quarantineReleaseService, in, &out)
	if re, ok := errors.AsType[*transport.RemoteError](err); ok {
		return out, re // the member's own refusal, status and words
	}
	if err != nil {
		// The outcome is unknown on a timeout: the operator lists again.
		return out, transport.Errorf(transport.StatusTimeout, "release on %s: %v; list its copies to see whether it happened", in.Node, err)
	}
	return out, nil
}

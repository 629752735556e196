package actors

import (
	"context"
	"maps"
	"time"

	"github.com/naradmq/narad/messages"
)

// Members is the member records of the local replica, with the partitions
// each owns and the moves out of it: what GET /v1/cluster/members and the
// admin "members" verb answer. Each member's quarantine figures are its
// own: this node's from its sweeper's book (actors/sweeper), the others'
// asked at once over NATS (memberFigures); a member that does not answer
// has them null.
func (n *Node) Members(ctx context.Context) []messages.MemberInfo {
	out := []messages.MemberInfo{}
	records := n.store.Members()
	figures := n.memberFigures(ctx, records)
	for _, m := range records {
		owned := n.store.OwnedBy(m.ID)
		moving := 0
		for _, a := range owned {
			if a.Target != "" {
				moving++
			}
		}
		e := messages.MemberInfo{ID: m.ID, Addr: m.HTTPAddr, Status: m.Status, Draining: m.Draining,
			OwnedPartitions: len(owned), OutboundMoves: moving}
		if f, ok := figures[m.ID]; ok {
			e.QuarantinedBytes, e.ReclaimedBytes = &f.QuarantinedBytes, &f.ReclaimedBytes
		}
		out = append(out, e)
	}
	return out
}

// memberFiguresWait bounds how long a members listing waits for the
// others' quarantine figures: they are a side note to a listing that
// answers from the local replica, so a member slower than this shows them
// null rather than holding the listing up.
const memberFiguresWait = time.Second

// memberFigures is each member's quarantine figures: this node's own, and
// those of the members not marked dead that answered in time.
func (n *Node) memberFigures(ctx context.Context, records []messages.Member) map[string]messages.QuarantineCounts {
	out := map[string]messages.QuarantineCounts{}
	if c, ok := n.quarantineCounts(ctx); ok {
		out[n.cfg.NodeID] = c
	}
	var asked []string
	for _, m := range records {
		if m.ID != n.cfg.NodeID && m.Status != messages.MemberDead {
			asked = append(asked, m.ID)
		}
	}
	if n.nats == nil || len(asked) == 0 {
		return out
	}
	answers, _ := askMembers[messages.QuarantineCounts](ctx, n.nats, asked, quarantineCountsService, struct{}{},
		min(n.fanOutBudget(ctx), memberFiguresWait))
	maps.Copy(out, answers)
	return out
}

// sideStatus is a member's status as a move listing shows each side:
// alive, dead, draining, or not_a_member.
func (n *Node) sideStatus(id string) string {
	m, ok := n.store.Member(id)
	switch {
	case !ok:
		return "not_a_member"
	case m.Status == messages.MemberDead:
		return "dead"
	case m.Draining:
		return "draining"
	}
	return "alive"
}

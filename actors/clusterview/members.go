package clusterview

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
func (v *View) Members(ctx context.Context) []messages.MemberInfo {
	out := []messages.MemberInfo{}
	records := v.d.Replica.Members()
	figures := v.memberFigures(ctx, records)
	for _, m := range records {
		owned := v.d.Replica.OwnedBy(m.ID)
		moving := 0
		for _, a := range owned {
			if a.Target != "" {
				moving++
			}
		}
		e := messages.MemberInfo{ID: m.ID, Addr: m.HTTPAddr, Status: m.Status, Draining: m.Draining,
			OwnedPartitions: len(owned), OutboundMoves: moving, Role: m.Role, Leaving: m.Leaving}
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
func (v *View) memberFigures(ctx context.Context, records []messages.Member) map[string]messages.QuarantineCounts {
	out := map[string]messages.QuarantineCounts{}
	if c, ok := v.quarantineCounts(ctx); ok {
		out[v.d.NodeID] = c
	}
	var asked []string
	for _, m := range records {
		if m.ID != v.d.NodeID && m.Status != messages.MemberDead {
			asked = append(asked, m.ID)
		}
	}
	if v.d.NATS == nil || len(asked) == 0 {
		return out
	}
	answers, _ := askEach[messages.QuarantineCounts](ctx, v.d.NATS, asked, quarantineCountsService, struct{}{},
		min(v.FanOutBudget(ctx), memberFiguresWait))
	maps.Copy(out, answers)
	return out
}

// sideStatus is a member's status as a move listing shows each side:
// alive, dead, draining, or not_a_member.
func (v *View) sideStatus(id string) string {
	m, ok := v.d.Replica.Member(id)
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

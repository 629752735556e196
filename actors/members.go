package actors

import "github.com/naradmq/narad/messages"

// Members is the member records of the local replica, with the partitions
// each owns and the moves out of it: what GET /v1/cluster/members and the
// admin "members" verb answer.
func (n *Node) Members() []messages.MemberInfo {
	out := []messages.MemberInfo{}
	for _, m := range n.store.Members() {
		owned := n.store.OwnedBy(m.ID)
		moving := 0
		for _, a := range owned {
			if a.Target != "" {
				moving++
			}
		}
		out = append(out, messages.MemberInfo{ID: m.ID, Addr: m.HTTPAddr, Status: m.Status, Draining: m.Draining,
			OwnedPartitions: len(owned), OutboundMoves: moving})
	}
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

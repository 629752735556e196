package startup

import (
	"testing"

	"github.com/naradmq/narad/messages"
)

// A registration a peer proposed is waited for, until this node's own
// replica applied it, exactly when it changes what the node reads of
// itself (rule B8's restart: a node that was leaving reads itself back).
func TestRegistrationChanges(t *testing.T) {
	m := messages.Member{ID: "n1", ReplicaID: 1, HTTPAddr: "h:1", RaftAddr: "r:1", Role: messages.RoleVoter}
	alive := m
	alive.Status = messages.MemberAlive
	with := func(f func(*messages.Member)) messages.Member { b := alive; f(&b); return b }
	for _, tc := range []struct {
		name   string
		before messages.Member
		found  bool
		want   bool
	}{
		{"alive, same addresses", alive, true, false},
		{"no record yet", messages.Member{}, false, true},
		{"leaving", with(func(b *messages.Member) { b.Leaving = true }), true, true},
		{"dead", with(func(b *messages.Member) { b.Status = messages.MemberDead }), true, true},
		{"another HTTP address", with(func(b *messages.Member) { b.HTTPAddr = "h:2" }), true, true},
		{"another Raft address", with(func(b *messages.Member) { b.RaftAddr = "r:2" }), true, true},
		{"another replica id", with(func(b *messages.Member) { b.ReplicaID = 2 }), true, true},
		{"another role", with(func(b *messages.Member) { b.Role = messages.RoleNonVoter }), true, true},
		{"draining stays draining", with(func(b *messages.Member) { b.Draining = true }), true, false},
	} {
		if got := RegistrationChanges(tc.before, tc.found, m); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

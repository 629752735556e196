//go:build !noraft

package metastore

import (
	"errors"
	"reflect"
	"testing"

	"github.com/naradmq/narad/messages"
)

func TestStoreMembers(t *testing.T) {
	ctx := guardCtx(t)
	s := openReady(t, ctx, fastConfig(t, "n1"))

	if got := s.Members(); len(got) != 0 {
		t.Fatalf("Members of a fresh store: got %+v, want none", got)
	}
	n2, err := s.PutMember(ctx, messages.Member{ID: "n2", ReplicaID: 2, HTTPAddr: "h2", RaftAddr: "r2"})
	if err != nil {
		t.Fatalf("PutMember n2: %v", err)
	}
	if n2.Status != messages.MemberAlive || n2.Role != messages.RoleVoter || n2.Registered == 0 {
		t.Fatalf("registered n2: got %+v, want alive, a voter, a registration index", n2)
	}
	n1, err := s.PutMember(ctx, messages.Member{ID: "n1", ReplicaID: 1, Role: messages.RoleNonVoter})
	if err != nil {
		t.Fatalf("PutMember n1: %v", err)
	}
	if _, err := s.PutMember(ctx, messages.Member{ID: "n3", ReplicaID: 2}); !errors.Is(err, ErrExists) {
		t.Errorf("PutMember with n2's replica id: got %v, want ErrExists", err)
	}
	for _, bad := range []messages.Member{{ReplicaID: 3}, {ID: "n3"}, {ID: "n3", ReplicaID: 3, Role: "observer"}} {
		if _, err := s.PutMember(ctx, bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("PutMember(%+v): got %v, want ErrInvalid", bad, err)
		}
	}
	if got := s.Members(); !reflect.DeepEqual(got, []messages.Member{n1, n2}) {
		t.Errorf("Members: got %+v, want n1 then n2", got)
	}

	// Heartbeats.
	for range 3 {
		if err := s.Heartbeat(ctx, "n2"); err != nil {
			t.Fatalf("Heartbeat n2: %v", err)
		}
	}
	if err := s.Heartbeat(ctx, "n9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Heartbeat of an unknown member: got %v, want ErrNotFound", err)
	}
	if got, ok := s.Member("n2"); !ok || got.Heartbeats != 3 {
		t.Errorf("Member(n2) after 3 heartbeats: got (%+v, %t), want 3 heartbeats", got, ok)
	}

	// Status compare-and-set: refusals are results.
	r, err := s.SetMemberStatus(ctx, "n2", messages.MemberDead, messages.MemberAlive)
	if err != nil || r.Code != messages.ResultOK || r.Member.Status != messages.MemberDead {
		t.Fatalf("mark n2 dead: got (%+v, %v), want OK and dead", r, err)
	}
	r, err = s.SetMemberStatus(ctx, "n2", messages.MemberDead, messages.MemberAlive)
	if err != nil || r.Code != messages.ResultRefused || r.Member.Status != messages.MemberDead {
		t.Errorf("mark n2 dead again: got (%+v, %v), want refused showing dead", r, err)
	}
	r, err = s.SetMemberStatusIf(ctx, messages.SetMemberStatus{ID: "n1", Status: messages.MemberDead,
		IfStatus: messages.MemberAlive, IfHeartbeats: ptr(uint64(7))})
	if err != nil || r.Code != messages.ResultRefused || r.Member.Status != messages.MemberAlive {
		t.Errorf("mark n1 dead at a counter it never had: got (%+v, %v), want refused showing alive", r, err)
	}
	r, err = s.SetMemberStatus(ctx, "n9", messages.MemberDead, "")
	if err != nil || r.Code != messages.ResultNotFound {
		t.Errorf("status of an unknown member: got (%+v, %v), want not found", r, err)
	}
	if _, err := s.SetMemberStatus(ctx, "n2", "zombie", ""); !errors.Is(err, ErrInvalid) {
		t.Errorf("an unknown status: got %v, want ErrInvalid", err)
	}

	// Flags, role; rule D1: draining survives a re-registration.
	if err := s.SetDraining(ctx, "n2", true); err != nil {
		t.Fatalf("SetDraining: %v", err)
	}
	if err := s.SetLeaving(ctx, "n2", true); err != nil {
		t.Fatalf("SetLeaving: %v", err)
	}
	if err := s.SetMemberRole(ctx, "n1", messages.RoleVoter); err != nil {
		t.Fatalf("SetMemberRole: %v", err)
	}
	if err := s.SetMemberRole(ctx, "n1", "observer"); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetMemberRole to an unknown role: got %v, want ErrInvalid", err)
	}
	if err := s.SetDraining(ctx, "n9", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetDraining of an unknown member: got %v, want ErrNotFound", err)
	}
	if err := s.SetLeaving(ctx, "n9", true); !errors.Is(err, ErrNotFound) {
		t.Errorf("SetLeaving of an unknown member: got %v, want ErrNotFound", err)
	}
	again, err := s.PutMember(ctx, messages.Member{ID: "n2", ReplicaID: 2, HTTPAddr: "h2b", RaftAddr: "r2"})
	if err != nil {
		t.Fatalf("PutMember n2 again: %v", err)
	}
	want := messages.Member{ID: "n2", ReplicaID: 2, HTTPAddr: "h2b", RaftAddr: "r2", Status: messages.MemberAlive,
		Draining: true, Role: messages.RoleVoter, Heartbeats: 4, Registered: again.Registered}
	if again != want || again.Registered <= n2.Registered {
		t.Errorf("re-registered n2: got %+v, want %+v with a later registration than %d", again, want, n2.Registered)
	}

	// Leader read, then removal.
	leader, err := s.LeaderMembers(ctx)
	if err != nil {
		t.Fatalf("LeaderMembers: %v", err)
	}
	if local := s.Members(); !reflect.DeepEqual(leader, local) || len(leader) != 2 || leader[0].Role != messages.RoleVoter {
		t.Errorf("LeaderMembers: got %+v, want %+v (n1 now a voter)", leader, local)
	}
	removed, err := s.RemoveMember(ctx, "n2")
	if err != nil || removed != again {
		t.Fatalf("RemoveMember n2: got (%+v, %v), want (%+v, nil)", removed, err, again)
	}
	if _, err := s.RemoveMember(ctx, "n2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("RemoveMember again: got %v, want ErrNotFound", err)
	}
	if _, ok := s.Member("n2"); ok {
		t.Errorf("Member(n2) after removal: got found, want absent")
	}
	if leader, err := s.LeaderMembers(ctx); err != nil || len(leader) != 1 || leader[0].ID != "n1" {
		t.Errorf("LeaderMembers after removal: got (%+v, %v), want n1 only", leader, err)
	}
}

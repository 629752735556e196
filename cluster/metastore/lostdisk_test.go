package metastore

import (
	"testing"

	"github.com/naradmq/narad/messages"
)

func recreateCmd(items ...messages.Recreate) messages.AssignCommand {
	return messages.AssignCommand{Version: messages.CommandVersion, Recreates: &messages.Recreates{Recreates: items}}
}

// A lost member's partition is re-created on a live node only while the
// lost member still owns it, with no move left on it, and its log starts
// a generation above every offset the lost copy could have handed out:
// above the last floor and the last flip's HWM. The floor stays through
// later moves.
func TestRecreateGivesALostPartitionAFloorAboveEveryOffsetItHadOut(t *testing.T) {
	s := newAssignState()
	moving := asg(7, 1, "n3", "n1")
	moving.TargetSince = 4
	s.apply(putCmd(flippedAsg(7, 0, "n3", "n1", 5_000), moving, asg(7, 2, "n2", "")), 1)

	r := s.apply(recreateCmd(
		messages.Recreate{Incarnation: 7, Partition: 0, From: "n3", To: "n1"},
		messages.Recreate{Incarnation: 7, Partition: 1, From: "n3", To: "n2"},
		messages.Recreate{Incarnation: 7, Partition: 2, From: "n3", To: "n1"}, // n2 owns it: refused
		messages.Recreate{Incarnation: 7, Partition: 9, From: "n3", To: "n1"}, // no such partition
	), 2)
	if r.Code != messages.ResultOK || len(r.Recreates) != 4 {
		t.Fatalf("got %v with %d answers, want OK with 4", r.Code, len(r.Recreates))
	}
	for i, want := range []messages.ResultCode{messages.ResultOK, messages.ResultOK, messages.ResultRefused, messages.ResultNotFound} {
		if got := r.Recreates[i].Code; got != want {
			t.Errorf("re-creation %d: got %v, want %v", i, got, want)
		}
	}
	p0, _ := s.get(7, 0)
	if p0.Owner != "n1" || p0.Floor != messages.FloorGeneration || p0.FlippedFrom != "" || p0.FlippedAtHWM != 0 {
		t.Errorf("partition 0: got %+v, want owner n1, floor 2^48, no flip recorded", p0)
	}
	p1, _ := s.get(7, 1)
	if p1.Owner != "n2" || p1.Target != "" || p1.TargetSince != 0 || p1.Floor != messages.FloorGeneration {
		t.Errorf("partition 1: got %+v, want owner n2 with its move gone, floor 2^48", p1)
	}
	if got := s.ownedBy("n3"); len(got) != 0 {
		t.Errorf("n3 still owns %v", got)
	}

	// A move keeps the floor; a second loss goes a generation higher,
	// above a flip's HWM past the first floor too.
	s.apply(setTargetCmd(7, 0, "n1", "", "n2"), 3)
	s.apply(flipAtCmd(7, 0, "n1", "n2", messages.FloorGeneration+10), 4)
	p0, _ = s.get(7, 0)
	if p0.Floor != messages.FloorGeneration {
		t.Fatalf("after a move: got floor %d, want %d", p0.Floor, messages.FloorGeneration)
	}
	s.apply(recreateCmd(messages.Recreate{Incarnation: 7, Partition: 0, From: "n2", To: "n1"}), 5)
	p0, _ = s.get(7, 0)
	if got, want := p0.Floor, 2*messages.FloorGeneration; got != want {
		t.Errorf("second loss: got floor %d, want %d", got, want)
	}
	if got := s.apply(recreateCmd(), 6).Code; got != messages.ResultInvalid {
		t.Errorf("an empty batch: got %v, want invalid", got)
	}
}

func TestRecreateFloor(t *testing.T) {
	g := messages.FloorGeneration
	for _, c := range []struct {
		a    messages.Assignment
		want int64
	}{
		{messages.Assignment{}, g},
		{messages.Assignment{FlippedAtHWM: g - 1}, g},
		{messages.Assignment{FlippedAtHWM: g}, 2 * g},
		{messages.Assignment{Floor: g, FlippedAtHWM: 3}, 2 * g},
		{messages.Assignment{Floor: 2 * g, FlippedAtHWM: 2*g + 7}, 3 * g},
	} {
		if got := messages.RecreateFloor(c.a); got != c.want {
			t.Errorf("RecreateFloor(floor %d, flipped at %d): got %d, want %d", c.a.Floor, c.a.FlippedAtHWM, got, c.want)
		}
	}
}

// Only a dead member is forgotten; it is then lost and draining, and a
// registration (the machine came back) keeps both.
func TestForgetMemberOnlyADeadOneAndItStaysLost(t *testing.T) {
	s := newMetaState()
	meta := func(c messages.MetaCommand) messages.MetaCommand { c.Version = messages.CommandVersion; return c }
	s.apply(meta(messages.MetaCommand{PutMember: &messages.PutMember{Member: messages.Member{ID: "n3", ReplicaID: 3}}}), 1)
	forget := meta(messages.MetaCommand{ForgetMember: &messages.ForgetMember{ID: "n3"}})
	if r := s.apply(forget, 2); r.Code != messages.ResultRefused || r.Reason == "" {
		t.Fatalf("forget an alive member: got %v %q, want refused with a reason", r.Code, r.Reason)
	}
	if m, _ := s.member("n3"); m.Lost || m.Draining {
		t.Fatalf("a refused forget changed the member: %+v", m)
	}
	s.apply(meta(messages.MetaCommand{SetMemberStatus: &messages.SetMemberStatus{ID: "n3", Status: messages.MemberDead}}), 3)
	if r := s.apply(forget, 4); r.Code != messages.ResultOK || !r.Member.Lost || !r.Member.Draining {
		t.Fatalf("forget a dead member: got %v %+v, want OK, lost and draining", r.Code, r.Member)
	}
	s.apply(meta(messages.MetaCommand{PutMember: &messages.PutMember{Member: messages.Member{ID: "n3", ReplicaID: 3}}}), 5)
	if m, _ := s.member("n3"); !m.Lost || !m.Draining || m.Status != messages.MemberAlive {
		t.Errorf("after a registration: got %+v, want alive, still lost and draining", m)
	}
	if r := s.apply(meta(messages.MetaCommand{ForgetMember: &messages.ForgetMember{ID: "n9"}}), 6); r.Code != messages.ResultNotFound {
		t.Errorf("forget an unknown member: got %v, want not found", r.Code)
	}
}

// A replica of a binary that predates forgetting stops at the commands
// rather than apply them as something else.
func TestLostDiskCommandsNeedTheirVersion(t *testing.T) {
	if got := commandVersion(messages.MetaCommand{ForgetMember: &messages.ForgetMember{ID: "n3"}}); got != messages.LostDiskCommandVersion {
		t.Errorf("ForgetMember: got version %d, want %d", got, messages.LostDiskCommandVersion)
	}
	if got := assignCommandVersion(messages.AssignCommand{Recreates: &messages.Recreates{}}); got != messages.LostDiskCommandVersion {
		t.Errorf("Recreates: got version %d, want %d", got, messages.LostDiskCommandVersion)
	}
}

package metastore

import (
	"testing"

	"github.com/naradmq/narad/messages"
)

func allocateCmd(floor uint64) messages.MetaCommand {
	return metaCmd(messages.MetaCommand{AllocateReplica: &messages.AllocateReplica{Floor: floor}})
}

func TestMetaStateAllocateReplica(t *testing.T) {
	tests := []struct {
		name  string
		setup []messages.MetaCommand
		floor uint64
		want  uint64
	}{
		{name: "the first allocation of an empty state is 1", want: 1},
		{name: "the floor is respected", floor: 4, want: 4},
		{name: "an id handed out before is never handed out again",
			setup: []messages.MetaCommand{allocateCmd(4)}, floor: 4, want: 5},
		{name: "a lower floor does not go back",
			setup: []messages.MetaCommand{allocateCmd(7)}, floor: 2, want: 8},
		{name: "an id registered by hand is never allocated",
			setup: []messages.MetaCommand{putMemberCmd("n1", 1, ""), putMemberCmd("n9", 9, "")}, want: 10},
		{name: "an id stays used after its member is removed",
			setup: []messages.MetaCommand{putMemberCmd("n4", 4, ""), removeMemberCmd("n4")}, floor: 1, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := metaStateAfter(t, tt.setup)
			r := s.apply(allocateCmd(tt.floor), uint64(len(tt.setup)+1))
			if r.Code != messages.ResultOK || r.ReplicaID != tt.want {
				t.Errorf("allocate with floor %d: got code %d id %d, want OK id %d", tt.floor, r.Code, r.ReplicaID, tt.want)
			}
		})
	}
}

// Allocations never repeat, across a snapshot round trip too: a restored
// replica (or one that caught up from a snapshot) must not hand out an id
// the original already gave to a node.
func TestMetaStateAllocatedReplicaIDsSurviveASnapshot(t *testing.T) {
	s := newMetaState()
	seen := map[uint64]bool{}
	index := uint64(0)
	allocate := func(st *metaState, floor uint64) uint64 {
		index++
		r := st.apply(allocateCmd(floor), index)
		if r.Code != messages.ResultOK {
			t.Fatalf("allocate: got code %d, want OK", r.Code)
		}
		if seen[r.ReplicaID] {
			t.Fatalf("allocate: got id %d a second time", r.ReplicaID)
		}
		seen[r.ReplicaID] = true
		return r.ReplicaID
	}
	for range 3 {
		allocate(s, 4)
	}
	restored := savedAndLoaded(t, s)
	got, want := allocate(restored, 1), uint64(7)
	if got != want {
		t.Errorf("first allocation after the restore: got %d, want %d", got, want)
	}
}

func TestMetaStateAllocateReplicaWithAnotherCommandIsInvalid(t *testing.T) {
	s := newMetaState()
	c := allocateCmd(1)
	c.Heartbeat = &messages.Heartbeat{ID: "n1"}
	if r := s.apply(c, 1); r.Code != messages.ResultInvalid {
		t.Errorf("allocate with a heartbeat: got code %d, want invalid", r.Code)
	}
	if r := s.apply(allocateCmd(0), 2); r.ReplicaID != 1 {
		t.Errorf("allocate after the invalid entry: got id %d, want 1 (nothing was allocated)", r.ReplicaID)
	}
}

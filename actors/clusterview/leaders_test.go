package clusterview

import (
	"reflect"
	"testing"

	"github.com/naradmq/narad/messages"
)

// leaderReplica answers what Leaders reads; any other method of Replica
// is nil and would panic, so a Leaders that read more would show.
type leaderReplica struct {
	Replica
	members []messages.Member
	leaders map[uint64][2]uint64 // shard: replica id, term
}

func (r leaderReplica) Members() []messages.Member { return r.members }
func (r leaderReplica) Shards() []uint64           { return []uint64{1, 2, 3} }
func (r leaderReplica) LeaderOf(shard uint64) (uint64, uint64, bool) {
	l, ok := r.leaders[shard]
	return l[0], l[1], ok
}

// Each shard's leader is named by the member with its replica id; a shard
// without a known leader names none; a replica no member has is named by
// its number.
func TestLeadersNameEachShardsLeaderByItsMember(t *testing.T) {
	v := New(Deps{NodeID: "n1", Replica: leaderReplica{
		members: []messages.Member{{ID: "n1", ReplicaID: 1}, {ID: "n2", ReplicaID: 2}},
		leaders: map[uint64][2]uint64{1: {2, 7}, 3: {9, 4}},
	}})
	want := messages.LeaderList{Shards: []messages.ShardLeader{
		{Shard: 1, Kind: "metadata", Leader: "n2", Term: 7},
		{Shard: 2, Kind: "assignments"},
		{Shard: 3, Kind: "assignments", Leader: "replica 9", Term: 4},
	}}
	if got := v.Leaders(); !reflect.DeepEqual(got, want) {
		t.Errorf("leaders: got %+v, want %+v", got, want)
	}
}

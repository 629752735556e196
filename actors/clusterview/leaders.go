package clusterview

import (
	"strconv"

	"github.com/naradmq/narad/messages"
)

// Leaders is who leads each Raft shard as the local replica knows it, the
// metadata shard first: what GET /v1/cluster/leaders answers. A leader's
// replica id is named by the member that has it; one no member record
// has (a member being removed) is named by its number.
func (v *View) Leaders() messages.LeaderList {
	byReplica := map[uint64]string{}
	for _, m := range v.d.Replica.Members() {
		byReplica[m.ReplicaID] = m.ID
	}
	out := messages.LeaderList{Shards: []messages.ShardLeader{}}
	for i, shard := range v.d.Replica.Shards() {
		e := messages.ShardLeader{Shard: shard, Kind: "assignments"}
		if i == 0 {
			e.Kind = "metadata"
		}
		if id, term, ok := v.d.Replica.LeaderOf(shard); ok {
			e.Leader, e.Term = byReplica[id], term
			if e.Leader == "" {
				e.Leader = "replica " + strconv.FormatUint(id, 10)
			}
		}
		out.Shards = append(out.Shards, e)
	}
	return out
}

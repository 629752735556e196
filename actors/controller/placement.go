package controller

import (
	"slices"

	"github.com/naradmq/narad/messages"
)

// memberLoad is one member that may take new partitions, with how many it
// owns now.
type memberLoad struct {
	ID    string
	Owned int
}

// eligibleLoads lists the members that may take new partitions (alive, not
// draining, not leaving) with their partition counts, sorted by id. owned
// gives a member's count.
func eligibleLoads(members []messages.Member, owned func(id string) int) []memberLoad {
	var ls []memberLoad
	for _, m := range members {
		if m.Status == messages.MemberAlive && !m.Draining && !m.Leaving {
			ls = append(ls, memberLoad{ID: m.ID, Owned: owned(m.ID)})
		}
	}
	slices.SortFunc(ls, func(a, b memberLoad) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return ls
}

// planPlacement gives each of t's partitions in missing an owner: each in
// turn to the member owning the fewest partitions so far, ties to the
// lowest id. It is pure (the controller carries out what it returns) and
// nil when no member may take partitions: they wait for one instead of
// landing on a dead or draining node. loads is not modified.
func planPlacement(loads []memberLoad, t messages.Topic, missing []int) []messages.Assignment {
	if len(loads) == 0 || len(missing) == 0 {
		return nil
	}
	ls := slices.Clone(loads)
	as := make([]messages.Assignment, 0, len(missing))
	for _, p := range missing {
		best := 0
		for i := range ls {
			if ls[i].Owned < ls[best].Owned || (ls[i].Owned == ls[best].Owned && ls[i].ID < ls[best].ID) {
				best = i
			}
		}
		ls[best].Owned++
		as = append(as, messages.Assignment{Topic: t.Name, Incarnation: t.Incarnation, Partition: p, Owner: ls[best].ID})
	}
	return as
}

// missingPartitions lists the partitions of t in [0, t.Partitions) that
// have no assignment in have.
func missingPartitions(t messages.Topic, have []messages.Assignment) []int {
	placed := make([]bool, t.Partitions)
	for _, a := range have {
		if a.Incarnation == t.Incarnation && a.Partition >= 0 && a.Partition < t.Partitions {
			placed[a.Partition] = true
		}
	}
	var out []int
	for p, ok := range placed {
		if !ok {
			out = append(out, p)
		}
	}
	return out
}

// pickPromotion chooses the non-voter to promote when a shard has fewer
// than want voters: the lowest replica id among non-voters whose member is
// alive and neither draining nor leaving (a voter must be likely to stay).
// ok is false when the shard has its voters or no non-voter qualifies.
func pickPromotion(voters, nonVoters map[uint64]string, members []messages.Member, want int) (replica uint64, addr string, ok bool) {
	if len(voters) >= want {
		return 0, "", false
	}
	for _, m := range members {
		a, isNonVoter := nonVoters[m.ReplicaID]
		if !isNonVoter || m.Status != messages.MemberAlive || m.Draining || m.Leaving {
			continue
		}
		if !ok || m.ReplicaID < replica {
			replica, addr, ok = m.ReplicaID, a, true
		}
	}
	return replica, addr, ok
}

package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/naradmq/narad/messages"
)

func TestPlanPlacement(t *testing.T) {
	topic := messages.Topic{Name: "t", Incarnation: 7, Partitions: 6}
	owners := func(as []messages.Assignment) []string {
		var out []string
		for _, a := range as {
			if a.Topic != "t" || a.Incarnation != 7 || a.Target != "" {
				t.Fatalf("assignment %+v: want topic t, incarnation 7, no target", a)
			}
			out = append(out, fmt.Sprintf("%d:%s", a.Partition, a.Owner))
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		loads   []memberLoad
		missing []int
		want    []string
	}{
		{"even members take turns by id", []memberLoad{{"n1", 0}, {"n2", 0}, {"n3", 0}}, []int{0, 1, 2, 3, 4, 5},
			[]string{"0:n1", "1:n2", "2:n3", "3:n1", "4:n2", "5:n3"}},
		{"the least loaded member fills up first", []memberLoad{{"n1", 4}, {"n2", 0}, {"n3", 3}}, []int{0, 1, 2, 3, 4},
			[]string{"0:n2", "1:n2", "2:n2", "3:n2", "4:n3"}},
		{"only the missing partitions", []memberLoad{{"n1", 0}, {"n2", 0}}, []int{3, 5},
			[]string{"3:n1", "5:n2"}},
		{"one member takes all", []memberLoad{{"n9", 100}}, []int{0, 1},
			[]string{"0:n9", "1:n9"}},
		{"no member: nothing placed", nil, []int{0, 1}, nil},
		{"nothing missing", []memberLoad{{"n1", 0}}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := slices.Clone(tc.loads)
			got := owners(planPlacement(tc.loads, topic, tc.missing))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if !slices.Equal(tc.loads, before) {
				t.Errorf("loads modified: got %v, want %v", tc.loads, before)
			}
		})
	}
}

func TestEligibleLoads(t *testing.T) {
	members := []messages.Member{
		{ID: "n3", Status: messages.MemberAlive},
		{ID: "n1", Status: messages.MemberAlive},
		{ID: "n2", Status: messages.MemberDead},
		{ID: "n4", Status: messages.MemberAlive, Draining: true},
		{ID: "n5", Status: messages.MemberAlive, Leaving: true},
	}
	owned := map[string]int{"n1": 5, "n3": 2}
	got := eligibleLoads(members, func(id string) int { return owned[id] })
	want := []memberLoad{{"n1", 5}, {"n3", 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v (alive, not draining or leaving, by id)", got, want)
	}
}

func TestMissingPartitions(t *testing.T) {
	topic := messages.Topic{Name: "t", Incarnation: 2, Partitions: 5}
	have := []messages.Assignment{
		{Incarnation: 2, Partition: 0}, {Incarnation: 2, Partition: 3},
		{Incarnation: 1, Partition: 1}, // an earlier incarnation's: not this topic's
		{Incarnation: 2, Partition: 9}, // past the topic's partitions
	}
	if got, want := missingPartitions(topic, have), []int{1, 2, 4}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestPickPromotion(t *testing.T) {
	alive := func(id string, replica uint64) messages.Member {
		return messages.Member{ID: id, ReplicaID: replica, Status: messages.MemberAlive}
	}
	three := map[uint64]string{1: "a1", 2: "a2", 3: "a3"}
	two := map[uint64]string{1: "a1", 2: "a2"}
	for _, tc := range []struct {
		name      string
		voters    map[uint64]string
		nonVoters map[uint64]string
		members   []messages.Member
		want      uint64 // 0: none
	}{
		{"enough voters", three, map[uint64]string{4: "a4"}, []messages.Member{alive("n4", 4)}, 0},
		{"a voter left: the lowest alive non-voter", two, map[uint64]string{5: "a5", 4: "a4"},
			[]messages.Member{alive("n5", 5), alive("n4", 4)}, 4},
		{"a dead non-voter is skipped", two, map[uint64]string{4: "a4", 5: "a5"},
			[]messages.Member{{ID: "n4", ReplicaID: 4, Status: messages.MemberDead}, alive("n5", 5)}, 5},
		{"draining and leaving are skipped", two, map[uint64]string{4: "a4", 5: "a5"},
			[]messages.Member{{ID: "n4", ReplicaID: 4, Status: messages.MemberAlive, Draining: true},
				{ID: "n5", ReplicaID: 5, Status: messages.MemberAlive, Leaving: true}}, 0},
		{"a non-voter without a member record is skipped", two, map[uint64]string{4: "a4"}, nil, 0},
		{"a member that is no non-voter is skipped", two, nil, []messages.Member{alive("n3", 3)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			replica, addr, ok := pickPromotion(tc.voters, tc.nonVoters, tc.members, 3)
			if tc.want == 0 {
				if ok {
					t.Fatalf("got replica %d, want none", replica)
				}
				return
			}
			if !ok || replica != tc.want || addr != tc.nonVoters[tc.want] {
				t.Fatalf("got %d at %q (ok %v), want %d at %q", replica, addr, ok, tc.want, tc.nonVoters[tc.want])
			}
		})
	}
}

// BenchmarkPlanPlacement places a topic of the largest size over 100
// members: the controller runs it once per create or grow.
func BenchmarkPlanPlacement(b *testing.B) {
	loads := make([]memberLoad, 100)
	for i := range loads {
		loads[i] = memberLoad{ID: fmt.Sprintf("n%03d", i), Owned: i % 7}
	}
	missing := make([]int, 10000)
	for i := range missing {
		missing[i] = i
	}
	topic := messages.Topic{Name: "t", Incarnation: 1, Partitions: len(missing)}
	for b.Loop() {
		if as := planPlacement(loads, topic, missing); len(as) != len(missing) {
			b.Fatalf("got %d assignments, want %d", len(as), len(missing))
		}
	}
}

package planner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// refs makes n partitions of topic t, numbered from first.
func refs(t string, first, n int) []Ref {
	out := make([]Ref, n)
	for i := range out {
		out[i] = Ref{Topic: t, Incarnation: 1, Partition: first + i}
	}
	return out
}

func alive(id string, owned int) Node {
	return Node{ID: id, Alive: true, Owned: refs(id, 0, owned)}
}

// moved counts the moves by (from, to).
func moved(ms []Move) map[string]int {
	out := map[string]int{}
	for _, m := range ms {
		out[m.From+">"+m.To]++
	}
	return out
}

func TestPlan(t *testing.T) {
	dead := alive("n3", 5)
	dead.Alive = false
	draining := alive("n2", 4)
	draining.Draining = true
	leaving := alive("n2", 4)
	leaving.Leaving = true
	incoming := alive("n4", 0)
	incoming.Incoming = 3
	for _, tc := range []struct {
		name string
		in   Input
		want map[string]int
	}{
		{
			// The seed's example: 6, 6, 6 and a new node; T = 18, R = 4.
			name: "rule L1: only the surplus above each share moves, the fullest keep the ceil slots",
			in:   Input{Nodes: []Node{alive("n0", 6), alive("n1", 6), alive("n2", 6), alive("n3", 0)}, MaxInFlight: 8},
			want: map[string]int{"n0>n3": 1, "n1>n3": 1, "n2>n3": 2},
		},
		{
			name: "rule L1: a balanced cluster moves nothing",
			in:   Input{Nodes: []Node{alive("n1", 5), alive("n2", 4), alive("n3", 5)}, MaxInFlight: 8},
			want: map[string]int{},
		},
		{
			name: "rule L1: a node within its share is never touched",
			in:   Input{Nodes: []Node{alive("n1", 9), alive("n2", 3), alive("n3", 0)}, MaxInFlight: 8},
			want: map[string]int{"n1>n3": 4, "n1>n2": 1},
		},
		{
			name: "rule L2: moves in flight count at their destination",
			in:   Input{Nodes: []Node{alive("n0", 6), alive("n1", 5), alive("n2", 4), incoming}, InFlight: 3, MaxInFlight: 8},
			want: map[string]int{"n0>n4": 1},
		},
		{
			name: "rule L3: the plan tops moves in flight up to the cap",
			in:   Input{Nodes: []Node{alive("n1", 20), alive("n2", 0)}, InFlight: 5, MaxInFlight: 8},
			want: map[string]int{"n1>n2": 3},
		},
		{
			name: "rule L3: no room left, no move",
			in:   Input{Nodes: []Node{alive("n1", 20), alive("n2", 0)}, InFlight: 8, MaxInFlight: 8},
			want: map[string]int{},
		},
		{
			name: "rule L5: a dead owner's partitions stay, and it receives nothing",
			in:   Input{Nodes: []Node{alive("n1", 2), alive("n2", 2), dead}, MaxInFlight: 8},
			want: map[string]int{},
		},
		{
			name: "rule D1: a draining node sheds everything onto the receivers",
			in:   Input{Nodes: []Node{alive("n1", 4), draining, alive("n3", 4)}, MaxInFlight: 8},
			want: map[string]int{"n2>n1": 2, "n2>n3": 2},
		},
		{
			name: "rule B11: a leaving node sheds and is never a target",
			in:   Input{Nodes: []Node{alive("n1", 0), leaving, alive("n3", 4)}, MaxInFlight: 8},
			want: map[string]int{"n2>n1": 4},
		},
		{
			name: "nobody to receive: no move",
			in:   Input{Nodes: []Node{draining, dead}, MaxInFlight: 8},
			want: map[string]int{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := moved(Plan(tc.in))
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("moves: got %v, want %v", got, tc.want)
			}
		})
	}
}

// rule L6: a partition avoids a node when a balanced alternative exists,
// and lands there anyway when balance needs it.
func TestPlanAntiAffinityIsAPreference(t *testing.T) {
	// T = 5 over 3: n1 keeps the ceil 2, n3 (1) takes 1 more, n2 takes
	// 1. Partitions 0 and 1 leave n1 in that order; without a preference
	// partition 0 goes to n2 (deficits tie, lower id first).
	src := alive("n1", 4)
	src.Owned[0].Avoid = "n2"
	got := moved(Plan(Input{Nodes: []Node{src, alive("n2", 0), alive("n3", 1)}, MaxInFlight: 8}))
	if fmt.Sprint(got) != fmt.Sprint(map[string]int{"n1>n2": 1, "n1>n3": 1}) {
		t.Fatalf("moves: got %v, want one to n2 and one to n3", got)
	}
	for _, m := range Plan(Input{Nodes: []Node{src, alive("n2", 0), alive("n3", 1)}, MaxInFlight: 8}) {
		if m.Partition == 0 && m.To != "n3" {
			t.Fatalf("partition 0 avoids n2: got it moved to %s while n3 had room, want n3", m.To)
		}
	}

	// Only n2 has room: balance wins over the preference.
	only := alive("n1", 2)
	only.Owned[0].Avoid, only.Owned[1].Avoid = "n2", "n2"
	ms := Plan(Input{Nodes: []Node{only, alive("n2", 0)}, MaxInFlight: 8})
	if len(ms) != 1 || ms[0].To != "n2" {
		t.Fatalf("balance against the preference: got %+v, want one move to n2", ms)
	}
}

// apply carries out moves as the cluster would once they complete: the
// partition leaves its owner and lands at its destination.
func apply(in Input, ms []Move) Input {
	in.Nodes = slices.Clone(in.Nodes)
	idx := map[string]int{}
	for i, n := range in.Nodes {
		idx[n.ID] = i
		in.Nodes[i].Owned = slices.Clone(n.Owned)
	}
	for _, m := range ms {
		src := &in.Nodes[idx[m.From]]
		k := slices.IndexFunc(src.Owned, func(r Ref) bool { return r.Topic == m.Topic && r.Partition == m.Partition })
		src.Owned = slices.Delete(src.Owned, k, k+1)
		dst := &in.Nodes[idx[m.To]]
		dst.Owned = append(dst.Owned, m.Ref)
	}
	return in
}

// randomInput is a cluster of up to 8 nodes, some dead, draining or
// leaving, with up to 60 partitions each and some moves in flight.
func randomInput(r *rand.Rand) Input {
	in := Input{MaxInFlight: 1 + r.IntN(16)}
	for i := range 1 + r.IntN(8) {
		n := alive(fmt.Sprintf("n%d", i), r.IntN(60))
		switch r.IntN(6) {
		case 0:
			n.Alive = false
		case 1:
			n.Draining = true
		case 2:
			n.Leaving = true
		}
		if n.receiving() && r.IntN(3) == 0 {
			n.Incoming = r.IntN(3)
			in.InFlight += n.Incoming
		}
		in.Nodes = append(in.Nodes, n)
	}
	return in
}

// The properties that make it safe to plan every tick, over random
// clusters: the budget holds; moves go from live owners to receivers
// only; each partition moves once; rounds of planning and completing
// reach the floor/ceil balance with the fewest moves, and then plan
// nothing (rules L1, L2, L3, L5).
func TestPlanProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		in := randomInput(r)
		byID := map[string]Node{}
		for _, n := range in.Nodes {
			byID[n.ID] = n
		}
		// The fewest moves: what is on shedders plus the surplus above
		// the shares, counted before any move.
		total, recv := 0, 0
		for _, n := range in.Nodes {
			if n.receiving() {
				total += len(n.Owned) + n.Incoming
				recv++
			} else if n.shedding() {
				total += len(n.Owned)
			}
		}
		moves := 0
		state := in
		for round := 0; ; round++ {
			if round > 1000 {
				t.Fatalf("iteration %d: no fixed point after 1000 rounds", iter)
			}
			ms := Plan(state)
			if len(ms) > max(state.MaxInFlight-state.InFlight, 0) {
				t.Fatalf("iteration %d: %d moves with room for %d", iter, len(ms), state.MaxInFlight-state.InFlight)
			}
			seen := map[string]bool{}
			for _, m := range ms {
				from, to := byID[m.From], byID[m.To]
				if !from.Alive || !to.receiving() || m.From == m.To {
					t.Fatalf("iteration %d: move %+v from %+v to %+v", iter, m, from, to)
				}
				k := fmt.Sprint(m.Topic, m.Partition)
				if seen[k] {
					t.Fatalf("iteration %d: partition %s moved twice in one plan", iter, k)
				}
				seen[k] = true
			}
			if len(ms) == 0 && state.InFlight == 0 {
				break // balanced, or nothing can move
			}
			moves += len(ms)
			// Completing the moves frees their slots; incoming moves from
			// before complete too (they were counted at the destination).
			state = apply(state, ms)
			state.InFlight = 0
			for i := range state.Nodes {
				for range state.Nodes[i].Incoming {
					state.Nodes[i].Owned = append(state.Nodes[i].Owned, Ref{Topic: "incoming", Partition: len(state.Nodes[i].Owned)})
				}
				state.Nodes[i].Incoming = 0
			}
		}
		if recv == 0 {
			if moves != 0 {
				t.Fatalf("iteration %d: %d moves without a receiver", iter, moves)
			}
			continue
		}
		floor := total / recv
		for _, n := range state.Nodes {
			switch {
			case n.receiving() && (len(n.Owned) < floor || len(n.Owned) > floor+1):
				t.Fatalf("iteration %d: %s ends with %d partitions, want %d or %d", iter, n.ID, len(n.Owned), floor, floor+1)
			case n.shedding() && len(n.Owned) != 0:
				t.Fatalf("iteration %d: shedding %s ends with %d partitions, want 0", iter, n.ID, len(n.Owned))
			case !n.Alive && len(n.Owned) != len(byID[n.ID].Owned):
				t.Fatalf("iteration %d: dead %s went from %d to %d partitions", iter, n.ID, len(byID[n.ID].Owned), len(n.Owned))
			}
		}
		if want := fewestMoves(in); moves != want {
			t.Fatalf("iteration %d: %d moves, want the fewest, %d", iter, moves, want)
		}
	}
}

// fewestMoves is what must move to reach the shares: everything on the
// shedders, plus each receiver's surplus over the share the fullest-first
// order gives it (incoming moves already count at their destination).
func fewestMoves(in Input) int {
	type c struct {
		id    string
		count int
	}
	var recv []c
	total, need := 0, 0
	for _, n := range in.Nodes {
		if n.receiving() {
			recv = append(recv, c{n.ID, len(n.Owned) + n.Incoming})
			total += len(n.Owned) + n.Incoming
		} else if n.shedding() {
			total += len(n.Owned)
			need += len(n.Owned)
		}
	}
	slices.SortFunc(recv, func(a, b c) int {
		if a.count != b.count {
			return b.count - a.count
		}
		if a.id < b.id {
			return -1
		}
		return 1
	})
	for i, r := range recv {
		want := total / len(recv)
		if i < total%len(recv) {
			want++
		}
		need += max(r.count-want, 0)
	}
	return need
}

// rule B3: one round of 512 picks over 300,000 partitions: three nodes
// hold 100,000 each and a fourth joins empty.
func BenchmarkPlan512Picks300kPartitions(b *testing.B) {
	in := Input{MaxInFlight: 512}
	for i := range 3 {
		in.Nodes = append(in.Nodes, alive(fmt.Sprintf("n%d", i), 100_000))
	}
	in.Nodes = append(in.Nodes, alive("n3", 0))
	for b.Loop() {
		if ms := Plan(in); len(ms) != 512 {
			b.Fatalf("got %d moves, want 512", len(ms))
		}
	}
}

func TestNewInput(t *testing.T) {
	members := []Member{{ID: "n1", Alive: true}, {ID: "n2", Alive: true, Draining: true}}
	ps := []Placement{
		{Ref: Ref{Topic: "t", Partition: 0}, Owner: "n1"},
		{Ref: Ref{Topic: "t", Partition: 1}, Owner: "n1", Target: "n2"},
		{Ref: Ref{Topic: "t", Partition: 2}, Owner: "n2"},
		{Ref: Ref{Topic: "t", Partition: 3}, Owner: "n9"},               // not a member: stays
		{Ref: Ref{Topic: "t", Partition: 4}, Owner: "n2", Target: "n8"}, // in flight to a non-member
	}
	in := NewInput(members, ps, 8)
	if in.InFlight != 2 || in.MaxInFlight != 8 {
		t.Fatalf("in flight: got %d of %d, want 2 of 8", in.InFlight, in.MaxInFlight)
	}
	n1, n2 := in.Nodes[0], in.Nodes[1]
	if n1.ID != "n1" || len(n1.Owned) != 1 || n1.Owned[0].Partition != 0 || n1.Incoming != 0 || !n1.Alive {
		t.Fatalf("n1: got %+v, want alive, owning partition 0", n1)
	}
	if n2.ID != "n2" || len(n2.Owned) != 1 || n2.Owned[0].Partition != 2 || n2.Incoming != 1 || !n2.Draining {
		t.Fatalf("n2: got %+v, want draining, owning partition 2, one incoming", n2)
	}
}

// rule B3 with the input built too: NewInput over 300,000 placements, then
// one round of 512 picks; NewInput is what a controller pays per round.
func BenchmarkPlanWithInput300kPartitions(b *testing.B) {
	members := []Member{{ID: "n0", Alive: true}, {ID: "n1", Alive: true}, {ID: "n2", Alive: true}, {ID: "n3", Alive: true}}
	ps := make([]Placement, 300_000)
	for p := range ps {
		ps[p] = Placement{Ref: Ref{Topic: "t", Incarnation: 1, Partition: p}, Owner: members[p%3].ID}
	}
	for b.Loop() {
		if ms := Plan(NewInput(members, ps, 512)); len(ms) != 512 {
			b.Fatalf("got %d moves, want 512", len(ms))
		}
	}
}

// rule B3: a round's Input may list only the first of each node's settled
// partitions, as many as the round can move, with Settled counting them
// all: over random clusters the plan is the one the full lists give.
func TestPlanOfABudgetPrefixIsThePlanOfTheWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for iter := range 2000 {
		in := randomInput(r)
		cut := in
		cut.Nodes = slices.Clone(in.Nodes)
		budget := max(0, in.MaxInFlight-in.InFlight)
		for i := range cut.Nodes {
			n := &cut.Nodes[i]
			n.Settled = len(n.Owned)
			n.Owned = n.Owned[:min(budget, len(n.Owned))]
		}
		if got, want := Plan(cut), Plan(in); !slices.Equal(got, want) {
			t.Fatalf("iteration %d, budget %d: plan of the prefixes %v, want the plan of the whole %v", iter, budget, got, want)
		}
	}
}

// A Settled count below len(Owned) reads as len(Owned): a node listed in
// full needs no count.
func TestPlanReadsTheLargerOfSettledAndOwned(t *testing.T) {
	n2 := alive("n2", 4)
	n2.Settled = 1
	in := Input{MaxInFlight: 8, Nodes: []Node{alive("n1", 0), n2}}
	if got := moved(Plan(in)); got["n2>n1"] != 2 || len(got) != 1 {
		t.Fatalf("moves: got %v, want 2 from n2 to n1", got)
	}
}

// rule B3 as the controller builds the input: the moves in flight, a count
// per node and each node's first budget-many settled partitions, over
// 300,000 partitions; against BenchmarkPlanWithInput300kPartitions.
func BenchmarkPlanWithBudgetPrefix300kPartitions(b *testing.B) {
	in := Input{MaxInFlight: 512}
	for i := range 3 {
		n := alive(fmt.Sprintf("n%d", i), 512)
		n.Settled = 100_000
		in.Nodes = append(in.Nodes, n)
	}
	in.Nodes = append(in.Nodes, alive("n3", 0))
	for b.Loop() {
		if ms := Plan(in); len(ms) != 512 {
			b.Fatalf("got %d moves, want 512", len(ms))
		}
	}
}

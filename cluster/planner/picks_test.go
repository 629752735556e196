package planner

import (
	"fmt"
	"strings"
	"testing"
)

// trace writes moves in the order Plan returns them, each as
// owner+partition>destination ("d0>a"): the partitions of alive(id, n) are
// topic id, numbered from 0.
func trace(ms []Move) string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%s%d>%s", m.Topic, m.Partition, m.To)
	}
	return strings.Join(out, " ")
}

func drainingNode(id string, owned int) Node {
	n := alive(id, owned)
	n.Draining = true
	return n
}

func avoiding(n Node, avoid string) Node {
	for i := range n.Owned {
		n.Owned[i].Avoid = avoid
	}
	return n
}

// TestPlanPickOrder pins which receiver each pick chooses and in which
// order the surplus leaves, not only the counts: the largest deficit
// first, ties by id, every pick counted as done before the next (rule
// B2); the largest surplus leaves first, ties by id, so a budget cut
// keeps the same prefix (rules L1, L3); the avoided node only when no
// other receiver has room (rule L6).
func TestPlanPickOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Input
		want string
	}{
		{
			// T = 4 over a, b, c: a (first by id) holds the ceil slot, 2.
			name: "rule B2: each pick goes to the largest deficit and counts as done, ties by id",
			in:   Input{Nodes: []Node{alive("c", 0), alive("b", 0), alive("a", 0), drainingNode("d", 4)}, MaxInFlight: 8},
			want: "d0>a d1>a d2>b d3>c",
		},
		{
			// b (1) sorts before a (0), yet the deficits decide: a lacks
			// 2, then both lack 1 and a wins the tie by id.
			name: "rule B2: a tie of deficits goes to the lower id, whatever the receivers' order",
			in:   Input{Nodes: []Node{alive("a", 0), alive("b", 1), drainingNode("d", 3)}, MaxInFlight: 8},
			want: "d0>a d1>a d2>b",
		},
		{
			// T = 9 over 4: b (5) keeps the ceil 3, a (4) keeps 2. Both
			// have a surplus of 2: a leaves first by id.
			name: "rule L1: the largest surplus leaves first, ties by id",
			in:   Input{Nodes: []Node{alive("a", 4), alive("b", 5), alive("c", 0), alive("d", 0)}, MaxInFlight: 8},
			want: "a0>c a1>d b0>c b1>d",
		},
		{
			// T = 9 over 4: a (6) keeps the ceil 3 and has 3 to give, b
			// (3) has 1.
			name: "rule L1: a larger surplus leaves before a smaller one",
			in:   Input{Nodes: []Node{alive("b", 3), alive("a", 6), alive("c", 0), alive("d", 0)}, MaxInFlight: 8},
			want: "a0>c a1>d a2>c b0>d",
		},
		{
			name: "rule L3: a budget cut keeps the first picks",
			in:   Input{Nodes: []Node{alive("a", 4), alive("b", 5), alive("c", 0), alive("d", 0)}, MaxInFlight: 1},
			want: "a0>c",
		},
		{
			name: "rule L3: a draining node sheds no more than the budget",
			in:   Input{Nodes: []Node{alive("a", 0), drainingNode("d", 4)}, InFlight: 1, MaxInFlight: 3},
			want: "d0>a d1>a",
		},
		{
			name: "rule L3: a budget below zero plans nothing",
			in:   Input{Nodes: []Node{alive("a", 0), drainingNode("d", 4)}, InFlight: 9, MaxInFlight: 3},
			want: "",
		},
		{
			name: "rule L6: the only receiver takes a partition that avoids it",
			in:   Input{Nodes: []Node{alive("a", 0), avoiding(drainingNode("d", 1), "a")}, MaxInFlight: 8},
			want: "d0>a",
		},
		{
			// a is at its share (1 of T = 2): only b, the avoided node,
			// has room.
			name: "rule L6: a receiver at its share is no alternative to the avoided node",
			in:   Input{Nodes: []Node{alive("a", 1), alive("b", 0), avoiding(drainingNode("d", 1), "b")}, MaxInFlight: 8},
			want: "d0>b",
		},
		{
			name: "rule L6: with room elsewhere the avoided node is passed over, even with the larger deficit",
			in:   Input{Nodes: []Node{alive("a", 0), alive("b", 0), avoiding(drainingNode("d", 3), "a")}, MaxInFlight: 8},
			want: "d0>b d1>a d2>a",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := trace(Plan(tc.in)); got != tc.want {
				t.Fatalf("moves: got %q, want %q", got, tc.want)
			}
		})
	}
}

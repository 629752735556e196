// Package planner computes the partition moves that balance the number of
// partitions each node owns: the move planner of seed 000 (rules L1-L3,
// L5, L6, D1, B1-B3). Start with Plan.
//
// Plan is pure: a function of its Input, with no clock, randomness or I/O.
// The controller builds the Input from a leader read of the assignments
// and members, under its planning mutex (rule L4), and sets the targets
// Plan returns. Because a partition in flight counts at its destination
// and leaves the movable pool, planning again while moves run reaches a
// fixed point: it never undoes or repeats a move (rule L2).
package planner

import (
	"cmp"
	"slices"
)

// Ref names one partition that may move.
type Ref struct {
	Topic       string
	Incarnation uint64
	Partition   int
	// Avoid is a node this partition should preferably not land on (a
	// fan-out child's parent's node); balance wins over it (rule L6).
	Avoid string
}

// Node is one member as the planner needs it.
type Node struct {
	ID string
	// Alive: its heartbeats are fresh. A dead node's partitions stay where
	// they are, since their only copy is on its disk (rule L5).
	Alive bool
	// Draining (decommission) or Leaving (shutting down): it takes no
	// partitions and sheds all it owns (rules D1, B11).
	Draining bool
	Leaving  bool
	// Owned lists the partitions it owns that have no move in flight, in
	// the order they should leave when some must. It may list only the
	// first of them, as many as a round can move (MaxInFlight-InFlight),
	// when Settled counts them all: Plan never takes more than that from
	// one node, so the plan is the same.
	Owned []Ref
	// Settled counts the partitions it owns that have no move in flight;
	// a count below len(Owned) reads as len(Owned).
	Settled int
	// Incoming counts the moves in flight to it: they count here, not at
	// their owner (rule L2).
	Incoming int
}

func (n *Node) receiving() bool { return n.Alive && !n.Draining && !n.Leaving }
func (n *Node) settled() int    { return max(n.Settled, len(n.Owned)) }
func (n *Node) shedding() bool  { return n.Alive && (n.Draining || n.Leaving) }

// Input is what one planning round sees.
type Input struct {
	// Nodes are the members, in any order; ids are unique.
	Nodes []Node
	// InFlight counts every move in flight (with a target), wherever it
	// goes: the budget is MaxInFlight minus it (rule L3).
	InFlight int
	// MaxInFlight caps the moves in flight (MaxInFlightMoves).
	MaxInFlight int
}

// Move is one planned move: set Target := To on the partition owned by
// From.
type Move struct {
	Ref
	From, To string
}

// Plan returns the fewest moves that bring every receiving node (alive,
// not draining, not leaving) to floor(T/R) or ceil(T/R) partitions, T
// counting the partitions of receivers and of shedding nodes, R the
// receivers; the nodes holding the most keep the ceil slots, so a node
// within its share loses nothing (rule L1). Shedding nodes give up all
// their partitions first. At most MaxInFlight-InFlight moves are returned
// (rule L3), each counted as done for the next pick (rule B2).
//
// Its cost is O(N log N + moves x R) for N nodes and R receivers,
// independent of the number of partitions, so the controller can plan
// hundreds of picks over hundreds of thousands of partitions in well
// under a millisecond (rule B3); with Owned cut to the budget (Settled
// counting the rest), so is building its Input.
func Plan(in Input) []Move {
	// No room (budget <= 0) plans nothing: both pick loops stop before
	// their first pick.
	budget := in.MaxInFlight - in.InFlight
	type slot struct {
		node  *Node
		count int // partitions it will hold: owned + incoming
		want  int // its share: floor or ceil
	}
	var recv []slot
	var shed []*Node
	total := 0
	for i := range in.Nodes {
		n := &in.Nodes[i]
		switch {
		case n.receiving():
			c := n.settled() + n.Incoming
			recv = append(recv, slot{node: n, count: c})
			total += c
		case n.shedding():
			shed = append(shed, n)
			total += n.settled()
		}
	}
	if len(recv) == 0 {
		return nil
	}
	// The nodes holding the most keep the ceil slots; ties by id, so the
	// plan does not depend on the input's order.
	slices.SortFunc(recv, func(a, b slot) int {
		return cmp.Or(cmp.Compare(b.count, a.count), cmp.Compare(a.node.ID, b.node.ID))
	})
	floor, ceilSlots := total/len(recv), total%len(recv)
	for i := range recv {
		recv[i].want = floor
		if i < ceilSlots {
			recv[i].want++
		}
	}
	slices.SortFunc(shed, func(a, b *Node) int { return cmp.Compare(a.ID, b.ID) })

	var moves []Move
	// pick sends r from its owner to the receiver with the largest deficit
	// (ties by id), preferring one that r does not avoid; false when no
	// receiver has room.
	pick := func(from *Node, r Ref) bool {
		best, bestAvoided := -1, -1
		for i := range recv {
			d := recv[i].want - recv[i].count
			if d <= 0 {
				continue
			}
			better := func(j int) bool {
				if j < 0 {
					return true
				}
				dj := recv[j].want - recv[j].count
				return d > dj || (d == dj && recv[i].node.ID < recv[j].node.ID)
			}
			if r.Avoid != "" && recv[i].node.ID == r.Avoid {
				if better(bestAvoided) {
					bestAvoided = i
				}
				continue
			}
			if better(best) {
				best = i
			}
		}
		if best < 0 {
			best = bestAvoided // balance wins over anti-affinity
		}
		if best < 0 {
			return false
		}
		recv[best].count++
		moves = append(moves, Move{Ref: r, From: from.ID, To: recv[best].node.ID})
		return true
	}
	for _, n := range shed {
		for _, r := range n.Owned {
			if len(moves) >= budget || !pick(n, r) {
				return moves
			}
		}
	}
	// Receivers above their share, the largest surplus first.
	over := make([]int, 0, len(recv))
	for i := range recv {
		if recv[i].count > recv[i].want {
			over = append(over, i)
		}
	}
	slices.SortFunc(over, func(a, b int) int {
		sa, sb := recv[a].count-recv[a].want, recv[b].count-recv[b].want
		return cmp.Or(cmp.Compare(sb, sa), cmp.Compare(recv[a].node.ID, recv[b].node.ID))
	})
	for _, i := range over {
		n := recv[i].node
		// Only partitions it owns can leave; incoming ones are in flight.
		// Its count is not lowered as they leave: it never drops below its
		// share, so pick, which looks only at deficits, never looks at it.
		surplus := min(recv[i].count-recv[i].want, len(n.Owned))
		for _, r := range n.Owned[:surplus] {
			if len(moves) >= budget || !pick(n, r) {
				return moves
			}
		}
	}
	return moves
}

// Member is a cluster member as NewInput reads it.
type Member struct {
	ID                       string
	Alive, Draining, Leaving bool
}

// Placement is one partition's assignment as NewInput reads it: its owner
// and, while a move is planned or in flight, its target.
type Placement struct {
	Ref
	Owner, Target string
}

// NewInput builds a planning round's Input from the members and every
// partition's placement, keeping the placements' order in each node's
// Owned. An owner that is not a member keeps its partitions (like a dead
// one); a target counts as in flight wherever it points.
func NewInput(members []Member, placements []Placement, maxInFlight int) Input {
	in := Input{Nodes: make([]Node, len(members)), MaxInFlight: maxInFlight}
	idx := make(map[string]int, len(members))
	for i, m := range members {
		in.Nodes[i] = Node{ID: m.ID, Alive: m.Alive, Draining: m.Draining, Leaving: m.Leaving}
		idx[m.ID] = i
	}
	// Two passes: count, then fill slices allocated once.
	owner := make([]int32, len(placements))
	counts := make([]int, len(members))
	for k, p := range placements {
		owner[k] = -1
		if p.Target != "" {
			in.InFlight++
			if i, ok := idx[p.Target]; ok {
				in.Nodes[i].Incoming++
			}
			continue
		}
		if i, ok := idx[p.Owner]; ok {
			owner[k] = int32(i)
			counts[i]++
		}
	}
	for i := range in.Nodes {
		in.Nodes[i].Owned = make([]Ref, 0, counts[i])
	}
	for k, p := range placements {
		if i := owner[k]; i >= 0 {
			in.Nodes[i].Owned = append(in.Nodes[i].Owned, p.Ref)
		}
	}
	return in
}

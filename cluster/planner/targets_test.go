package planner

import (
	"testing"
	"time"
)

// rule T1 (the threshold: the seed's DeadTargetAbortAfter is 2 minutes;
// the node's default is checked against it in actors' T1 test)
func TestTargetGoneRuleT1(t *testing.T) {
	const after = 2 * time.Minute
	alive := Destination{Member: true, InRaft: true}
	dead := Destination{Member: true, InRaft: true, Dead: true}
	with := func(d Destination, f func(*Destination)) Destination { f(&d); return d }
	for _, tc := range []struct {
		name string
		d    Destination
		want bool
	}{
		{"no longer a member", Destination{InRaft: true}, true},
		{"no longer a member, record says dead", Destination{Dead: true}, true},
		{"alive", alive, false},
		{"alive, a stale dead-for is ignored", with(alive, func(d *Destination) { d.DeadFor = time.Hour }), false},
		{"dead, not yet seen dead by this leader", dead, false},
		{"dead a moment less than the bound", with(dead, func(d *Destination) { d.DeadFor = after - time.Nanosecond }), false},
		{"dead exactly the bound", with(dead, func(d *Destination) { d.DeadFor = after }), true},
		{"dead longer", with(dead, func(d *Destination) { d.DeadFor = after + time.Second }), true},
		{"dead a moment, out of the Raft configuration", with(dead, func(d *Destination) { d.InRaft = false }), true},
		{"draining, out of the Raft configuration", with(alive, func(d *Destination) { d.Draining, d.InRaft = true, false }), true},
		{"draining, still in the Raft configuration", with(alive, func(d *Destination) { d.Draining = true }), false},
		{"alive, out of the Raft configuration (a join not yet added)", with(alive, func(d *Destination) { d.InRaft = false }), false},
	} {
		if got := TargetGone(tc.d, after); got != tc.want {
			t.Errorf("%s: TargetGone(%+v) = %v, want %v", tc.name, tc.d, got, tc.want)
		}
	}
}

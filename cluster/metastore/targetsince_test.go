package metastore

import (
	"testing"

	"github.com/naradmq/narad/messages"
)

// A flip names the move it was proposed for (TargetSince); one that
// reaches the log late, after an abort and a re-plan to the same target,
// is refused for the new move. Found by the move simulator (seed 2510 of
// actors/move/sim with -break ABA).
func TestFlipNamesItsMove(t *testing.T) {
	m := NewAssignMachine()
	apply := func(c messages.AssignCommand) messages.AssignResult {
		t.Helper()
		c.Version = messages.CommandVersion
		r, err := m.Apply(c, m.Applied()+1)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	target := func(from, to string) messages.AssignResult {
		return apply(messages.AssignCommand{SetTarget: &messages.SetTarget{Incarnation: 1, Partition: 0, Owner: "a", From: from, To: to}})
	}
	flip := func(since uint64) messages.AssignResult {
		hwm := int64(7)
		return apply(messages.AssignCommand{Flip: &messages.Flip{Incarnation: 1, Partition: 0, From: "a", To: "b", HWM: &hwm, TargetSince: since}})
	}
	apply(messages.AssignCommand{PutAssignments: &messages.PutAssignments{Assignments: []messages.Assignment{{Topic: "t", Incarnation: 1, Partition: 0, Owner: "a"}}}})
	first := target("", "b").Assignment.TargetSince
	if first != 2 {
		t.Fatalf("TargetSince after the first SetTarget: got %d, want 2 (its log index)", first)
	}
	target("b", "")                                  // the abort
	second := target("", "b").Assignment.TargetSince // the re-plan
	if second == first {
		t.Fatalf("re-planned move has TargetSince %d, the same as the aborted one", second)
	}
	if r := flip(first); r.Code != messages.ResultRefused {
		t.Fatalf("late flip of the aborted move: got code %d, want ResultRefused (%d)", r.Code, messages.ResultRefused)
	}
	if a, _ := m.Get(1, 0); a.Owner != "a" || a.Target != "b" {
		t.Fatalf("after the refused flip: got owner %q target %q, want a, b", a.Owner, a.Target)
	}
	if r := flip(second); r.Code != messages.ResultOK {
		t.Fatalf("flip of the current move: got code %d, want ResultOK", r.Code)
	}
	if a, _ := m.Get(1, 0); a.Owner != "b" || a.Target != "" || a.TargetSince != 0 {
		t.Fatalf("after the flip: got %+v, want owner b, no target, TargetSince 0", a)
	}
	// A flip that names no move (an older binary's) is judged as before.
	apply(messages.AssignCommand{SetTarget: &messages.SetTarget{Incarnation: 1, Partition: 0, Owner: "b", To: "c"}})
	hwm := int64(9)
	if r := apply(messages.AssignCommand{Flip: &messages.Flip{Incarnation: 1, Partition: 0, From: "b", To: "c", HWM: &hwm}}); r.Code != messages.ResultOK {
		t.Fatalf("flip without TargetSince: got code %d, want ResultOK", r.Code)
	}
}

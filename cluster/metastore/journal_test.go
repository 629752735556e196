//go:build !noraft

package metastore

import (
	"slices"
	"testing"

	"github.com/naradmq/narad/messages"
)

// The journal lists exactly the partitions whose owner changed: a create,
// a flip and a delete; a target set or cleared is no owner change.
func TestOwnerJournalListsOwnerChangesOnly(t *testing.T) {
	v := messages.CommandVersion
	s := newAssignState()
	s.apply(messages.AssignCommand{Version: v, PutAssignments: &messages.PutAssignments{Assignments: []messages.Assignment{
		{Topic: "t", Incarnation: 1, Partition: 0, Owner: "a"}, {Topic: "t", Incarnation: 1, Partition: 1, Owner: "a"},
	}}}, 1)
	mark := s.owners.seq
	steps := []struct {
		name string
		cmd  messages.AssignCommand
		want []partKey
	}{
		{"a target set", messages.AssignCommand{Version: v, SetTarget: &messages.SetTarget{Incarnation: 1, Partition: 0, Owner: "a", To: "b"}}, nil},
		{"a refused flip", messages.AssignCommand{Version: v, Flip: &messages.Flip{Incarnation: 1, Partition: 1, From: "a", To: "b"}}, nil},
		{"a flip", messages.AssignCommand{Version: v, Flip: &messages.Flip{Incarnation: 1, Partition: 0, From: "a", To: "b"}}, []partKey{{1, 0}}},
		{"a retried put", messages.AssignCommand{Version: v, PutAssignments: &messages.PutAssignments{Assignments: []messages.Assignment{{Topic: "t", Incarnation: 1, Partition: 1, Owner: "c"}}}}, nil},
		{"a delete", messages.AssignCommand{Version: v, DeleteAssignments: &messages.DeleteAssignments{Incarnation: 1}}, []partKey{{1, 0}, {1, 1}}},
	}
	for _, st := range steps {
		s.apply(st.cmd, s.index+1)
		var got []partKey
		if !s.owners.since(mark, func(k partKey) { got = append(got, k) }) {
			t.Fatalf("%s: the journal lost changes it should hold", st.name)
		}
		slices.SortFunc(got, func(a, b partKey) int { return a.partition - b.partition })
		if !slices.Equal(got, st.want) {
			t.Fatalf("%s: got %v, want %v", st.name, got, st.want)
		}
		mark = s.owners.seq
	}
}

// A reader that fell more than the ring behind, or whose mark is ahead of
// the journal (another state's), is told to read whole.
func TestOwnerJournalRefusesWhatItNoLongerHolds(t *testing.T) {
	var j ownerJournal
	for p := range ownerJournalLen + 1 {
		j.add(partKey{1, p})
	}
	n := 0
	if j.since(0, func(partKey) { n++ }) || n != 0 {
		t.Fatalf("one change past the ring: got ok with %d changes, want false with none", n)
	}
	if !j.since(1, func(partKey) { n++ }) || n != ownerJournalLen {
		t.Fatalf("exactly the ring: got %d changes, want %d", n, ownerJournalLen)
	}
	if j.since(j.seq+1, func(partKey) {}) {
		t.Fatal("a mark past the journal: got ok, want false")
	}
}

// A Store reader follows ownership change by change from a mark, over
// every shard, and a zero cursor is told to read whole.
func TestOwnerChangesSinceFollowsFlipsOverEveryShard(t *testing.T) {
	ctx := guardCtx(t)
	s := openReady(t, ctx, fastConfig(t, "n1"))
	var c OwnerCursor
	if _, ok := s.OwnerChangesSince(&c, nil); ok {
		t.Fatal("a zero cursor: got ok, want false")
	}
	const n = 64
	as := make([]messages.Assignment, n)
	for p := range n {
		as[p] = messages.Assignment{Topic: "t", Incarnation: 5, Partition: p, Owner: "n1", Target: "n2"}
	}
	if err := s.PutAssignments(ctx, as); err != nil {
		t.Fatal(err)
	}
	s.MarkOwners(&c)
	var flips []messages.Flip
	for p := 0; p < n; p += 3 {
		flips = append(flips, messages.Flip{Incarnation: 5, Partition: p, From: "n1", To: "n2"})
	}
	for _, o := range s.FlipMany(ctx, flips) {
		if o.Err != nil || o.Result.Code != messages.ResultOK {
			t.Fatalf("flip: got %+v (err %v), want OK", o.Result, o.Err)
		}
	}
	got, ok := s.OwnerChangesSince(&c, nil)
	if !ok {
		t.Fatal("after the flips: got false, want the changes")
	}
	var parts []int
	for _, a := range got {
		if a.Owner != "n2" {
			t.Fatalf("changed partition %d: got owner %q, want n2", a.Partition, a.Owner)
		}
		parts = append(parts, a.Partition)
	}
	slices.Sort(parts)
	var want []int
	for _, f := range flips {
		want = append(want, f.Partition)
	}
	if !slices.Equal(parts, want) {
		t.Fatalf("changed partitions: got %v, want %v", parts, want)
	}
	if again, ok := s.OwnerChangesSince(&c, nil); !ok || len(again) != 0 {
		t.Fatalf("nothing changed since: got %d changes (ok %v), want none", len(again), ok)
	}
	if err := s.DeleteAssignments(ctx, 5, n); err != nil {
		t.Fatal(err)
	}
	gone, ok := s.OwnerChangesSince(&c, nil)
	if !ok || len(gone) != n || gone[0].Topic != "" || gone[0].Owner != "" {
		t.Fatalf("after the delete: got %d changes (ok %v, first %+v), want %d with only their keys", len(gone), ok, gone[0], n)
	}
}

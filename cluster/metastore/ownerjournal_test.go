package metastore

import (
	"slices"
	"testing"
)

// The owner journal hands a reader every change after the ones it saw, in
// order, while the ring still holds them all; a reader further behind, or
// one naming a count past the journal's, is told to read the shard whole.
func TestOwnerJournalHandsOutTheChangesSinceOrSaysToReadWhole(t *testing.T) {
	var j ownerJournal
	key := func(i int) partKey { return partKey{incarnation: 1, partition: i} }
	since := func(seq uint64) ([]int, bool) {
		var got []int
		ok := j.since(seq, func(k partKey) { got = append(got, k.partition) })
		return got, ok
	}
	if got, ok := since(0); !ok || len(got) != 0 {
		t.Fatalf("an empty journal since 0: got %v, %v; want none, true", got, ok)
	}
	for i := range 3 {
		j.add(key(i))
	}
	for _, tc := range []struct {
		seq    uint64
		want   []int
		wantOK bool
	}{
		{0, []int{0, 1, 2}, true},
		{2, []int{2}, true},
		{3, nil, true},
		{4, nil, false}, // past what was appended
	} {
		if got, ok := since(tc.seq); ok != tc.wantOK || !slices.Equal(got, tc.want) {
			t.Errorf("since %d: got %v, %v; want %v, %v", tc.seq, got, ok, tc.want, tc.wantOK)
		}
	}
	// Fill the ring past its length: the oldest changes fall out.
	for i := 3; i < ownerJournalLen+3; i++ {
		j.add(key(i))
	}
	if _, ok := since(2); ok {
		t.Fatalf("since 2 with %d changes after it: got true, want false (read the shard whole)", j.seq-2)
	}
	got, ok := since(3)
	if !ok || len(got) != ownerJournalLen || got[0] != 3 || got[len(got)-1] != ownerJournalLen+2 {
		t.Fatalf("since 3, exactly a ring's worth: got %d changes (%v), want %d from 3 to %d", len(got), ok, ownerJournalLen, ownerJournalLen+2)
	}
}

package storage

import (
	"errors"
	"testing"
)

// A partition re-created after its owner's disk was lost starts its log at
// a floor (messages.Assignment.Floor): its first record takes the floor's
// offset, nothing below it reads, a reopen keeps the offsets, and a listing
// for a move names the segment at the floor, so the next owner's copy
// starts there too.
func TestALogOpenedFromAFloorStartsThereAndKeepsIt(t *testing.T) {
	const floor = int64(1) << 48
	dir := t.TempDir()
	l, err := (*Files)(nil).OpenLogFrom(dir, smallLogConfig(), floor)
	if err != nil {
		t.Fatal(err)
	}
	if l.HWM() != floor || l.Oldest() != floor {
		t.Fatalf("a new log at the floor: got HWM %d oldest %d, want both %d", l.HWM(), l.Oldest(), floor)
	}
	ls, err := l.List(t0)
	if err != nil || len(ls.Segments) != 1 || ls.Segments[0].Name != segmentName(floor) {
		t.Fatalf("listing of an empty log at the floor: got %+v (%v), want its one segment at %d", ls.Segments, err, floor)
	}
	appendN(t, l, 40, 5) // past a few segment rolls
	checkRecords(t, readAll(t, l, floor), floor, floor+200)
	if _, err := l.Read(floor-1, 1, 1<<10); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("read below the floor: got %v, want ErrOutOfRange", err)
	}
	l.Close()

	// Reopened, with or without the floor, the log is what it was.
	for _, floorAgain := range []int64{0, floor} {
		l, err = (*Files)(nil).OpenLogFrom(dir, smallLogConfig(), floorAgain)
		if err != nil {
			t.Fatal(err)
		}
		if l.HWM() != floor+200 || l.Oldest() != floor {
			t.Errorf("reopened with floor %d: got HWM %d oldest %d, want %d and %d", floorAgain, l.HWM(), l.Oldest(), floor+200, floor)
		}
		checkRecords(t, readAll(t, l, floor), floor, floor+200)
		l.Close()
	}
	if _, err := (*Files)(nil).OpenLogFrom(t.TempDir(), smallLogConfig(), -1); !errors.Is(err, ErrInvalid) {
		t.Errorf("a negative floor: got %v, want ErrInvalid", err)
	}
}

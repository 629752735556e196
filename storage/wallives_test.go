package storage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWALLivesDecodeOnlyWhatTheEncoderWrites(t *testing.T) {
	lives := []walLife{{from: 1, id: 9}, {from: 40, id: 3}, {from: 41, id: 77}}
	b := walEncodeLives(lives)
	got, err := walDecodeLives(b)
	if err != nil || !slices.Equal(got, lives) {
		t.Fatalf("round trip: got %v (%v), want %v", got, err, lives)
	}
	full := make([]walLife, walLivesMax)
	for i := range full {
		full[i] = walLife{from: uint64(i + 1), id: uint64(i + 1)}
	}
	if got, err := walDecodeLives(walEncodeLives(full)); err != nil || len(got) != walLivesMax {
		t.Fatalf("walLivesMax lives: got %d (%v), want all %d", len(got), err, walLivesMax)
	}
	for name, bad := range map[string][]byte{
		"torn":            b[:len(b)-1],
		"bit flipped":     func() []byte { x := slices.Clone(b); x[14] ^= 1; return x }(),
		"out of order":    walEncodeLives([]walLife{{from: 5, id: 1}, {from: 5, id: 2}}),
		"an id of 0":      walEncodeLives([]walLife{{from: 5, id: 0}}),
		"another file":    walEncodePosition(7),
		"past the bound":  walEncodeLives(make([]walLife, walLivesMax+1)),
		"trailing bytes":  append(slices.Clone(b), 0),
		"empty":           nil,
		"magic only":      []byte(walLivesMagic),
		"count past size": func() []byte { x := walEncodeLives(lives[:1]); x[8] = 2; return x }(),
	} {
		if _, err := walDecodeLives(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
}

func TestWALNextLivesKeepsOnlyTheLivesWhoseRecordsAreStillHeld(t *testing.T) {
	tests := []struct {
		name         string
		lives        []walLife
		oldest, next uint64
		want         []walLife
	}{
		{name: "a new WAL", oldest: 1, next: 1, want: []walLife{{1, 99}}},
		{name: "both lives still held", lives: []walLife{{1, 5}, {10, 6}}, oldest: 1, next: 20,
			want: []walLife{{1, 5}, {10, 6}, {20, 99}}},
		{name: "the first life's records compacted away", lives: []walLife{{1, 5}, {10, 6}}, oldest: 12, next: 20,
			want: []walLife{{10, 6}, {20, 99}}},
		{name: "compacted exactly to the second life", lives: []walLife{{1, 5}, {10, 6}}, oldest: 10, next: 20,
			want: []walLife{{10, 6}, {20, 99}}},
		{name: "a life that appended nothing is replaced", lives: []walLife{{1, 5}, {20, 6}}, oldest: 1, next: 20,
			want: []walLife{{1, 5}, {20, 99}}},
		{name: "lives past the seqs the disk still has go", lives: []walLife{{1, 5}, {30, 6}}, oldest: 1, next: 20,
			want: []walLife{{1, 5}, {20, 99}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := walNextLives(tc.lives, tc.oldest, tc.next, 99); !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	many := make([]walLife, walLivesMax)
	for i := range many {
		many[i] = walLife{from: uint64(i + 1), id: uint64(i + 1)}
	}
	got := walNextLives(many, 1, walLivesMax+1, 99)
	if len(got) != walLivesMax || got[0].from != 2 || got[len(got)-1] != (walLife{walLivesMax + 1, 99}) {
		t.Fatalf("past the bound: got %d lives from %v to %v, want %d from seq 2 to the new one", len(got), got[0], got[len(got)-1], walLivesMax)
	}
}

func TestWALLifeOfNamesTheLifeThatHandedTheSeqOut(t *testing.T) {
	lives := []walLife{{from: 5, id: 50}, {from: 9, id: 90}}
	for seq, want := range map[uint64]uint64{1: 0, 4: 0, 5: 50, 8: 50, 9: 90, 1 << 40: 90} {
		if got := walLifeOf(lives, seq); got != want {
			t.Errorf("walLifeOf(%d): got %d, want %d", seq, got, want)
		}
	}
}

// A WAL names a record by the life that wrote it, in that life and after
// a restart, and names the next life's records under another ID.
func TestEveryOpenOfAWALHandsOutOriginsUnderANewID(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, walSmallConfig())
	first := walAppendN(t, w, 0, 3)
	before := w.Origin(first[0].Seq)
	if before.WAL == 0 || before.Seq != first[0].Seq {
		t.Fatalf("origin of seq %d: got %+v, want a WAL ID and the seq", first[0].Seq, before)
	}
	walCloseTest(t, w)

	w = walOpenTest(t, dir, walSmallConfig())
	replayed, _ := walReplayAll(t, w)
	walSameRecords(t, "replay", replayed, first)
	for _, r := range replayed {
		if got := w.Origin(r.Seq); got != (Origin{WAL: before.WAL, Seq: r.Seq}) {
			t.Errorf("replayed seq %d: got origin %+v, want WAL %d's", r.Seq, got, before.WAL)
		}
	}
	next := walAppendOK(t, w, walTestRecord(3))
	if got := w.Origin(next); got.WAL == before.WAL || got.WAL == 0 {
		t.Fatalf("a record of the second open: got WAL %d, want a new ID (the first was %d)", got.WAL, before.WAL)
	}
}

// The reason lives exist: a WAL directory put back from a copy hands out
// again seqs its original handed out after the copy was taken. Those are
// other records, and they must not carry an origin a partition may hold.
func TestAWALPutBackFromACopyNamesItsNewRecordsApartFromTheOriginals(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, walSmallConfig())
	walAppendN(t, w, 0, 2)
	backup := walCopyDir(t, dir)
	later := walAppendN(t, w, 2, 2)
	original := w.Origin(later[0].Seq)
	walCloseTest(t, w)

	r := walOpenTest(t, backup, walSmallConfig())
	seq := walAppendOK(t, r, walTestRecord(9))
	if seq != later[0].Seq {
		t.Fatalf("the copy handed out seq %d, want %d again (what this test is about)", seq, later[0].Seq)
	}
	if got := r.Origin(seq); got == original || got.WAL == 0 {
		t.Fatalf("seq %d in the copy: got origin %+v, the original's record has %+v", seq, got, original)
	}
}

func TestAWALWhoseLivesFileIsDamagedReplaysWithoutOriginsAndStartsAfresh(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, walSmallConfig())
	recs := walAppendN(t, w, 0, 2)
	walCloseTest(t, w)
	if err := os.WriteFile(filepath.Join(dir, walLivesName), []byte("not lives"), 0o644); err != nil {
		t.Fatal(err)
	}
	w = walOpenTest(t, dir, walSmallConfig())
	replayed, _ := walReplayAll(t, w)
	walSameRecords(t, "replay", replayed, recs)
	if got := w.Origin(recs[0].Seq); got != (Origin{}) {
		t.Fatalf("a record of a life the file lost: got origin %+v, want none", got)
	}
	if got := w.Origin(walAppendOK(t, w, walTestRecord(5))); got.WAL == 0 {
		t.Fatalf("a new record: got origin %+v, want one", got)
	}
}

package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cursorEpoch is the attach epoch the tests write unless they say otherwise.
const cursorEpoch = 41

func cursorMustWrite(t *testing.T, dir, child string, offset int64, sync bool) {
	t.Helper()
	if err := WriteCursor(dir, Cursor{Child: child, Epoch: cursorEpoch, Offset: offset}, sync, nil); err != nil {
		t.Fatalf("WriteCursor(%s, %d): %v", child, offset, err)
	}
}

func cursorMustRead(t *testing.T, dir, child string) int64 {
	t.Helper()
	got, err := ReadCursor(dir, child, DefaultConsumerConfig().CursorReadAttempts)
	if err != nil {
		t.Fatalf("ReadCursor(%s): %v", child, err)
	}
	if got.Child != child || got.Epoch != cursorEpoch {
		t.Fatalf("ReadCursor(%s): got child %q epoch %d, want %q epoch %d", child, got.Child, got.Epoch, child, cursorEpoch)
	}
	return got.Offset
}

// cursorOffsets keeps the offsets of a listing, checking each entry's name.
func cursorOffsets(t *testing.T, m map[string]Cursor) map[string]int64 {
	t.Helper()
	out := make(map[string]int64, len(m))
	for k, c := range m {
		if c.Child != k {
			t.Fatalf("listing key %q holds child %q", k, c.Child)
		}
		out[k] = c.Offset
	}
	return out
}

func TestCursorWriteThenReadReturnsTheLastValue(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "fanout-orders.eu.offset")
	var size int64 = -1
	for i, offset := range []int64{0, 7, 1 << 40, 3, 1<<63 - 1} {
		cursorMustWrite(t, dir, "orders.eu", offset, i%2 == 0)
		if got := cursorMustRead(t, dir, "orders.eu"); got != offset {
			t.Fatalf("after write %d: got %d, want %d", i, got, offset)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if size >= 0 && fi.Size() != size {
			t.Fatalf("after write %d: file size %d, want %d (in-place overwrite keeps the size)", i, fi.Size(), size)
		}
		size = fi.Size()
	}
	if want := int64(cursorFixedBytes + len("orders.eu")); size != want {
		t.Fatalf("file size: got %d, want %d", size, want)
	}
}

func TestCursorMissingIsNotFound(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadCursor(dir, "orders", 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v, want ErrNotFound", err)
	}
}

// rule K8: a cursor caught mid-write is read again, never shipped unverified.
func TestCursorTornFileIsReadAgainNeverReturnedUnverified(t *testing.T) {
	const child = "payments"
	old, next := encodeCursor(Cursor{child, 1, 100}), encodeCursor(Cursor{child, 1, 1<<33 + 5})
	path := filepath.Join(t.TempDir(), cursorFileName(child))
	dir := filepath.Dir(path)

	// A writer is mid-overwrite at the first read and done by the second.
	torn := append(bytes.Clone(next[:12]), old[12:]...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	reads := 0
	finishWriter := func(p string) ([]byte, error) {
		reads++
		b, err := cursorReadFile(p)
		if reads == 1 {
			if err := WriteCursor(dir, Cursor{child, 1, 1<<33 + 5}, false, nil); err != nil {
				t.Fatal(err)
			}
		}
		return b, err
	}
	raw, got, err := cursorRead(finishWriter, dir, child, 3)
	if err != nil || got.Offset != 1<<33+5 || reads != 2 || !bytes.Equal(raw, next) {
		t.Fatalf("writer finishing between reads: got %+v, %v after %d reads, want %d, nil after 2 reads", got, err, reads, int64(1<<33+5))
	}

	// A file that stays torn is corrupt after exactly `attempts` reads.
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	reads = 0
	counting := func(p string) ([]byte, error) {
		reads++
		return cursorReadFile(p)
	}
	raw, got, err = cursorRead(counting, dir, child, 4)
	if !errors.Is(err, ErrCorrupt) || got != (Cursor{}) || raw != nil || reads != 4 {
		t.Fatalf("file that stays torn: got %+v, %v after %d reads, want 0, ErrCorrupt after 4 reads", got, err, reads)
	}

	// Every tear of an overwrite (new prefix, old suffix) reads as the old
	// value, the new value, or ErrCorrupt; never anything else.
	for k := 0; k <= len(next); k++ {
		b := append(bytes.Clone(next[:k]), old[k:]...)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := ReadCursor(dir, child, 2)
		switch {
		case err != nil && !errors.Is(err, ErrCorrupt):
			t.Fatalf("tear at %d: got error %v, want ErrCorrupt or a value", k, err)
		case err == nil && got.Offset != 100 && got.Offset != 1<<33+5:
			t.Fatalf("tear at %d: got %d, want 100 or %d", k, got.Offset, int64(1<<33+5))
		case err == nil && !bytes.Equal(b, old) && !bytes.Equal(b, next):
			t.Fatalf("tear at %d: got %+v from bytes that are neither record", k, got)
		}
	}

	// Garbage of every length up to the largest record never verifies.
	for n := range cursorMaxRecord + 2 {
		if err := os.WriteFile(path, bytes.Repeat([]byte{0x5a}, n), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadCursor(dir, child, 1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d garbage bytes: got %+v, %v, want ErrCorrupt", n, got, err)
		}
	}
}

func TestCursorFileOfAnotherChildIsCorrupt(t *testing.T) {
	dir := t.TempDir()
	cursorMustWrite(t, dir, "a", 5, false)
	b, err := os.ReadFile(filepath.Join(dir, cursorFileName("a")))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, cursorFileName("b")), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadCursor(dir, "b", 2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %+v, %v, want ErrCorrupt", got, err)
	}
}

// rule K6
func TestCursorPastHWMIsLoweredSilently(t *testing.T) {
	for _, tc := range []struct{ offset, hwm, want int64 }{
		{12, 10, 10},
		{10, 10, 10},
		{3, 10, 3},
		{5, 0, 0},
	} {
		if got := ClampCursor(tc.offset, tc.hwm); got != tc.want {
			t.Errorf("ClampCursor(%d, %d) = %d, want %d", tc.offset, tc.hwm, got, tc.want)
		}
	}
}

func TestCursorInvalidChildIsRejected(t *testing.T) {
	dir := t.TempDir()
	for _, child := range []string{"", ".", "..", "a/b", "../x", "a b", "t\x00", "café", strings.Repeat("x", 256)} {
		if err := WriteCursor(dir, Cursor{Child: child, Offset: 1}, false, nil); !errors.Is(err, ErrInvalid) {
			t.Errorf("WriteCursor(%q): got %v, want ErrInvalid", child, err)
		}
		if _, err := ReadCursor(dir, child, 1); !errors.Is(err, ErrInvalid) {
			t.Errorf("ReadCursor(%q): got %v, want ErrInvalid", child, err)
		}
		if err := RemoveCursor(dir, child); !errors.Is(err, ErrInvalid) {
			t.Errorf("RemoveCursor(%q): got %v, want ErrInvalid", child, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("files after rejected writes: got %d, want 0", len(entries))
	}
	if err := WriteCursor(dir, Cursor{Child: "ok", Offset: -1}, false, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative offset: got %v, want ErrInvalid", err)
	}
	if _, err := ReadCursor(dir, "ok", 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("zero attempts: got %v, want ErrInvalid", err)
	}
}

func TestCursorChildNamesUpToTheTopicLimitFitTheFileSystem(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("L", 255)
	edge := strings.Repeat("e", 255-len(cursorPrefix)-len(cursorSuffix))
	cursorMustWrite(t, dir, long, 42, true)
	cursorMustWrite(t, dir, edge, 43, true)
	if got := cursorMustRead(t, dir, long); got != 42 {
		t.Fatalf("255-byte child: got %d, want 42", got)
	}
	if got := cursorMustRead(t, dir, edge); got != 43 {
		t.Fatalf("%d-byte child: got %d, want 43", len(edge), got)
	}
	if _, err := os.Stat(filepath.Join(dir, cursorPrefix+edge+cursorSuffix)); err != nil {
		t.Fatalf("a child that fits keeps the plain file name: %v", err)
	}
	got, err := ListCursors(dir, 2)
	if err != nil {
		t.Fatalf("ListCursors: %v", err)
	}
	if want := map[string]int64{long: 42, edge: 43}; !maps.Equal(cursorOffsets(t, got), want) {
		t.Fatalf("ListCursors: got %v, want %v", got, want)
	}
	if n := len(cursorFileName(long)); n > cursorMaxFileName {
		t.Fatalf("file name of a 255-byte child: got %d bytes, want at most %d", n, cursorMaxFileName)
	}

	// A hashed file is found by its record alone, so a damaged one must fail
	// the listing, not vanish from it.
	path := filepath.Join(dir, cursorFileName(long))
	flipBit(t, path, cursorFixedBytes)
	if got, err := ListCursors(dir, 2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("ListCursors with a damaged hashed cursor: got %v, %v, want ErrCorrupt", got, err)
	}
}

func TestListCursorsReturnsEveryChildAndIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	want := map[string]int64{"a": 1, "b.c": 20, "d_e-f": 300}
	for child, offset := range want {
		cursorMustWrite(t, dir, child, offset, false)
	}
	for _, name := range []string{"00000000000000000000.log", "fanout-x.offset.tmp", "fanout-..offset", "consumer-0.state", "fanout-~zz.offset"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("not a cursor"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "fanout-dir.offset"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := ListCursors(dir, 2)
	if err != nil {
		t.Fatalf("ListCursors: %v", err)
	}
	if !maps.Equal(cursorOffsets(t, got), want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestListCursorsFailsOnACursorThatDoesNotVerify(t *testing.T) {
	dir := t.TempDir()
	cursorMustWrite(t, dir, "good", 1, false)
	cursorMustWrite(t, dir, "bad", 2, false)
	path := filepath.Join(dir, cursorFileName("bad"))
	flipBit(t, path, 9)
	if got, err := ListCursors(dir, 3); !errors.Is(err, ErrCorrupt) || got != nil {
		t.Fatalf("got %v, %v, want nil, ErrCorrupt", got, err)
	}
	if _, err := ListCursors(filepath.Join(dir, "missing"), 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing dir: got %v, want ErrNotFound", err)
	}
}

func TestRemoveCursorDeletesItAndRemovingAgainIsFine(t *testing.T) {
	dir := t.TempDir()
	cursorMustWrite(t, dir, "gone", 9, true)
	cursorMustWrite(t, dir, "kept", 10, true)
	for i := range 2 {
		if err := RemoveCursor(dir, "gone"); err != nil {
			t.Fatalf("RemoveCursor #%d: %v", i+1, err)
		}
	}
	if _, err := ReadCursor(dir, "gone", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read after remove: got %v, want ErrNotFound", err)
	}
	got, err := ListCursors(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"kept": 10}; !maps.Equal(cursorOffsets(t, got), want) {
		t.Fatalf("ListCursors after remove: got %v, want %v", got, want)
	}
}

func TestCursorWriteRepairsAForeignLongerFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, cursorFileName("c"))
	if err := os.WriteFile(path, bytes.Repeat([]byte{1}, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadCursor(dir, "c", 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("before write: got %v, want ErrCorrupt", err)
	}
	cursorMustWrite(t, dir, "c", 77, false)
	if got := cursorMustRead(t, dir, "c"); got != 77 {
		t.Fatalf("after write: got %d, want 77", got)
	}
}

func TestCursorEncodingRoundTrips(t *testing.T) {
	for _, c := range []Cursor{{"a", 1, 0}, {"orders", 7, 12345}, {strings.Repeat("z", 255), 1<<64 - 1, 1<<63 - 1}} {
		got, err := decodeCursor(encodeCursor(c))
		if err != nil || got != c {
			t.Errorf("decode(encode(%+v)) = %+v, %v; want it back, nil", c, got, err)
		}
	}
	b := encodeCursor(Cursor{"neg", 1, 0})
	for i := 8; i < 16; i++ {
		b[i] = 0xff // offset -1, with a correct CRC below
	}
	b = cursorFixCRC(b)
	if _, err := decodeCursor(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("negative offset with a valid CRC: got %v, want ErrCorrupt", err)
	}
	b = encodeCursor(Cursor{"v3", 1, 0})
	binary.BigEndian.PutUint16(b[4:6], 3)
	if _, err := decodeCursor(cursorFixCRC(b)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("version 3 with a valid CRC: got %v, want ErrCorrupt", err)
	}
}

// cursorFixCRC recomputes the trailing checksum of a record.
func cursorFixCRC(b []byte) []byte {
	b = bytes.Clone(b[:len(b)-4])
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, consumerCRC))
}

// encodeCursorV1 writes the version 1 record, which had no epoch.
func encodeCursorV1(child string, offset int64) []byte {
	b := append([]byte(nil), cursorMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, cursorVersion1)
	b = binary.BigEndian.AppendUint16(b, uint16(len(child)))
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = append(b, child...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, consumerCRC))
}

func TestCursorVersion1FileReadsWithEpochZeroAndIsOverwrittenAsVersion2(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, cursorFileName("old"))
	if err := os.WriteFile(path, encodeCursorV1("old", 99), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadCursor(dir, "old", 1)
	if want := (Cursor{"old", 0, 99}); err != nil || got != want {
		t.Fatalf("version 1 file: got %+v, %v, want %+v, nil", got, err, want)
	}
	all, err := ListCursors(dir, 1)
	if want := map[string]Cursor{"old": {"old", 0, 99}}; err != nil || !maps.Equal(all, want) {
		t.Fatalf("ListCursors over a version 1 file: got %v, %v, want %v", all, err, want)
	}
	if err := WriteCursor(dir, Cursor{"old", 5, 100}, false, nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := encodeCursor(Cursor{"old", 5, 100}); !bytes.Equal(b, want) {
		t.Fatalf("after overwrite: file %x, want the version 2 record %x", b, want)
	}
}

func TestReadCursorFileReturnsTheVerifiedRecord(t *testing.T) {
	dir := t.TempDir()
	c := Cursor{"side", 12, 3456}
	if err := WriteCursor(dir, c, false, nil); err != nil {
		t.Fatal(err)
	}
	raw, got, err := ReadCursorFile(dir, "side", 2)
	if err != nil || got != c || !bytes.Equal(raw, encodeCursor(c)) {
		t.Fatalf("got %x, %+v, %v, want %x, %+v, nil", raw, got, err, encodeCursor(c), c)
	}
	if _, _, err := ReadCursorFile(dir, "none", 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: got %v, want ErrNotFound", err)
	}
}

// rule K6: a cursor installed past the destination's HWM is lowered to it.
func TestInstallCursorClampsToTheHWMAndKeepsTheEpoch(t *testing.T) {
	for _, tc := range []struct{ offset, hwm, want int64 }{
		{120, 100, 100},
		{100, 100, 100},
		{30, 100, 30},
		{7, 0, 0},
	} {
		dir := t.TempDir()
		raw := encodeCursor(Cursor{"kid", 9, tc.offset})
		got, err := InstallCursor(dir, raw, tc.hwm, true)
		if want := (Cursor{"kid", 9, tc.want}); err != nil || got != want {
			t.Fatalf("install %d at hwm %d: got %+v, %v, want %+v, nil", tc.offset, tc.hwm, got, err, want)
		}
		if on, err := ReadCursor(dir, "kid", 1); err != nil || on != got {
			t.Fatalf("install %d at hwm %d: file holds %+v, %v, want %+v", tc.offset, tc.hwm, on, err, got)
		}
	}
}

// rule K8: a sidecar that does not verify at the destination is refused and
// writes nothing.
func TestInstallCursorRefusesARecordThatDoesNotVerify(t *testing.T) {
	dir := t.TempDir()
	good := encodeCursor(Cursor{"kid", 9, 50})
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x10
		if _, err := InstallCursor(dir, bad, 100, false); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: got %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := InstallCursor(dir, good[:len(good)-1], 100, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short record: got %v, want ErrCorrupt", err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("files after refused installs: got %d (%v), want 0", len(entries), err)
	}
	if _, err := InstallCursor(dir, good, -1, false); !errors.Is(err, ErrInvalid) {
		t.Fatalf("negative hwm: got %v, want ErrInvalid", err)
	}
}

// rule K8 (source side): the sidecars a source ships are the verified
// records as read; one caught mid-write is read again, and one that never
// verifies fails the listing rather than being shipped or left out.
func TestRuleK8ListCursorFilesReReadsATornRecordAndNeverShipsABadOne(t *testing.T) {
	dir := t.TempDir()
	want := []Cursor{{"a", 3, 10}, {"b", 4, 20}}
	for _, c := range want {
		if err := WriteCursor(dir, c, false, nil); err != nil {
			t.Fatal(err)
		}
	}
	raws, err := ListCursorFiles(dir, 2)
	if err != nil || len(raws) != 2 || !bytes.Equal(raws[0], encodeCursor(want[0])) || !bytes.Equal(raws[1], encodeCursor(want[1])) {
		t.Fatalf("ListCursorFiles: got %x, %v, want the records of %+v in child order", raws, err, want)
	}

	// b is torn when first read, and its writer finishes before the second.
	path := filepath.Join(dir, cursorFileName("b"))
	next := encodeCursor(Cursor{"b", 4, 1 << 40})
	torn := append(bytes.Clone(next[:12]), encodeCursor(want[1])[12:]...)
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	reads := 0
	finish := func(p string) ([]byte, error) {
		b, err := cursorReadFile(p)
		if p == path {
			reads++
			if reads == 1 {
				if werr := os.WriteFile(path, next, 0o644); werr != nil {
					t.Fatal(werr)
				}
			}
		}
		return b, err
	}
	files, err := cursorList(finish, dir, 3)
	if err != nil || !bytes.Equal(files["b"].raw, next) || files["b"].cursor.Offset != 1<<40 || reads != 2 {
		t.Fatalf("torn then written: got %x, %v after %d reads of b, want the new record after 2", files["b"].raw, err, reads)
	}

	// b stays torn: nothing is shipped.
	if err := os.WriteFile(path, torn, 0o644); err != nil {
		t.Fatal(err)
	}
	if raws, err := ListCursorFiles(dir, 3); !errors.Is(err, ErrCorrupt) || raws != nil {
		t.Fatalf("a record that stays torn: got %x, %v, want nil, ErrCorrupt", raws, err)
	}
}

// rule K8 (destination side) and K6: the sidecars are installed only when
// every one verifies, clamped to the HWM; a cursor an earlier attempt left
// for a child not shipped now is removed.
func TestRuleK8ReplaceCursorsInstallsVerifiedRecordsClampedOrNothing(t *testing.T) {
	dir := t.TempDir()
	if err := WriteCursor(dir, Cursor{"left", 1, 5}, false, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteCursor(dir, Cursor{"a", 1, 1}, false, nil); err != nil {
		t.Fatal(err)
	}
	good, past := encodeCursor(Cursor{"a", 2, 30}), encodeCursor(Cursor{"b", 3, 90})
	bad := bytes.Clone(past)
	bad[len(bad)-1] ^= 1
	if _, err := ReplaceCursors(dir, [][]byte{good, bad}, 50, false); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a corrupt sidecar: got %v, want ErrCorrupt", err)
	}
	before, err := ListCursors(dir, 1)
	if want := map[string]Cursor{"left": {"left", 1, 5}, "a": {"a", 1, 1}}; err != nil || !maps.Equal(before, want) {
		t.Fatalf("after a refused install: got %v, %v, want the directory unchanged %v", before, err, want)
	}
	if _, err := ReplaceCursors(dir, [][]byte{good, good}, 50, false); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a child twice: got %v, want ErrInvalid", err)
	}
	got, err := ReplaceCursors(dir, [][]byte{good, past}, 50, true)
	if want := []Cursor{{"a", 2, 30}, {"b", 3, 50}}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("install: got %+v, %v, want %+v", got, err, want)
	}
	after, err := ListCursors(dir, 1)
	if want := map[string]Cursor{"a": {"a", 2, 30}, "b": {"b", 3, 50}}; err != nil || !maps.Equal(after, want) {
		t.Fatalf("cursors after the install: got %v, %v, want %v", after, err, want)
	}
}

// flipBit damages the file at path in place: the low bit of byte at.
func flipBit(t testing.TB, path string, at int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

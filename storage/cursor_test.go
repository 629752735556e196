package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func cursorMustWrite(t *testing.T, dir, child string, offset int64, sync bool) {
	t.Helper()
	if err := WriteCursor(dir, child, offset, sync); err != nil {
		t.Fatalf("WriteCursor(%s, %d): %v", child, offset, err)
	}
}

func cursorMustRead(t *testing.T, dir, child string) int64 {
	t.Helper()
	got, err := ReadCursor(dir, child, DefaultConsumerConfig().CursorReadAttempts)
	if err != nil {
		t.Fatalf("ReadCursor(%s): %v", child, err)
	}
	return got
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
	old, next := encodeCursor(child, 100), encodeCursor(child, 1<<33+5)
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
			cursorMustWrite(t, dir, child, 1<<33+5, false)
		}
		return b, err
	}
	got, err := cursorRead(finishWriter, dir, child, 3)
	if err != nil || got != 1<<33+5 || reads != 2 {
		t.Fatalf("writer finishing between reads: got %d, %v after %d reads, want %d, nil after 2 reads", got, err, reads, int64(1<<33+5))
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
	got, err = cursorRead(counting, dir, child, 4)
	if !errors.Is(err, ErrCorrupt) || got != 0 || reads != 4 {
		t.Fatalf("file that stays torn: got %d, %v after %d reads, want 0, ErrCorrupt after 4 reads", got, err, reads)
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
		case err == nil && got != 100 && got != 1<<33+5:
			t.Fatalf("tear at %d: got %d, want 100 or %d", k, got, int64(1<<33+5))
		case err == nil && !bytes.Equal(b, old) && !bytes.Equal(b, next):
			t.Fatalf("tear at %d: got %d from bytes that are neither record", k, got)
		}
	}

	// Garbage of every length up to the largest record never verifies.
	for n := range cursorMaxRecord + 2 {
		if err := os.WriteFile(path, bytes.Repeat([]byte{0x5a}, n), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadCursor(dir, child, 1); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d garbage bytes: got %d, %v, want ErrCorrupt", n, got, err)
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
		t.Fatalf("got %d, %v, want ErrCorrupt", got, err)
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
		if err := WriteCursor(dir, child, 1, false); !errors.Is(err, ErrInvalid) {
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
	if err := WriteCursor(dir, "ok", -1, false); !errors.Is(err, ErrInvalid) {
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
	if want := map[string]int64{long: 42, edge: 43}; !maps.Equal(got, want) {
		t.Fatalf("ListCursors: got %v, want %v", got, want)
	}
	if n := len(cursorFileName(long)); n > cursorMaxFileName {
		t.Fatalf("file name of a 255-byte child: got %d bytes, want at most %d", n, cursorMaxFileName)
	}

	// A hashed file is found by its record alone, so a damaged one must fail
	// the listing, not vanish from it.
	path := filepath.Join(dir, cursorFileName(long))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[20] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
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
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestListCursorsFailsOnACursorThatDoesNotVerify(t *testing.T) {
	dir := t.TempDir()
	cursorMustWrite(t, dir, "good", 1, false)
	cursorMustWrite(t, dir, "bad", 2, false)
	path := filepath.Join(dir, cursorFileName("bad"))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[9] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
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
	if want := map[string]int64{"kept": 10}; !maps.Equal(got, want) {
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
	for _, tc := range []struct {
		child  string
		offset int64
	}{{"a", 0}, {"orders", 12345}, {strings.Repeat("z", 255), 1<<63 - 1}} {
		b := encodeCursor(tc.child, tc.offset)
		child, offset, err := decodeCursor(b)
		if err != nil || child != tc.child || offset != tc.offset {
			t.Errorf("decode(encode(%q, %d)) = %q, %d, %v; want %q, %d, nil", tc.child, tc.offset, child, offset, err, tc.child, tc.offset)
		}
	}
	b := encodeCursor("neg", 0)
	for i := 8; i < 16; i++ {
		b[i] = 0xff // offset -1, with a correct CRC below
	}
	b = b[:len(b)-4]
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, consumerCRC))
	if _, _, err := decodeCursor(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("negative offset with a valid CRC: got %v, want ErrCorrupt", err)
	}
}

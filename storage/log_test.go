package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func smallLogConfig() LogConfig {
	cfg := DefaultLogConfig()
	cfg.SegmentMaxBytes = 4 << 10
	cfg.IndexIntervalBytes = 256
	cfg.ReadBufferBytes = 4 << 10
	return cfg
}

func openTestLog(t testing.TB, dir string, cfg LogConfig) *Log {
	t.Helper()
	l, err := OpenLog(dir, cfg)
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// entriesFrom makes n entries whose bodies name their future offsets.
func entriesFrom(first int64, n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		off := first + int64(i)
		es[i] = Entry{Key: []byte(fmt.Sprintf("k%d", off%7)), Body: []byte(fmt.Sprintf("record-%06d-%s", off, bytes.Repeat([]byte{'x'}, int(off%50))))}
	}
	return es
}

func appendN(t testing.TB, l *Log, batches, perBatch int) {
	t.Helper()
	for i := 0; i < batches; i++ {
		first := l.HWM()
		got, err := l.Append(t0, entriesFrom(first, perBatch))
		if err != nil {
			t.Fatalf("append batch %d: %v", i, err)
		}
		if got != first {
			t.Fatalf("append: got first offset %d, want %d", got, first)
		}
	}
}

// repeatUntil runs step in a goroutine of wg again and again until stop is
// closed or step returns false, which it does after reporting a failure.
// The tests that race readers or writers against the code under test
// share this loop so that each says only what one round does.
func repeatUntil(wg *sync.WaitGroup, stop <-chan struct{}, step func() bool) {
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if !step() {
				return
			}
		}
	})
}

// filledLog is a new log in a temp dir, opened with smallLogConfig, with
// batches batches of perBatch records appended; and the dir.
func filledLog(t testing.TB, batches, perBatch int) (string, *Log) {
	t.Helper()
	dir := t.TempDir()
	l := openTestLog(t, dir, smallLogConfig())
	appendN(t, l, batches, perBatch)
	return dir, l
}

func readAll(t testing.TB, l *Log, from int64) []Record {
	t.Helper()
	var out []Record
	for {
		recs, err := l.Read(from, 1000, 1<<20)
		if err != nil {
			t.Fatalf("read from %d: %v", from, err)
		}
		if len(recs) == 0 {
			return out
		}
		out = append(out, recs...)
		from = recs[len(recs)-1].Offset + 1
	}
}

// checkRecords asserts recs are exactly the records entriesFrom made for
// offsets [from, to).
func checkRecords(t testing.TB, recs []Record, from, to int64) {
	t.Helper()
	if int64(len(recs)) != to-from {
		t.Fatalf("got %d records, want %d (offsets %d..%d)", len(recs), to-from, from, to)
	}
	for i, r := range recs {
		want := entriesFrom(from+int64(i), 1)[0]
		if r.Offset != from+int64(i) || r.Corrupt || !bytes.Equal(r.Body, want.Body) || !bytes.Equal(r.Key, want.Key) {
			t.Fatalf("record %d: got offset %d corrupt %v body %q, want offset %d body %q", i, r.Offset, r.Corrupt, r.Body, from+int64(i), want.Body)
		}
	}
}

func TestAppendedRecordsReadBackWithOffsetKeyBodyAndCommitTime(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallLogConfig())
	appendN(t, l, 10, 7)
	recs := readAll(t, l, 0)
	checkRecords(t, recs, 0, 70)
	if recs[0].Time != t0.UnixNano() {
		t.Fatalf("commit time: got %d, want %d", recs[0].Time, t0.UnixNano())
	}
}

func TestHWMIsTheExclusiveBoundOfReads(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallLogConfig())
	appendN(t, l, 1, 5)
	if got := l.HWM(); got != 5 {
		t.Fatalf("hwm: got %d, want 5", got)
	}
	if recs, err := l.Read(5, 10, 1<<20); err != nil || len(recs) != 0 {
		t.Fatalf("read at hwm: got %d records (%v), want none", len(recs), err)
	}
	recs, err := l.Read(4, 10, 1<<20)
	if err != nil || len(recs) != 1 || recs[0].Offset != 4 {
		t.Fatalf("read below hwm: got %v (%v), want offset 4 only", recs, err)
	}
}

func TestAWriteStaysInvisibleUntilItIsSyncedAndReadBack(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallLogConfig())
	b1, err := l.Write(t0, entriesFrom(0, 3))
	if err != nil {
		t.Fatal(err)
	}
	if got := l.HWM(); got != 0 {
		t.Fatalf("after write: hwm %d, want 0", got)
	}
	if _, err := l.Write(t0, entriesFrom(3, 1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a second write with one pending: got %v, want ErrInvalid", err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := l.HWM(); got != 0 {
		t.Fatalf("after sync, before publish: hwm %d, want 0", got)
	}
	if recs := readAll(t, l, 0); len(recs) != 0 {
		t.Fatalf("read before the publish: got %d records, want none", len(recs))
	}
	if err := l.Publish(b1); err != nil {
		t.Fatal(err)
	}
	if got := l.HWM(); got != 3 {
		t.Fatalf("after publish: hwm %d, want 3", got)
	}
	// The next write starts after b1's commit frame: one write and one
	// fsync a batch.
	b2, err := l.Write(t0, entriesFrom(3, 2))
	if err != nil {
		t.Fatal(err)
	}
	if b2.First() != 3 {
		t.Fatalf("second batch first offset: got %d, want 3", b2.First())
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := l.Publish(b2); err != nil {
		t.Fatal(err)
	}
	if got := l.HWM(); got != 5 {
		t.Fatalf("after the second batch's publish: hwm %d, want 5", got)
	}
	checkRecords(t, readAll(t, l, 0), 0, 5)
}

func TestFailedSyncTruncatesTheBatchAndGivesItsOffsetsToLaterRecords(t *testing.T) {
	dir, l := filledLog(t, 1, 4)
	before := fileSize(t, filepath.Join(dir, segmentName(0)))
	boom := errors.New("injected fsync failure")
	l.hooks = &logHooks{sync: func() error { return boom }}
	if _, err := l.Append(t0, []Entry{{Body: []byte("lost")}}); !errors.Is(err, boom) {
		t.Fatalf("append with failing fsync: got %v, want %v", err, boom)
	}
	if got := fileSize(t, filepath.Join(dir, segmentName(0))); got != before {
		t.Fatalf("segment after failed commit: got %d bytes, want %d (truncated)", got, before)
	}
	l.hooks = nil
	first, err := l.Append(t0, entriesFrom(4, 2))
	if err != nil || first != 4 {
		t.Fatalf("append after failure: got first %d (%v), want 4", first, err)
	}
	checkRecords(t, readAll(t, l, 0), 0, 6)
	l.Close()
	checkRecords(t, readAll(t, openTestLog(t, dir, smallLogConfig()), 0), 0, 6)
}

func TestReadBackMismatchFailsTheCommit(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallLogConfig())
	appendN(t, l, 1, 2)
	l.hooks = &logHooks{readBack: func(b []byte) { b[len(b)/2] ^= 0x40 }}
	if _, err := l.Append(t0, entriesFrom(2, 3)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("append with bad read-back: got %v, want ErrCorrupt", err)
	}
	if got := l.HWM(); got != 2 {
		t.Fatalf("hwm after failed read-back: got %d, want 2", got)
	}
	l.hooks = nil
	appendN(t, l, 1, 3)
	checkRecords(t, readAll(t, l, 0), 0, 5)
}

func TestFailedWriteFailsOnlyTheBatchNotYetVisible(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, smallLogConfig())
	b1, _ := l.Write(t0, entriesFrom(0, 2))
	l.Sync()
	if err := l.Publish(b1); err != nil {
		t.Fatal(err)
	}
	visible := fileSize(t, filepath.Join(dir, segmentName(0)))
	boom := errors.New("injected write failure")
	l.hooks = &logHooks{write: func() error { return boom }}
	if _, err := l.Write(t0, entriesFrom(2, 2)); !errors.Is(err, boom) {
		t.Fatalf("write: got %v, want %v", err, boom)
	}
	l.hooks = nil
	if got := l.HWM(); got != 2 {
		t.Fatalf("hwm: got %d, want 2 (b1 visible, the failed batch not)", got)
	}
	if got := fileSize(t, filepath.Join(dir, segmentName(0))); got != visible {
		t.Fatalf("segment: got %d bytes, want %d (nothing past b1)", got, visible)
	}
	appendN(t, l, 1, 3)
	checkRecords(t, readAll(t, l, 0), 0, 5)
}

func TestFailedTruncationRefusesAppendsUntilReopen(t *testing.T) {
	dir, l := filledLog(t, 1, 2)
	l.hooks = &logHooks{
		sync:     func() error { return errors.New("injected fsync failure") },
		truncate: func() error { return errors.New("injected truncate failure") },
	}
	if _, err := l.Append(t0, entriesFrom(2, 1)); !errors.Is(err, ErrBroken) {
		t.Fatalf("append: got %v, want ErrBroken", err)
	}
	l.hooks = nil
	if _, err := l.Append(t0, entriesFrom(2, 1)); !errors.Is(err, ErrBroken) {
		t.Fatalf("append on broken log: got %v, want ErrBroken", err)
	}
	l.Close()
	// The failed batch is still whole in the file (the injected fsync
	// failure synced nothing, the truncation cut nothing): the reopen
	// believes its commit frame, as after a crash that kept every byte of
	// it. Its sender was told it failed and sends the record again: a
	// duplicate, never a loss.
	l = openTestLog(t, dir, smallLogConfig())
	if got := l.HWM(); got != 3 {
		t.Fatalf("reopened hwm: got %d, want 3", got)
	}
	appendN(t, l, 1, 1)
	checkRecords(t, readAll(t, l, 0), 0, 4)
}

func TestReopenReportsTheHWMThatWasVisible(t *testing.T) {
	dir, l := filledLog(t, 20, 9)
	l.Close()
	l = openTestLog(t, dir, smallLogConfig())
	if got := l.HWM(); got != 180 {
		t.Fatalf("hwm: got %d, want 180", got)
	}
	checkRecords(t, readAll(t, l, 0), 0, 180)
	appendN(t, l, 1, 1)
	checkRecords(t, readAll(t, l, 170), 170, 181)
}

// writeTorn writes entries as l's next batch and closes l, leaving the
// segment as a crash that kept every record frame of the write but not its
// commit frame would.
func writeTorn(t testing.TB, l *Log, entries []Entry) {
	t.Helper()
	path := filepath.Join(l.Dir(), segmentName(l.segs[len(l.segs)-1].base))
	if _, err := l.Write(t0, entries); err != nil {
		t.Fatal(err)
	}
	torn := fileSize(t, path) - frameHeaderBytes
	l.Close()
	if err := os.Truncate(path, torn); err != nil {
		t.Fatal(err)
	}
}

// rule V1: a hidden tail past the HWM is never exposed.
func TestReopenCutsFramesWhoseCommitFrameNeverBecameDurable(t *testing.T) {
	dir, l := filledLog(t, 1, 3)
	boundary := fileSize(t, filepath.Join(dir, segmentName(0)))
	writeTorn(t, l, entriesFrom(3, 4)) // a crash: b's frames are durable, its commit frame is not
	l = openTestLog(t, dir, smallLogConfig())
	if got := l.HWM(); got != 3 {
		t.Fatalf("hwm: got %d, want 3: frames without a commit frame were never visible", got)
	}
	if got := fileSize(t, filepath.Join(dir, segmentName(0))); got != boundary {
		t.Fatalf("segment: got %d bytes, want %d (hidden tail cut)", got, boundary)
	}
	first, err := l.Append(t0, entriesFrom(3, 1))
	if err != nil || first != 3 {
		t.Fatalf("append: got first %d (%v), want 3", first, err)
	}
}

func TestTornTailOfTheActiveSegmentIsCutAtRecovery(t *testing.T) {
	dir, l := filledLog(t, 2, 3)
	l.Close()
	path := filepath.Join(dir, segmentName(0))
	size := fileSize(t, path)
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	torn := appendFrame(nil, frame{kind: frameRecord, offset: 6, body: []byte("torn away")})
	f.Write(torn[:len(torn)-3])
	f.Close()
	l = openTestLog(t, dir, smallLogConfig())
	if got := l.HWM(); got != 6 {
		t.Fatalf("hwm: got %d, want 6", got)
	}
	if got := fileSize(t, path); got != size {
		t.Fatalf("segment: got %d bytes, want %d", got, size)
	}
}

func TestCommitFrameNamingTheWrongOffsetIsNotBelieved(t *testing.T) {
	dir, l := filledLog(t, 1, 2)
	l.Close()
	// Records 2 and 3 followed by a commit naming 5: a stale commit frame
	// behind a shorter batch, which must not expose anything.
	var tail []byte
	tail = appendFrame(tail, frame{kind: frameRecord, offset: 2, body: []byte("a")})
	tail = appendFrame(tail, frame{kind: frameRecord, offset: 3, body: []byte("b")})
	tail = appendFrame(tail, frame{kind: frameCommit, offset: 5})
	f, _ := os.OpenFile(filepath.Join(dir, segmentName(0)), os.O_WRONLY|os.O_APPEND, 0)
	f.Write(tail)
	f.Close()
	if got := openTestLog(t, dir, smallLogConfig()).HWM(); got != 2 {
		t.Fatalf("hwm: got %d, want 2", got)
	}
}

func TestSegmentsRollAtSegmentMaxBytesAndSealedOnesEndInACommitFrame(t *testing.T) {
	cfg := smallLogConfig()
	dir, l := filledLog(t, 60, 5)
	ls, err := l.List(t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls.Segments) < 3 {
		t.Fatalf("segments: got %d, want several at %d bytes each", len(ls.Segments), cfg.SegmentMaxBytes)
	}
	for i, s := range ls.Segments[:len(ls.Segments)-1] {
		if s.Size > cfg.SegmentMaxBytes {
			t.Fatalf("segment %s: %d bytes, over %d", s.Name, s.Size, cfg.SegmentMaxBytes)
		}
		sc, err := scanPath(osFS{}, filepath.Join(dir, s.Name), s.Size, s.Base, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if next := ls.Segments[i+1].Base; sc.hwm != next || sc.committed != s.Size {
			t.Fatalf("sealed %s: recovers to %d at byte %d, want %d at %d", s.Name, sc.hwm, sc.committed, next, s.Size)
		}
	}
	checkRecords(t, readAll(t, l, 0), 0, 300)
}

func TestRetentionRemovesWholeSealedSegmentsOlderThanTheAge(t *testing.T) {
	dir, l := filledLog(t, 60, 5)
	ls, _ := l.List(t0)
	old := time.Now().Add(-2 * time.Hour)
	for _, s := range ls.Segments[:2] {
		os.Chtimes(filepath.Join(dir, s.Name), old, old)
	}
	n, err := l.Retain(time.Now(), time.Hour, 0)
	if err != nil || n != 2 {
		t.Fatalf("retain: removed %d (%v), want 2", n, err)
	}
	if got, want := l.Oldest(), ls.Segments[2].Base; got != want {
		t.Fatalf("oldest: got %d, want %d", got, want)
	}
	if _, err := l.Read(0, 1, 1<<20); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("read below oldest: got %v, want ErrOutOfRange", err)
	}
	checkRecords(t, readAll(t, l, l.Oldest()), l.Oldest(), 300)
}

func TestRetentionBySizeRemovesOldestSegmentsButNeverTheActiveOne(t *testing.T) {
	_, l := filledLog(t, 60, 5)
	n, err := l.Retain(time.Now(), 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	ls, _ := l.List(t0)
	if len(ls.Segments) != 1 || n == 0 {
		t.Fatalf("after retaining 1 byte: %d segments left (removed %d), want only the active one", len(ls.Segments), n)
	}
	checkRecords(t, readAll(t, l, l.Oldest()), l.Oldest(), 300)
}

// rule V5: the source tolerates a damaged frame in a sealed segment; the copy takes
// the segment byte for byte and the destination tolerates it the same way.
func TestDamagedFrameInASealedSegmentIsReportedCorruptAndSkipped(t *testing.T) {
	for _, where := range []string{"body", "length"} {
		t.Run(where, func(t *testing.T) {
			dir := t.TempDir()
			cfg := smallLogConfig()
			l := openTestLog(t, dir, cfg)
			appendN(t, l, 60, 5)
			l.Close()
			// Damage record 3 of the first segment.
			path := filepath.Join(dir, segmentName(0))
			data, _ := os.ReadFile(path)
			pos := 0
			for i := 0; i < 3; i++ {
				n, _ := frameLen(data[pos:])
				pos += n
				if f, _ := decodeFrame(data[pos-n : pos]); f.kind == frameCommit {
					i--
				}
			}
			if where == "body" {
				data[pos+frameHeaderBytes+4] ^= 0xff
			} else {
				data[pos+1] ^= 0x7f
			}
			os.WriteFile(path, data, 0o644)

			l = openTestLog(t, dir, cfg)
			recs := readAll(t, l, 0)
			if len(recs) != 300 {
				t.Fatalf("got %d records, want 300 (one reported corrupt)", len(recs))
			}
			for i, r := range recs {
				if r.Offset != int64(i) {
					t.Fatalf("record %d has offset %d", i, r.Offset)
				}
				if r.Corrupt != (i == 3) {
					t.Fatalf("record %d: corrupt %v, want %v", i, r.Corrupt, i == 3)
				}
			}
			checkRecords(t, recs[4:], 4, 300)
		})
	}
}

func TestOversizedOrEmptyRecordsAreRefused(t *testing.T) {
	cfg := smallLogConfig()
	l := openTestLog(t, t.TempDir(), cfg)
	cases := []struct {
		name string
		e    Entry
		want error
	}{
		{"empty body", Entry{}, ErrInvalid},
		{"body over 1 MiB", Entry{Body: make([]byte, cfg.MaxBodyBytes+1)}, ErrTooLarge},
		{"key over limit", Entry{Key: make([]byte, cfg.MaxKeyBytes+1), Body: []byte("x")}, ErrTooLarge},
	}
	for _, c := range cases {
		if _, err := l.Append(t0, []Entry{c.e}); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := l.Append(t0, []Entry{{Body: make([]byte, cfg.MaxBodyBytes)}}); err != nil {
		t.Fatalf("a 1 MiB body: got %v, want it accepted", err)
	}
	if got := l.HWM(); got != 1 {
		t.Fatalf("hwm: got %d, want 1", got)
	}
}

func TestLogConfigValidate(t *testing.T) {
	ok := DefaultLogConfig()
	if err := ok.Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	bad := map[string]func(*LogConfig){
		"SegmentMaxBytes":     func(c *LogConfig) { c.SegmentMaxBytes = 100 },
		"MaxBodyBytes":        func(c *LogConfig) { c.MaxBodyBytes = 2 << 20 },
		"MaxKeyBytes":         func(c *LogConfig) { c.MaxKeyBytes = -1 },
		"MaxBatchRecords":     func(c *LogConfig) { c.MaxBatchRecords = 0 },
		"MaxBatchBytes":       func(c *LogConfig) { c.MaxBatchBytes = 1000 },
		"IndexIntervalBytes":  func(c *LogConfig) { c.IndexIntervalBytes = 1 },
		"ReadBufferBytes":     func(c *LogConfig) { c.ReadBufferBytes = 10 },
		"MaxOpenSegmentFiles": func(c *LogConfig) { c.MaxOpenSegmentFiles = 0 },
		"RecentOriginsMax":    func(c *LogConfig) { c.RecentOriginsMax = -1 },
	}
	for field, mutate := range bad {
		c := ok
		mutate(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) || !bytes.Contains([]byte(err.Error()), []byte(field)) {
			t.Errorf("%s out of range: got %v, want ErrInvalid naming the field", field, err)
		}
	}
}

func TestReadsAndListingsRunConcurrentlyWithAppends(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallLogConfig())
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 2; r++ {
		repeatUntil(&wg, stop, func() bool {
			hwm := l.HWM()
			recs, err := l.Read(0, 1000, 1<<20)
			if err != nil {
				t.Errorf("concurrent read: %v", err)
				return false
			}
			for i, r := range recs {
				if r.Offset != int64(i) || r.Corrupt {
					t.Errorf("concurrent read: record %d has offset %d corrupt %v", i, r.Offset, r.Corrupt)
					return false
				}
			}
			if len(recs) < 1000 && int64(len(recs)) < hwm {
				t.Errorf("concurrent read: got %d records below hwm %d", len(recs), hwm)
				return false
			}
			if _, err := l.List(t0); err != nil {
				t.Errorf("concurrent list: %v", err)
				return false
			}
			return true
		})
	}
	appendN(t, l, 200, 3)
	close(stop)
	wg.Wait()
}

// statFile is os.Stat for a file the test expects to be there.
func statFile(t testing.TB, path string) os.FileInfo {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	return statFile(t, path).Size()
}

func modTime(t testing.TB, path string) time.Time {
	t.Helper()
	return statFile(t, path).ModTime()
}

func TestOnlyCanonicalSegmentNamesAreSegments(t *testing.T) {
	for _, name := range []string{"+0000000000000000001.log", "-0000000000000000000.log", "1.log", "00000000000000000001.log.tmp"} {
		if _, ok := parseSegmentName(name); ok {
			t.Errorf("%q: parsed as a segment, want refused", name)
		}
	}
	if base, ok := parseSegmentName(segmentName(42)); !ok || base != 42 {
		t.Fatalf("canonical name: got %d %v, want 42", base, ok)
	}
}

func TestACommitFrameThatCommitsNothingIsNotBelieved(t *testing.T) {
	dir := t.TempDir()
	var data []byte
	for i := 0; i < 200; i++ {
		data = appendFrame(data, frame{kind: frameCommit, offset: 0})
	}
	os.WriteFile(filepath.Join(dir, segmentName(0)), data, 0o644)
	l := openTestLog(t, dir, smallLogConfig())
	if got := l.HWM(); got != 0 {
		t.Fatalf("hwm: got %d, want 0", got)
	}
	appendN(t, l, 3, 2) // must not try to roll onto an existing name
	checkRecords(t, readAll(t, l, 0), 0, 6)
}

package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestRecentOriginsRemembersTheNewestUpToItsBound(t *testing.T) {
	o := func(seq uint64) Origin { return Origin{WAL: 7, Seq: seq} }
	tests := []struct {
		name   string
		max    int
		add    []Origin
		has    []Origin
		hasNot []Origin
	}{
		{name: "below the bound", max: 4, add: []Origin{o(1), o(2)}, has: []Origin{o(1), o(2)}, hasNot: []Origin{o(3), {WAL: 8, Seq: 1}}},
		{name: "wrapped: the oldest go", max: 3, add: []Origin{o(1), o(2), o(3), o(4), o(5)}, has: []Origin{o(3), o(4), o(5)}, hasNot: []Origin{o(1), o(2)}},
		{name: "wrapped twice", max: 2, add: []Origin{o(1), o(2), o(3), o(4), o(5), o(6), o(7)}, has: []Origin{o(6), o(7)}, hasNot: []Origin{o(4), o(5)}},
		{name: "the zero origin is never remembered", max: 4, add: []Origin{{}, o(1)}, has: []Origin{o(1)}, hasNot: []Origin{{}}},
		{name: "a bound of 0 remembers nothing", max: 0, add: []Origin{o(1)}, hasNot: []Origin{o(1)}},
		{name: "another WAL's same seq is another record", max: 4, add: []Origin{o(1)}, hasNot: []Origin{{WAL: 6, Seq: 1}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := recentOrigins{max: tc.max}
			for _, x := range tc.add {
				r.add(x)
			}
			for _, x := range tc.has {
				if !r.has(x) {
					t.Errorf("has(%v): got false, want true", x)
				}
			}
			for _, x := range tc.hasNot {
				if r.has(x) {
					t.Errorf("has(%v): got true, want false", x)
				}
			}
			if len(r.ring) > tc.max {
				t.Errorf("ring holds %d, want at most %d", len(r.ring), tc.max)
			}
		})
	}
}

func BenchmarkRecentOriginsHasAFullRing(b *testing.B) {
	r := recentOrigins{max: DefaultLogConfig().RecentOriginsMax}
	for i := range r.max {
		r.add(Origin{WAL: 1, Seq: uint64(i + 1)})
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Half found, half not: a replayed commit is mostly either.
		r.has(Origin{WAL: 1, Seq: uint64(i%(2*r.max) + 1)})
	}
}

// fromWAL makes n entries whose bodies name their future offsets and
// whose origins are seqs from..from+n-1 of WAL 5.
func fromWAL(first int64, from uint64, n int) []Entry {
	es := entriesFrom(first, n)
	for i := range es {
		es[i].Origin = Origin{WAL: 5, Seq: from + uint64(i)}
	}
	return es
}

func checkCommitted(t *testing.T, l *Log, from, to uint64, want bool) {
	t.Helper()
	for seq := from; seq < to; seq++ {
		if got := l.Committed(Origin{WAL: 5, Seq: seq}); got != want {
			t.Errorf("Committed(seq %d): got %v, want %v", seq, got, want)
		}
	}
}

// A log says a record is committed only once its commit frame is durable
// and the batch visible, and says it again after a restart for what the
// restart kept, never for a batch the restart cut.
func TestALogRemembersAnOriginOnlyOnceItsRecordIsVisibleAndAcrossAReopen(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, smallLogConfig())
	b, err := l.Write(t0, fromWAL(0, 1, 3))
	if err != nil {
		t.Fatal(err)
	}
	checkCommitted(t, l, 1, 4, false) // written
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	checkCommitted(t, l, 1, 4, false) // durable, not yet read back
	if err := l.Publish(b); err != nil {
		t.Fatal(err)
	}
	checkCommitted(t, l, 1, 4, true)

	// A second batch written, then a crash that kept all of it but its
	// commit frame (a torn write).
	writeTorn(t, l, fromWAL(3, 4, 2))

	l = openTestLog(t, dir, smallLogConfig())
	checkCommitted(t, l, 1, 4, true)
	checkCommitted(t, l, 4, 6, false) // cut by the reopen: never visible
	recs := readAll(t, l, 0)
	checkRecords(t, recs, 0, 3)
}

func TestALogRemembersOnlyTheLastRecentOriginsMaxAcrossAReopen(t *testing.T) {
	dir := t.TempDir()
	cfg := smallLogConfig()
	cfg.RecentOriginsMax = 4
	l := openTestLog(t, dir, cfg)
	for i := range 5 {
		if _, err := l.Append(t0, fromWAL(int64(2*i), uint64(2*i+1), 2)); err != nil {
			t.Fatal(err)
		}
	}
	checkCommitted(t, l, 7, 11, true)
	checkCommitted(t, l, 1, 7, false)
	l.Close()
	l = openTestLog(t, dir, cfg)
	checkCommitted(t, l, 7, 11, true)
	checkCommitted(t, l, 1, 7, false)

	cfg.RecentOriginsMax = 0
	l.Close()
	l = openTestLog(t, dir, cfg)
	checkCommitted(t, l, 1, 11, false)
}

// Records with and without an origin share a segment and read back the
// same: the origin is the log's, never the reader's.
func TestRecordsWithAndWithoutAnOriginReadBackAlike(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, smallLogConfig())
	mixed := fromWAL(0, 1, 4)
	mixed[1].Origin, mixed[3].Origin = Origin{}, Origin{}
	if _, err := l.Append(t0, mixed); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, readAll(t, l, 0), 0, 4)
	l.Close()
	l = openTestLog(t, dir, smallLogConfig())
	checkRecords(t, readAll(t, l, 0), 0, 4)
	for i, want := range []bool{true, false, true, false} {
		if got := l.Committed(Origin{WAL: 5, Seq: uint64(i + 1)}); got != want {
			t.Errorf("Committed(seq %d): got %v, want %v", i+1, got, want)
		}
	}
	if size, want := fileSize(t, filepath.Join(dir, segmentName(0))), int64(2*frameOriginBytes); size < want {
		t.Fatalf("segment of %d bytes cannot hold two origins", size)
	}
}

func TestAnOriginFrameRoundTripsAndRefusesWhatItCannotBe(t *testing.T) {
	f := frame{kind: frameRecord, offset: 3, time: 9, origin: Origin{WAL: 11, Seq: 12}, key: []byte("key"), body: []byte("body")}
	b := appendFrame(nil, f)
	if b[8] != frameRecordFrom || len(b) != frameSize(3, 4)+frameOriginBytes {
		t.Fatalf("encoded kind %d, %d bytes: want kind %d, %d bytes", b[8], len(b), frameRecordFrom, frameSize(3, 4)+frameOriginBytes)
	}
	got, err := decodeFrame(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.kind != frameRecord || got.origin != f.origin || !bytes.Equal(got.key, f.key) || !bytes.Equal(got.body, f.body) {
		t.Fatalf("decoded %+v, want %+v", got, f)
	}
	reseal := func(b []byte) []byte {
		b[0], b[1], b[2], b[3] = byte((len(b)-4)>>24), byte((len(b)-4)>>16), byte((len(b)-4)>>8), byte(len(b)-4)
		c := frameCRC(b)
		b[4], b[5], b[6], b[7] = byte(c>>24), byte(c>>16), byte(c>>8), byte(c)
		return b
	}
	for name, bad := range map[string][]byte{
		"origin of WAL 0":     reseal(func() []byte { x := bytes.Clone(b); clear(x[29:37]); return x }()),
		"cut inside origin":   reseal(bytes.Clone(b[:frameHeaderBytes+8])),
		"key past the origin": reseal(func() []byte { x := bytes.Clone(b); x[28] = byte(len(b)); return x }()),
	} {
		if _, err := decodeFrame(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", name, err)
		}
	}
}

// A moved partition remembers what its source committed: the origins
// travel in the copied frames, and the destination's open finds them.
func TestACopiedLogRemembersTheOriginsItsSourceCommitted(t *testing.T) {
	data := t.TempDir()
	src := openTestLog(t, filepath.Join(data, "src"), smallLogConfig())
	if _, err := src.Append(t0, fromWAL(0, 1, 3)); err != nil {
		t.Fatal(err)
	}
	st := openTestStaging(t, StagingPath(data, "orders", 3))
	ls, _ := copyPass(t, src, st, t0)
	if err := st.Verify(ls.HWM); err != nil {
		t.Fatalf("verify: %v", err)
	}
	target := PartitionPath(data, "orders", 3)
	if _, err := st.Install(target, InstallOptions{Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, Now: t0}); err != nil {
		t.Fatalf("install: %v", err)
	}
	dst := openTestLog(t, target, smallLogConfig())
	checkCommitted(t, dst, 1, 4, true)
	checkRecords(t, readAll(t, dst, 0), 0, 3)
}

// rawKinds are the kinds of the frames in dir's segments, read from the
// bytes: a decoded kind-3 frame reads as kind 1.
func rawKinds(t *testing.T, dir string) map[uint8]int {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("segments of %s: %v, %v", dir, segs, err)
	}
	kinds := map[uint8]int{}
	for _, seg := range segs {
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			n, ok := frameLen(b)
			if !ok || n > len(b) {
				t.Fatalf("%s: a frame of %d bytes in %d left", seg, n, len(b))
			}
			kinds[b[8]]++
			b = b[n:]
		}
	}
	return kinds
}

// Until the cluster version lets it (LogConfig.Origins), a log writes its
// records as kind 1, which a node of an older binary reads, and remembers
// none of their origins; once it may, the same records go as kind 3.
func TestALogWritesOriginsOnlyOnceTheClusterVersionLetsIt(t *testing.T) {
	dir := t.TempDir()
	cfg := smallLogConfig()
	var may bool
	cfg.Origins = func() bool { return may }
	l := openTestLog(t, dir, cfg)
	if _, err := l.Append(t0, fromWAL(0, 1, 3)); err != nil {
		t.Fatal(err)
	}
	if got := rawKinds(t, dir); got[frameRecordFrom] != 0 || got[frameRecord] != 3 {
		t.Errorf("frames before the cluster version lets origins in: got %v, want 3 of kind 1 and none of kind 3", got)
	}
	checkCommitted(t, l, 1, 4, false)
	may = true
	if _, err := l.Append(t0, fromWAL(3, 4, 2)); err != nil {
		t.Fatal(err)
	}
	if got := rawKinds(t, dir); got[frameRecordFrom] != 2 || got[frameRecord] != 3 {
		t.Errorf("frames after: got %v, want 3 of kind 1 and 2 of kind 3", got)
	}
	checkCommitted(t, l, 4, 6, true)
	checkRecords(t, readAll(t, l, 0), 0, 5)
}

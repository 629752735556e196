package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// FuzzFrameDecode holds decodeFrame to its two promises: no input makes it
// panic, and a frame it accepts is exactly the bytes appendFrame would write
// for what it decoded, so nothing on disk can mean two things. Random bytes
// almost never pass the checksum, so each input is also tried with its
// length and checksum fields made right: that lets the fuzzer reach the
// field checks behind the checksum, which must accept exactly the frames
// the format allows.
func FuzzFrameDecode(f *testing.F) {
	f.Add(appendFrame(nil, frame{kind: frameRecord, offset: 7, time: 1, key: []byte("k"), body: []byte("body")}))
	f.Add(appendFrame(nil, frame{kind: frameRecord, offset: 7, time: 1, origin: Origin{WAL: 9, Seq: 3}, key: []byte("k"), body: []byte("body")}))
	f.Add(appendFrame(nil, frame{kind: frameCommit, offset: 8, time: 2}))
	f.Fuzz(func(t *testing.T, b []byte) {
		checkFrameDecode(t, b)
		if len(b) < frameHeaderBytes || len(b) > frameMaxBytes {
			return
		}
		sealed := bytes.Clone(b)
		binary.BigEndian.PutUint32(sealed[0:4], uint32(len(sealed)-4))
		binary.BigEndian.PutUint32(sealed[4:8], frameCRC(sealed))
		kind := sealed[8]
		payload := len(sealed) - frameHeaderBytes
		keyLen := uint64(binary.BigEndian.Uint32(sealed[25:29]))
		valid := int64(binary.BigEndian.Uint64(sealed[9:17])) >= 0 &&
			(kind == frameRecord && keyLen <= uint64(payload) ||
				kind == frameCommit && payload == 0 && keyLen == 0 ||
				kind == frameRecordFrom && payload >= frameOriginBytes &&
					keyLen <= uint64(payload-frameOriginBytes) && binary.BigEndian.Uint64(sealed[29:37]) != 0)
		if got := checkFrameDecode(t, sealed); got != valid {
			t.Fatalf("decodeFrame accepts %x: %v, the format says %v", sealed, got, valid)
		}
	})
}

func checkFrameDecode(t *testing.T, b []byte) bool {
	fr, err := decodeFrame(b)
	if err != nil {
		return false
	}
	if n, ok := frameLen(b); !ok || n != len(b) {
		t.Fatalf("decoded a %d-byte frame whose length field says %d (ok %v)", len(b), n, ok)
	}
	if again := appendFrame(nil, fr); !bytes.Equal(again, b) {
		t.Fatalf("re-encoding differs:\n got  %x\n want %x", again, b)
	}
	// A CRC-32 catches every single-bit error; flip one bit chosen by the
	// input so the fuzzer walks all positions over time.
	bit := int(crc32.ChecksumIEEE(b) % uint32(len(b)*8))
	flipped := bytes.Clone(b)
	flipped[bit/8] ^= 1 << (bit % 8)
	if _, err := decodeFrame(flipped); err == nil {
		t.Fatalf("frame still decodes with bit %d flipped: %x", bit, flipped)
	}
	return true
}

// fuzzLogConfig keeps every boundary small so that short inputs cross them:
// frames straddle read windows, the sparse index gets an entry every frame
// or two, and an append after recovery may roll the segment.
func fuzzLogConfig() LogConfig {
	cfg := DefaultLogConfig()
	cfg.SegmentMaxBytes = 4 << 10
	cfg.ReadBufferBytes = 4 << 10
	cfg.IndexIntervalBytes = 64
	return cfg
}

// fuzzPrefixTime is the commit timestamp of batch i of a fuzz prefix.
func fuzzPrefixTime(batch int) int64 { return 1_700_000_000_000_000_000 + int64(batch) }

// fuzzRecord is record i of a fuzz prefix: small, some keys empty, no two
// bodies alike, so a record read back at the wrong offset shows.
func fuzzRecord(i int) Entry {
	var key []byte
	if i%3 != 0 {
		key = []byte(fmt.Sprintf("k%d", i))
	}
	body := make([]byte, 1+(i*7)%40)
	for j := range body {
		body[j] = byte(i + j)
	}
	return Entry{Key: key, Body: body}
}

// fuzzPrefix is the segment Append writes for records 0..n-1 in batches of
// 1, 2, 3, ... records (the last one cut short to end at n), each batch's
// record frames followed by its commit frame. It is built from appendFrame
// directly because a Log would cost fsyncs per fuzz input;
// checkFuzzPrefixMatchesLog proves the two agree.
func fuzzPrefix(n int) ([]byte, []Entry) {
	var seg []byte
	var entries []Entry
	for batch, next := 0, 0; next < n; batch++ {
		ts := fuzzPrefixTime(batch)
		for range batch + 1 {
			if next == n {
				break
			}
			e := fuzzRecord(next)
			entries = append(entries, e)
			seg = appendFrame(seg, frame{kind: frameRecord, offset: int64(next), time: ts, key: e.Key, body: e.Body})
			next++
		}
		seg = appendFrame(seg, frame{kind: frameCommit, offset: int64(next), time: ts})
	}
	return seg, entries
}

func checkFuzzPrefixMatchesLog(tb testing.TB) {
	const n = 10 // batches of 1, 2, 3 and a cut-short 4
	dir := tb.TempDir()
	l, err := OpenLog(dir, fuzzLogConfig())
	if err != nil {
		tb.Fatal(err)
	}
	_, entries := fuzzPrefix(n)
	for batch, next := 0, 0; next < n; batch++ {
		size := min(batch+1, n-next)
		if _, err := l.Append(time.Unix(0, fuzzPrefixTime(batch)), entries[next:next+size]); err != nil {
			tb.Fatal(err)
		}
		next += size
	}
	if err := l.Close(); err != nil {
		tb.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, segmentName(0)))
	if err != nil {
		tb.Fatal(err)
	}
	if want, _ := fuzzPrefix(n); !bytes.Equal(got, want) {
		tb.Fatalf("fuzzPrefix no longer matches what Append writes:\n log    %x\n prefix %x", got, want)
	}
}

// segmentModel is what recovery must find in one segment, worked out from
// the frame format alone: the last commit frame reached by an unbroken walk
// in which every frame names the next offset and every commit frame commits
// at least one record.
type segmentModel struct {
	hwm       int64
	committed int64
	records   []frame // the committed records, in order
}

func modelSegment(seg []byte, base int64) segmentModel {
	m := segmentModel{hwm: base}
	var uncommitted []frame
	expect := base
	for p := 0; len(seg)-p >= 4; {
		n := int(binary.BigEndian.Uint32(seg[p:])) + 4
		if n > len(seg)-p {
			break
		}
		fr, err := decodeFrame(seg[p : p+n])
		if err != nil || fr.offset != expect {
			break
		}
		if fr.kind == frameCommit && fr.offset == m.hwm {
			break // a commit frame must commit at least one record
		}
		p += n
		if fr.kind == frameRecord {
			uncommitted = append(uncommitted, fr)
			expect++
			continue
		}
		m.hwm, m.committed = fr.offset, int64(p)
		m.records = append(m.records, uncommitted...)
		uncommitted = uncommitted[:0]
	}
	return m
}

// FuzzSegmentRecovery writes arbitrary bytes as the active segment of a
// partition and holds recovery to its contract. prefixRecords > 0 puts a
// valid, committed prefix of that many records in front of tail (or, with
// sealPrefix, in a sealed segment of its own, tail then being the active
// segment that starts at offset prefixRecords); prefixRecords == 0 leaves
// the segment to the fuzzer alone. Then:
//   - ListClosed, which must not change the files, lists the HWM and the
//     committed boundary that OpenLog then recovers;
//   - a committed prefix survives any tail, and the HWM passes it only by
//     records the tail itself commits in sequence;
//   - every offset below the HWM reads back as the record written there;
//   - recovery is idempotent, and the recovered log takes the next append at
//     the HWM.
//
// Each input costs a few fsyncs, which on a busy disk caps the fuzzer at a
// handful of inputs a second. Nothing checked here depends on durability,
// so fuzz with TMPDIR on a tmpfs (TMPDIR=/dev/shm go test -fuzz ...).
func FuzzSegmentRecovery(f *testing.F) {
	checkFuzzPrefixMatchesLog(f)
	f.Fuzz(func(t *testing.T, prefixRecords uint8, sealPrefix bool, tail []byte) {
		cfg := fuzzLogConfig()
		n := int64(prefixRecords)
		prefix, prefixEntries := fuzzPrefix(int(n))
		dir := t.TempDir()
		activeBase, active := int64(0), slices.Concat(prefix, tail)
		if sealPrefix && n > 0 {
			if err := os.WriteFile(filepath.Join(dir, segmentName(0)), prefix, 0o644); err != nil {
				t.Fatal(err)
			}
			activeBase, active = n, tail
		}
		activePath := filepath.Join(dir, segmentName(activeBase))
		if err := os.WriteFile(activePath, active, 0o644); err != nil {
			t.Fatal(err)
		}
		model := modelSegment(active, activeBase)
		// The sealed prefix is read by the tolerant walk, not modelled.
		var want []Record
		for _, e := range prefixEntries[:activeBase] {
			want = append(want, Record{Key: e.Key, Body: e.Body})
		}
		for _, fr := range model.records {
			want = append(want, Record{Time: fr.time, Key: fr.key, Body: fr.body})
		}
		for i := range want {
			want[i].Offset = int64(i)
			if int64(i) < n && (!bytes.Equal(want[i].Key, prefixEntries[i].Key) || !bytes.Equal(want[i].Body, prefixEntries[i].Body)) {
				t.Fatalf("the frame walk reads record %d of the prefix as %q/%x", i, want[i].Key, want[i].Body)
			}
		}
		// Whether the first bytes after the prefix could continue it at all.
		extends := false
		if len(tail) >= 4 {
			if fl := int(binary.BigEndian.Uint32(tail)) + 4; fl <= len(tail) {
				fr, err := decodeFrame(tail[:fl])
				extends = err == nil && fr.offset == n
			}
		}

		ls, err := ListClosed(dir, cfg, time.Unix(0, 0))
		if err != nil {
			t.Fatalf("ListClosed: %v", err)
		}
		if after, err := os.ReadFile(activePath); err != nil || !bytes.Equal(after, active) {
			t.Fatalf("ListClosed changed the active segment (%v)", err)
		}
		l, err := OpenLog(dir, cfg)
		if err != nil {
			t.Fatalf("OpenLog: %v", err)
		}
		hwm := l.HWM()
		if hwm != ls.HWM {
			t.Fatalf("OpenLog recovered HWM %d, ListClosed listed %d", hwm, ls.HWM)
		}
		if hwm < n {
			t.Fatalf("HWM %d lost part of a committed prefix of %d records", hwm, n)
		}
		if hwm != model.hwm {
			t.Fatalf("HWM %d, the frames commit %d", hwm, model.hwm)
		}
		if hwm != n && !extends {
			t.Fatalf("HWM %d, but only the %d-record prefix is committed: the tail does not start with its next frame", hwm, n)
		}
		checkRecovered(t, l, activePath, ls, model.committed, want)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		ls2, err := ListClosed(dir, cfg, time.Unix(0, 0))
		if err != nil || ls2.HWM != hwm {
			t.Fatalf("ListClosed after recovery: HWM %d, want %d (%v)", ls2.HWM, hwm, err)
		}
		l, err = OpenLog(dir, cfg)
		if err != nil {
			t.Fatalf("second OpenLog: %v", err)
		}
		if got := l.HWM(); got != hwm {
			t.Fatalf("second recovery: HWM %d, first %d", got, hwm)
		}
		checkRecovered(t, l, activePath, ls2, model.committed, want)

		next := Entry{Key: []byte("after"), Body: []byte("recovery")}
		off, err := l.Append(time.Unix(0, 42), []Entry{next})
		if err != nil {
			t.Fatalf("append after recovery to HWM %d: %v", hwm, err)
		}
		if off != hwm {
			t.Fatalf("append after recovery got offset %d, want the HWM %d", off, hwm)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l, err = OpenLog(dir, cfg)
		if err != nil {
			t.Fatalf("third OpenLog: %v", err)
		}
		defer l.Close()
		if got := l.HWM(); got != hwm+1 {
			t.Fatalf("after one append and recovery: HWM %d, want %d", got, hwm+1)
		}
		recs, err := l.Read(hwm, 10, 1<<20)
		if err != nil || len(recs) != 1 || recs[0].Offset != hwm || recs[0].Corrupt ||
			!bytes.Equal(recs[0].Key, next.Key) || !bytes.Equal(recs[0].Body, next.Body) {
			t.Fatalf("Read(%d) after append: %+v, %v", hwm, recs, err)
		}
	})
}

// checkRecovered compares an opened log with the records it must hold and
// the committed boundary its active segment must have been cut to.
func checkRecovered(t *testing.T, l *Log, activePath string, ls Listing, committed int64, want []Record) {
	t.Helper()
	hwm := l.HWM()
	st, err := os.Stat(activePath)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != committed {
		t.Fatalf("active segment after recovery has %d bytes, want the committed %d", st.Size(), committed)
	}
	if last := ls.Segments[len(ls.Segments)-1]; last.Size != committed {
		t.Fatalf("listing gives the active segment %d bytes, committed boundary is %d", last.Size, committed)
	}
	all, err := l.Read(0, int(hwm)+10, 1<<30)
	if err != nil {
		t.Fatalf("Read(0): %v", err)
	}
	if int64(len(all)) != hwm {
		t.Fatalf("Read(0) returned %d records below HWM %d", len(all), hwm)
	}
	for i, r := range all {
		w := want[i]
		if r.Offset != w.Offset || r.Corrupt || !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Body, w.Body) {
			t.Fatalf("record %d: got offset %d corrupt %v key %q body %x, want key %q body %x",
				i, r.Offset, r.Corrupt, r.Key, r.Body, w.Key, w.Body)
		}
		if w.Time != 0 && r.Time != w.Time {
			t.Fatalf("record %d: time %d, frame says %d", i, r.Time, w.Time)
		}
	}
	// Reading from each offset goes through the sparse index and must land
	// on exactly the record asked for.
	for from := int64(0); from < hwm; from++ {
		recs, err := l.Read(from, 1, 1)
		if err != nil || len(recs) != 1 || recs[0].Offset != from || recs[0].Corrupt {
			t.Fatalf("Read(%d, 1): %+v, %v", from, recs, err)
		}
	}
	if recs, err := l.Read(hwm, 10, 1<<20); err != nil || len(recs) != 0 {
		t.Fatalf("Read at HWM %d returned %d records (%v)", hwm, len(recs), err)
	}
}

// FuzzMarkerDecode: decodeMarker never panics, and a marker it accepts
// survives an encode and decode unchanged, with an encoding that is stable.
// Each input is also tried as the JSON body of a marker with a correct
// header and checksum, or the fuzzer would never get past the checksum to
// the JSON.
func FuzzMarkerDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		checkMarkerDecode(t, b)
		if len(b) <= markerMaxBytes {
			framed := append([]byte(markerMagic), markerVersion)
			framed = binary.BigEndian.AppendUint32(framed, uint32(len(b)))
			framed = append(framed, b...)
			checkMarkerDecode(t, binary.BigEndian.AppendUint32(framed, crc32.Checksum(framed, castagnoli)))
		}
	})
}

func checkMarkerDecode(t *testing.T, b []byte) {
	m, err := decodeMarker(b)
	if err != nil {
		return
	}
	enc, err := encodeMarker(m)
	if err != nil {
		t.Fatalf("a marker that decodes does not encode: %v (%+v)", err, m)
	}
	m2, err := decodeMarker(enc)
	if err != nil {
		t.Fatalf("re-encoded marker does not decode: %v\n%q", err, enc)
	}
	if !markerEqual(m, m2) {
		t.Fatalf("marker changed in a round trip:\n was %+v\n now %+v", m, m2)
	}
	if enc2, err := encodeMarker(m2); err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("encoding not stable (%v):\n %q\n %q", err, enc, enc2)
	}
}

// markerEqual compares times as instants (a zone may decode as a different
// *Location) and treats an empty children list like none, which is how
// omitempty writes it.
func markerEqual(a, b Marker) bool {
	return a.PromotedHWM == b.PromotedHWM && a.ForcePromoted == b.ForcePromoted &&
		a.SourceNode == b.SourceNode && a.DurableAt.Equal(b.DurableAt) &&
		slices.Equal(a.Children, b.Children)
}

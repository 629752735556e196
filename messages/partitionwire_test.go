package messages

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

var wireKey = PartitionKey{Topic: "orders", Incarnation: 42, Partition: 3}

func wireRequests() map[string]PartitionRequest {
	return map[string]PartitionRequest{
		"commit": {Key: wireKey, Commit: &Commit{Key: wireKey, WAL: math.MaxUint64, Records: []CommitRecord{
			{Seq: 1, Key: []byte("k1"), Body: []byte(`{"a":1}`)},
			{Seq: 2, Again: true, Body: []byte("sent again")},
			{Seq: math.MaxUint64, Key: []byte{0, 0xff, '"', '\\'}, Body: []byte{0xc3, 0x28, 0, 1}},
			{Seq: 7, Body: []byte("keyless")},
		}}},
		"commit of no records": {Key: wireKey, Commit: &Commit{Key: wireKey}},
		"reserve":              {Key: wireKey, Reserve: &Reserve{Limits: ConsumeLimits{Visibility: time.Second, MaxInFlight: 5, MaxAckedAhead: 9}}},
		"read at":              {Key: wireKey, ReadAt: &ReadAt{Offset: 12}},
		"lease":                {Key: wireKey, Lease: &Lease{Action: LeaseNack, Offset: 3, Nonce: 99}},
		"stats":                {Key: wireKey, Stats: &GetStats{}},
		"list":                 {Key: wireKey, List: &ListPartition{}},
		"handoff":              {Key: wireKey, Handoff: &Handoff{Op: HandoffFence, Token: "t", HWM: 5}},
	}
}

func wireReplies() map[string]PartitionReply {
	clock := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	return map[string]PartitionReply{
		"commit result": {Commit: &CommitResult{Key: wireKey, Status: StatusFrozen, FirstOffset: -1, Seqs: []uint64{1, 2}, Err: "frozen"}},
		"delivery": {Reply: &Reserved{Status: StatusOK, Delivery: Delivery{Partition: 3, Offset: 17,
			Key: []byte("key-1"), Body: []byte{0xff, 0xfe, 0, '{'}, Time: 123456789, Nonce: 5}}},
		"empty": {Reply: &Reserved{Status: StatusEmpty}},
		"lease": {Lease: &LeaseResult{Status: StatusGone, Err: "gone"}},
		"stats": {Stats: &PartitionStats{Index: 3, Segments: 2, NextOffset: 9, HighWatermark: 9, SizeBytes: 1 << 20}},
		"listing": {Listing: &PartitionListing{Status: StatusOK, HWM: 4, Clock: clock,
			Segments: []SegmentInfo{{Name: "00000000000000000000.log", Size: 100, ModTime: clock}},
			Position: ConsumerPosition{Frontier: 2, AckedAhead: []int64{3}}}},
		"handoff": {Handoff: &HandoffResult{Status: StatusOK, Token: "t", Listing: &PartitionListing{HWM: 1, Clock: clock}}},
	}
}

func TestPartitionWireRoundTrips(t *testing.T) {
	for name, want := range wireRequests() {
		b, err := EncodePartitionRequest(want)
		if err != nil {
			t.Fatalf("%s: encode: %v", name, err)
		}
		got, err := DecodePartitionRequest(b)
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
	for name, want := range wireReplies() {
		b, err := EncodePartitionReply(want)
		if err != nil {
			t.Fatalf("%s: encode: %v", name, err)
		}
		got, err := DecodePartitionReply(b)
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
}

// Encoding leaves the caller's message alone: the header is built from
// copies.
func TestPartitionWireEncodingKeepsTheCallersBytes(t *testing.T) {
	req := wireRequests()["commit"]
	if _, err := EncodePartitionRequest(req); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(req, wireRequests()["commit"]) {
		t.Fatalf("request after encoding: got %+v, want it unchanged", req)
	}
	rep := wireReplies()["delivery"]
	if _, err := EncodePartitionReply(rep); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep, wireReplies()["delivery"]) {
		t.Fatalf("reply after encoding: got %+v, want it unchanged", rep)
	}
}

// A record's bytes travel raw: a commit of the largest record (1 MiB body,
// 64 KiB key) costs its bytes plus at most WireRecordOverheadBytes beyond
// an empty commit, where base64 in JSON would cost a third more.
func TestPartitionWireCarriesRecordBytesRaw(t *testing.T) {
	empty, err := EncodePartitionRequest(PartitionRequest{Key: wireKey, Commit: &Commit{Key: wireKey}})
	if err != nil {
		t.Fatal(err)
	}
	key, body := bytes.Repeat([]byte{0xff}, 64<<10), bytes.Repeat([]byte{0x80}, 1<<20)
	one, err := EncodePartitionRequest(PartitionRequest{Key: wireKey, Commit: &Commit{Key: wireKey,
		Records: []CommitRecord{{Seq: math.MaxUint64, Again: true, Key: key, Body: body}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(one)-len(empty), len(key)+len(body)+WireRecordOverheadBytes; got > want {
		t.Fatalf("one largest record adds %d bytes, want at most %d", got, want)
	}
	if !bytes.Contains(one, body) {
		t.Fatal("encoded commit: the body's bytes are not in it verbatim")
	}
	// Many records: the per-record bound holds for each.
	const n = 1000
	recs := make([]CommitRecord, n)
	for i := range recs {
		recs[i] = CommitRecord{Seq: math.MaxUint64 - uint64(i), Again: true, Key: []byte("k"), Body: []byte("b")}
	}
	many, err := EncodePartitionRequest(PartitionRequest{Key: wireKey, Commit: &Commit{Key: wireKey, Records: recs}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(many)-len(empty), n*(2+WireRecordOverheadBytes); got > want {
		t.Fatalf("%d one-byte records add %d bytes, want at most %d", n, got, want)
	}

	delivery, err := EncodePartitionReply(PartitionReply{Reply: &Reserved{Delivery: Delivery{Key: key, Body: body}}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(delivery), len(key)+len(body)+1024; got > want {
		t.Fatalf("a delivery of the largest record encodes to %d bytes, want at most %d", got, want)
	}
}

// frame builds a message by hand: version, header, blobs.
func frame(version byte, header string, blobs ...[]byte) []byte {
	b := []byte{version}
	b = binary.BigEndian.AppendUint32(b, uint32(len(header)))
	b = append(b, header...)
	for _, x := range blobs {
		b = binary.BigEndian.AppendUint32(b, uint32(len(x)))
		b = append(b, x...)
	}
	return b
}

func TestPartitionWireRefusesMalformedInput(t *testing.T) {
	good, err := EncodePartitionRequest(wireRequests()["commit"])
	if err != nil {
		t.Fatal(err)
	}
	commit := `{"key":{"Topic":"t"},"commit":{"Key":{"Topic":"t"},"Records":[{"Seq":1}]}}`
	lengthPastEnd := frame(1, commit, []byte("k"))
	lengthPastEnd = binary.BigEndian.AppendUint32(lengthPastEnd, math.MaxUint32)
	lengthPastEnd = append(lengthPastEnd, "body"...)
	for name, b := range map[string][]byte{
		"empty":                         nil,
		"wrong version":                 frame(2, commit, []byte("k"), []byte("b")),
		"header length cut short":       {1, 0, 0},
		"header length past the end":    {1, 0xff, 0xff, 0xff, 0xff, '{', '}'},
		"header not JSON":               frame(1, `{"key":`, []byte("k"), []byte("b")),
		"header of the wrong shape":     frame(1, `[1,2]`),
		"a record without its body":     frame(1, commit, []byte("k")),
		"a record without its key":      frame(1, commit),
		"blob length past the end":      lengthPastEnd,
		"bytes past the last field":     append(append([]byte(nil), good...), 0),
		"header carrying a key":         frame(1, `{"commit":{"Records":[{"Seq":1,"Key":"aw=="}]}}`, []byte("k"), []byte("b")),
		"header carrying an empty body": frame(1, `{"commit":{"Records":[{"Seq":1,"Body":""}]}}`, []byte("k"), []byte("b")),
		"the good message cut short":    good[:len(good)-1],
	} {
		if _, err := DecodePartitionRequest(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("request %s: got %v, want ErrMalformed", name, err)
		}
	}
	reserved := `{"reply":{"Status":0,"Delivery":{"Offset":1}}}`
	for name, b := range map[string][]byte{
		"empty":                       nil,
		"a delivery without its body": frame(1, reserved, []byte("k")),
		"header carrying the body":    frame(1, `{"reply":{"Delivery":{"Body":"aw=="}}}`, nil, []byte("b")),
		"bytes past the last field":   frame(1, reserved, []byte("k"), []byte("b"), []byte("extra")),
	} {
		if _, err := DecodePartitionReply(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("reply %s: got %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzPartitionWire feeds arbitrary bytes to both decoders: they must
// never panic, and whatever they accept must encode to a form that decodes
// back to the same encoding (the first decode may normalise, say an empty
// list to none; after that the form is fixed).
func FuzzPartitionWire(f *testing.F) {
	for _, r := range wireRequests() {
		b, err := EncodePartitionRequest(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, r := range wireReplies() {
		b, err := EncodePartitionReply(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1, 0, 0, 0, 2, '{', '}'})
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if req, err := DecodePartitionRequest(b); err == nil {
			once, err := EncodePartitionRequest(req)
			if err != nil {
				t.Fatalf("a decoded request does not encode: %v", err)
			}
			again, err := DecodePartitionRequest(once)
			if err != nil {
				t.Fatalf("a re-encoded request does not decode: %v", err)
			}
			twice, err := EncodePartitionRequest(again)
			if err != nil || !bytes.Equal(once, twice) {
				t.Fatalf("request encodings differ: got %q (%v), want %q", twice, err, once)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("request decode error %v does not wrap ErrMalformed", err)
		}
		if rep, err := DecodePartitionReply(b); err == nil {
			once, err := EncodePartitionReply(rep)
			if err != nil {
				t.Fatalf("a decoded reply does not encode: %v", err)
			}
			again, err := DecodePartitionReply(once)
			if err != nil {
				t.Fatalf("a re-encoded reply does not decode: %v", err)
			}
			twice, err := EncodePartitionReply(again)
			if err != nil || !bytes.Equal(once, twice) {
				t.Fatalf("reply encodings differ: got %q (%v), want %q", twice, err, once)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("reply decode error %v does not wrap ErrMalformed", err)
		}
	})
}

// A commit group carries each commit's records raw, item by item, and
// decodes to the commits it was made of; the caller's records keep their
// bytes.
func TestCommitGroupRoundTrips(t *testing.T) {
	reqs := wireRequests()
	other := wireKey
	other.Partition = 4
	want := []PartitionRequest{reqs["commit"], reqs["commit of no records"],
		{Key: other, Commit: &Commit{Key: other, Records: []CommitRecord{{Seq: 9, Key: []byte("k"), Body: []byte("b")}}}}}
	b, err := EncodeCommitGroup(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommitGroup(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if k := want[0].Commit.Records[0].Key; string(k) != "k1" {
		t.Fatalf("the caller's first key after encoding: got %q, want k1", k)
	}
}

// A commit group holds commits and nothing else, and a header that carries
// record bytes itself, or blobs missing or left over, do not decode.
func TestCommitGroupRefusesWhatIsNoCommitGroup(t *testing.T) {
	reqs := wireRequests()
	if _, err := EncodeCommitGroup([]PartitionRequest{reqs["commit"], reqs["list"]}); err == nil {
		t.Fatal("encode a listing in a commit group: got nil, want an error")
	}
	mixed := reqs["commit"]
	mixed.Stats = &GetStats{}
	if _, err := EncodeCommitGroup([]PartitionRequest{mixed}); err == nil {
		t.Fatal("encode a commit that also asks stats: got nil, want an error")
	}
	good, err := EncodeCommitGroup([]PartitionRequest{reqs["commit"]})
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"truncated":       good[:len(good)-1],
		"trailing byte":   append(append([]byte(nil), good...), 0),
		"listing in it":   mustWire(t, CommitGroup{Items: []PartitionRequest{reqs["list"]}}, nil),
		"bytes in header": mustWire(t, CommitGroup{Items: []PartitionRequest{reqs["commit"]}}, nil),
	} {
		if _, err := DecodeCommitGroup(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
}

func mustWire(t *testing.T, header any, blobs [][]byte) []byte {
	t.Helper()
	b, err := encodeWire(header, blobs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func commitGroupItems() []PartitionRequest {
	k2 := PartitionKey{Topic: "t", Incarnation: 1, Partition: 0}
	return []PartitionRequest{
		{Key: wireKey, Commit: wireRequests()["commit"].Commit},
		{Key: k2, Commit: &Commit{Key: k2, Records: []CommitRecord{{Seq: 9, Body: []byte("x")}}}},
		{Key: wireKey, Commit: &Commit{Key: wireKey}},
	}
}

func TestCommitWireRoundTrips(t *testing.T) {
	want := commitGroupItems()
	b, err := EncodeCommits(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeCommits(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("commits: got %+v, want %+v", got, want)
	}
	rep := MoveGroupReply{Items: []MoveGroupItem{
		{Reply: PartitionReply{Commit: &CommitResult{Key: wireKey, Status: StatusOK, FirstOffset: 7, Seqs: []uint64{1, 2, math.MaxUint64}}}},
		{Status: 504, Err: "no answer in time"},
		{Reply: PartitionReply{Commit: &CommitResult{Key: wireKey, Status: StatusFrozen, FirstOffset: -1, Err: "frozen"}}},
	}}
	b, err = EncodeCommitReplies(rep)
	if err != nil {
		t.Fatal(err)
	}
	gotRep, err := DecodeCommitReplies(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotRep, rep) {
		t.Fatalf("answers: got %+v, want %+v", gotRep, rep)
	}
	if _, err := EncodeCommits([]PartitionRequest{{Key: wireKey, Reserve: &Reserve{}}}); err == nil {
		t.Fatal("a group holding a reserve: got it encoded, want refused")
	}
}

// Every prefix of an encoded group and answer is refused, as is a byte
// past the end and another version.
func TestCommitWireRefusesCutAndPaddedForms(t *testing.T) {
	b, _ := EncodeCommits(commitGroupItems())
	r, _ := EncodeCommitReplies(MoveGroupReply{Items: []MoveGroupItem{{Reply: PartitionReply{Commit: &CommitResult{Key: wireKey, Seqs: []uint64{3}}}}}})
	for name, c := range map[string]struct {
		enc    []byte
		decode func([]byte) error
	}{
		"commits": {b, func(b []byte) error { _, err := DecodeCommits(b); return err }},
		"answers": {r, func(b []byte) error { _, err := DecodeCommitReplies(b); return err }},
	} {
		for n := range len(c.enc) {
			if err := c.decode(c.enc[:n]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s cut to %d of %d bytes: got %v, want ErrMalformed", name, n, len(c.enc), err)
			}
		}
		if err := c.decode(append(bytes.Clone(c.enc), 0)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s with a byte past the end: got %v, want ErrMalformed", name, err)
		}
		other := bytes.Clone(c.enc)
		other[0] = PartitionWireVersion
		if err := c.decode(other); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s of version %d: got %v, want ErrMalformed", name, other[0], err)
		}
	}
	// A count no buffer of this size could hold allocates nothing.
	huge := binary.BigEndian.AppendUint32([]byte{CommitWireVersion}, math.MaxUint32)
	if _, err := DecodeCommits(huge); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a count of 4 Gi commits in 5 bytes: got %v, want ErrMalformed", err)
	}
}

// FuzzCommitWire feeds arbitrary bytes to both decoders: they must
// refuse or decode, never panic, and what decodes encodes back to the
// same bytes.
func FuzzCommitWire(f *testing.F) {
	b, _ := EncodeCommits(commitGroupItems())
	f.Add(b)
	r, _ := EncodeCommitReplies(MoveGroupReply{Items: []MoveGroupItem{{Status: 503, Err: "x"}, {Reply: PartitionReply{Commit: &CommitResult{Key: wireKey, Seqs: []uint64{3}}}}}})
	f.Add(r)
	f.Fuzz(func(t *testing.T, b []byte) {
		if items, err := DecodeCommits(b); err == nil {
			again, err := EncodeCommits(items)
			if err != nil {
				t.Fatalf("decoded commits do not encode: %v", err)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("commits re-encode to %x, decoded from %x", again, b)
			}
		}
		if rep, err := DecodeCommitReplies(b); err == nil {
			again, err := EncodeCommitReplies(rep)
			if err != nil {
				t.Fatalf("decoded answers do not encode: %v", err)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("answers re-encode to %x, decoded from %x", again, b)
			}
		}
	})
}

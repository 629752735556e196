package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// walOldFrame builds, field by field, the frame a node wrote before WAL
// records carried their topic's incarnation: the body ends the frame. It
// does not use the encoder, so a change to the encoder cannot change what
// an old node's WAL looks like.
func walOldFrame(seq uint64, topic string, partition int32, key, body []byte) []byte {
	var p []byte
	p = binary.LittleEndian.AppendUint64(p, seq)
	p = binary.LittleEndian.AppendUint16(p, uint16(len(topic)))
	p = append(p, topic...)
	p = binary.LittleEndian.AppendUint32(p, uint32(partition))
	p = binary.LittleEndian.AppendUint32(p, uint32(len(key)))
	p = append(p, key...)
	p = binary.LittleEndian.AppendUint32(p, uint32(len(body)))
	p = append(p, body...)
	length := binary.LittleEndian.AppendUint32(nil, uint32(len(p)))
	crc := crc32.Update(crc32.Update(0, walCRC, length), walCRC, p)
	frame := binary.LittleEndian.AppendUint32(length, crc)
	return append(frame, p...)
}

// A record's incarnation is durable: appended, closed, reopened and
// replayed, it comes back with the incarnation it was written with.
func TestWALRecordIncarnationRoundTripsThroughAReopen(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, walSmallConfig())
	want := []WALRecord{
		{Topic: "orders", Incarnation: 7, Partition: 2, Key: []byte("k"), Body: []byte("first")},
		{Topic: "orders", Incarnation: 1<<64 - 1, Partition: -1, Body: []byte("second")},
		{Topic: "orders", Partition: 0, Body: []byte("unknown incarnation")},
	}
	for i, rec := range want {
		want[i] = walWithSeq(rec, walAppendOK(t, w, rec))
	}
	walCloseTest(t, w)

	w = walOpenTest(t, dir, walSmallConfig())
	got, _ := walReplayAll(t, w)
	walSameRecords(t, "replay after reopen", got, want)
}

// A WAL written before records carried an incarnation still replays after
// an upgrade: its frames come back whole, with incarnation 0 (the topic's
// current one, to the dispatcher), beside new frames that carry theirs.
func TestWALReplaysFramesWrittenWithoutAnIncarnationAsIncarnationZero(t *testing.T) {
	dir := t.TempDir()
	var seg []byte
	seg = append(seg, walOldFrame(1, "orders", 3, []byte("key-1"), []byte("old body"))...)
	seg = append(seg, walOldFrame(2, "audit", -1, nil, []byte("no key"))...)
	if err := os.WriteFile(filepath.Join(dir, walSegmentName(1)), seg, 0o644); err != nil {
		t.Fatal(err)
	}
	w := walOpenTest(t, dir, walSmallConfig())
	newer := WALRecord{Topic: "orders", Incarnation: 42, Partition: 3, Body: []byte("new body")}
	if seq := walAppendOK(t, w, newer); seq != 3 {
		t.Fatalf("append after the old frames: got seq %d, want 3", seq)
	}
	got, stats := walReplayAll(t, w)
	if stats.Corrupt != 0 || stats.Lost != 0 || stats.TornBytes != 0 {
		t.Fatalf("replay of old frames: got %+v, want nothing damaged, lost or torn", stats)
	}
	walSameRecords(t, "replay of old and new frames", got, []WALRecord{
		{Seq: 1, Topic: "orders", Partition: 3, Key: []byte("key-1"), Body: []byte("old body")},
		{Seq: 2, Topic: "audit", Partition: -1, Body: []byte("no key")},
		walWithSeq(newer, 3),
	})
}

// The incarnation trailer is there only when it is not 0, so each record
// has one frame: a trailer holding 0 was not written by this WAL.
func TestWALFrameWithAZeroIncarnationTrailerIsCorrupt(t *testing.T) {
	rec := WALRecord{Seq: 1, Topic: "t", Incarnation: 5, Partition: 0, Body: []byte("b")}
	frame := walEncodeFrame(nil, rec)
	if len(frame) != len(walOldFrame(1, "t", 0, nil, []byte("b")))+walIncarnationBytes {
		t.Fatalf("frame with an incarnation: got %d bytes, want the old frame's plus %d", len(frame), walIncarnationBytes)
	}
	zeroed := walOldFrame(1, "t", 0, nil, []byte("b"))
	// Append a zero trailer and fix length and crc, so only the trailer
	// is wrong.
	zeroed = append(zeroed, make([]byte, walIncarnationBytes)...)
	binary.LittleEndian.PutUint32(zeroed, uint32(len(zeroed)-walHeaderBytes))
	binary.LittleEndian.PutUint32(zeroed[4:], crc32.Update(crc32.Update(0, walCRC, zeroed[:4]), walCRC, zeroed[8:]))
	if _, _, err := walDecodeFrame(zeroed); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("frame with a zero incarnation trailer: got %v, want ErrCorrupt", err)
	}
	if got, _, err := walDecodeFrame(frame); err != nil || got.Incarnation != 5 {
		t.Fatalf("frame with incarnation 5: got (%+v, %v), want incarnation 5", got, err)
	}
}

package messages

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The binary form of a commit group and of its answer (the "commits"
// service), which carries a dispatcher's commits to a peer owner. Issue
// 45's profile put a tenth of a record's CPU through three nodes into the
// JSON of the older form (CommitGroup and a JSON MoveGroupReply); a commit
// has a fixed shape, so here every field has a fixed place:
//
//	group    version u8 (CommitWireVersion), items u32, then each item:
//	         topic u16+bytes, incarnation u64, partition u32, wal u64,
//	         records u32, then each record: seq u64, flags u8 (1: Again),
//	         key u32+bytes, body u32+bytes
//	answer   version u8, items u32, then each item: transport status u16;
//	         0: the commit's result follows (topic u16+bytes, incarnation
//	         u64, partition u32, status u8, first offset i64, seqs u32 then
//	         u64 each, err u32+bytes); otherwise err u32+bytes, the reason
//	         the item alone would have failed with (503, 504)
//
// Integers are big-endian. A decoder believes no count or length past the
// end of its buffer and refuses trailing bytes; decoded keys and bodies
// alias the buffer. A field added later needs a new version and service.

// CommitWireVersion is the first byte of a binary commit group or answer.
const CommitWireVersion = 2

// EncodeCommits encodes items, each a commit and nothing else.
func EncodeCommits(items []PartitionRequest) ([]byte, error) {
	size := 1 + 4
	for i, it := range items {
		if it.Commit == nil || !it.onlyCommit() {
			return nil, fmt.Errorf("commit group item %d is not a commit alone", i)
		}
		c := it.Commit
		if len(c.Key.Topic) > math.MaxUint16 || c.Key.Partition < 0 || c.Key.Partition > math.MaxUint32 {
			return nil, fmt.Errorf("commit group item %d: partition %q/%d cannot be encoded", i, c.Key.Topic, c.Key.Partition)
		}
		size += 2 + len(c.Key.Topic) + 8 + 4 + 8 + 4
		for _, r := range c.Records {
			if uint64(len(r.Key)) > math.MaxUint32 || uint64(len(r.Body)) > math.MaxUint32 {
				return nil, fmt.Errorf("commit group item %d: a record exceeds the 4 GiB a length can name", i)
			}
			size += 8 + 1 + 4 + len(r.Key) + 4 + len(r.Body)
		}
	}
	out := make([]byte, 0, size)
	out = append(out, CommitWireVersion)
	out = binary.BigEndian.AppendUint32(out, uint32(len(items)))
	for _, it := range items {
		c := it.Commit
		out = appendString16(out, c.Key.Topic)
		out = binary.BigEndian.AppendUint64(out, c.Key.Incarnation)
		out = binary.BigEndian.AppendUint32(out, uint32(c.Key.Partition))
		out = binary.BigEndian.AppendUint64(out, c.WAL)
		out = binary.BigEndian.AppendUint32(out, uint32(len(c.Records)))
		for _, r := range c.Records {
			out = binary.BigEndian.AppendUint64(out, r.Seq)
			var flags byte
			if r.Again {
				flags = 1
			}
			out = append(out, flags)
			out = appendBytes32(out, r.Key)
			out = appendBytes32(out, r.Body)
		}
	}
	return out, nil
}

// DecodeCommits decodes a binary commit group; an error wraps
// ErrMalformed. Each item's Key is its commit's.
func DecodeCommits(b []byte) ([]PartitionRequest, error) {
	d := binReader{rest: b}
	n, err := d.header()
	if err != nil {
		return nil, err
	}
	// An item takes at least 26 bytes: a count past what the buffer can
	// hold is refused before anything is allocated for it.
	if uint64(n)*26 > uint64(len(d.rest)) {
		return nil, fmt.Errorf("%w: %d commits in %d bytes", ErrMalformed, n, len(d.rest))
	}
	items := make([]PartitionRequest, n)
	for i := range items {
		c := &Commit{}
		c.Key.Topic = d.string16()
		c.Key.Incarnation = d.u64()
		c.Key.Partition = int(d.u32())
		c.WAL = d.u64()
		recs := d.u32()
		if d.err == nil && uint64(recs)*17 > uint64(len(d.rest)) {
			return nil, fmt.Errorf("%w: %d records in %d bytes", ErrMalformed, recs, len(d.rest))
		}
		if recs > 0 {
			c.Records = make([]CommitRecord, recs)
		}
		for j := range c.Records {
			r := &c.Records[j]
			r.Seq = d.u64()
			switch flags := d.u8(); {
			case flags&^1 != 0 && d.err == nil:
				return nil, fmt.Errorf("%w: record flags %#x", ErrMalformed, flags)
			case flags == 1:
				r.Again = true
			}
			r.Key = d.bytes32()
			r.Body = d.bytes32()
		}
		if d.err != nil {
			return nil, d.err
		}
		items[i] = PartitionRequest{Key: c.Key, Commit: c}
	}
	return items, d.end()
}

// EncodeCommitReplies encodes the answer to a binary commit group: each
// item a commit's result, or the status its request alone would have
// failed with.
func EncodeCommitReplies(rep MoveGroupReply) ([]byte, error) {
	size := 1 + 4
	for i, it := range rep.Items {
		switch {
		case it.Status != 0:
			size += 2 + 4 + len(it.Err)
		case it.Reply.Commit == nil:
			return nil, fmt.Errorf("commit answer item %d carries no commit result", i)
		case it.Reply.Commit.Status < 0 || it.Reply.Commit.Status > math.MaxUint8 || len(it.Reply.Commit.Key.Topic) > math.MaxUint16:
			return nil, fmt.Errorf("commit answer item %d: result %+v cannot be encoded", i, it.Reply.Commit)
		default:
			c := it.Reply.Commit
			size += 2 + 2 + len(c.Key.Topic) + 8 + 4 + 1 + 8 + 4 + 8*len(c.Seqs) + 4 + len(c.Err)
		}
		if it.Status < 0 || it.Status > math.MaxUint16 {
			return nil, fmt.Errorf("commit answer item %d: status %d", i, it.Status)
		}
	}
	out := make([]byte, 0, size)
	out = append(out, CommitWireVersion)
	out = binary.BigEndian.AppendUint32(out, uint32(len(rep.Items)))
	for _, it := range rep.Items {
		out = binary.BigEndian.AppendUint16(out, uint16(it.Status))
		if it.Status != 0 {
			out = appendBytes32(out, []byte(it.Err))
			continue
		}
		c := it.Reply.Commit
		out = appendString16(out, c.Key.Topic)
		out = binary.BigEndian.AppendUint64(out, c.Key.Incarnation)
		out = binary.BigEndian.AppendUint32(out, uint32(c.Key.Partition))
		out = append(out, byte(c.Status))
		out = binary.BigEndian.AppendUint64(out, uint64(c.FirstOffset))
		out = binary.BigEndian.AppendUint32(out, uint32(len(c.Seqs)))
		for _, s := range c.Seqs {
			out = binary.BigEndian.AppendUint64(out, s)
		}
		out = appendBytes32(out, []byte(c.Err))
	}
	return out, nil
}

// DecodeCommitReplies decodes the answer to a binary commit group; an
// error wraps ErrMalformed.
func DecodeCommitReplies(b []byte) (MoveGroupReply, error) {
	d := binReader{rest: b}
	n, err := d.header()
	if err != nil {
		return MoveGroupReply{}, err
	}
	if uint64(n)*6 > uint64(len(d.rest)) {
		return MoveGroupReply{}, fmt.Errorf("%w: %d answers in %d bytes", ErrMalformed, n, len(d.rest))
	}
	out := MoveGroupReply{Items: make([]MoveGroupItem, n)}
	for i := range out.Items {
		it := &out.Items[i]
		it.Status = int(d.u16())
		if it.Status != 0 {
			it.Err = string(d.bytes32())
			continue
		}
		c := &CommitResult{}
		c.Key.Topic = d.string16()
		c.Key.Incarnation = d.u64()
		c.Key.Partition = int(d.u32())
		c.Status = Status(d.u8())
		c.FirstOffset = int64(d.u64())
		seqs := d.u32()
		if d.err == nil && uint64(seqs)*8 > uint64(len(d.rest)) {
			return MoveGroupReply{}, fmt.Errorf("%w: %d seqs in %d bytes", ErrMalformed, seqs, len(d.rest))
		}
		if seqs > 0 {
			c.Seqs = make([]uint64, seqs)
		}
		for j := range c.Seqs {
			c.Seqs[j] = d.u64()
		}
		c.Err = string(d.bytes32())
		it.Reply.Commit = c
	}
	if d.err != nil {
		return MoveGroupReply{}, d.err
	}
	return out, d.end()
}

func appendString16(out []byte, s string) []byte {
	out = binary.BigEndian.AppendUint16(out, uint16(len(s)))
	return append(out, s...)
}

func appendBytes32(out, b []byte) []byte {
	out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
	return append(out, b...)
}

// binReader reads fixed fields; the first short read sets err, and every
// read after it returns zero.
type binReader struct {
	rest []byte
	err  error
}

func (d *binReader) take(n uint64, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.rest)) {
		d.err = fmt.Errorf("%w: %s of %d bytes, only %d left", ErrMalformed, what, n, len(d.rest))
		return nil
	}
	// The full slice expression: an append to one field must never write
	// over the next.
	v := d.rest[:n:n]
	d.rest = d.rest[n:]
	return v
}

func (d *binReader) header() (uint32, error) {
	v := d.take(1, "version")
	if d.err != nil {
		return 0, d.err
	}
	if v[0] != CommitWireVersion {
		return 0, fmt.Errorf("%w: version %d, want %d", ErrMalformed, v[0], CommitWireVersion)
	}
	n := d.u32()
	return n, d.err
}

func (d *binReader) u8() uint8 {
	if v := d.take(1, "byte"); v != nil {
		return v[0]
	}
	return 0
}

func (d *binReader) u16() uint16 {
	if v := d.take(2, "u16"); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (d *binReader) u32() uint32 {
	if v := d.take(4, "u32"); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *binReader) u64() uint64 {
	if v := d.take(8, "u64"); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

func (d *binReader) string16() string {
	return string(d.take(uint64(d.u16()), "string"))
}

// bytes32 reads a length-prefixed field; empty is nil.
func (d *binReader) bytes32() []byte {
	v := d.take(uint64(d.u32()), "bytes")
	if len(v) == 0 {
		return nil
	}
	return v
}

func (d *binReader) end() error {
	if d.err != nil {
		return d.err
	}
	if len(d.rest) > 0 {
		return fmt.Errorf("%w: %d bytes past the last field", ErrMalformed, len(d.rest))
	}
	return nil
}

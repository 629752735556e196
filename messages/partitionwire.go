package messages

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// The wire form of PartitionRequest and PartitionReply between nodes (the
// "partition" service of the NATS transport). Record keys and bodies travel
// as raw bytes: inside JSON a []byte is base64, a third larger, so a 1 MiB
// body did not fit NATS's default 1 MiB max payload and its commit could
// never be sent. Everything else stays JSON, so fields can be added without
// a new version:
//
//	version  u8    PartitionWireVersion
//	header   u32 length, then that many bytes: the message as JSON with
//	         every byte field left out (nil)
//	blobs    for each byte field left out, in a fixed order: u32 length,
//	         then that many raw bytes
//
// Integers are big-endian. The blob order, fixed by the header's content:
//
//	request: each Commit record's Key, then its Body, in record order
//	reply:   Reply.Delivery.Key, then Reply.Delivery.Body
//
// A move's chunks do not travel here: they have a raw service of their own.
//
// A decoder believes no length past the end of its buffer, refuses a
// header that carries a byte field itself, and refuses trailing bytes. An
// empty blob decodes as nil. Decoded byte fields alias the buffer decoded,
// so the caller must not reuse that buffer while they live.

// PartitionWireVersion is the first byte of every encoded partition message.
// It stayed 1 through every change so far because each was additive (new
// JSON fields in the header, which an older decoder ignores): the rolling
// upgrade test (bench/chaos, -upgrade-from) runs old and new nodes side by
// side on it. A change an older decoder would misread needs a new version,
// which a decoder of this binary refuses, and so must be written only once
// the cluster version says every member reads it (ClusterVersionBase and
// the versions after it), with this one written until then.
const PartitionWireVersion = 1

// WireRecordOverheadBytes is the most one CommitRecord adds to an encoded
// PartitionRequest beyond its key and body: its seq in the header
// (`{"Seq":` and up to 20 digits, `,"Again":true`, `}`, a comma) and its
// two blob lengths. A sender that counts this much per record can bound a
// commit's size before encoding it.
const WireRecordOverheadBytes = 53

// ErrMalformed is an encoded partition message that does not decode.
var ErrMalformed = errors.New("malformed partition message")

// EncodePartitionRequest encodes req in the wire form. It fails only when
// the header does not encode as JSON or a key or body exceeds 4 GiB.
func EncodePartitionRequest(req PartitionRequest) ([]byte, error) {
	var blobs [][]byte
	if req.Commit != nil {
		c := *req.Commit
		if c.Records != nil {
			// The header's copy: the caller's records keep their bytes.
			c.Records = make([]CommitRecord, len(req.Commit.Records))
			blobs = make([][]byte, 0, 2*len(c.Records))
		}
		for i, r := range req.Commit.Records {
			blobs = append(blobs, r.Key, r.Body)
			r.Key, r.Body = nil, nil
			c.Records[i] = r
		}
		req.Commit = &c
	}
	return encodeWire(req, blobs)
}

// DecodePartitionRequest decodes the wire form of a PartitionRequest; an
// error wraps ErrMalformed.
func DecodePartitionRequest(b []byte) (PartitionRequest, error) {
	var req PartitionRequest
	r, err := openWire(b, &req)
	if err != nil {
		return PartitionRequest{}, err
	}
	if req.Commit != nil {
		for i := range req.Commit.Records {
			rec := &req.Commit.Records[i]
			if rec.Key != nil || rec.Body != nil {
				return PartitionRequest{}, fmt.Errorf("%w: header carries the bytes of record %d", ErrMalformed, i)
			}
			if rec.Key, err = r.blob("key"); err != nil {
				return PartitionRequest{}, err
			}
			if rec.Body, err = r.blob("body"); err != nil {
				return PartitionRequest{}, err
			}
		}
	}
	if err := r.end(); err != nil {
		return PartitionRequest{}, err
	}
	return req, nil
}

// EncodePartitionReply encodes rep in the wire form. It fails only when
// the header does not encode as JSON or a byte field exceeds 4 GiB.
func EncodePartitionReply(rep PartitionReply) ([]byte, error) {
	var blobs [][]byte
	if rep.Reply != nil {
		r := *rep.Reply
		blobs = append(blobs, r.Delivery.Key, r.Delivery.Body)
		r.Delivery.Key, r.Delivery.Body = nil, nil
		rep.Reply = &r
	}
	return encodeWire(rep, blobs)
}

// DecodePartitionReply decodes the wire form of a PartitionReply; an error
// wraps ErrMalformed.
func DecodePartitionReply(b []byte) (PartitionReply, error) {
	var rep PartitionReply
	r, err := openWire(b, &rep)
	if err != nil {
		return PartitionReply{}, err
	}
	if rep.Reply != nil {
		d := &rep.Reply.Delivery
		if d.Key != nil || d.Body != nil {
			return PartitionReply{}, fmt.Errorf("%w: header carries the delivery's bytes", ErrMalformed)
		}
		if d.Key, err = r.blob("delivery key"); err != nil {
			return PartitionReply{}, err
		}
		if d.Body, err = r.blob("delivery body"); err != nil {
			return PartitionReply{}, err
		}
	}
	if err := r.end(); err != nil {
		return PartitionReply{}, err
	}
	return rep, nil
}

// encodeWire writes the version, header and blobs into one buffer sized
// up front: a commit may carry megabytes, copied once.
func encodeWire(header any, blobs [][]byte) ([]byte, error) {
	h, err := json.Marshal(header)
	if err != nil {
		return nil, fmt.Errorf("encode partition message header: %w", err)
	}
	tooLong := func(n int) error {
		return fmt.Errorf("encode partition message: a field of %d bytes exceeds the 4 GiB a length can name", n)
	}
	if uint64(len(h)) > math.MaxUint32 {
		return nil, tooLong(len(h))
	}
	size := 1 + 4 + len(h)
	for _, b := range blobs {
		if uint64(len(b)) > math.MaxUint32 {
			return nil, tooLong(len(b))
		}
		size += 4 + len(b)
	}
	out := make([]byte, 0, size)
	out = append(out, PartitionWireVersion)
	out = binary.BigEndian.AppendUint32(out, uint32(len(h)))
	out = append(out, h...)
	for _, b := range blobs {
		out = binary.BigEndian.AppendUint32(out, uint32(len(b)))
		out = append(out, b...)
	}
	return out, nil
}

// wireReader reads the length-prefixed fields of one encoded message.
type wireReader struct {
	rest []byte
}

// openWire checks the version and decodes the header into v.
func openWire(b []byte, v any) (*wireReader, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if b[0] != PartitionWireVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrMalformed, b[0], PartitionWireVersion)
	}
	r := &wireReader{rest: b[1:]}
	h, err := r.blob("header")
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(h, v); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	return r, nil
}

// blob reads one length-prefixed field; what names it in errors.
func (r *wireReader) blob(what string) ([]byte, error) {
	if len(r.rest) < 4 {
		return nil, fmt.Errorf("%w: %s: length cut short (%d bytes left)", ErrMalformed, what, len(r.rest))
	}
	n := uint64(binary.BigEndian.Uint32(r.rest))
	left := uint64(len(r.rest) - 4)
	if n > left {
		return nil, fmt.Errorf("%w: %s of %d bytes, only %d left", ErrMalformed, what, n, left)
	}
	// The full slice expression: an append to one field must never write
	// over the next.
	v := r.rest[4 : 4+n : 4+n]
	r.rest = r.rest[4+n:]
	if n == 0 {
		return nil, nil
	}
	return v, nil
}

// end refuses bytes past the last field the header accounts for.
func (r *wireReader) end() error {
	if len(r.rest) > 0 {
		return fmt.Errorf("%w: %d bytes past the last field", ErrMalformed, len(r.rest))
	}
	return nil
}

// CommitGroup is a dispatcher's commits to one peer owner in one request
// (the commit group service): the wire form above, its header the items
// with their record bytes left out, its blobs each item's record keys and
// bodies, item by item. The answer is a MoveGroupReply, one item per
// commit in order.
type CommitGroup struct {
	Items []PartitionRequest `json:"items"`
}

// EncodeCommitGroup encodes items, each a commit and nothing else, in the
// wire form of a CommitGroup.
func EncodeCommitGroup(items []PartitionRequest) ([]byte, error) {
	g := CommitGroup{Items: make([]PartitionRequest, len(items))}
	var blobs [][]byte
	for i, it := range items {
		if it.Commit == nil || !it.onlyCommit() {
			return nil, fmt.Errorf("commit group item %d is not a commit alone", i)
		}
		c := *it.Commit
		if c.Records != nil {
			// The header's copy: the caller's records keep their bytes.
			c.Records = make([]CommitRecord, len(it.Commit.Records))
		}
		for j, r := range it.Commit.Records {
			blobs = append(blobs, r.Key, r.Body)
			r.Key, r.Body = nil, nil
			c.Records[j] = r
		}
		it.Commit = &c
		g.Items[i] = it
	}
	return encodeWire(g, blobs)
}

// DecodeCommitGroup decodes the wire form of a CommitGroup; an error wraps
// ErrMalformed. Every item is a commit and nothing else.
func DecodeCommitGroup(b []byte) ([]PartitionRequest, error) {
	var g CommitGroup
	r, err := openWire(b, &g)
	if err != nil {
		return nil, err
	}
	for i := range g.Items {
		it := &g.Items[i]
		if it.Commit == nil || !it.onlyCommit() {
			return nil, fmt.Errorf("%w: commit group item %d is not a commit alone", ErrMalformed, i)
		}
		for j := range it.Commit.Records {
			rec := &it.Commit.Records[j]
			if rec.Key != nil || rec.Body != nil {
				return nil, fmt.Errorf("%w: header carries the bytes of item %d's record %d", ErrMalformed, i, j)
			}
			if rec.Key, err = r.blob("key"); err != nil {
				return nil, err
			}
			if rec.Body, err = r.blob("body"); err != nil {
				return nil, err
			}
		}
	}
	if err := r.end(); err != nil {
		return nil, err
	}
	return g.Items, nil
}

// onlyCommit: no request but the commit is set.
func (req PartitionRequest) onlyCommit() bool {
	return req.Reserve == nil && req.ReserveAny == nil && req.ReadAt == nil && req.Lease == nil &&
		req.Stats == nil && req.List == nil && req.Handoff == nil
}

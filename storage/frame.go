package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A frame is one entry of a partition log segment:
//
//	[0:4)   length   uint32  bytes after this field (crc + header rest + key + body)
//	[4:8)   crc      uint32  CRC-32C of [0:4) followed by [8:end)
//	[8]     kind     uint8   frameRecord or frameCommit
//	[9:17)  offset   uint64  record: its offset; commit: the HWM the batch makes visible
//	[17:25) time     int64   commit timestamp, Unix nanoseconds
//	[25:29) keyLen   uint32
//	[29:)   key, then body
//
// A record frame of kind frameRecordFrom carries its Origin between the
// header and the key:
//
//	[29:37) wal      uint64  Origin.WAL, never 0
//	[37:45) seq      uint64  Origin.Seq
//	[45:)   key, then body
//
// The CRC covers the length so a damaged length cannot pair with a valid
// checksum over the wrong bytes. Commit frames carry no key or body and use no
// offset of their own: they are how visibility becomes durable (see
// ARCHITECTURE.md §10). A record without an origin (a fan-out
// copy, a test) is written as frameRecord, so logs written before origins
// existed read as they are.
const (
	frameHeaderBytes = 29
	frameOriginBytes = 16
	frameRecord      = 1
	frameCommit      = 2
	frameRecordFrom  = 3

	// frameMaxBytes bounds what a decoder will believe a length field. It is
	// above any frame a valid config can write (1 MiB body + 64 KiB key), and
	// keeps a damaged length from asking for gigabytes.
	frameMaxBytes = 2 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frame is a decoded frame. Key and Body alias the decoded buffer. A
// decoded frameRecordFrom reads as kind frameRecord with its origin set, so
// only the encoder and the decoder know the two kinds apart.
type frame struct {
	kind   uint8
	offset int64
	time   int64
	origin Origin
	key    []byte
	body   []byte
}

// frameSize is the encoded size of a record frame with the given key and
// body and no origin.
func frameSize(keyLen, bodyLen int) int { return frameHeaderBytes + keyLen + bodyLen }

// entrySize is the encoded size of e's record frame.
func entrySize(e Entry) int {
	n := frameSize(len(e.Key), len(e.Body))
	if e.Origin.WAL != 0 {
		n += frameOriginBytes
	}
	return n
}

// appendFrame encodes f at the end of dst: a record with an origin as
// frameRecordFrom.
func appendFrame(dst []byte, f frame) []byte {
	n := frameSize(len(f.key), len(f.body))
	head := frameHeaderBytes
	if f.kind == frameRecord && f.origin.WAL != 0 {
		f.kind = frameRecordFrom
		n += frameOriginBytes
		head += frameOriginBytes
	}
	start := len(dst)
	dst = append(dst, make([]byte, head)...)
	b := dst[start:]
	binary.BigEndian.PutUint32(b[0:4], uint32(n-4))
	b[8] = f.kind
	binary.BigEndian.PutUint64(b[9:17], uint64(f.offset))
	binary.BigEndian.PutUint64(b[17:25], uint64(f.time))
	binary.BigEndian.PutUint32(b[25:29], uint32(len(f.key)))
	if f.kind == frameRecordFrom {
		binary.BigEndian.PutUint64(b[29:37], f.origin.WAL)
		binary.BigEndian.PutUint64(b[37:45], f.origin.Seq)
	}
	dst = append(dst, f.key...)
	dst = append(dst, f.body...)
	b = dst[start:]
	binary.BigEndian.PutUint32(b[4:8], frameCRC(b))
	return dst
}

func frameCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[0:4])
	return crc32.Update(c, castagnoli, b[8:])
}

// frameLen reads the total encoded length of the frame starting at b[0:4]. It
// reports false when the length cannot belong to a frame.
func frameLen(b []byte) (int, bool) {
	if len(b) < 4 {
		return 0, false
	}
	n := int(binary.BigEndian.Uint32(b[0:4])) + 4
	if n < frameHeaderBytes || n > frameMaxBytes {
		return 0, false
	}
	return n, true
}

// decodeFrame decodes exactly one frame that fills b. It never panics on
// arbitrary bytes and allocates nothing.
func decodeFrame(b []byte) (frame, error) {
	n, ok := frameLen(b)
	if !ok || n != len(b) {
		return frame{}, fmt.Errorf("frame length: %w", ErrCorrupt)
	}
	if binary.BigEndian.Uint32(b[4:8]) != frameCRC(b) {
		return frame{}, fmt.Errorf("frame checksum: %w", ErrCorrupt)
	}
	f := frame{
		kind:   b[8],
		offset: int64(binary.BigEndian.Uint64(b[9:17])),
		time:   int64(binary.BigEndian.Uint64(b[17:25])),
	}
	if f.offset < 0 {
		return frame{}, fmt.Errorf("frame offset %d: %w", f.offset, ErrCorrupt)
	}
	head := frameHeaderBytes
	switch f.kind {
	case frameRecord:
	case frameRecordFrom:
		head += frameOriginBytes
		if n < head {
			return frame{}, fmt.Errorf("record frame too short for its origin: %w", ErrCorrupt)
		}
		f.kind = frameRecord
		f.origin = Origin{WAL: binary.BigEndian.Uint64(b[29:37]), Seq: binary.BigEndian.Uint64(b[37:45])}
		if f.origin.WAL == 0 {
			return frame{}, fmt.Errorf("record frame origin names no WAL: %w", ErrCorrupt)
		}
	case frameCommit:
		if n != frameHeaderBytes {
			return frame{}, fmt.Errorf("commit frame with payload: %w", ErrCorrupt)
		}
	default:
		return frame{}, fmt.Errorf("frame kind %d: %w", f.kind, ErrCorrupt)
	}
	keyLen := int(binary.BigEndian.Uint32(b[25:29]))
	if keyLen > n-head {
		return frame{}, fmt.Errorf("frame key length %d: %w", keyLen, ErrCorrupt)
	}
	f.key = b[head : head+keyLen]
	f.body = b[head+keyLen:]
	return f, nil
}

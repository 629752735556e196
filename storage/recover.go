package storage

import (
	"errors"
	"fmt"
	"io"
)

// window reads a region [0, limit) of a file through one reusable buffer, so
// that a sequential walk costs one system call per buffer, not per frame.
type window struct {
	r     io.ReaderAt
	limit int64
	buf   []byte
	start int64 // file position of buf[0]
	n     int   // valid bytes in buf
}

// newWindow reads r up to limit through a buffer of size bytes, or of limit
// bytes when the file is smaller: a move's destination opens and verifies
// thousands of segments of a few records, and a full read buffer for each
// was a twentieth of its CPU in allocation and clearing.
func newWindow(r io.ReaderAt, limit int64, size int) *window {
	if limit >= 0 && limit < int64(size) {
		size = int(limit)
	}
	return &window{r: r, limit: limit, buf: make([]byte, size)}
}

// errShort is a frame that runs past the readable limit: a torn tail.
var errShort = errors.New("short read")

// at returns n bytes at file position pos. The slice is valid until the next call.
func (w *window) at(pos int64, n int) ([]byte, error) {
	if n < 0 || pos < 0 || pos+int64(n) > w.limit {
		return nil, errShort
	}
	if pos >= w.start && pos+int64(n) <= w.start+int64(w.n) {
		off := pos - w.start
		return w.buf[off : off+int64(n)], nil
	}
	if n > len(w.buf) {
		w.buf = make([]byte, n)
	}
	want := int64(len(w.buf))
	if rest := w.limit - pos; rest < want {
		want = rest
	}
	got, err := w.r.ReadAt(w.buf[:want], pos)
	if got < n {
		if err == nil || errors.Is(err, io.EOF) {
			return nil, errShort
		}
		return nil, fmt.Errorf("read at %d: %w", pos, err)
	}
	w.start, w.n = pos, got
	return w.buf[:n], nil
}

// frameAt decodes the frame at pos. A frame that does not decode returns an
// error wrapping ErrCorrupt or errShort; I/O errors are returned as they are.
func (w *window) frameAt(pos int64) (frame, int, error) {
	head, err := w.at(pos, 4)
	if err != nil {
		return frame{}, 0, err
	}
	n, ok := frameLen(head)
	if !ok {
		return frame{}, 0, fmt.Errorf("frame length at %d: %w", pos, ErrCorrupt)
	}
	b, err := w.at(pos, n)
	if err != nil {
		return frame{}, 0, err
	}
	f, err := decodeFrame(b)
	return f, n, err
}

func isFrameDamage(err error) bool { return errors.Is(err, ErrCorrupt) || errors.Is(err, errShort) }

// indexEntry maps a record offset to the file position of its frame.
type indexEntry struct {
	offset int64
	pos    int64
}

// segmentScan is what a strict sequential walk of one segment found. The walk
// stops at the first frame that does not decode or breaks the offset
// sequence; everything from there on is a torn or hidden tail.
type segmentScan struct {
	// committed is the byte position right after the last commit frame: the
	// committed boundary, where the first frame at or above the HWM starts.
	committed int64
	// hwm is the offset the last commit frame made visible (base if none).
	hwm int64
	// validEnd is the end of the last frame that decoded in sequence.
	validEnd int64
	// lastTime is the commit timestamp of the last commit frame.
	lastTime int64
	// index is a sparse offset index over the committed part.
	index []indexEntry
	// origins are the origins of the committed records, the last
	// cfg.RecentOriginsMax of them, oldest first.
	origins []Origin
}

// scanSegment walks the frames of a segment whose first offset is base.
// Recovery uses it on the active segment: visibility is durable only through
// commit frames, so the HWM is the last commit frame reached by an unbroken
// walk. A commit frame must name exactly the offset after the records before
// it, so a stale commit left behind a truncated batch can never be believed.
func scanSegment(r io.ReaderAt, size, base int64, cfg LogConfig) (segmentScan, error) {
	w := newWindow(r, size, cfg.ReadBufferBytes)
	s := segmentScan{hwm: base}
	var pending []indexEntry // index entries past the last commit, kept only if committed
	var pendingOrigins []Origin
	lastIndexed := int64(-cfg.IndexIntervalBytes)
	expect := base
	pos := int64(0)
	for pos < size {
		f, n, err := w.frameAt(pos)
		if err != nil {
			if isFrameDamage(err) {
				break
			}
			return s, err
		}
		if f.offset != expect {
			break
		}
		if f.kind == frameCommit && f.offset == s.hwm {
			// A commit frame that commits nothing new: the writer never
			// writes one, so it is not part of a valid log.
			break
		}
		if f.kind == frameRecord {
			if pos-lastIndexed >= int64(cfg.IndexIntervalBytes) {
				pending = append(pending, indexEntry{offset: f.offset, pos: pos})
				lastIndexed = pos
			}
			if f.origin.WAL != 0 && cfg.RecentOriginsMax > 0 {
				pendingOrigins = append(pendingOrigins, f.origin)
			}
			expect++
		} else {
			s.hwm, s.lastTime = f.offset, f.time
			s.committed = pos + int64(n)
			s.index = append(s.index, pending...)
			pending = pending[:0]
			s.origins = append(s.origins, pendingOrigins...)
			pendingOrigins = pendingOrigins[:0]
			if over := len(s.origins) - cfg.RecentOriginsMax; over > 2*cfg.RecentOriginsMax {
				// Trimmed now and then, not at every commit frame, so a
				// long segment costs a bounded copy per frame on average.
				s.origins = append(s.origins[:0], s.origins[over:]...)
			}
		}
		pos += int64(n)
		s.validEnd = pos
	}
	if over := len(s.origins) - cfg.RecentOriginsMax; over > 0 {
		s.origins = s.origins[over:]
	}
	return s, nil
}

// buildIndex walks a sealed segment tolerantly (damaged frames are skipped by
// resynchronising) and returns a sparse index over it.
func buildIndex(r io.ReaderAt, size, base, end int64, cfg LogConfig) ([]indexEntry, error) {
	var idx []indexEntry
	lastIndexed := int64(-cfg.IndexIntervalBytes)
	err := walkRecords(r, size, base, end, 0, base, cfg.ReadBufferBytes, func(pos int64, rec Record) bool {
		if !rec.Corrupt && pos-lastIndexed >= int64(cfg.IndexIntervalBytes) {
			idx = append(idx, indexEntry{offset: rec.Offset, pos: pos})
			lastIndexed = pos
		}
		return true
	})
	return idx, err
}

// walkRecords visits the records of one segment in offset order, starting at
// file position pos where the record expect begins, up to offset end
// (exclusive) or the readable size. A frame that fails its checksum is not
// fatal: the walk searches forward for the next frame that decodes with a
// plausible offset and reports every offset it could not read as a Corrupt
// record. visit returns false to stop. Key and Body alias a reused buffer
// of bufBytes (grown for a larger frame).
func walkRecords(r io.ReaderAt, size, base, end, pos, expect int64, bufBytes int, visit func(pos int64, rec Record) bool) error {
	w := newWindow(r, size, bufBytes)
	for pos < size && expect < end {
		f, n, err := w.frameAt(pos)
		if err != nil && !isFrameDamage(err) {
			return err
		}
		if err == nil && f.offset == expect && f.kind == frameRecord {
			if !visit(pos, Record{Offset: f.offset, Time: f.time, Key: f.key, Body: f.body}) {
				return nil
			}
			expect++
			pos += int64(n)
			continue
		}
		if err == nil && f.kind == frameCommit && f.offset <= expect {
			pos += int64(n)
			continue
		}
		// Damage: find the next frame we can trust and report the gap.
		next, nextOffset, rerr := resync(w, pos, size, expect, end)
		if rerr != nil {
			return rerr
		}
		for ; expect < nextOffset; expect++ {
			if !visit(pos, Record{Offset: expect, Corrupt: true}) {
				return nil
			}
		}
		pos = next
	}
	return nil
}

// resync searches [from, size) for the first frame that decodes and names an
// offset in [expect, end): a record at that offset or a commit naming it. It
// returns that position and offset, or (size, end) when there is none.
func resync(w *window, from, size, expect, end int64) (int64, int64, error) {
	for p := from; p+frameHeaderBytes <= size; p++ {
		f, _, err := w.frameAt(p)
		if err != nil {
			if isFrameDamage(err) {
				continue
			}
			return 0, 0, err
		}
		if f.offset < expect || f.offset > end {
			continue
		}
		if f.kind == frameRecord && f.offset < end {
			return p, f.offset, nil
		}
		if f.kind == frameCommit && f.offset > expect {
			return p, f.offset, nil
		}
	}
	return size, end, nil
}

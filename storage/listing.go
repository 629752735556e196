package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// SegmentInfo describes one segment in a transfer listing.
type SegmentInfo struct {
	// Name is the segment's file name, which encodes its base offset.
	Name string
	// Base is the segment's first offset.
	Base int64
	// Size is the committed bytes only: a sealed segment's file size, the
	// active segment's committed boundary (the first frame at or above the HWM).
	Size int64
	// ModTime is the file's modification time on the source's clock; the
	// destination keeps each segment's age from it (see Staging.StampAges).
	ModTime time.Time
}

// Listing is what a copy needs to know about a partition at one moment.
type Listing struct {
	Segments []SegmentInfo
	// HWM is the exclusive bound of visible records; the committed bytes of
	// the listed segments hold exactly the records below it.
	HWM int64
	// Clock is the source's clock when it listed, so the destination can
	// turn ModTime into an age without trusting that the clocks agree.
	Clock time.Time
}

// Bytes is the total listed size.
func (ls Listing) Bytes() int64 {
	var n int64
	for _, s := range ls.Segments {
		n += s.Size
	}
	return n
}

// List lists the open log for a copy. The HWM and the sizes are read under
// one lock, so the listed bytes hold exactly the records below the HWM: a
// batch being written lies past the listed boundary. (The caller reads the
// consumer frontier and fan-out cursors before calling List, rule C7.)
func (l *Log) List(now time.Time) (Listing, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.readableLocked(); err != nil {
		return Listing{}, fmt.Errorf("list: %w", err)
	}
	ls := Listing{HWM: l.hwm, Clock: now, Segments: make([]SegmentInfo, 0, len(l.segs))}
	for _, s := range l.segs {
		name := segmentName(s.base)
		st, err := l.fs.Stat(filepath.Join(l.dir, name))
		if err != nil {
			return Listing{}, fmt.Errorf("list %s: %w", l.dir, err)
		}
		ls.Segments = append(ls.Segments, SegmentInfo{Name: name, Base: s.base, Size: s.size, ModTime: st.ModTime()})
	}
	return ls, nil
}

// ReadChunk reads committed bytes of a segment at pos into p and returns how
// many it read; 0 at the committed end. It never returns a byte past the
// active segment's committed boundary, so a copy never holds a frame the
// source has not made visible.
func (l *Log) ReadChunk(name string, pos int64, p []byte) (int, error) {
	base, ok := parseSegmentName(name)
	if !ok {
		return 0, fmt.Errorf("segment name %q: %w", name, ErrInvalid)
	}
	l.mu.RLock()
	var limit int64 = -1
	for _, s := range l.segs {
		if s.base == base {
			limit = s.size
		}
	}
	unreadable := l.readableLocked()
	l.mu.RUnlock()
	if unreadable != nil {
		return 0, fmt.Errorf("read chunk: %w", unreadable)
	}
	if limit < 0 {
		return 0, fmt.Errorf("segment %s of %s: %w", name, l.dir, ErrNotFound)
	}
	return readChunk(l.fs, filepath.Join(l.dir, name), pos, p, limit)
}

func readChunk(fsys FS, path string, pos int64, p []byte, limit int64) (int, error) {
	if pos < 0 || pos > limit {
		return 0, fmt.Errorf("chunk at %d of %d committed bytes: %w", pos, limit, ErrOutOfRange)
	}
	if rest := limit - pos; int64(len(p)) > rest {
		p = p[:rest]
	}
	if len(p) == 0 {
		return 0, nil
	}
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("read chunk: %v: %w", err, ErrNotFound)
	}
	defer f.Close()
	n, err := f.ReadAt(p, pos)
	if n < len(p) {
		return n, fmt.Errorf("read chunk %s at %d: short (%d of %d): %v: %w", path, pos, n, len(p), err, ErrCorrupt)
	}
	return n, nil
}

// ListClosed lists a partition whose log is not open, without changing it.
// The active segment's boundary comes from walking its frame headers up to
// the HWM that recovery would report; frames past it are left on disk but
// not listed.
func ListClosed(dir string, cfg LogConfig, now time.Time) (Listing, error) {
	fsys := fsOf(cfg)
	bases, err := listSegmentBases(fsys, dir)
	if err != nil {
		return Listing{}, err
	}
	if len(bases) == 0 {
		return Listing{}, fmt.Errorf("list %s: no segments: %w", dir, ErrNotFound)
	}
	ls := Listing{Clock: now}
	for i, b := range bases {
		name := segmentName(b)
		path := filepath.Join(dir, name)
		st, err := fsys.Stat(path)
		if err != nil {
			return Listing{}, fmt.Errorf("list %s: %w", dir, err)
		}
		info := SegmentInfo{Name: name, Base: b, Size: st.Size(), ModTime: st.ModTime()}
		if i == len(bases)-1 {
			sc, err := scanPath(fsys, path, st.Size(), b, cfg)
			if err != nil {
				return Listing{}, err
			}
			info.Size, ls.HWM = sc.committed, sc.hwm
		}
		ls.Segments = append(ls.Segments, info)
	}
	return ls, nil
}

func scanPath(fsys FS, path string, size, base int64, cfg LogConfig) (segmentScan, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return segmentScan{}, fmt.Errorf("scan %s: %w", path, err)
	}
	defer f.Close()
	sc, err := scanSegment(f, size, base, cfg)
	if err != nil {
		return sc, fmt.Errorf("scan %s: %w", path, err)
	}
	return sc, nil
}

// ReadClosedChunk reads a segment of a closed partition at pos, never past
// the size its ListClosed listing gave. It reads the OS's file system: a
// move copies partitions on a node's disk.
func ReadClosedChunk(dir string, seg SegmentInfo, pos int64, p []byte) (int, error) {
	if _, ok := parseSegmentName(seg.Name); !ok {
		return 0, fmt.Errorf("segment name %q: %w", seg.Name, ErrInvalid)
	}
	return readChunk(osFS{}, filepath.Join(dir, seg.Name), pos, p, seg.Size)
}

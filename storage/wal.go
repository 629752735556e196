package storage

// The ingress write-ahead log. A producer's record is answered only after it
// is fsynced here; a dispatcher later commits it to its owner's partition log
// and tells the WAL, which may then drop it. See WAL for the rules.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/naradmq/narad/actors/clock"
)

// On-disk format of a WAL frame, little-endian:
//
//	0   uint32 length     bytes after the crc field (seq to the end)
//	4   uint32 crc        CRC-32C over bytes 0..3 and 8..8+length
//	8   uint64 seq
//	16  uint16 topic length, then the topic
//	    int32  partition  (-1: pick by key)
//	    uint32 key length, then the key
//	    uint32 body length, then the body
//	    uint64 incarnation, only when it is not 0
//
// The crc covers the length so that a damaged length cannot make a reader
// trust a frame of the wrong size.
//
// The incarnation came later. Frames written before it end at the body and
// read as incarnation 0, which the dispatcher takes as the topic's current
// incarnation, so a WAL left by an older node still replays. A record with
// incarnation 0 is written the old way too, and a trailer holding 0 is
// refused: one record has exactly one frame, which the fuzz target checks.
const (
	walHeaderBytes = 8
	walFixedBytes  = 8 + 2 + 4 + 4 + 4
	// walIncarnationBytes is the optional trailer after the body.
	walIncarnationBytes = 8
	// walMaxFrameBytes is a format limit, not a tunable: readers refuse
	// lengths above it before allocating, whatever the config says, so that a
	// config change can never turn old, valid frames into "corrupt" ones.
	walMaxFrameBytes = 64 << 20
	// walMaxSeq keeps every seq and every count derived from seqs inside
	// int64, and leaves room so nextSeq can never wrap.
	walMaxSeq = math.MaxInt64

	walSegmentSuffix  = ".wal"
	walSegmentNameLen = 20 + len(walSegmentSuffix)
	walPositionName   = "position"
	walPositionMagic  = "NRDWALP1"
	walPositionBytes  = len(walPositionMagic) + 8 + 4
	// walPositionMagic2 is the position that also lists committed ranges
	// above the watermark: magic, through, uint32 count, count × (lo, hi),
	// CRC-32C of everything before it. A v1 file still reads.
	walPositionMagic2 = "NRDWALP2"
	// walMaxPositionRanges is a format limit, as walMaxFrameBytes is: a
	// config change never makes a valid file unreadable.
	walMaxPositionRanges = 1 << 16
	walPositionMaxBytes  = len(walPositionMagic2) + 8 + 4 + 16*walMaxPositionRanges + 4
	// walLiveName is the position saver's file (PositionOnCommit): two
	// slots of v2 positions written in place by turns, one write and one
	// fsync each, so a torn write leaves the other slot whole. Every
	// position written anywhere lists only committed seqs, so OpenWAL
	// takes the union of the position file and both slots.
	walLiveName        = "position.live"
	walMinReadBufBytes = walHeaderBytes + walFixedBytes
)

var walCRC = crc32.MakeTable(crc32.Castagnoli)

// walErrShort is a frame cut off by the end of the bytes: the torn tail of an
// interrupted write, as opposed to bytes that are there and wrong.
var walErrShort = fmt.Errorf("short wal frame: %w", ErrCorrupt)

// WALConfig sizes the ingress WAL. Start from DefaultWALConfig: zero values
// are not defaults.
type WALConfig struct {
	// SegmentMaxBytes is the size at which the active segment is sealed and a
	// new one started (a segment never exceeds it). Compaction frees whole
	// segments, so this is the grain of disk reclamation: smaller frees space
	// sooner but means more files.
	SegmentMaxBytes int64
	// MaxBatchRecords caps the records in one group-commit write, bounding how
	// long the first producer of a batch waits for the others' bytes.
	MaxBatchRecords int
	// MaxBatchBytes caps the bytes of one group-commit write, for the same
	// reason, and bounds the writer's buffer. It must hold the largest record.
	MaxBatchBytes int64
	// MaxQueueRecords bounds appends waiting for the writer. Past it Append
	// fails at once with ErrFull so the API can shed load (503) instead of
	// letting latency and memory grow without limit.
	MaxQueueRecords int
	// MaxQueueBytes bounds the encoded bytes waiting for the writer, because a
	// record count alone would let 1 MiB bodies pin gigabytes.
	MaxQueueBytes int64
	// MaxBodyBytes is the largest record body; it matches the API's limit.
	MaxBodyBytes int
	// MaxKeyBytes is the largest partition key; keys are hashed, not stored
	// for their own sake, so they have no reason to be big.
	MaxKeyBytes int
	// MaxTopicBytes is the longest topic name; it matches the API's limit and
	// must fit the frame's 16-bit length.
	MaxTopicBytes int
	// ReadBufferBytes is the read window of recovery and Replay: larger means
	// fewer reads; it is held only while a scan runs.
	ReadBufferBytes int
	// PositionOnCommit persists the committed position as records are
	// marked committed, not only on SavePosition and Compact, so a crash
	// replays about one position write's worth of committed records rather
	// than everything since the last Compact. One write (and its fsyncs)
	// is in flight at most, on a goroutine of the WAL's own; the next one
	// covers every mark made meanwhile.
	PositionOnCommit bool
	// MaxPositionRanges bounds the committed ranges above the watermark the
	// position file lists (16 bytes each), so one held partition among many
	// busy ones cannot make every position write large. Past it the lowest
	// ranges are kept: the rest are replayed after a crash (duplicates,
	// never a gap). 0 persists the watermark alone.
	MaxPositionRanges int
	// PositionSaveInterval is the least time between two position writes
	// of PositionOnCommit: each is a write and an fsync, and under load one
	// per few records cost the produce path more than the WAL's own group
	// commits. A crash then replays at most about this much of committed
	// traffic, plus the commits whose answers were on their way. 0 writes
	// as soon as the last write finished. At most 1 s.
	PositionSaveInterval time.Duration
	// Faults, when not nil, fails the WAL's writes or fsyncs on purpose
	// (a fault-injection run).
	Faults *Faults
	// Clock times PositionSaveInterval; nil is the wall clock.
	Clock clock.Clock
	// FS is the file system the WAL lives on; nil is the OS's. A crash
	// test hands one that forgets what was not synced (fs.go).
	FS FS
}

// DefaultWALConfig returns the configuration a node runs with unless told
// otherwise.
func DefaultWALConfig() WALConfig {
	return WALConfig{
		SegmentMaxBytes: 64 << 20,
		MaxBatchRecords: 4096,
		MaxBatchBytes:   8 << 20,
		MaxQueueRecords: 16384,
		MaxQueueBytes:   64 << 20,
		MaxBodyBytes:    1 << 20,
		MaxKeyBytes:     4 << 10,
		MaxTopicBytes:   255,
		ReadBufferBytes: 1 << 20,
		// On: measured by BenchmarkWALPositionOnCommit.
		PositionOnCommit:     true,
		MaxPositionRanges:    1024,
		PositionSaveInterval: 10 * time.Millisecond,
	}
}

// maxFrameBytes is the encoded size of the largest record the config admits.
func (c WALConfig) maxFrameBytes() int64 {
	return walFrameBytes(c.MaxTopicBytes, c.MaxKeyBytes, c.MaxBodyBytes, math.MaxUint64)
}

// Validate reports the first field that is out of range, wrapping ErrInvalid.
func (c WALConfig) Validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("wal config: %s %v %s: %w", field, v, why, ErrInvalid)
	}
	switch {
	case c.SegmentMaxBytes <= 0:
		return bad("SegmentMaxBytes", c.SegmentMaxBytes, "must be positive")
	case c.MaxBatchRecords <= 0:
		return bad("MaxBatchRecords", c.MaxBatchRecords, "must be positive")
	case c.MaxBatchBytes <= 0:
		return bad("MaxBatchBytes", c.MaxBatchBytes, "must be positive")
	case c.MaxQueueRecords <= 0:
		return bad("MaxQueueRecords", c.MaxQueueRecords, "must be positive")
	case c.MaxQueueBytes <= 0:
		return bad("MaxQueueBytes", c.MaxQueueBytes, "must be positive")
	case c.MaxBodyBytes <= 0:
		return bad("MaxBodyBytes", c.MaxBodyBytes, "must be positive")
	case c.MaxKeyBytes < 0:
		return bad("MaxKeyBytes", c.MaxKeyBytes, "must not be negative")
	case c.MaxTopicBytes <= 0 || c.MaxTopicBytes > math.MaxUint16:
		return bad("MaxTopicBytes", c.MaxTopicBytes, "must be in 1..65535")
	case c.MaxPositionRanges < 0 || c.MaxPositionRanges > walMaxPositionRanges:
		return bad("MaxPositionRanges", c.MaxPositionRanges, fmt.Sprintf("must be in 0..%d", walMaxPositionRanges))
	case c.PositionSaveInterval < 0 || c.PositionSaveInterval > time.Second:
		return bad("PositionSaveInterval", c.PositionSaveInterval, "must be in 0..1s")
	case c.ReadBufferBytes < walMinReadBufBytes:
		return bad("ReadBufferBytes", c.ReadBufferBytes, fmt.Sprintf("must be at least %d", walMinReadBufBytes))
	case c.MaxBodyBytes > walMaxFrameBytes || c.MaxKeyBytes > walMaxFrameBytes ||
		c.maxFrameBytes() > walMaxFrameBytes:
		return bad("MaxBodyBytes", c.MaxBodyBytes,
			fmt.Sprintf("with MaxKeyBytes and MaxTopicBytes exceeds the %d-byte frame limit", walMaxFrameBytes))
	case c.MaxBatchBytes < c.maxFrameBytes():
		return bad("MaxBatchBytes", c.MaxBatchBytes,
			fmt.Sprintf("must hold the largest record (%d bytes)", c.maxFrameBytes()))
	case c.SegmentMaxBytes < c.MaxBatchBytes:
		return bad("SegmentMaxBytes", c.SegmentMaxBytes, "must be at least MaxBatchBytes")
	case c.MaxQueueRecords < c.MaxBatchRecords:
		return bad("MaxQueueRecords", c.MaxQueueRecords, "must be at least MaxBatchRecords")
	case c.MaxQueueBytes < c.MaxBatchBytes:
		return bad("MaxQueueBytes", c.MaxQueueBytes, "must be at least MaxBatchBytes")
	}
	return nil
}

// WALRecord is one produced record as the WAL stores it.
type WALRecord struct {
	// Seq is the WAL sequence number, assigned by Append (any value passed in
	// is ignored). Seqs start at 1, are dense and never go backwards.
	Seq uint64
	// Topic is the record's topic; it must not be empty.
	Topic string
	// Incarnation is the incarnation of the topic record the produce was
	// validated against, so that a record outliving a delete of its topic
	// is never committed to a topic recreated under the same name. 0 is
	// unknown: a record written before the WAL carried incarnations, which
	// the dispatcher commits to the topic's current incarnation.
	Incarnation uint64
	// Partition is the target partition, or -1 to pick one by Key.
	Partition int32
	// Key is the optional partition key.
	Key []byte
	// Body is the record's payload.
	Body []byte
}

// WALReplayStats describes one Replay, and what OpenWAL had to repair.
type WALReplayStats struct {
	// Records is how many records were passed to fn.
	Records int64
	// Bytes is the frame bytes of those records.
	Bytes int64
	// Corrupt is how many damaged regions of sealed segments were skipped.
	Corrupt int64
	// CorruptBytes is the size of those regions.
	CorruptBytes int64
	// Lost is how many seqs were found missing (their frames damaged); they
	// can never be replayed, so they count as committed, or the committed
	// low watermark could never pass them.
	Lost int64
	// TornBytes is what OpenWAL cut from the last segment's tail: the unsynced
	// remains of an interrupted write, or anything after a damaged frame.
	TornBytes int64
	// PositionDiscarded says OpenWAL found the position file damaged and fell
	// back to the oldest segment, so more duplicates than usual are replayed.
	PositionDiscarded bool
}

// WAL is a node's ingress write-ahead log.
//
// Append returns only once the record is fsynced; concurrent appends share
// fsyncs (group commit) through one writer goroutine that ends on Close.
// Records are then committed to their owners' partition logs in any order
// and reported with MarkCommitted; the WAL keeps the low watermark
// (CommittedThrough) and the seqs committed above it, persists both with
// SavePosition (and, with PositionOnCommit, after marks), and Compact removes
// segments wholly at or below the persisted watermark. After a restart,
// Replay hands back every acknowledged record not persisted as committed.
// Delivery is at-least-once: a record may be replayed although it was
// committed (after the last position write, or past MaxPositionRanges), so
// commits at the owners must tolerate duplicates.
//
// All methods are safe for concurrent use.
type WAL struct {
	dir string
	cfg WALConfig
	fs  FS // orOS(cfg.FS)

	// wake holds at most one signal. A lost send is harmless: the writer
	// drains the whole queue after each wake.
	wake chan struct{}
	quit chan struct{} // closed by Close: the writer returns
	done chan struct{} // closed when the writer has returned
	// posWake holds at most one signal for the position saver
	// (PositionOnCommit); posDone is closed when it has returned.
	posWake chan struct{}
	posDone chan struct{}

	syncs     atomic.Int64 // fsync calls by the writer, for tests and benchmarks
	positions atomic.Int64 // position files written, for the same

	// maint serialises SavePosition and Compact, so two of them never write
	// the position file or remove segments at once.
	maint sync.Mutex

	mu          sync.Mutex
	closed      bool
	broken      error // set when a failed batch could not be cut off
	queue       []*walRequest
	queuedRecs  int
	queuedBytes int64
	nextSeq     uint64
	segs        []*walSegment // ascending base; the last one is active
	committed   walCommitSet
	persisted   uint64 // the watermark last made durable
	// marks counts changes to committed; fileMarks and liveMarks are its
	// value at the last write of the position file and of a live slot, so
	// a save with nothing new writes nothing.
	marks, fileMarks, liveMarks uint64
	tornBytes                   int64
	posDamaged                  bool
	// lives are the opens whose records the segments may still hold, this
	// one last (wallives.go); fixed once open, so read without a lock.
	lives []walLife

	// live is the position saver's file, nil without PositionOnCommit;
	// liveSlot is the slot its next write goes to. Both under maint.
	live     File
	liveSlot int

	// Owned by the writer goroutine (and by Open and Close around it).
	file   walFile
	active *walSegment
	buf    []byte
	batch  []*walRequest
	// cutUnsynced: the last failed batch was cut back, but the cut's fsync
	// failed too; the next batch syncs it before writing (cutBack).
	cutUnsynced bool
}

// walFile is what the writer needs from a segment file; tests wrap it to
// inject faults.
type walFile interface {
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Close() error
}

type walSegment struct {
	base uint64 // seq of the first frame, and the file's name
	path string
	// size is the bytes known good: for the active segment, up to the end of
	// the last acknowledged batch.
	size int64
}

// walRequest is one record waiting for the writer.
type walRequest struct {
	frame []byte // the encoded frame; the writer fills in seq and crc
	// done has room for the answer, so the writer never blocks on a caller
	// that gave up.
	done chan walResult
}

type walResult struct {
	seq uint64
	err error
}

// OpenWAL opens or creates the WAL in dir. It cuts a torn tail off the last
// segment durably, reads the persisted position, and starts the writer.
func OpenWAL(dir string, cfg WALConfig) (*WAL, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fsys := orOS(cfg.FS)
	if err := cfg.Faults.mkdirAllSync(fsys, dir); err != nil {
		return nil, fmt.Errorf("open wal: %w", err)
	}
	w := &WAL{
		dir:     dir,
		cfg:     cfg,
		fs:      fsys,
		wake:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		done:    make(chan struct{}),
		posWake: make(chan struct{}, 1),
		posDone: make(chan struct{}),
	}
	err := w.rebuild()
	if err == nil {
		err = w.beginLife()
	}
	if err != nil {
		// The recovery error is the one worth returning.
		if w.file != nil {
			w.file.Close()
		}
		if w.live != nil {
			w.live.Close()
		}
		return nil, err
	}
	go w.run()
	if cfg.PositionOnCommit {
		go w.savePositions()
	} else {
		close(w.posDone)
	}
	return w, nil
}

// savePositions is the position saver (PositionOnCommit): one position
// write at a time, each covering every mark made before it began. It
// returns when Close closes quit. A failed write is not reported here: the
// next one retries it, and Compact, which its caller runs on a timer,
// returns the same error to someone who logs it.
func (w *WAL) savePositions() {
	defer close(w.posDone)
	for {
		select {
		case <-w.quit:
			return
		case <-w.posWake:
		}
		w.maint.Lock()
		w.mu.Lock()
		closed := w.closed
		w.mu.Unlock()
		if !closed {
			_ = w.writePosition(true)
		}
		w.maint.Unlock()
		if w.cfg.PositionSaveInterval > 0 {
			t := clock.NewAlarm(clock.Or(w.cfg.Clock), w.cfg.PositionSaveInterval)
			select {
			case <-w.quit:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// liveSlotBytes is the size of one slot of the live position file.
func (c WALConfig) liveSlotBytes() int {
	return len(walPositionMagic2) + 8 + 4 + 16*c.MaxPositionRanges + 4
}

// walDecodeLiveSlot decodes the v2 position at the start of b, which may
// be followed by anything; ok is false for a slot never written or torn.
func walDecodeLiveSlot(b []byte) (through uint64, ranges []walSeqRange, ok bool) {
	head := len(walPositionMagic2) + 8 + 4
	if len(b) < head+4 || string(b[:len(walPositionMagic2)]) != walPositionMagic2 {
		return 0, nil, false
	}
	n := int(binary.LittleEndian.Uint32(b[head-4:]))
	if n > walMaxPositionRanges || head+16*n+4 > len(b) {
		return 0, nil, false
	}
	through, ranges, err := walDecodePositionRanges(b[:head+16*n+4])
	return through, ranges, err == nil
}

// openLive reads both slots of the live position file, creating the file
// if it is missing, and leaves it open in w.live.
func (w *WAL) openLive() (through uint64, ranges []walSeqRange, err error) {
	path := filepath.Join(w.dir, walLiveName)
	_, statErr := w.fs.Stat(path)
	f, err := w.fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return 0, nil, fmt.Errorf("open wal live position: %w", err)
	}
	w.live = f
	if errors.Is(statErr, fs.ErrNotExist) {
		if err := w.cfg.Faults.syncDir(w.fs, w.dir); err != nil {
			return 0, nil, fmt.Errorf("create wal live position: %w", err)
		}
		return 0, nil, nil
	}
	// Bounded by the largest slots any config writes, so an oversized file
	// cannot cost memory; a slot of another config's size reads as torn.
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 2*int64(walPositionMaxBytes)))
	if err != nil {
		return 0, nil, fmt.Errorf("read wal live position: %w", err)
	}
	slot := w.cfg.liveSlotBytes()
	for _, off := range []int{0, slot} {
		if off >= len(b) {
			continue
		}
		if t, r, ok := walDecodeLiveSlot(b[off:]); ok {
			through = max(through, t)
			ranges = append(ranges, r...)
		}
	}
	return through, ranges, nil
}

// rebuild recovers the in-memory state from dir and leaves w.file open on an
// active segment whose next frame is w.nextSeq.
func (w *WAL) rebuild() error {
	posPath := filepath.Join(w.dir, walPositionName)
	// A leftover temporary is a position save that never completed; the
	// position file itself is still the old, whole one.
	if err := w.fs.Remove(posPath + ".tmp"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("open wal %s: remove stale position: %w", w.dir, err)
	}
	through, ranges, err := walReadPosition(w.fs, posPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		through = 0
	case errors.Is(err, ErrCorrupt):
		// Safe to forget: Compact only removes segments below a persisted
		// position, so the oldest segment bounds it from below. The cost is
		// replaying committed records again.
		through, ranges, w.posDamaged = 0, nil, true
	case err != nil:
		return err
	}
	if w.cfg.PositionOnCommit {
		liveThrough, liveRanges, err := w.openLive()
		if err != nil {
			return err
		}
		through = max(through, liveThrough)
		ranges = append(ranges, liveRanges...)
	}
	w.persisted = through

	segs, err := walListSegments(w.fs, w.dir)
	if err != nil {
		return err
	}
	if len(segs) > 0 && segs[0].base-1 > through {
		through = segs[0].base - 1
	}
	w.committed = walCommitSet{through: through, blocks: map[uint64]uint64{}}
	w.nextSeq = through + 1
	// In any order: the union of every position read.
	for _, r := range ranges {
		if r.hi > w.committed.through {
			w.committed.markRange(max(r.lo, w.committed.through+1), r.hi)
		}
		// A seq persisted as committed is never handed out again, even if
		// the disk lost its frame: a new record under it would be skipped.
		w.nextSeq = max(w.nextSeq, r.hi+1)
	}

	if len(segs) > 0 {
		last := segs[len(segs)-1]
		f, err := w.fs.OpenFile(last.path, os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("open wal segment: %w", err)
		}
		w.file = f
		end, next, err := walScanTail(f, last, w.cfg.ReadBufferBytes)
		if err != nil {
			return err
		}
		if end < last.size {
			if err := f.Truncate(end); err != nil {
				return fmt.Errorf("cut torn tail of wal segment %s at %d: %w", last.path, end, err)
			}
			if err := w.cfg.Faults.sync(f); err != nil {
				return fmt.Errorf("sync wal segment %s after cut: %w", last.path, err)
			}
			w.tornBytes = last.size - end
			last.size = end
		}
		w.nextSeq = max(w.nextSeq, next)
		w.segs, w.active = segs, last
		if w.nextSeq > walMaxSeq {
			return fmt.Errorf("open wal %s: seqs exhausted at %d: %w", w.dir, w.nextSeq, ErrCorrupt)
		}
		if next == w.nextSeq {
			return nil
		}
		// The position is ahead of the disk (records lost outside the WAL's
		// control). Seqs below it are done with, so start a segment at
		// nextSeq rather than leave a hole inside the active one.
		w.file = nil
		if err := f.Close(); err != nil {
			return fmt.Errorf("close wal segment %s: %w", last.path, err)
		}
		if last.size == 0 {
			if err := w.fs.Remove(last.path); err != nil {
				return fmt.Errorf("remove empty wal segment: %w", err)
			}
			w.segs = segs[:len(segs)-1]
		}
	}
	seg, f, err := w.createSegment(w.nextSeq)
	if err != nil {
		return err
	}
	w.segs = append(w.segs, seg)
	w.file, w.active = f, seg
	return nil
}

// createSegment creates the (empty) segment starting at base and makes its
// name durable, so records fsynced into it are found after a crash.
func (w *WAL) createSegment(base uint64) (*walSegment, File, error) {
	path := filepath.Join(w.dir, walSegmentName(base))
	// O_TRUNC, not O_EXCL: a file of this name can only be an empty leftover
	// of an earlier roll that failed before any record went into it.
	f, err := w.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("create wal segment: %w", err)
	}
	if err := w.cfg.Faults.syncDir(w.fs, w.dir); err != nil {
		f.Close() // the sync error is the one worth returning
		return nil, nil, fmt.Errorf("create wal segment %s: %w", path, err)
	}
	return &walSegment{base: base, path: path}, f, nil
}

func walSegmentName(base uint64) string {
	return fmt.Sprintf("%020d%s", base, walSegmentSuffix)
}

// walListSegments returns dir's segments in seq order. Other files are left
// alone: the directory is the WAL's, but a stray file is no reason to stop.
func walListSegments(fsys FS, dir string) ([]*walSegment, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list wal %s: %w", dir, err)
	}
	var segs []*walSegment
	for _, e := range entries {
		name := e.Name()
		if len(name) != walSegmentNameLen || !strings.HasSuffix(name, walSegmentSuffix) {
			continue
		}
		digits := name[:20]
		if strings.Trim(digits, "0123456789") != "" {
			continue
		}
		base, err := strconv.ParseUint(digits, 10, 64)
		if err != nil || base == 0 || base > walMaxSeq {
			return nil, fmt.Errorf("wal segment %s: base out of range: %w", name, ErrCorrupt)
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("stat wal segment %s: %w", name, err)
		}
		if !info.Mode().IsRegular() {
			return nil, fmt.Errorf("wal segment %s is not a regular file: %w", name, ErrCorrupt)
		}
		segs = append(segs, &walSegment{base: base, path: filepath.Join(dir, name), size: info.Size()})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].base < segs[j].base })
	return segs, nil
}

// walScanTail walks the last segment from its start and returns where its
// valid frames end and the seq after the last of them. Frames there must
// follow each other without gaps (the writer makes them so); the first one
// that does not verify marks the torn tail, whatever follows it.
func walScanTail(f io.ReaderAt, seg *walSegment, readBuf int) (end int64, next uint64, err error) {
	r := walReader{r: f, size: seg.size, window: readBuf}
	next = seg.base
	for {
		v, n, ok, err := r.frameAt(end, next, next)
		if err != nil {
			return 0, 0, fmt.Errorf("scan wal segment %s: %w", seg.path, err)
		}
		if !ok {
			return end, next, nil
		}
		end += int64(n)
		next = v.seq + 1
	}
}

// Append validates rec, queues it for the writer and returns its seq once
// the frame is written and fsynced. rec.Seq is ignored.
//
// It fails at once with ErrTooLarge or ErrInvalid for a bad record, ErrFull
// when the queue is at its bound, ErrClosed after Close and ErrBroken after an
// unrecoverable write failure. If ctx ends while the record waits, Append
// returns ctx.Err(), but the record may still be written and replayed later:
// delivery is at-least-once. Key and Body are copied before Append returns.
func (w *WAL) Append(ctx context.Context, rec WALRecord) (uint64, error) {
	if err := w.checkRecord(rec); err != nil {
		return 0, err
	}
	frame := walEncodeUnsealed(make([]byte, 0, walFrameBytes(len(rec.Topic), len(rec.Key), len(rec.Body), rec.Incarnation)), rec)
	return w.enqueue(ctx, frame)
}

// AppendMany is Append for many records at once: their frames queue
// together, so the writer makes them durable with as few fsyncs as one
// record would need. seqs[i] and errs[i] are records[i]'s: a record that
// is refused (checkRecord) fails alone; one that queued gets its own
// outcome, which for records written in one batch is the batch's.
func (w *WAL) AppendMany(ctx context.Context, recs []WALRecord) (seqs []uint64, errs []error) {
	seqs, errs = make([]uint64, len(recs)), make([]error, len(recs))
	frames := make([][]byte, 0, len(recs))
	at := make([]int, 0, len(recs))
	for i, rec := range recs {
		if errs[i] = w.checkRecord(rec); errs[i] != nil {
			continue
		}
		frames = append(frames, walEncodeUnsealed(make([]byte, 0, walFrameBytes(len(rec.Topic), len(rec.Key), len(rec.Body), rec.Incarnation)), rec))
		at = append(at, i)
	}
	if len(frames) == 0 {
		return seqs, errs
	}
	got, err := w.enqueueMany(ctx, frames)
	for j, i := range at {
		if err != nil {
			errs[i] = err
			continue
		}
		seqs[i], errs[i] = got[j].seq, got[j].err
	}
	return seqs, errs
}

func (w *WAL) checkRecord(rec WALRecord) error {
	switch {
	case rec.Topic == "":
		return fmt.Errorf("wal append: empty topic: %w", ErrInvalid)
	case len(rec.Topic) > w.cfg.MaxTopicBytes:
		return fmt.Errorf("wal append: topic of %d bytes, over MaxTopicBytes %d: %w",
			len(rec.Topic), w.cfg.MaxTopicBytes, ErrTooLarge)
	case rec.Partition < -1:
		return fmt.Errorf("wal append: partition %d: %w", rec.Partition, ErrInvalid)
	case len(rec.Key) > w.cfg.MaxKeyBytes:
		return fmt.Errorf("wal append: key of %d bytes, over MaxKeyBytes %d: %w",
			len(rec.Key), w.cfg.MaxKeyBytes, ErrTooLarge)
	case len(rec.Body) > w.cfg.MaxBodyBytes:
		return fmt.Errorf("wal append: body of %d bytes, over MaxBodyBytes %d: %w",
			len(rec.Body), w.cfg.MaxBodyBytes, ErrTooLarge)
	}
	return nil
}

// enqueue hands one encoded frame to the writer and waits for its seq.
func (w *WAL) enqueue(ctx context.Context, frame []byte) (uint64, error) {
	res, err := w.enqueueMany(ctx, [][]byte{frame})
	if err != nil {
		return 0, err
	}
	return res[0].seq, res[0].err
}

// enqueueMany hands encoded frames to the writer, all of them or none
// (the queue's bounds count them together), and waits for each one's seq.
// An error is the whole call's: nothing queued, or ctx ended first.
func (w *WAL) enqueueMany(ctx context.Context, frames [][]byte) ([]walResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	reqs := make([]*walRequest, len(frames))
	var size int64
	for i, f := range frames {
		reqs[i] = &walRequest{frame: f, done: make(chan walResult, 1)}
		size += int64(len(f))
	}
	w.mu.Lock()
	switch {
	case w.closed:
		w.mu.Unlock()
		return nil, fmt.Errorf("wal append: %w", ErrClosed)
	case w.broken != nil:
		err := w.broken
		w.mu.Unlock()
		return nil, err
	case w.queuedRecs+len(frames) > w.cfg.MaxQueueRecords,
		w.queuedBytes+size > w.cfg.MaxQueueBytes:
		recs, queued := w.queuedRecs, w.queuedBytes
		w.mu.Unlock()
		return nil, fmt.Errorf("wal append of %d records: %d records (%d bytes) already queued: %w", len(frames), recs, queued, ErrFull)
	}
	w.queue = append(w.queue, reqs...)
	w.queuedRecs += len(frames)
	w.queuedBytes += size
	w.mu.Unlock()

	select {
	case w.wake <- struct{}{}:
	default:
	}
	out := make([]walResult, len(reqs))
	for i, req := range reqs {
		select {
		case out[i] = <-req.done:
		case <-ctx.Done():
			// Prefer a real answer that raced with the cancellation.
			select {
			case out[i] = <-req.done:
			default:
				return nil, ctx.Err()
			}
		}
	}
	return out, nil
}

// run is the writer goroutine. It returns when Close closes quit.
func (w *WAL) run() {
	defer close(w.done)
	for {
		select {
		case <-w.quit:
			return
		case <-w.wake:
		}
		for {
			batch := w.takeBatch()
			if len(batch) == 0 {
				break
			}
			w.commit(batch)
		}
	}
}

// takeBatch takes queued requests, one record each, up to the batch caps. It
// always takes at least one, and one always fits a batch: Validate requires
// MaxBatchRecords to be positive and MaxBatchBytes to hold the largest
// record, and Append refuses records bigger than the config admits.
func (w *WAL) takeBatch() []*walRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	var size int64
	k := 0 // requests taken, and so records
	for ; k < len(w.queue); k++ {
		r := w.queue[k]
		if k > 0 && (k >= w.cfg.MaxBatchRecords || size+int64(len(r.frame)) > w.cfg.MaxBatchBytes) {
			break
		}
		size += int64(len(r.frame))
	}
	w.batch = append(w.batch[:0], w.queue[:k]...)
	rest := copy(w.queue, w.queue[k:])
	clear(w.queue[rest:])
	w.queue = w.queue[:rest]
	w.queuedRecs -= k
	w.queuedBytes -= size
	return w.batch
}

// takeAllLocked empties the queue. w.mu must be held.
func (w *WAL) takeAllLocked() []*walRequest {
	q := w.queue
	w.queue, w.queuedRecs, w.queuedBytes = nil, 0, 0
	return q
}

func walAnswerAll(reqs []*walRequest, err error) {
	for _, r := range reqs {
		r.done <- walResult{err: err}
	}
}

// commit writes one batch with one write and one fsync, then answers it.
func (w *WAL) commit(batch []*walRequest) {
	w.mu.Lock()
	broken := w.broken
	w.mu.Unlock()
	if broken != nil {
		walAnswerAll(batch, broken)
		return
	}
	var size int64
	for _, r := range batch {
		size += int64(len(r.frame))
	}
	if w.cutUnsynced {
		// Before anything new is written (or the segment rolls and closes),
		// so no acknowledged frame ever lies where a power loss could bring
		// back a failed batch's bytes past it.
		w.syncs.Add(1)
		err := w.cfg.Faults.failSync(w.active.path)
		if err == nil {
			err = w.file.Sync()
		}
		if err != nil {
			walAnswerAll(batch, fmt.Errorf("sync wal segment %s cut after a failed batch: %w", w.active.path, err))
			return
		}
		w.cutUnsynced = false
	}
	if err := w.rollIfFull(size); err != nil {
		walAnswerAll(batch, err)
		return
	}

	first, seq := w.nextSeq, w.nextSeq
	buf := w.buf[:0]
	for _, r := range batch {
		start := len(buf)
		buf = append(buf, r.frame...)
		walSealFrame(buf[start:], seq)
		seq++
	}
	w.buf = buf

	seg, at := w.active, w.active.size
	err := w.cfg.Faults.failWrite(seg.path)
	if err == nil {
		_, err = w.file.WriteAt(buf, at)
	}
	if err == nil {
		w.syncs.Add(1)
		if err = w.cfg.Faults.failSync(seg.path); err == nil {
			err = w.file.Sync()
		}
	}
	if err != nil {
		err = fmt.Errorf("write wal segment %s at %d: %w", seg.path, at, err)
		if rerr := w.cutBack(at); rerr != nil {
			// The garbage stays, and a later batch would land after it
			// where recovery could not reach it: refuse appends instead.
			berr := fmt.Errorf("wal segment %s: cannot cut a failed batch (%w): %w", seg.path, rerr, ErrBroken)
			w.mu.Lock()
			w.broken = berr
			queued := w.takeAllLocked()
			w.mu.Unlock()
			walAnswerAll(queued, berr)
			err = fmt.Errorf("%w; %w", err, berr)
		}
		walAnswerAll(batch, err)
		return
	}

	w.mu.Lock()
	seg.size = at + int64(len(buf))
	w.nextSeq = seq
	w.mu.Unlock()
	for _, r := range batch {
		r.done <- walResult{seq: first}
		first++
	}
}

// cutBack truncates the active segment to at, where the failed batch began,
// and makes that durable. The batch's seqs are handed out again: nobody was
// told about them.
//
// Only a failed truncation is an error. A cut whose fsync fails is in the
// file all the same (a reader, the next write, a crash of the process see
// it); what is not known is whether a power loss keeps it, so the next
// batch syncs it before it writes (commit), and the WAL keeps serving once
// fsyncs work again instead of refusing every append until a restart.
func (w *WAL) cutBack(at int64) error {
	if err := w.file.Truncate(at); err != nil {
		return err
	}
	w.syncs.Add(1)
	err := w.cfg.Faults.failSync(w.active.path)
	if err == nil {
		err = w.file.Sync()
	}
	w.cutUnsynced = err != nil
	return nil
}

// rollIfFull seals the active segment if the next size bytes would push it
// past SegmentMaxBytes. An empty segment is never sealed, so a batch always
// fits (Validate keeps MaxBatchBytes within SegmentMaxBytes).
func (w *WAL) rollIfFull(size int64) error {
	if w.active.size == 0 || w.active.size+size <= w.cfg.SegmentMaxBytes {
		return nil
	}
	seg, f, err := w.createSegment(w.nextSeq)
	if err != nil {
		return err
	}
	// The old segment's bytes were fsynced with its last batch, so a close
	// error cannot lose anything; the file is not used again either way.
	_ = w.file.Close()
	w.mu.Lock()
	w.segs = append(w.segs, seg)
	w.mu.Unlock()
	w.file, w.active = f, seg
	return nil
}

// MarkCommitted records that the record seq is committed at its owner. Seqs
// may be marked in any order and more than once. It fails with ErrInvalid for
// a seq the WAL never assigned.
func (w *WAL) MarkCommitted(seq uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq == 0 || seq >= w.nextSeq {
		return fmt.Errorf("wal mark committed: seq %d not assigned (next is %d): %w", seq, w.nextSeq, ErrInvalid)
	}
	w.committed.mark(seq)
	w.marks++
	if w.cfg.PositionOnCommit {
		select {
		case w.posWake <- struct{}{}:
		default: // a save is due already; it will cover this mark
		}
	}
	return nil
}

// CommittedThrough returns the low watermark: every seq at or below it is
// committed (or was found lost). It is in memory; SavePosition persists it.
func (w *WAL) CommittedThrough() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed.through
}

// SavePosition durably stores CommittedThrough and up to MaxPositionRanges
// ranges committed above it. A crash during it leaves the old or the new
// value; the file carries a checksum.
func (w *WAL) SavePosition() error {
	w.maint.Lock()
	defer w.maint.Unlock()
	return w.savePosition()
}

// savePosition is SavePosition with w.maint held.
func (w *WAL) savePosition() error {
	w.mu.Lock()
	closed := w.closed
	w.mu.Unlock()
	if closed {
		return fmt.Errorf("wal save position: %w", ErrClosed)
	}
	return w.writePosition(false)
}

// writePosition writes the position if marks changed it since the last
// write of the same kind: into the position file (replaced whole, which
// an older node reads too), or into the next live slot. w.maint must be
// held.
func (w *WAL) writePosition(live bool) error {
	w.mu.Lock()
	through, marks := w.committed.through, w.marks
	saved := &w.fileMarks
	if live {
		saved = &w.liveMarks
	}
	if marks == *saved {
		w.mu.Unlock()
		return nil
	}
	ranges := w.committed.rangesAbove(w.cfg.MaxPositionRanges)
	w.mu.Unlock()
	if live {
		if err := w.writeLive(through, ranges); err != nil {
			return fmt.Errorf("wal save live position %d: %w", through, err)
		}
	} else {
		var b []byte
		if len(ranges) == 0 {
			b = walEncodePosition(through) // v1, readable by an older node
		} else {
			b = walEncodePositionRanges(through, ranges)
		}
		if err := w.cfg.Faults.writeFileSync(w.fs, filepath.Join(w.dir, walPositionName), b); err != nil {
			return fmt.Errorf("wal save position %d: %w", through, err)
		}
	}
	w.positions.Add(1)
	w.mu.Lock()
	w.persisted, *saved = max(w.persisted, through), marks
	w.mu.Unlock()
	return nil
}

// writeLive writes a position into the next live slot. The slot turns only
// after a write that succeeded: a torn slot is written again, never the
// whole one.
func (w *WAL) writeLive(through uint64, ranges []walSeqRange) error {
	b := walEncodePositionRanges(through, ranges)
	if _, err := w.cfg.Faults.writeAt(w.live, b, int64(w.liveSlot*w.cfg.liveSlotBytes())); err != nil {
		return err
	}
	if err := w.cfg.Faults.sync(w.live); err != nil {
		return err
	}
	w.liveSlot ^= 1
	return nil
}

// Compact persists the position, then removes the sealed segments whose
// records are all at or below it. The active segment is never removed.
func (w *WAL) Compact() error {
	w.maint.Lock()
	defer w.maint.Unlock()
	if err := w.savePosition(); err != nil {
		return fmt.Errorf("wal compact: %w", err)
	}
	w.mu.Lock()
	var doomed []*walSegment
	for i := 0; i+1 < len(w.segs) && w.segs[i+1].base-1 <= w.persisted; i++ {
		doomed = append(doomed, w.segs[i])
	}
	w.mu.Unlock()
	if len(doomed) == 0 {
		return nil
	}
	// Oldest first: a crash part way leaves a suffix, which is still a
	// valid WAL whatever order the directory entries reach the disk in.
	removed := 0
	var err error
	for _, s := range doomed {
		if rerr := w.fs.Remove(s.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = fmt.Errorf("wal compact: remove segment: %w", rerr)
			break
		}
		removed++
	}
	if removed > 0 {
		w.mu.Lock()
		// Only Compact removes from the front, under w.maint, so the first
		// removed entries are still the ones removed.
		w.segs = slices.Clone(w.segs[removed:])
		w.mu.Unlock()
		if serr := w.cfg.Faults.syncDir(w.fs, w.dir); err == nil && serr != nil {
			err = fmt.Errorf("wal compact: %w", serr)
		}
	}
	return err
}

// WALStats counts a WAL's work since it opened.
type WALStats struct {
	// Syncs is the writer's fsyncs (a batch, or a cut after a failed one).
	Syncs int64
	// Positions is the position files written.
	Positions int64
}

// Stats reads the WAL's counters.
func (w *WAL) Stats() WALStats {
	return WALStats{Syncs: w.syncs.Load(), Positions: w.positions.Load()}
}

// Backlog reports the records appended and not yet committed-through, and
// the bytes of the segments still holding any of them (what Compact could not
// free). Bytes is per segment, so it over-counts by up to one segment.
func (w *WAL) Backlog() (records int64, bytes int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	through := w.committed.through
	records = int64(w.nextSeq - 1 - min(through, w.nextSeq-1))
	for i, s := range w.segs {
		last := w.nextSeq - 1
		if i+1 < len(w.segs) {
			last = w.segs[i+1].base - 1
		}
		if last > through {
			bytes += s.size
		}
	}
	return records, bytes
}

// Replay calls fn, in seq order, for every record on disk above the
// committed watermark that has not been marked committed: every acknowledged
// record not yet committed, plus possibly some that were committed but not
// yet persisted as such (at-least-once; duplicates are expected). fn may keep
// the record. An error from fn stops Replay and is returned.
//
// The rule: Replay sees the records that were durable when it started. Run
// it once after OpenWAL, before the dispatcher takes live appends; appends
// may proceed meanwhile but are not replayed, and running it again later is
// safe but repeats every record not yet committed. Replay holds no lock while
// fn runs, so fn may call MarkCommitted (or any other method).
//
// A damaged frame in a sealed segment is skipped up to the next frame that
// verifies, counted in the stats, and its seqs are counted as lost (and so as
// committed). Replay never panics on damaged bytes.
func (w *WAL) Replay(fn func(WALRecord) error) (WALReplayStats, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return WALReplayStats{}, fmt.Errorf("wal replay: %w", ErrClosed)
	}
	segs := make([]walSegment, len(w.segs))
	for i, s := range w.segs {
		segs[i] = *s
	}
	end := w.nextSeq - 1
	stats := WALReplayStats{TornBytes: w.tornBytes, PositionDiscarded: w.posDamaged}
	w.mu.Unlock()

	for i, s := range segs {
		last := end
		if i+1 < len(segs) {
			last = segs[i+1].base - 1
		}
		if last < s.base || last <= w.CommittedThrough() {
			continue
		}
		if err := w.replaySegment(s, last, fn, &stats); err != nil {
			return stats, err
		}
	}
	return stats, nil
}

// replaySegment replays seg, whose records are seg.base..last.
func (w *WAL) replaySegment(seg walSegment, last uint64, fn func(WALRecord) error, stats *WALReplayStats) error {
	f, err := w.fs.OpenFile(seg.path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		w.mu.Lock()
		gone := last <= w.persisted
		w.mu.Unlock()
		if gone {
			return nil // compacted since Replay started: all committed
		}
	}
	if err != nil {
		return fmt.Errorf("wal replay: %w", err)
	}
	defer f.Close() // read-only: nothing to lose on close

	r := walReader{r: f, size: seg.size, window: w.cfg.ReadBufferBytes}
	expect := seg.base
	var off int64
	for off < seg.size {
		v, n, ok, err := r.frameAt(off, expect, last)
		if err != nil {
			return fmt.Errorf("wal replay %s: %w", seg.path, err)
		}
		if !ok {
			// Find the next frame that verifies. Requiring its seq to fit
			// expect..last rejects almost every false start before the
			// checksum is even computed.
			next := off + 1
			for ; next < seg.size; next++ {
				if _, _, ok, err = r.frameAt(next, expect, last); err != nil {
					return fmt.Errorf("wal replay %s: %w", seg.path, err)
				} else if ok {
					break
				}
			}
			stats.Corrupt++
			stats.CorruptBytes += next - off
			off = next
			continue
		}
		if v.seq > expect {
			stats.Lost += w.markLost(expect, v.seq-1)
		}
		expect = v.seq + 1
		off += int64(n)
		if w.isCommitted(v.seq) {
			continue
		}
		rec := v.record()
		if err := fn(rec); err != nil {
			return fmt.Errorf("wal replay seq %d: %w", rec.Seq, err)
		}
		stats.Records++
		stats.Bytes += int64(n)
	}
	if expect <= last {
		stats.Lost += w.markLost(expect, last)
	}
	return nil
}

func (w *WAL) isCommitted(seq uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.committed.has(seq)
}

// markLost counts lo..hi as committed and returns how many of them lay above
// the watermark.
func (w *WAL) markLost(lo, hi uint64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if hi <= w.committed.through {
		return 0
	}
	lo = max(lo, w.committed.through+1)
	w.committed.markRange(lo, hi)
	return int64(hi - lo + 1)
}

// Close stops the writer, fails queued appends with ErrClosed and closes the
// active segment. A batch already being written completes first.
func (w *WAL) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("close wal %s: %w", w.dir, ErrClosed)
	}
	w.closed = true
	queued := w.takeAllLocked()
	w.mu.Unlock()
	walAnswerAll(queued, fmt.Errorf("wal append: %w", ErrClosed))
	close(w.quit)
	<-w.done
	<-w.posDone
	// The marks since the last save, so a clean stop replays nothing
	// that was committed.
	w.maint.Lock()
	perr := w.writePosition(false)
	if w.live != nil {
		// Written with a fsync each time: a close error loses nothing.
		_ = w.live.Close()
	}
	w.maint.Unlock()
	if err := w.file.Close(); err != nil {
		return fmt.Errorf("close wal segment %s: %w", w.active.path, err)
	}
	if perr != nil {
		return fmt.Errorf("close wal %s: %w", w.dir, perr)
	}
	return nil
}

// walCommitSet is the set of committed seqs, compactly: everything at or
// below through, a bitmap of the seqs above it committed out of order (one
// bit each, kept in 64-seq blocks so that memory follows the seqs actually
// marked rather than their span), and ranges known to be lost.
type walCommitSet struct {
	through uint64
	blocks  map[uint64]uint64 // block (seq-1)/64 → bit (seq-1)%64
	lost    []walSeqRange     // sorted by lo, disjoint and not adjacent
}

type walSeqRange struct{ lo, hi uint64 }

func (s *walCommitSet) has(seq uint64) bool {
	if seq <= s.through || s.blocks[(seq-1)/64]&(1<<((seq-1)%64)) != 0 {
		return true
	}
	// A range marked at once: lost, or listed by the position file.
	i := sort.Search(len(s.lost), func(i int) bool { return s.lost[i].hi >= seq })
	return i < len(s.lost) && s.lost[i].lo <= seq
}

func (s *walCommitSet) mark(seq uint64) {
	if seq <= s.through {
		return
	}
	s.blocks[(seq-1)/64] |= 1 << ((seq - 1) % 64)
	s.advance()
}

// rangesAbove returns the committed seqs above through as sorted, disjoint,
// non-adjacent ranges, the lowest limit of them.
func (s *walCommitSet) rangesAbove(limit int) []walSeqRange {
	if limit == 0 || (len(s.blocks) == 0 && len(s.lost) == 0) {
		return nil
	}
	idxs := make([]uint64, 0, len(s.blocks))
	for idx := range s.blocks {
		idxs = append(idxs, idx)
	}
	slices.Sort(idxs)
	var out []walSeqRange
	add := func(lo, hi uint64) {
		// A block that through is inside keeps its bits below through.
		if hi <= s.through {
			return
		}
		lo = max(lo, s.through+1)
		if n := len(out); n > 0 && out[n-1].hi+1 >= lo {
			out[n-1].hi = max(out[n-1].hi, hi)
			return
		}
		out = append(out, walSeqRange{lo, hi})
	}
	lost := s.lost
	// Merges the lost ranges that start before seq into out, in order.
	flushLost := func(seq uint64) {
		for len(lost) > 0 && lost[0].lo < seq {
			add(lost[0].lo, lost[0].hi)
			lost = lost[1:]
		}
	}
	for _, idx := range idxs {
		b := s.blocks[idx]
		for b != 0 && len(out) <= limit {
			off := uint64(bits.TrailingZeros64(b))
			run := uint64(bits.TrailingZeros64(^(b >> off)))
			lo := idx*64 + off + 1
			flushLost(lo)
			add(lo, lo+run-1)
			if off+run >= 64 {
				break
			}
			b &^= (1<<run - 1) << off
		}
		if len(out) > limit {
			break
		}
	}
	flushLost(math.MaxUint64)
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// markRange marks lo..hi (lo > through) without a bit per seq, so a huge
// lost range costs nothing.
func (s *walCommitSet) markRange(lo, hi uint64) {
	i := sort.Search(len(s.lost), func(i int) bool { return s.lost[i].hi+1 >= lo })
	j := i
	for j < len(s.lost) && s.lost[j].lo <= hi+1 {
		lo, hi = min(lo, s.lost[j].lo), max(hi, s.lost[j].hi)
		j++
	}
	s.lost = slices.Replace(s.lost, i, j, walSeqRange{lo, hi})
	s.advance()
}

// advance moves through over every seq above it that is marked or lost.
func (s *walCommitSet) advance() {
	for {
		if len(s.lost) > 0 && s.lost[0].lo <= s.through+1 {
			if s.lost[0].hi > s.through {
				s.jump(s.lost[0].hi)
			}
			s.lost = s.lost[1:]
			continue
		}
		idx, off := s.through/64, s.through%64 // block and bit of through+1
		b, ok := s.blocks[idx]
		if !ok {
			return
		}
		run := uint64(bits.TrailingZeros64(^(b >> off))) // marked seqs from through+1 on
		if run == 0 {
			return
		}
		if off+run < 64 {
			s.through += run // a lost range may start right after
			continue
		}
		delete(s.blocks, idx)
		s.through = idx*64 + 64
	}
}

// jump moves through to t and drops the blocks wholly at or below it,
// visiting whichever is fewer: the blocks skipped or the blocks held.
func (s *walCommitSet) jump(t uint64) {
	from, to := s.through/64, t/64 // blocks from..to-1 end at or below t
	if to-from > uint64(len(s.blocks)) {
		for idx := range s.blocks {
			if idx < to {
				delete(s.blocks, idx)
			}
		}
	} else {
		for idx := from; idx < to; idx++ {
			delete(s.blocks, idx)
		}
	}
	s.through = t
}

// walFrameBytes is the encoded size of a record with these field sizes and
// this incarnation (whose trailer is there only when it is not 0).
func walFrameBytes(topic, key, body int, incarnation uint64) int64 {
	n := int64(walHeaderBytes + walFixedBytes + topic + key + body)
	if incarnation != 0 {
		n += walIncarnationBytes
	}
	return n
}

// walEncodeUnsealed appends rec's frame with seq and crc left zero; the
// writer seals it once the seq is known.
func walEncodeUnsealed(dst []byte, rec WALRecord) []byte {
	length := int(walFrameBytes(len(rec.Topic), len(rec.Key), len(rec.Body), rec.Incarnation)) - walHeaderBytes
	dst = binary.LittleEndian.AppendUint32(dst, uint32(length))
	dst = binary.LittleEndian.AppendUint32(dst, 0) // crc
	dst = binary.LittleEndian.AppendUint64(dst, 0) // seq
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(rec.Topic)))
	dst = append(dst, rec.Topic...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(rec.Partition))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(rec.Key)))
	dst = append(dst, rec.Key...)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(rec.Body)))
	dst = append(dst, rec.Body...)
	if rec.Incarnation != 0 {
		dst = binary.LittleEndian.AppendUint64(dst, rec.Incarnation)
	}
	return dst
}

// walSealFrame sets the seq and crc of the unsealed frame at the start of b
// and returns the frame's size.
func walSealFrame(b []byte, seq uint64) int {
	total := walHeaderBytes + int(binary.LittleEndian.Uint32(b))
	binary.LittleEndian.PutUint64(b[8:], seq)
	crc := crc32.Update(crc32.Update(0, walCRC, b[:4]), walCRC, b[8:total])
	binary.LittleEndian.PutUint32(b[4:], crc)
	return total
}

// walEncodeFrame appends the complete frame of rec, with rec.Seq.
func walEncodeFrame(dst []byte, rec WALRecord) []byte {
	start := len(dst)
	dst = walEncodeUnsealed(dst, rec)
	walSealFrame(dst[start:], rec.Seq)
	return dst
}

// walFrameView is a verified frame; its slices alias the bytes it was
// parsed from.
type walFrameView struct {
	seq         uint64
	topic       []byte
	incarnation uint64
	partition   int32
	key, body   []byte
}

func (v walFrameView) record() WALRecord {
	rec := WALRecord{Seq: v.seq, Topic: string(v.topic), Incarnation: v.incarnation, Partition: v.partition}
	if len(v.key) > 0 {
		rec.Key = slices.Clone(v.key)
	}
	rec.Body = slices.Clone(v.body)
	if rec.Body == nil {
		rec.Body = []byte{}
	}
	return rec
}

// walDecodeFrame decodes the frame at the start of b and returns the record
// (its slices are copies) and the frame's size. It fails with an error
// wrapping ErrCorrupt, or walErrShort if b ends inside the frame.
func walDecodeFrame(b []byte) (WALRecord, int, error) {
	v, n, err := walParseFrame(b)
	if err != nil {
		return WALRecord{}, 0, err
	}
	return v.record(), n, nil
}

// walParseFrame verifies the frame at the start of b without copying. It
// trusts no length before checking it against what is there, so it cannot
// panic or be made to allocate.
func walParseFrame(b []byte) (walFrameView, int, error) {
	var v walFrameView
	if len(b) < walHeaderBytes {
		return v, 0, walErrShort
	}
	length := binary.LittleEndian.Uint32(b)
	if length < walFixedBytes || length > walMaxFrameBytes-walHeaderBytes {
		return v, 0, fmt.Errorf("wal frame length %d out of range: %w", length, ErrCorrupt)
	}
	total := walHeaderBytes + int(length)
	if len(b) < total {
		return v, 0, walErrShort
	}
	crc := crc32.Update(crc32.Update(0, walCRC, b[:4]), walCRC, b[8:total])
	if crc != binary.LittleEndian.Uint32(b[4:]) {
		return v, 0, fmt.Errorf("wal frame checksum mismatch: %w", ErrCorrupt)
	}
	p := b[8:total]
	v.seq = binary.LittleEndian.Uint64(p)
	topicLen := int(binary.LittleEndian.Uint16(p[8:]))
	p = p[10:]
	if len(p) < topicLen+8 {
		return v, 0, fmt.Errorf("wal frame topic length %d past the frame: %w", topicLen, ErrCorrupt)
	}
	v.topic, p = p[:topicLen], p[topicLen:]
	v.partition = int32(binary.LittleEndian.Uint32(p))
	keyLen := uint64(binary.LittleEndian.Uint32(p[4:]))
	p = p[8:]
	if uint64(len(p)) < keyLen+4 {
		return v, 0, fmt.Errorf("wal frame key length %d past the frame: %w", keyLen, ErrCorrupt)
	}
	v.key, p = p[:keyLen], p[keyLen:]
	bodyLen := uint64(binary.LittleEndian.Uint32(p))
	p = p[4:]
	switch uint64(len(p)) {
	case bodyLen: // no incarnation: a frame of an older node, or incarnation 0
		v.body = p
	case bodyLen + walIncarnationBytes:
		v.body, p = p[:bodyLen], p[bodyLen:]
		if v.incarnation = binary.LittleEndian.Uint64(p); v.incarnation == 0 {
			return v, 0, fmt.Errorf("wal frame incarnation trailer holds 0: %w", ErrCorrupt)
		}
	default:
		return v, 0, fmt.Errorf("wal frame body length %d does not fill the frame: %w", bodyLen, ErrCorrupt)
	}
	// Checks the writer guarantees; a frame breaking them was not written by
	// this WAL, whatever its checksum says.
	if v.seq == 0 || v.seq > walMaxSeq || topicLen == 0 || v.partition < -1 {
		return v, 0, fmt.Errorf("wal frame seq %d, topic length %d, partition %d: %w",
			v.seq, topicLen, v.partition, ErrCorrupt)
	}
	return v, total, nil
}

// walReader reads frames from a segment through a window, so scanning for
// the next good frame byte by byte does not cost a read per byte.
type walReader struct {
	r      io.ReaderAt
	size   int64
	window int

	buf    []byte
	bufOff int64
}

// bytesAt returns the n bytes at off, or nil if the segment ends first. The
// result is valid until the next call.
func (r *walReader) bytesAt(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off > r.size || int64(n) > r.size-off {
		return nil, nil
	}
	if off >= r.bufOff && off+int64(n) <= r.bufOff+int64(len(r.buf)) {
		return r.buf[off-r.bufOff:][:n], nil
	}
	want := int64(max(n, r.window))
	want = min(want, r.size-off) // n fits, so want >= n
	if int64(cap(r.buf)) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:want]
	// ReaderAt may report io.EOF along with a full read at the end.
	if n, err := r.r.ReadAt(r.buf, off); n < len(r.buf) {
		r.buf = r.buf[:0]
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF // the file is shorter than it was
		}
		return nil, fmt.Errorf("read at %d: %w", off, err)
	}
	r.bufOff = off
	return r.buf[:n], nil
}

// frameAt parses the frame at off if one verifies there with a seq in
// minSeq..maxSeq; ok is false otherwise. err is for failed reads only.
func (r *walReader) frameAt(off int64, minSeq, maxSeq uint64) (v walFrameView, n int, ok bool, err error) {
	h, err := r.bytesAt(off, walHeaderBytes+8)
	if h == nil || err != nil {
		return v, 0, false, err
	}
	length := binary.LittleEndian.Uint32(h)
	seq := binary.LittleEndian.Uint64(h[walHeaderBytes:])
	if length < walFixedBytes || length > walMaxFrameBytes-walHeaderBytes || seq < minSeq || seq > maxSeq {
		return v, 0, false, nil
	}
	b, err := r.bytesAt(off, walHeaderBytes+int(length))
	if b == nil || err != nil {
		return v, 0, false, err
	}
	v, n, perr := walParseFrame(b)
	if perr != nil {
		return v, 0, false, nil
	}
	return v, n, true, nil
}

// walEncodePosition encodes the position file: magic, committed-through,
// CRC-32C of both.
func walEncodePosition(through uint64) []byte {
	b := append([]byte(walPositionMagic), make([]byte, 8)...)
	binary.LittleEndian.PutUint64(b[len(walPositionMagic):], through)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, walCRC))
}

// walEncodePositionRanges encodes the v2 position file: walPositionMagic2,
// through, the count of ranges, each range's lo and hi, CRC-32C of all of it.
func walEncodePositionRanges(through uint64, ranges []walSeqRange) []byte {
	b := make([]byte, 0, len(walPositionMagic2)+8+4+16*len(ranges)+4)
	b = append(b, walPositionMagic2...)
	b = binary.LittleEndian.AppendUint64(b, through)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(ranges)))
	for _, r := range ranges {
		b = binary.LittleEndian.AppendUint64(b, r.lo)
		b = binary.LittleEndian.AppendUint64(b, r.hi)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, walCRC))
}

// walDecodePosition reads either version of the position file. The ranges
// it returns are sorted, disjoint and above through; anything else is
// ErrCorrupt, since a wrong range would skip a record at replay.
func walDecodePosition(b []byte) (uint64, []walSeqRange, error) {
	if len(b) >= len(walPositionMagic2) && string(b[:len(walPositionMagic2)]) == walPositionMagic2 {
		return walDecodePositionRanges(b)
	}
	through, err := walDecodePositionV1(b)
	return through, nil, err
}

func walDecodePositionRanges(b []byte) (uint64, []walSeqRange, error) {
	head := len(walPositionMagic2) + 8 + 4
	if len(b) < head+4 {
		return 0, nil, fmt.Errorf("wal position: short v2 file: %w", ErrCorrupt)
	}
	n := binary.LittleEndian.Uint32(b[head-4:])
	if n > walMaxPositionRanges || len(b) != head+16*int(n)+4 {
		return 0, nil, fmt.Errorf("wal position: %d ranges in %d bytes: %w", n, len(b), ErrCorrupt)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, walCRC) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return 0, nil, fmt.Errorf("wal position: checksum mismatch: %w", ErrCorrupt)
	}
	through := binary.LittleEndian.Uint64(b[len(walPositionMagic2):])
	if through >= walMaxSeq {
		return 0, nil, fmt.Errorf("wal position %d out of range: %w", through, ErrCorrupt)
	}
	ranges := make([]walSeqRange, n)
	prev := through
	for i := range ranges {
		p := b[head+16*i:]
		r := walSeqRange{binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[8:])}
		if r.lo <= prev || r.hi < r.lo || r.hi >= walMaxSeq {
			return 0, nil, fmt.Errorf("wal position: range %d..%d after %d: %w", r.lo, r.hi, prev, ErrCorrupt)
		}
		ranges[i], prev = r, r.hi
	}
	return through, ranges, nil
}

func walDecodePositionV1(b []byte) (uint64, error) {
	if len(b) != walPositionBytes || string(b[:len(walPositionMagic)]) != walPositionMagic {
		return 0, fmt.Errorf("wal position: bad size or magic: %w", ErrCorrupt)
	}
	body := b[:walPositionBytes-4]
	if crc32.Checksum(body, walCRC) != binary.LittleEndian.Uint32(b[walPositionBytes-4:]) {
		return 0, fmt.Errorf("wal position: checksum mismatch: %w", ErrCorrupt)
	}
	through := binary.LittleEndian.Uint64(body[len(walPositionMagic):])
	if through >= walMaxSeq {
		return 0, fmt.Errorf("wal position %d out of range: %w", through, ErrCorrupt)
	}
	return through, nil
}

// walReadPosition reads the position file, reading at most one byte more
// than the largest valid one so an oversized file cannot cost memory.
func walReadPosition(fsys FS, path string) (uint64, []walSeqRange, error) {
	b, err := readFile(fsys, path, int64(walPositionMaxBytes)+1)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil, err
		}
		return 0, nil, fmt.Errorf("read wal position %s: %w", path, err)
	}
	return walDecodePosition(b)
}

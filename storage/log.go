package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Entry is one record to append: the key (may be empty) and the body, and
// where it came from (the zero Origin when unknown), which the frame keeps
// so the log can tell a record sent again from a new one (Committed).
type Entry struct {
	Key    []byte
	Body   []byte
	Origin Origin
}

// Record is one record read from a log.
type Record struct {
	Offset int64
	// Time is the commit timestamp, Unix nanoseconds.
	Time int64
	Key  []byte
	Body []byte
	// Corrupt marks an offset whose frame failed its checksum in a sealed
	// segment. Key and Body are nil; consumers skip it.
	Corrupt bool
}

const segmentSuffix = ".log"

// segmentName is the file name of the segment whose first offset is base.
// Zero-padded so that lexical order is offset order.
func segmentName(base int64) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }

func parseSegmentName(name string) (int64, bool) {
	s, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(s, 10, 64)
	// Only the canonical spelling: ParseInt takes "+001", which would name
	// a file no other code path can find.
	return base, err == nil && base >= 0 && name == segmentName(base)
}

type segment struct {
	base int64
	// size is the readable size: the file size of a sealed segment, the
	// committed boundary of the active one (frames of a pending batch lie
	// past it).
	size    int64
	index   []indexEntry
	indexed bool // sealed segments build their index on first read
}

// Log is one partition's log: a directory of segments named by base offset.
//
// A record becomes visible (the HWM moves past it) only once a commit frame
// naming the new HWM is durable and the write that carries it was read back
// byte for byte. A batch is one write: its record frames, then its commit
// frame. Recovery believes a commit frame only at the end of an unbroken
// walk of valid frames that names exactly the offset after them, so a batch
// torn anywhere (a record frame short or damaged, the commit frame missing)
// is a hidden tail that recovery cuts; a batch whose every byte reached the
// disk is visible after a crash even if the crash came before Publish (its
// caller was never answered, so it sends the records again: duplicates,
// never a loss or an offset that later holds another record).
//
// A group commit runs in steps: Write, then Sync (one fsync per batch),
// then Publish, which reads the write back and makes the batch visible.
// Append does all three. Sync is separate so that a caller may replace it
// with one barrier for many partitions (SyncLane).
//
// One goroutine (the partition's actor) writes; reads, listings and chunk
// reads are safe from any goroutine.
//
// The active segment's file is held in a Files (files.go), which may close
// it while the log is idle; the log reopens it on its next write.
type Log struct {
	dir   string
	cfg   LogConfig
	fs    FS // fsOf(cfg)
	files *Files
	slot  fileSlot // the active segment's file, guarded by files.mu

	mu       sync.RWMutex
	segs     []*segment  // ascending base; the last one is active
	activeID os.FileInfo // the active segment as created or opened, to know it again
	lost     error       // the active segment on disk is not the one written: no reads either
	hwm      int64
	pending  *Batch // written, not yet synced and read back
	broken   error
	// cutUnsynced: an abort cut the file back but the cut's fsync failed;
	// the next Write syncs it first (syncCutLocked).
	cutUnsynced bool
	closed      bool
	encBuf      []byte // reused encode buffer: at most one write is pending
	readBuf     []byte // reused read-back buffer
	// origins are the origins of the records committed last, at most
	// cfg.RecentOriginsMax: those the open's walk of the active segment
	// found committed, then each batch's as it becomes visible.
	origins recentOrigins

	hooks *logHooks // test fault injection; nil in production
}

// logHooks inject faults into the commit path in tests.
type logHooks struct {
	write    func() error // fails a write
	sync     func() error // fails an fsync
	readBack func([]byte) // damages the read-back bytes
	truncate func() error // fails the truncation after a failed commit
}

// Batch is one group commit on its way to visibility.
type Batch struct {
	first, next int64 // record offsets [first, next)
	start, end  int64 // file positions of this write, in the active segment
	seg         *segment
	buf         []byte
	index       []indexEntry
	origins     []Origin // of its records that have one, remembered once visible
}

// First is the offset of the batch's first record.
func (b *Batch) First() int64 { return b.first }

// Next is one past the batch's last record: the HWM once it is visible.
func (b *Batch) Next() int64 { return b.next }

// OpenLog opens (creating if needed) the log in dir and recovers it: the HWM is
// the last commit frame of the active segment, and everything after that
// frame (a torn write, or frames whose commit never became durable) is cut.
// The log holds its active segment open until Close; Files.OpenLog opens
// one whose file a node-wide cache may close while it is idle.
func OpenLog(dir string, cfg LogConfig) (*Log, error) {
	return (*Files)(nil).OpenLog(dir, cfg)
}

// openLog opens the log in dir; one it creates starts at offset floor (0
// but for a partition re-created after its owner's disk was lost).
func openLog(dir string, cfg LogConfig, files *Files, floor int64) (*Log, error) {
	if floor < 0 {
		return nil, fmt.Errorf("open log %s at floor %d: %w", dir, floor, ErrInvalid)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fsys := fsOf(cfg)
	if err := cfg.Faults.mkdirAllSync(fsys, dir); err != nil {
		return nil, err
	}
	l := &Log{dir: dir, cfg: cfg, fs: fsys, files: files, origins: recentOrigins{max: cfg.RecentOriginsMax}}
	bases, err := listSegmentBases(fsys, dir)
	if err != nil {
		return nil, err
	}
	if len(bases) == 0 {
		if _, err := files.pin(l, func() (File, error) { return l.createActive(floor) }); err != nil {
			return nil, err
		}
		files.unpin(l)
		l.segs = []*segment{{base: floor, indexed: true}}
		l.hwm = floor
		return l, nil
	}
	for _, b := range bases[:len(bases)-1] {
		st, err := fsys.Stat(filepath.Join(dir, segmentName(b)))
		if err != nil {
			return nil, fmt.Errorf("stat segment: %w", err)
		}
		l.segs = append(l.segs, &segment{base: b, size: st.Size()})
	}
	last := bases[len(bases)-1]
	f, err := files.pin(l, func() (File, error) {
		f, err := fsys.OpenFile(filepath.Join(dir, segmentName(last)), os.O_RDWR, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open active segment: %w", err)
		}
		if l.activeID, err = f.Stat(); err != nil {
			f.Close()
			return nil, fmt.Errorf("stat active segment: %w", err)
		}
		return f, nil
	})
	if err != nil {
		return nil, err
	}
	if err := l.recoverActive(f, last); err != nil {
		files.release(l)
		return nil, err
	}
	files.unpin(l)
	return l, nil
}

// recoverActive walks the active segment at open and cuts what was never
// visible.
func (l *Log) recoverActive(f File, last int64) error {
	size := l.activeID.Size()
	sc, err := scanSegment(f, size, last, l.cfg)
	if err != nil {
		return fmt.Errorf("recover %s: %w", segmentName(last), err)
	}
	if sc.committed < size {
		// A torn tail or frames whose commit frame never became durable:
		// they were never visible, so they go, and their offsets are free.
		if err := f.Truncate(sc.committed); err != nil {
			return fmt.Errorf("cut tail of %s: %w", segmentName(last), err)
		}
	}
	if size > 0 {
		// What the walk found may be only in the page cache: a process
		// killed after its write and before its fsync leaves a whole batch
		// there, which the walk believes. Synced before it is visible, or
		// a power loss later would take back records consumers saw and
		// hand their offsets to others. A clean file's fsync costs little.
		if err := l.cfg.Faults.sync(f); err != nil {
			return fmt.Errorf("sync %s at open: %w", segmentName(last), err)
		}
	}
	l.segs = append(l.segs, &segment{base: last, size: sc.committed, index: sc.index, indexed: true})
	l.hwm = sc.hwm
	for _, o := range sc.origins {
		l.origins.add(o)
	}
	return nil
}

// createActive creates the segment at base as the active one.
func (l *Log) createActive(base int64) (File, error) {
	f, err := createSegment(l.fs, l.dir, base, l.cfg.Faults)
	if err != nil {
		return nil, err
	}
	if l.activeID, err = f.Stat(); err != nil {
		f.Close()
		return nil, fmt.Errorf("stat new segment: %w", err)
	}
	return f, nil
}

// fileLocked pins the active segment's file, reopening it if its Files
// closed it; the caller unpins it (l.files.unpin).
func (l *Log) fileLocked() (File, error) {
	return l.files.pin(l, l.reopenLocked)
}

// reopenLocked opens the active segment again. It must be the file the log
// created or opened (same device and inode) and end exactly at the log's
// tail: the log wrote nothing to it that was not synced before it closed,
// so anything else means the file was replaced or changed under the log,
// and serving it would serve records the log never wrote.
func (l *Log) reopenLocked() (File, error) {
	path := filepath.Join(l.dir, segmentName(l.segs[len(l.segs)-1].base))
	f, err := l.fs.OpenFile(path, os.O_RDWR, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, l.loseLocked(fmt.Errorf("active segment %s is gone", path))
	}
	if err != nil {
		return nil, fmt.Errorf("reopen active segment: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat reopened segment: %w", err)
	}
	if tail := l.tailLocked(); !l.fs.SameFile(st, l.activeID) || st.Size() != tail {
		f.Close()
		return nil, l.loseLocked(fmt.Errorf("active segment %s reopened as another file or at %d bytes, log tail at %d", path, st.Size(), tail))
	}
	return f, nil
}

// loseLocked marks the log failed for writes and reads alike; reopening
// the log recovers whatever the directory holds.
func (l *Log) loseLocked(cause error) error {
	l.lost = fmt.Errorf("%v: %w", cause, ErrBroken)
	l.broken = l.lost
	return fmt.Errorf("log %s: %w", l.dir, l.lost)
}

// readableLocked refuses reads of a closed log or one whose active segment
// was lost.
func (l *Log) readableLocked() error {
	return l.usableLocked(l.lost)
}

// usableLocked is the refusal of a closed log, else of failed (l.lost for
// reads, l.broken for writes), else nil.
func (l *Log) usableLocked(failed error) error {
	if l.closed {
		return fmt.Errorf("log %s: %w", l.dir, ErrClosed)
	}
	if failed != nil {
		return fmt.Errorf("log %s: %w", l.dir, failed)
	}
	return nil
}

func listSegmentBases(fsys FS, dir string) ([]int64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var bases []int64
	for _, e := range ents {
		if b, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			bases = append(bases, b)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	return bases, nil
}

// createSegment creates an empty segment file and makes its name durable, so
// that a later commit into it cannot outlive the file's directory entry.
func createSegment(fsys FS, dir string, base int64, faults *Faults) (File, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, segmentName(base)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create segment: %w", err)
	}
	if err := faults.syncDir(fsys, dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// HWM is the high watermark: the exclusive bound of the visible records.
func (l *Log) HWM() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.hwm
}

// Oldest is the lowest retained offset (equal to HWM when the log is empty).
func (l *Log) Oldest() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.segs[0].base
}

// Bytes is the readable size of all segments.
func (l *Log) Bytes() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Append commits entries as one group commit and returns the first offset.
// When it returns nil the records are durable and visible. When it returns
// an error nothing was appended and the offsets go to later records.
func (l *Log) Append(now time.Time, entries []Entry) (int64, error) {
	b, err := l.Write(now, entries)
	if err != nil {
		return 0, err
	}
	if err := l.Sync(); err != nil {
		return 0, l.Abort(err)
	}
	if err := l.Publish(b); err != nil {
		return 0, err
	}
	return b.first, nil
}

// Write encodes entries as record frames followed by the commit frame
// that makes them visible, and writes them in one write after everything
// visible so far. Nothing new is visible until Sync and then Publish. At
// most one write is pending at a time.
func (l *Log) Write(now time.Time, entries []Entry) (*Batch, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return nil, err
	}
	if l.pending != nil {
		return nil, fmt.Errorf("write with a write pending: %w", ErrInvalid)
	}
	if err := l.syncCutLocked(); err != nil {
		return nil, err
	}
	if len(entries) == 0 || len(entries) > l.cfg.MaxBatchRecords {
		return nil, fmt.Errorf("batch of %d records (max %d): %w", len(entries), l.cfg.MaxBatchRecords, ErrInvalid)
	}
	origins := l.cfg.Origins == nil || l.cfg.Origins()
	size := frameHeaderBytes
	for _, e := range entries {
		if len(e.Body) == 0 {
			return nil, fmt.Errorf("empty body: %w", ErrInvalid)
		}
		if len(e.Body) > l.cfg.MaxBodyBytes || len(e.Key) > l.cfg.MaxKeyBytes {
			return nil, fmt.Errorf("record of %d body and %d key bytes: %w", len(e.Body), len(e.Key), ErrTooLarge)
		}
		if !origins {
			e.Origin = Origin{}
		}
		size += entrySize(e)
	}
	if size > l.cfg.MaxBatchBytes {
		return nil, fmt.Errorf("batch of %d bytes (max %d): %w", size, l.cfg.MaxBatchBytes, ErrTooLarge)
	}
	ts := now.UnixNano()
	seg := l.segs[len(l.segs)-1]
	if tail := l.tailLocked(); tail > 0 && tail+int64(size) > l.cfg.SegmentMaxBytes {
		// Every visible batch ends in its commit frame, so the sealed
		// segment does too.
		if err := l.rollLocked(); err != nil {
			return nil, err
		}
		seg = l.segs[len(l.segs)-1]
	}
	b := &Batch{first: l.hwm, start: l.tailLocked(), seg: seg}
	buf := l.encBuf[:0]
	b.next = b.first + int64(len(entries))
	lastIndexed := b.start - int64(l.cfg.IndexIntervalBytes)
	if n := len(seg.index); n > 0 {
		lastIndexed = seg.index[n-1].pos
	}
	for i, e := range entries {
		if !origins {
			e.Origin = Origin{}
		}
		pos := b.start + int64(len(buf))
		if pos-lastIndexed >= int64(l.cfg.IndexIntervalBytes) {
			b.index = append(b.index, indexEntry{offset: b.first + int64(i), pos: pos})
			lastIndexed = pos
		}
		buf = appendFrame(buf, frame{kind: frameRecord, offset: b.first + int64(i), time: ts, origin: e.Origin, key: e.Key, body: e.Body})
		if e.Origin.WAL != 0 {
			b.origins = append(b.origins, e.Origin)
		}
	}
	buf = appendFrame(buf, frame{kind: frameCommit, offset: b.next, time: ts})
	l.encBuf = buf
	b.buf = buf
	b.end = b.start + int64(len(buf))
	if err := l.writeLocked(b); err != nil {
		return nil, err
	}
	return b, nil
}

// tailLocked is the file position after everything visible: where the
// next write goes.
func (l *Log) tailLocked() int64 {
	return l.segs[len(l.segs)-1].size
}

// writeLocked writes b as the pending write. Its pin of the file lasts
// until Publish or Abort clear the pending write, so a file with an unsynced
// write is never closed.
func (l *Log) writeLocked(b *Batch) error {
	f, err := l.fileLocked()
	if err != nil {
		return err
	}
	l.pending = b
	err = l.hook(func(h *logHooks) func() error { return h.write })
	if err == nil {
		_, err = l.cfg.Faults.writeAt(f, b.buf, b.start)
	}
	if err != nil {
		return l.abortLocked(fmt.Errorf("write batch: %w", err))
	}
	return nil
}

func (l *Log) hook(pick func(*logHooks) func() error) error {
	if l.hooks == nil {
		return nil
	}
	if fn := pick(l.hooks); fn != nil {
		return fn()
	}
	return nil
}

// writableLocked refuses writes to a closed log or one that failed a
// write (or lost its active segment).
func (l *Log) writableLocked() error {
	return l.usableLocked(l.broken)
}

// rollLocked seals the active segment and starts a new one at the HWM. It
// runs only with no write pending, so a sealed segment ends in the commit
// frame of its last batch.
// The sealed segment's file closes first: were the create to fail, the
// sealed one stays active and is reopened at its next write.
func (l *Log) rollLocked() error {
	if err := l.files.drop(l); err != nil {
		return fmt.Errorf("close sealed segment: %w", err)
	}
	if _, err := l.files.pin(l, func() (File, error) { return l.createActive(l.hwm) }); err != nil {
		return err
	}
	l.files.unpin(l)
	l.segs = append(l.segs, &segment{base: l.hwm, indexed: true})
	return nil
}

// Sync makes everything written durable. Callers that batch syncs across
// many partitions may use their own barrier instead (syncfs), then Publish.
//
// A file its Files closed holds nothing unsynced, so it is not reopened.
func (l *Log) Sync() error {
	l.mu.RLock()
	f, err := l.files.pin(l, nil)
	l.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("sync batch: %w", err)
	}
	if f != nil {
		defer l.files.unpin(l)
	}
	if err := l.hook(func(h *logHooks) func() error { return h.sync }); err != nil {
		return fmt.Errorf("sync batch: %w", err)
	}
	if err := l.cfg.Faults.failSync(l.dir); err != nil {
		return fmt.Errorf("sync batch: %w", err)
	}
	if f == nil {
		return nil
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync batch: %w", err)
	}
	return nil
}

// syncFile is the active segment, for a SyncLane to sync: pinned under
// the lock (a log closed meanwhile is refused rather than synced), so that
// the open-file cache cannot close it under the sync; release unpins it.
// A nil file with no error is one the cache had closed: a closed file
// holds no unsynced bytes (a write pending keeps its pin), so there is
// nothing to sync.
func (l *Log) syncFile() (f File, release func(), err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, nil, fmt.Errorf("log %s: %w", l.dir, ErrClosed)
	}
	if err := l.hook(func(h *logHooks) func() error { return h.sync }); err != nil {
		return nil, nil, fmt.Errorf("sync batch: %w", err)
	}
	// The lane's syncfs or fdatasync round never sees a log the switch
	// fails: its request fails here, as that log's own sync would.
	if err := l.cfg.Faults.failSync(l.dir); err != nil {
		return nil, nil, fmt.Errorf("sync batch: %w", err)
	}
	if f, err = l.files.pin(l, nil); err != nil {
		return nil, nil, fmt.Errorf("sync batch: %w", err)
	}
	if f == nil {
		return nil, func() {}, nil
	}
	return f, func() { l.files.unpin(l) }, nil
}

// Publish reads a durable write back and checks that the file holds exactly
// the frames written; then the batch is visible. A write that does not read
// back fails: its frames are truncated and its offsets go to later records.
func (l *Log) Publish(b *Batch) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending != b || b == nil {
		return fmt.Errorf("publish of a batch that is not pending: %w", ErrInvalid)
	}
	return l.publishLocked(b)
}

func (l *Log) publishLocked(b *Batch) error {
	if err := l.readBackLocked(b); err != nil {
		return l.abortLocked(err)
	}
	l.makeVisibleLocked(b, b.end)
	l.clearPendingLocked()
	return nil
}

// makeVisibleLocked moves the HWM past a, whose commit frame ends at boundary.
func (l *Log) makeVisibleLocked(a *Batch, boundary int64) {
	if a.next <= l.hwm || boundary <= a.seg.size {
		panic(fmt.Sprintf("storage: visibility must only move forward: hwm %d to %d, boundary %d to %d", l.hwm, a.next, a.seg.size, boundary))
	}
	a.seg.size = boundary
	a.seg.index = append(a.seg.index, a.index...)
	l.hwm = a.next
	for _, o := range a.origins {
		l.origins.add(o)
	}
}

// Committed reports whether a record from o is among the last records the
// log made visible (at most LogConfig.RecentOriginsMax of them, counted
// since the open's walk of the active segment). True means the record is
// durably committed here; false means only that it is not remembered.
func (l *Log) Committed(o Origin) bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.origins.has(o)
}

// readBackLocked reads a synced write back and checks it byte for byte
// against what was written.
func (l *Log) readBackLocked(b *Batch) error {
	if cap(l.readBuf) < len(b.buf) {
		l.readBuf = make([]byte, len(b.buf))
	}
	got := l.readBuf[:len(b.buf)]
	f, err := l.fileLocked() // open: the pending write pins it
	if err != nil {
		return fmt.Errorf("read back batch: %w", err)
	}
	_, err = f.ReadAt(got, b.start)
	l.files.unpin(l)
	if err != nil {
		return fmt.Errorf("read back batch: %w", err)
	}
	if l.hooks != nil && l.hooks.readBack != nil {
		l.hooks.readBack(got)
	}
	if !bytes.Equal(got, b.buf) {
		return fmt.Errorf("read back at %d: bytes differ from those written: %w", b.start, ErrCorrupt)
	}
	// The bytes are exactly what the encoder produced; the encoder itself
	// is proved by the frame round-trip tests and fuzzing, so the frames are
	// not decoded again here (it cost a tenth of a large batch's commit).
	return nil
}

// Abort gives up every batch not yet visible after cause (typically a
// failed Sync): their frames are truncated, durably, and their offsets go to
// later records. It returns cause, annotated if the truncation failed.
func (l *Log) Abort(cause error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending == nil {
		return cause
	}
	return l.abortLocked(cause)
}

// abortLocked truncates to the last visible boundary. The truncation is
// synced: a failed fsync may have left frames on disk, and a later, shorter
// write must not leave a stale frame reachable. If the truncation fails the
// log refuses writes until it is reopened (recovery cuts the same bytes).
//
// If only the truncation's fsync fails, the cut is in the file all the
// same: a reopen would find exactly what the log now holds and sync
// nothing more. So the log stays writable and syncs the cut before its
// next write (syncCutLocked) rather than refuse every commit until its
// actor restarts: under a disk whose fsyncs fail for a while, those
// restarts ran out and the partition was given up on until it moved.
func (l *Log) abortLocked(cause error) error {
	// The file is pinned before the pending write's pin ends: closed in
	// between, it would reopen longer than the tail and look replaced.
	f, err := l.fileLocked()
	l.clearPendingLocked()
	boundary := l.segs[len(l.segs)-1].size
	if err == nil {
		defer l.files.unpin(l)
		err = l.hook(func(h *logHooks) func() error { return h.truncate })
	}
	if err == nil {
		err = f.Truncate(boundary)
	}
	if err != nil {
		l.broken = fmt.Errorf("truncate failed commit at %d: %v: %w", boundary, err, ErrBroken)
		return fmt.Errorf("%w (and %w)", cause, l.broken)
	}
	if err := l.cfg.Faults.sync(f); err != nil {
		l.cutUnsynced = true
		return fmt.Errorf("%w (and the cut at %d is not yet durable: %v)", cause, boundary, err)
	}
	l.cutUnsynced = false
	return cause
}

// syncCutLocked makes the cut of an earlier abort durable before anything
// is written after it, so a record never lands where a power loss could
// bring a failed batch's frames back past it.
func (l *Log) syncCutLocked() error {
	if !l.cutUnsynced {
		return nil
	}
	f, err := l.fileLocked()
	if err != nil {
		return fmt.Errorf("sync cut of a failed commit: %w", err)
	}
	defer l.files.unpin(l)
	if err := l.cfg.Faults.sync(f); err != nil {
		return fmt.Errorf("sync cut of a failed commit: %w", err)
	}
	l.cutUnsynced = false
	return nil
}

// clearPendingLocked ends the pending write and its pin of the file.
func (l *Log) clearPendingLocked() {
	if l.pending != nil {
		l.pending = nil
		l.files.unpin(l)
	}
}

// syncPendingLocked fsyncs the file the pending write pins.
func (l *Log) syncPendingLocked() error {
	f, err := l.fileLocked()
	if err != nil {
		return err
	}
	defer l.files.unpin(l)
	return l.cfg.Faults.sync(f)
}

// Read returns up to maxRecords records (and about maxBytes of keys and
// bodies, at least one record) starting at offset from. An offset at or past
// the HWM returns nothing; one below the oldest retained returns
// ErrOutOfRange. Damaged frames come back as Corrupt records.
func (l *Log) Read(from int64, maxRecords, maxBytes int) ([]Record, error) {
	var out []Record
	size := 0
	for len(out) < maxRecords && size < maxBytes {
		loc, err := l.locate(from)
		if err != nil {
			if len(out) > 0 && loc.gone {
				break
			}
			return out, err
		}
		if loc.end <= from {
			break
		}
		f, err := l.fs.OpenFile(loc.path, os.O_RDONLY, 0)
		if err != nil {
			return out, fmt.Errorf("read %s: %v: %w", loc.path, err, ErrOutOfRange)
		}
		next := from
		err = walkRecords(f, loc.limit, loc.base, loc.end, loc.pos, loc.expect, l.readWindow(maxRecords, maxBytes), func(_ int64, r Record) bool {
			if r.Offset < from {
				return true
			}
			if len(out) >= maxRecords || (size >= maxBytes && len(out) > 0) {
				return false
			}
			if !r.Corrupt {
				r.Key = bytes.Clone(r.Key)
				r.Body = bytes.Clone(r.Body)
				size += len(r.Key) + len(r.Body)
			}
			out = append(out, r)
			next = r.Offset + 1
			return true
		})
		f.Close()
		if err != nil {
			return out, fmt.Errorf("read %s: %w", loc.path, err)
		}
		if next == from {
			// The segment's readable bytes end before its last offset:
			// report the remainder rather than loop.
			for ; next < loc.end && len(out) < maxRecords; next++ {
				out = append(out, Record{Offset: next, Corrupt: true})
			}
		}
		from = next
	}
	return out, nil
}

// readWindow sizes a read's buffer to what it asks for: a consume reads one
// record, and a 256 KiB buffer per consume would be mostly garbage.
func (l *Log) readWindow(maxRecords, maxBytes int) int {
	want := int64(maxBytes) + int64(frameHeaderBytes+frameOriginBytes)*int64(min(maxRecords, 1024)) + int64(l.cfg.IndexIntervalBytes)
	return int(min(want, int64(l.cfg.ReadBufferBytes)))
}

type location struct {
	path        string
	base, end   int64 // offsets [base, end) live in this segment
	limit       int64 // readable bytes
	pos, expect int64 // where to start walking
	gone        bool
}

// locate finds the segment holding offset and where to start reading it,
// building a sealed segment's index on first use.
func (l *Log) locate(offset int64) (location, error) {
	l.mu.RLock()
	if err := l.readableLocked(); err != nil {
		l.mu.RUnlock()
		return location{}, err
	}
	if offset < l.segs[0].base {
		l.mu.RUnlock()
		return location{gone: true}, fmt.Errorf("offset %d below oldest %d: %w", offset, l.segs[0].base, ErrOutOfRange)
	}
	if hwm := l.hwm; offset >= hwm {
		l.mu.RUnlock()
		return location{end: hwm}, nil
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	seg := l.segs[i]
	loc := location{path: filepath.Join(l.dir, segmentName(seg.base)), base: seg.base, limit: seg.size, expect: seg.base, end: l.hwm}
	if i < len(l.segs)-1 {
		loc.end = l.segs[i+1].base
	}
	indexed, idx := seg.indexed, seg.index
	l.mu.RUnlock()

	if !indexed {
		f, err := l.fs.OpenFile(loc.path, os.O_RDONLY, 0)
		if err != nil {
			return location{gone: true}, fmt.Errorf("index %s: %v: %w", loc.path, err, ErrOutOfRange)
		}
		idx, err = buildIndex(f, loc.limit, loc.base, loc.end, l.cfg)
		f.Close()
		if err != nil {
			return location{}, fmt.Errorf("index %s: %w", loc.path, err)
		}
		l.mu.Lock()
		seg.index, seg.indexed = idx, true
		l.mu.Unlock()
	}
	j := sort.Search(len(idx), func(j int) bool { return idx[j].offset > offset }) - 1
	if j >= 0 {
		loc.pos, loc.expect = idx[j].pos, idx[j].offset
	}
	return loc, nil
}

// OldestSealed is the modification time of the oldest sealed segment, the
// one Retain by age removes first; ok is false when the active segment is
// the only one. A partition at rest keeps it to know when retention would
// remove something, without its log open.
func (l *Log) OldestSealed() (mod time.Time, ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.segs) < 2 {
		return time.Time{}, false, nil
	}
	st, err := l.fs.Stat(filepath.Join(l.dir, segmentName(l.segs[0].base)))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest sealed segment: %w", err)
	}
	return st.ModTime(), true, nil
}

// OldestSealedIn is OldestSealed of the log in dir, read from its
// directory without opening it (a resting partition's, which nobody
// opened since the node started): the smallest-based segment is the
// oldest, and it is sealed when another follows it. A directory that does
// not exist holds no sealed segment.
func OldestSealedIn(cfg LogConfig, dir string) (mod time.Time, ok bool, err error) {
	fsys := fsOf(cfg)
	bases, err := listSegmentBases(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	if len(bases) < 2 {
		return time.Time{}, false, nil
	}
	st, err := fsys.Stat(filepath.Join(dir, segmentName(bases[0])))
	if err != nil {
		return time.Time{}, false, fmt.Errorf("oldest sealed segment: %w", err)
	}
	return st.ModTime(), true, nil
}

// LogAbsent reports whether nothing is at dir on the log's file system:
// a partition that never opened its log there holds nothing. An error
// that is not "not there" reads as present (an open finds out).
func LogAbsent(cfg LogConfig, dir string) bool {
	_, err := fsOf(cfg).Stat(dir)
	return errors.Is(err, fs.ErrNotExist)
}

// Retain removes whole sealed segments, oldest first, while the oldest is
// older than maxAge by its modification time (0: no age limit) or the log is
// larger than maxBytes (0: no size limit). The active segment always stays.
// It returns how many segments it removed.
func (l *Log) Retain(now time.Time, maxAge time.Duration, maxBytes int64) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return 0, err
	}
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	removed := 0
	for len(l.segs) > 1 {
		s := l.segs[0]
		path := filepath.Join(l.dir, segmentName(s.base))
		expired := false
		if maxAge > 0 {
			st, err := l.fs.Stat(path)
			if err != nil {
				return removed, fmt.Errorf("retain: %w", err)
			}
			expired = now.Sub(st.ModTime()) > maxAge
		}
		if !expired && (maxBytes <= 0 || total <= maxBytes) {
			break
		}
		if err := l.fs.Remove(path); err != nil {
			return removed, fmt.Errorf("retain: %w", err)
		}
		total -= s.size
		l.segs = l.segs[1:]
		removed++
	}
	if removed > 0 {
		return removed, l.cfg.Faults.syncDir(l.fs, l.dir)
	}
	return 0, nil
}

// Close closes the active segment. A write pending is abandoned: its
// caller hears no success, and recovery keeps its frames only if they all
// became durable (a duplicate of records sent again, never a loss).
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	return l.files.release(l)
}

package storage

import (
	"container/list"
	"fmt"
	"sync"
)

// Files bounds the active segment files that the logs opened through it
// (Files.OpenLog) hold open, so that a node's descriptors do not grow with
// its partitions. A log's file is pinned while the log uses it and while a
// write into it is pending (written, not yet synced and read back); an
// unpinned file stays open until another log needs its slot, least recently
// used first, and its log reopens it on its next write. Reads, listings and
// chunk reads open a segment of their own for the call and never need it.
//
// Only a file with no pin is closed, so nothing closed was left unsynced:
// every write stays pinned until Publish or Abort, which come after its
// sync. A reopened file must be the one the log wrote, at the log's tail
// (Log.reopenLocked); anything else marks the log broken.
//
// When every slot is pinned, a log that needs one waits for a pin to end.
// Pins end without taking a slot (a sync, a read-back), so the wait ends as
// long as the writes in flight do; the limit must exceed the partitions a
// node writes at once for the wait to stay rare.
type Files struct {
	limit int

	mu    sync.Mutex
	freed sync.Cond  // a slot was freed or a file became idle
	open  int        // slots taken: files open or being opened
	idle  list.List  // *Log with an open, unpinned file; least recently used first
	stats FilesStats // counters, for tests and benchmarks
}

// FilesStats counts what a Files did.
type FilesStats struct {
	Open      int    // files held now
	Opens     uint64 // files opened or created, first opens included
	Evictions uint64 // idle files closed to free a slot
	Waits     uint64 // times a log waited for a pin to end
}

// fileSlot is one log's place in its Files, guarded by Files.mu.
type fileSlot struct {
	f        File
	pins     int
	idle     *list.Element // set while f is open and pins is 0
	released bool          // the log closed: no pin succeeds any more
	closeErr error         // the close of this log's evicted file failed
}

// NewFiles returns a cache that holds at most maxOpen active segment files
// open at once (LogConfig.MaxOpenSegmentFiles).
func NewFiles(maxOpen int) (*Files, error) {
	if maxOpen < 1 {
		return nil, fmt.Errorf("files: max open %d below 1: %w", maxOpen, ErrInvalid)
	}
	return newFiles(maxOpen), nil
}

func newFiles(limit int) *Files {
	fs := &Files{limit: limit}
	fs.freed.L = &fs.mu
	return fs
}

// OpenLog opens the log in dir (as the package's OpenLog does) with its
// active segment held in fs. A nil Files bounds nothing: the log holds its
// own file, as one opened with the package's OpenLog does.
func (fs *Files) OpenLog(dir string, cfg LogConfig) (*Log, error) {
	if fs == nil {
		fs = newFiles(1)
	}
	return openLog(dir, cfg, fs, 0)
}

// OpenLogFrom is OpenLog for a partition whose log, when it has none yet,
// starts at offset floor: one re-created after its owner's disk was lost
// (messages.Assignment.Floor). A log already there opens as it is; the
// caller compares its HWM with the floor.
func (fs *Files) OpenLogFrom(dir string, cfg LogConfig, floor int64) (*Log, error) {
	if fs == nil {
		fs = newFiles(1)
	}
	return openLog(dir, cfg, fs, floor)
}

// Stats returns the counters and the files held now.
func (fs *Files) Stats() FilesStats {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	s := fs.stats
	s.Open = fs.open
	return s
}

// pin returns l's file and holds it open until unpin. A closed file is
// opened with open, once a slot is free: the least recently used idle file
// is closed for it, or, with none idle, pin waits for one. A nil open
// returns a nil file when it is closed (nothing to sync). The caller holds
// l.mu for writing whenever open is not nil, so no other pin of l runs
// while the file is being opened.
func (fs *Files) pin(l *Log, open func() (File, error)) (File, error) {
	fs.mu.Lock()
	s := &l.slot
	if s.released {
		fs.mu.Unlock()
		return nil, fmt.Errorf("log %s: %w", l.dir, ErrClosed)
	}
	if err := s.closeErr; err != nil {
		s.closeErr = nil
		fs.mu.Unlock()
		return nil, fmt.Errorf("close of evicted segment of %s: %w", l.dir, err)
	}
	if s.f != nil {
		fs.unidleLocked(s)
		s.pins++
		fs.mu.Unlock()
		return s.f, nil
	}
	if open == nil {
		fs.mu.Unlock()
		return nil, nil
	}
	var victims []*Log
	for fs.open >= fs.limit {
		e := fs.idle.Front()
		if e == nil {
			fs.stats.Waits++
			fs.freed.Wait()
			continue
		}
		v := e.Value.(*Log)
		fs.unidleLocked(&v.slot)
		victims = append(victims, v)
		fs.open--
		fs.stats.Evictions++
	}
	fs.open++
	s.pins++
	// The victims' files leave their slots now but are closed below, before
	// this one opens, so the files open never exceed the limit.
	files := make([]File, len(victims))
	for i, v := range victims {
		files[i], v.slot.f = v.slot.f, nil
	}
	fs.mu.Unlock()

	fs.closeEvicted(victims, files)
	f, err := open()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if err != nil {
		fs.open--
		s.pins--
		fs.freed.Broadcast()
		return nil, err
	}
	s.f = f
	fs.stats.Opens++
	return f, nil
}

// closeEvicted closes the files taken from victims. A failed close (after
// their writes were synced) is the victim's to report, at its next pin.
func (fs *Files) closeEvicted(victims []*Log, files []File) {
	for i, f := range files {
		if err := f.Close(); err != nil {
			fs.mu.Lock()
			victims[i].slot.closeErr = err
			fs.mu.Unlock()
		}
	}
}

// unpin ends a pin; the last one makes the file idle, the most recently used.
func (fs *Files) unpin(l *Log) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	s := &l.slot
	if s.released {
		return // Close ended every pin
	}
	if s.pins == 0 {
		panic(fmt.Sprintf("storage: unpin of %s without a pin", l.dir))
	}
	s.pins--
	if s.pins == 0 && s.f != nil {
		s.idle = fs.idle.PushBack(l)
		fs.freed.Broadcast()
	}
}

// drop closes l's file now and frees its slot (a roll seals it). The log
// holds l.mu for writing; a Sync that pinned the file before keeps its pin,
// and Go defers the close of a file until a Sync running on it returns.
func (fs *Files) drop(l *Log) error {
	fs.mu.Lock()
	s := &l.slot
	f := fs.detachLocked(s)
	fs.mu.Unlock()
	if f == nil {
		return nil
	}
	return f.Close()
}

// release closes l's file for good (Log.Close) and frees its slot.
func (fs *Files) release(l *Log) error {
	fs.mu.Lock()
	s := &l.slot
	s.released = true
	s.pins = 0
	f := fs.detachLocked(s)
	err := s.closeErr
	s.closeErr = nil
	fs.mu.Unlock()
	if f != nil {
		if cerr := f.Close(); cerr != nil {
			err = cerr
		}
	}
	return err
}

// detachLocked takes s's open file, if any, out of the cache: off the idle
// list, out of the open count, and a waiter for a free slot woken. The
// caller closes the file it returns after letting go of fs.mu.
func (fs *Files) detachLocked(s *fileSlot) File {
	f := s.f
	if f != nil {
		fs.unidleLocked(s)
		s.f = nil
		fs.open--
		fs.freed.Broadcast()
	}
	return f
}

func (fs *Files) unidleLocked(s *fileSlot) {
	if s.idle != nil {
		fs.idle.Remove(s.idle)
		s.idle = nil
	}
}

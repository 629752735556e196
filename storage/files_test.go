package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
)

func newTestFiles(t testing.TB, maxOpen int) *Files {
	t.Helper()
	fs, err := NewFiles(maxOpen)
	if err != nil {
		t.Fatalf("new files: %v", err)
	}
	return fs
}

func openCachedLog(t testing.TB, fs *Files, dir string) *Log {
	t.Helper()
	l, err := fs.OpenLog(dir, smallLogConfig())
	if err != nil {
		t.Fatalf("open log %s: %v", dir, err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// openAndCloseLater opens the log at dir through fs in a goroutine and
// closes it again; the channel answers once, with the first error, when it
// is done. A test that fills the cache watches it wait for a slot.
func openAndCloseLater(fs *Files, dir string) <-chan error {
	opened := make(chan error, 1)
	go func() {
		l, err := fs.OpenLog(dir, smallLogConfig())
		if err == nil {
			err = l.Close()
		}
		opened <- err
	}()
	return opened
}

// openFDs counts this process's open descriptors.
func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

func TestFilesHoldAtMostTheLimitOpenAcrossManyLogs(t *testing.T) {
	const logs, limit = 40, 4
	fs := newTestFiles(t, limit)
	before := openFDs(t)
	root := t.TempDir()
	ls := make([]*Log, logs)
	for i := range ls {
		ls[i] = openCachedLog(t, fs, filepath.Join(root, fmt.Sprint(i)))
	}
	// Enough rounds that every log rolls segments and reopens its file.
	for round := 0; round < 30; round++ {
		for i, l := range ls {
			appendN(t, l, 1, 3)
			if got := fs.Stats().Open; got > limit {
				t.Fatalf("round %d log %d: got %d files held, want at most %d", round, i, got, limit)
			}
		}
		if got := openFDs(t) - before; got > limit {
			t.Fatalf("round %d: got %d more descriptors open, want at most %d", round, got, limit)
		}
	}
	if st := fs.Stats(); st.Evictions == 0 {
		t.Fatalf("got no evictions over %d logs with %d files, want some", logs, limit)
	}
	for i, l := range ls {
		checkRecords(t, readAll(t, l, 0), 0, 90)
		if got := len(l.segs); got < 2 {
			t.Fatalf("log %d: got %d segments, want a roll", i, got)
		}
	}
	// What the cache closed and reopened recovers to the same logs.
	for i, l := range ls {
		if err := l.Close(); err != nil {
			t.Fatalf("close log %d: %v", i, err)
		}
	}
	if got := fs.Stats().Open; got != 0 {
		t.Fatalf("after close: got %d files held, want 0", got)
	}
	for i := range ls {
		l := openTestLog(t, filepath.Join(root, fmt.Sprint(i)), smallLogConfig())
		if l.HWM() != 90 {
			t.Fatalf("log %d reopened: got hwm %d, want 90", i, l.HWM())
		}
		checkRecords(t, readAll(t, l, 0), 0, 90)
	}
}

func TestFilesEvictTheLeastRecentlyUsedIdleFile(t *testing.T) {
	fs := newTestFiles(t, 2)
	root := t.TempDir()
	a := openCachedLog(t, fs, filepath.Join(root, "a"))
	b := openCachedLog(t, fs, filepath.Join(root, "b"))
	appendN(t, a, 1, 1) // a is now the most recently used
	c := openCachedLog(t, fs, filepath.Join(root, "c"))
	if b.slot.f != nil {
		t.Fatalf("got b's file open, want it evicted: a was used after it")
	}
	if a.slot.f == nil || c.slot.f == nil {
		t.Fatalf("got a open %v, c open %v, want both open", a.slot.f != nil, c.slot.f != nil)
	}
}

// A file with a write pending (not yet synced and read back) is never
// closed: a log that needs a slot waits until the write is published.
func TestFilesNeverCloseAFileWithAWritePending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := newTestFiles(t, 1)
		root := t.TempDir()
		a := openCachedLog(t, fs, filepath.Join(root, "a"))
		b, err := a.Write(t0, entriesFrom(0, 2))
		if err != nil {
			t.Fatalf("write: %v", err)
		}
		opened := openAndCloseLater(fs, filepath.Join(root, "b"))
		synctest.Wait()
		select {
		case err := <-opened:
			t.Fatalf("got a second log opened (err %v) with the only file pinned by a pending write, want it waiting", err)
		default:
		}
		if got := fs.Stats().Waits; got != 1 {
			t.Fatalf("got %d waits, want 1", got)
		}
		if err := a.Sync(); err != nil {
			t.Fatalf("sync: %v", err)
		}
		if err := a.Publish(b); err != nil {
			t.Fatalf("publish: %v", err)
		}
		synctest.Wait()
		if err := <-opened; err != nil {
			t.Fatalf("open after the publish: %v", err)
		}
		if a.slot.f != nil {
			t.Fatalf("got a's file still open, want it evicted once idle")
		}
		// a's next write reopens its file, closed in between, at its tail.
		appendN(t, a, 1, 1)
		checkRecords(t, readAll(t, a, 0), 0, 3)
	})
}

// A Sync holds its file: an eviction in the middle would fail it, or, had
// it closed the file before the Sync began, skip the fsync.
func TestFilesNeverCloseAFileUnderASync(t *testing.T) {
	fs := newTestFiles(t, 1)
	root := t.TempDir()
	a := openCachedLog(t, fs, filepath.Join(root, "a"))
	appendN(t, a, 1, 1)
	syncing, release := make(chan struct{}), make(chan struct{})
	a.hooks = &logHooks{sync: func() error {
		close(syncing)
		<-release
		return nil
	}}
	done := make(chan error, 1)
	go func() { done <- a.Sync() }()
	<-syncing
	opened := openAndCloseLater(fs, filepath.Join(root, "b"))
	for fs.Stats().Waits == 0 {
		select {
		case err := <-opened:
			t.Fatalf("got a second log opened (err %v) while the only file was under a Sync, want it waiting", err)
		default:
			runtime.Gosched()
		}
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("sync: got %v, want nil", err)
	}
	if err := <-opened; err != nil {
		t.Fatalf("open after the sync: %v", err)
	}
}

func TestSyncOfAClosedFileHasNothingToDo(t *testing.T) {
	fs := newTestFiles(t, 1)
	root := t.TempDir()
	a := openCachedLog(t, fs, filepath.Join(root, "a"))
	appendN(t, a, 1, 1)
	openCachedLog(t, fs, filepath.Join(root, "b"))
	opens := fs.Stats().Opens
	if err := a.Sync(); err != nil {
		t.Fatalf("sync of an evicted file: %v", err)
	}
	if got := fs.Stats().Opens; got != opens {
		t.Fatalf("got %d opens after the sync, want %d: nothing unsynced to reopen for", got, opens)
	}
}

// evictA leaves a's file closed by opening another log in a cache of one.
func evictA(t *testing.T) (fs *Files, a *Log, path string) {
	fs = newTestFiles(t, 1)
	root := t.TempDir()
	a = openCachedLog(t, fs, filepath.Join(root, "a"))
	appendN(t, a, 2, 3)
	openCachedLog(t, fs, filepath.Join(root, "b"))
	if a.slot.f != nil {
		t.Fatalf("got a's file open, want it evicted")
	}
	return fs, a, filepath.Join(a.dir, segmentName(0))
}

func checkLost(t *testing.T, a *Log) {
	t.Helper()
	if _, err := a.Append(t0, entriesFrom(6, 1)); !errors.Is(err, ErrBroken) {
		t.Fatalf("append: got %v, want ErrBroken", err)
	}
	if _, err := a.Read(0, 10, 1<<20); !errors.Is(err, ErrBroken) {
		t.Fatalf("read: got %v, want ErrBroken", err)
	}
	if _, err := a.List(t0); !errors.Is(err, ErrBroken) {
		t.Fatalf("list: got %v, want ErrBroken", err)
	}
	if _, err := a.ReadChunk(segmentName(0), 0, make([]byte, 64)); !errors.Is(err, ErrBroken) {
		t.Fatalf("read chunk: got %v, want ErrBroken", err)
	}
}

func TestReopenedSegmentOfAnotherSizeMarksTheLogLost(t *testing.T) {
	_, a, path := evictA(t)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("not written by the log")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	checkLost(t, a)
}

func TestReopenedSegmentThatIsAnotherFileMarksTheLogLost(t *testing.T) {
	_, a, path := evictA(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The same bytes at the same size, under another inode.
	if err := os.WriteFile(path+".copy", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".copy", path); err != nil {
		t.Fatal(err)
	}
	checkLost(t, a)
}

func TestReopenedSegmentThatIsGoneMarksTheLogLost(t *testing.T) {
	_, a, path := evictA(t)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(t0, entriesFrom(6, 1)); !errors.Is(err, ErrBroken) {
		t.Fatalf("append: got %v, want ErrBroken", err)
	}
}

func TestReopenedSegmentAtItsTailTakesWrites(t *testing.T) {
	fs, a, _ := evictA(t)
	opens := fs.Stats().Opens
	appendN(t, a, 1, 2)
	if got := fs.Stats().Opens; got != opens+1 {
		t.Fatalf("got %d opens, want %d: one reopen", got, opens+1)
	}
	checkRecords(t, readAll(t, a, 0), 0, 8)
}

// Many logs in a small cache, each written by its own goroutine with its
// syncs on another, read and listed by others: no operation fails, so no
// eviction closed a file a write, a sync or a read-back used (go test -race).
func TestFilesUnderConcurrentWritesSyncsAndReads(t *testing.T) {
	const logs, limit, batches = 12, 3, 40
	fs := newTestFiles(t, limit)
	root := t.TempDir()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	ls := make([]*Log, logs)
	for i := range ls {
		ls[i] = openCachedLog(t, fs, filepath.Join(root, fmt.Sprint(i)))
	}
	for _, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := 0; b < batches; b++ {
				batch, err := l.Write(t0, entriesFrom(int64(2*b), 2))
				if err != nil {
					t.Errorf("write: %v", err)
					return
				}
				synced := make(chan error)
				go func() { synced <- l.Sync() }()
				if err := <-synced; err != nil {
					t.Errorf("sync: %v", err)
					return
				}
				if err := l.Publish(batch); err != nil {
					t.Errorf("publish: %v", err)
					return
				}
			}
		}()
		repeatUntil(&wg, stop, func() bool {
			if _, err := l.Read(0, 100, 1<<20); err != nil {
				t.Errorf("read: %v", err)
				return false
			}
			if _, err := l.List(t0); err != nil {
				t.Errorf("list: %v", err)
				return false
			}
			return true
		})
	}
	go func() {
		for _, l := range ls {
			for l.HWM() < 2*batches {
				runtime.Gosched()
			}
		}
		close(stop)
	}()
	wg.Wait()
	for i, l := range ls {
		checkRecords(t, readAll(t, l, 0), 0, 2*batches)
		if got := l.HWM(); got != 2*batches {
			t.Fatalf("log %d: got hwm %d, want %d", i, got, 2*batches)
		}
	}
	if st := fs.Stats(); st.Open > limit || st.Evictions == 0 {
		t.Fatalf("got %d open and %d evictions, want at most %d open and some evictions", st.Open, st.Evictions, limit)
	}
}

// BenchmarkAppendAcrossLogs appends one record to each of 256 logs in turn:
// every file held (the baseline) against a cache of 32, where each append
// reopens its log's file and closes another's.
//
// On tmpfs (TMPDIR=/dev/shm) the fsyncs cost nothing and what is left is
// the reopen and the close.
//
//	go test ./storage -run '^$' -bench AppendAcrossLogs -count 3 | go run ./bench/ratio -base held
func BenchmarkAppendAcrossLogs(b *testing.B) {
	const logs = 256
	for _, c := range []struct {
		name  string
		limit int
	}{{"held", logs}, {"evicting", logs / 8}} {
		limit := c.limit
		b.Run(c.name, func(b *testing.B) {
			fs := newTestFiles(b, limit)
			root := b.TempDir()
			ls := make([]*Log, logs)
			for i := range ls {
				ls[i] = openCachedLog(b, fs, filepath.Join(root, fmt.Sprint(i)))
			}
			entries := entriesFrom(0, 1)
			b.ResetTimer()
			for i := range b.N {
				if _, err := ls[i%logs].Append(t0, entries); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			st := fs.Stats()
			b.ReportMetric(float64(st.Evictions)/float64(b.N), "evictions/op")
		})
	}
}

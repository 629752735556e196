package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeSyncs stands in for syncfs: each sync records the files it covered and
// when it started, then waits for the test to release it with an error (nil
// for success) for every file of the batch.
type fakeSyncs struct {
	mu      sync.Mutex
	batches [][]*os.File
	starts  []time.Time
	release chan error
}

func newFakeSyncs() *fakeSyncs { return &fakeSyncs{release: make(chan error)} }

func (f *fakeSyncs) sync(files []*os.File, errs []error) {
	f.mu.Lock()
	f.batches = append(f.batches, append([]*os.File(nil), files...))
	f.starts = append(f.starts, time.Now())
	f.mu.Unlock()
	err := <-f.release
	for i := range errs {
		errs[i] = err
	}
}

func (f *fakeSyncs) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var n []int
	for _, b := range f.batches {
		n = append(n, len(b))
	}
	return n
}

// laneLogs opens n empty logs under a temp dir.
func laneLogs(t *testing.T, n int) []*Log {
	t.Helper()
	dir := t.TempDir()
	logs := make([]*Log, n)
	for i := range logs {
		l, err := OpenLog(filepath.Join(dir, strconv.Itoa(i)), DefaultLogConfig())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		logs[i] = l
	}
	return logs
}

func laneConfig() SyncLaneConfig {
	c := DefaultSyncLaneConfig()
	c.MaxQueuedRequests, c.MaxBatchRequests = 64, 64
	return c
}

// syncAsync runs lane.Sync(l) on a goroutine of its own; its error arrives
// on the returned channel.
func syncAsync(ctx context.Context, lane *SyncLane, l *Log) <-chan error {
	done := make(chan error, 1)
	go func() { done <- lane.Sync(ctx, l) }()
	return done
}

// answered peeks at a syncAsync channel: its buffer holds the answer once there.
func answered(c <-chan error) bool { return len(c) > 0 }

func wantSizes(t *testing.T, f *fakeSyncs, want ...int) {
	t.Helper()
	got := f.sizes()
	if len(got) != len(want) {
		t.Fatalf("batch sizes: got %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("batch sizes: got %v, want %v", got, want)
		}
	}
}

func TestSyncLaneJoinsRequestsQueuedDuringASyncIntoTheNextOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newFakeSyncs()
		lane := newTestSyncLane(laneConfig(), fake.sync, fake.sync)
		defer lane.Close()
		logs := laneLogs(t, 4)
		ctx := context.Background()

		first := syncAsync(ctx, lane, logs[0])
		synctest.Wait() // the first sync runs and waits for release
		wantSizes(t, fake, 1)

		var later []<-chan error
		for _, l := range logs[1:] {
			later = append(later, syncAsync(ctx, lane, l))
		}
		synctest.Wait()
		for i, c := range later {
			if answered(c) {
				t.Fatalf("request %d queued during a sync was answered by it; it must wait for the next sync", i+1)
			}
		}

		fake.release <- nil
		if err := <-first; err != nil {
			t.Fatalf("first request: got %v, want nil", err)
		}
		synctest.Wait()
		wantSizes(t, fake, 1, 3) // the three waited together for one sync
		for i, c := range later {
			if answered(c) {
				t.Fatalf("request %d answered before its own sync finished", i+1)
			}
		}
		fake.release <- nil
		for i, c := range later {
			if err := <-c; err != nil {
				t.Fatalf("request %d: got %v, want nil", i+1, err)
			}
		}
		if got := lane.Stats(); got.Batches != 2 || got.Requests != 4 {
			t.Fatalf("stats: got %+v, want 2 batches, 4 requests", got)
		}
	})
}

func TestSyncLaneFailedSyncFailsEveryRequestOfItsBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newFakeSyncs()
		lane := newTestSyncLane(laneConfig(), fake.sync, fake.sync)
		defer lane.Close()
		logs := laneLogs(t, 4)
		ctx := context.Background()

		first := syncAsync(ctx, lane, logs[0])
		synctest.Wait()
		var batch []<-chan error
		for _, l := range logs[1:] {
			batch = append(batch, syncAsync(ctx, lane, l))
		}
		synctest.Wait()
		fake.release <- nil
		if err := <-first; err != nil {
			t.Fatalf("first request: got %v, want nil", err)
		}
		synctest.Wait()
		eio := errors.New("input/output error")
		fake.release <- eio
		for i, c := range batch {
			if err := <-c; !errors.Is(err, eio) {
				t.Fatalf("request %d of the failed batch: got %v, want %v", i, err, eio)
			}
		}
	})
}

func TestSyncLaneBatchesAtMostMaxBatchRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := laneConfig()
		cfg.MaxBatchRequests = 2
		fake := newFakeSyncs()
		lane := newTestSyncLane(cfg, fake.sync, fake.sync)
		defer lane.Close()
		logs := laneLogs(t, 6)
		ctx := context.Background()

		var all []<-chan error
		all = append(all, syncAsync(ctx, lane, logs[0]))
		synctest.Wait()
		for _, l := range logs[1:] {
			all = append(all, syncAsync(ctx, lane, l))
		}
		synctest.Wait()
		want := []int{1}
		for _, next := range []int{2, 2, 1} {
			fake.release <- nil
			synctest.Wait()
			want = append(want, next)
			wantSizes(t, fake, want...)
		}
		fake.release <- nil
		for i, c := range all {
			if err := <-c; err != nil {
				t.Fatalf("request %d: got %v, want nil", i, err)
			}
		}
	})
}

func TestSyncLaneFullQueueBlocksUntilRoomOrContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := laneConfig()
		cfg.MaxQueuedRequests, cfg.MaxBatchRequests = 2, 2
		fake := newFakeSyncs()
		lane := newTestSyncLane(cfg, fake.sync, fake.sync)
		defer lane.Close()
		logs := laneLogs(t, 5)
		ctx := context.Background()

		syncing := syncAsync(ctx, lane, logs[0])
		synctest.Wait()
		queued := []<-chan error{syncAsync(ctx, lane, logs[1]), syncAsync(ctx, lane, logs[2])}
		synctest.Wait()
		if got := len(lane.queue); got != 2 {
			t.Fatalf("queued: got %d, want 2", got)
		}
		cctx, cancel := context.WithCancel(ctx)
		refused := syncAsync(cctx, lane, logs[3])
		blocked := syncAsync(ctx, lane, logs[4])
		synctest.Wait()
		if answered(refused) || answered(blocked) {
			t.Fatal("a request past MaxQueuedRequests returned; it must block")
		}
		if got := len(lane.queue); got != 2 {
			t.Fatalf("queued past the bound: got %d, want 2", got)
		}
		cancel()
		if err := <-refused; !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled wait for room: got %v, want context.Canceled", err)
		}
		fake.release <- nil // the first batch ends; the queue drains into the next
		synctest.Wait()
		fake.release <- nil
		synctest.Wait()
		fake.release <- nil
		for i, c := range append([]<-chan error{syncing}, append(queued, blocked)...) {
			if err := <-c; err != nil {
				t.Fatalf("request %d: got %v, want nil", i, err)
			}
		}
		wantSizes(t, fake, 1, 2, 1)
	})
}

func TestSyncLaneFirstRequestWaitsAtMostMaxWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := laneConfig()
		cfg.MaxWait, cfg.MaxBatchRequests = 5*time.Millisecond, 3
		fake := newFakeSyncs()
		lane := newTestSyncLane(cfg, fake.sync, fake.sync)
		defer lane.Close()
		logs := laneLogs(t, 5)
		ctx := context.Background()

		start := time.Now()
		a := syncAsync(ctx, lane, logs[0])
		time.Sleep(2 * time.Millisecond)
		b := syncAsync(ctx, lane, logs[1])
		synctest.Wait()
		if got := fake.sizes(); len(got) != 0 {
			t.Fatalf("a sync started %v after the first request; want it to wait MaxWait (%v) for others", time.Since(start), cfg.MaxWait)
		}
		time.Sleep(3 * time.Millisecond)
		synctest.Wait()
		wantSizes(t, fake, 2)
		if got := fake.starts[0].Sub(start); got != cfg.MaxWait {
			t.Fatalf("first batch started after %v, want %v", got, cfg.MaxWait)
		}
		fake.release <- nil
		for _, c := range []<-chan error{a, b} {
			if err := <-c; err != nil {
				t.Fatalf("got %v, want nil", err)
			}
		}

		// A full batch does not wait.
		start = time.Now()
		full := []<-chan error{syncAsync(ctx, lane, logs[2]), syncAsync(ctx, lane, logs[3]), syncAsync(ctx, lane, logs[4])}
		synctest.Wait()
		wantSizes(t, fake, 2, 3)
		if got := fake.starts[1].Sub(start); got != 0 {
			t.Fatalf("a full batch waited %v, want 0", got)
		}
		fake.release <- nil
		for _, c := range full {
			if err := <-c; err != nil {
				t.Fatalf("got %v, want nil", err)
			}
		}
	})
}

func TestSyncLaneCloseEndsTheLaneAndFailsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fake := newFakeSyncs()
		lane := newTestSyncLane(laneConfig(), fake.sync, fake.sync)
		logs := laneLogs(t, 3)
		ctx := context.Background()

		syncing := syncAsync(ctx, lane, logs[0])
		synctest.Wait()
		waiting := []<-chan error{syncAsync(ctx, lane, logs[1]), syncAsync(ctx, lane, logs[2])}
		synctest.Wait()
		closed := make(chan error, 1)
		go func() { closed <- lane.Close() }()
		synctest.Wait()
		select {
		case err := <-closed:
			t.Fatalf("Close returned %v with a sync under way; want it to wait for it", err)
		default:
		}
		fake.release <- nil
		if err := <-syncing; err != nil {
			t.Fatalf("the sync under way at Close: got %v, want nil (it finished)", err)
		}
		for i, c := range waiting {
			if err := <-c; !errors.Is(err, ErrClosed) {
				t.Fatalf("waiter %d: got %v, want ErrClosed", i, err)
			}
		}
		if err := <-closed; err != nil {
			t.Fatalf("Close: got %v", err)
		}
		select {
		case <-lane.done:
		default:
			t.Fatal("the lane's goroutine still runs after Close")
		}
		if err := lane.Sync(ctx, logs[0]); !errors.Is(err, ErrClosed) {
			t.Fatalf("Sync after Close: got %v, want ErrClosed", err)
		}
		wantSizes(t, fake, 1)
	})
}

// A real lane over real logs: the write, the lane's sync, then Publish and
// Flush make the records visible, and they are there after a reopen.
func TestSyncLaneMakesWritesDurable(t *testing.T) {
	for _, perFile := range []bool{false, true} {
		t.Run("perfile="+strconv.FormatBool(perFile), func(t *testing.T) {
			dir := t.TempDir()
			cfg := DefaultSyncLaneConfig()
			cfg.PerFileSync = perFile
			cfg.SyncFSMinRequests = 1 // every batch through syncfs unless perFile
			lane, err := OpenSyncLane(dir, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer lane.Close()
			if !perFile && !syncFSReportsErrors() && !lane.PerFile() {
				t.Fatal("a lane on a system whose syncfs hides errors must sync file by file")
			}
			const n = 16
			var wg sync.WaitGroup
			errs := make([]error, n)
			for i := range n {
				wg.Go(func() {
					errs[i] = writeThroughLane(lane, filepath.Join(dir, strconv.Itoa(i)))
				})
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("log %d: %v", i, err)
				}
			}
			for i := range n {
				l, err := OpenLog(filepath.Join(dir, strconv.Itoa(i)), DefaultLogConfig())
				if err != nil {
					t.Fatal(err)
				}
				if got := l.HWM(); got != 1 {
					t.Fatalf("log %d after reopen: HWM %d, want 1", i, got)
				}
				l.Close()
			}
			if got := lane.Stats(); got.Requests != n || got.Batches > n {
				t.Fatalf("stats %+v: want %d requests in at most as many batches", got, n)
			}
		})
	}
}

// writeThroughLane commits one record the way a partition actor does, with
// the lane in place of Log.Sync: write, sync, publish.
func writeThroughLane(lane *SyncLane, dir string) error {
	ctx := context.Background()
	l, err := OpenLog(dir, DefaultLogConfig())
	if err != nil {
		return err
	}
	defer l.Close()
	now := time.Now()
	b, err := l.Write(now, []Entry{{Key: []byte("k"), Body: []byte("v")}})
	if err != nil {
		return err
	}
	if err := lane.Sync(ctx, l); err != nil {
		return l.Abort(err)
	}
	return l.Publish(b)
}

func TestSyncLaneRefusesAClosedOrFailingLog(t *testing.T) {
	dir := t.TempDir()
	lane, err := OpenSyncLane(dir, DefaultSyncLaneConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer lane.Close()
	l, err := OpenLog(filepath.Join(dir, "p"), DefaultLogConfig())
	if err != nil {
		t.Fatal(err)
	}
	eio := errors.New("injected sync failure")
	l.hooks = &logHooks{sync: func() error { return eio }}
	if err := lane.Sync(context.Background(), l); !errors.Is(err, eio) {
		t.Fatalf("a log whose sync fails: got %v, want %v", err, eio)
	}
	l.hooks = nil
	l.Close()
	if err := lane.Sync(context.Background(), l); !errors.Is(err, ErrClosed) {
		t.Fatalf("a closed log: got %v, want ErrClosed", err)
	}
	if got := lane.Stats().Requests; got != 0 {
		t.Fatalf("requests queued for refused logs: got %d, want 0", got)
	}
}

func TestSyncLaneConfigValidate(t *testing.T) {
	if err := DefaultSyncLaneConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, edit := range map[string]func(*SyncLaneConfig){
		"negative wait":          func(c *SyncLaneConfig) { c.MaxWait = -time.Millisecond },
		"long wait":              func(c *SyncLaneConfig) { c.MaxWait = 11 * time.Millisecond },
		"no queue":               func(c *SyncLaneConfig) { c.MaxQueuedRequests = 0 },
		"huge queue":             func(c *SyncLaneConfig) { c.MaxQueuedRequests = 1<<20 + 1 },
		"no batch":               func(c *SyncLaneConfig) { c.MaxBatchRequests = 0 },
		"batch beyond the queue": func(c *SyncLaneConfig) { c.MaxBatchRequests = c.MaxQueuedRequests + 1 },
	} {
		c := DefaultSyncLaneConfig()
		edit(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
}

func TestSyncLaneSyncsABatchOfSyncFSMinRequestsWithOneSyncfsAndASmallerOneFileByFile(t *testing.T) {
	for _, perFile := range []bool{false, true} {
		t.Run("perfile="+strconv.FormatBool(perFile), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := laneConfig()
				cfg.SyncFSMinRequests, cfg.PerFileSync = 3, perFile
				all, each := newFakeSyncs(), newFakeSyncs()
				lane := newTestSyncLane(cfg, all.sync, each.sync)
				defer lane.Close()
				logs := laneLogs(t, 4)
				ctx := context.Background()

				first := syncAsync(ctx, lane, logs[0])
				synctest.Wait()
				var big []<-chan error
				for _, l := range logs[1:] {
					big = append(big, syncAsync(ctx, lane, l))
				}
				synctest.Wait()
				each.release <- nil // the batch of one, file by file
				synctest.Wait()
				if perFile {
					each.release <- nil
				} else {
					all.release <- nil
				}
				for _, c := range append(big, first) {
					if err := <-c; err != nil {
						t.Fatalf("got %v, want nil", err)
					}
				}
				if perFile {
					wantSizes(t, all)
					wantSizes(t, each, 1, 3)
				} else {
					wantSizes(t, all, 3)
					wantSizes(t, each, 1)
				}
			})
		})
	}
}

// A syncfs that fails cannot say which file's writeback failed, so every
// request of its batch fails.
func TestSyncLaneFailedSyncfsFailsEveryFileOfItsBatch(t *testing.T) {
	dir, err := os.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir.Close() // its syncfs fails
	lane := &SyncLane{dir: dir}
	errs := make([]error, 3)
	lane.syncFilesystem(make([]*os.File, 3), errs)
	for i, err := range errs {
		if err == nil {
			t.Fatalf("file %d of a batch whose syncfs failed: got nil, want the error", i)
		}
	}
}

// A failed syncfs may have consumed the writeback error of a file queued
// for a later batch; only that file's own fdatasync still reports it, so
// the lane never trusts syncfs again.
func TestSyncLaneAfterAFailedSyncfsSyncsEveryBatchFileByFile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := laneConfig()
		cfg.SyncFSMinRequests = 1
		all, each := newFakeSyncs(), newFakeSyncs()
		lane := newTestSyncLane(cfg, all.sync, each.sync)
		defer lane.Close()
		logs := laneLogs(t, 3)
		ctx := context.Background()

		failed := syncAsync(ctx, lane, logs[0])
		synctest.Wait()
		later := []<-chan error{syncAsync(ctx, lane, logs[1]), syncAsync(ctx, lane, logs[2])}
		synctest.Wait()
		eio := errors.New("input/output error")
		all.release <- eio
		if err := <-failed; !errors.Is(err, eio) {
			t.Fatalf("the failed syncfs's request: got %v, want %v", err, eio)
		}
		synctest.Wait()
		wantSizes(t, all, 1)
		wantSizes(t, each, 2) // the batch queued during the failed syncfs
		if !lane.PerFile() {
			t.Fatal("PerFile after a failed syncfs: got false, want true")
		}
		each.release <- nil
		for i, c := range later {
			if err := <-c; err != nil {
				t.Fatalf("request %d: got %v, want nil", i, err)
			}
		}
	})
}

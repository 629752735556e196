package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// --- helpers -------------------------------------------------------------

var walErrInjected = errors.New("injected fault")

// walSmallConfig makes segments hold about ten test records, so that tests
// cross segment boundaries.
func walSmallConfig() WALConfig {
	cfg := DefaultWALConfig()
	cfg.MaxBodyBytes = 512
	cfg.MaxKeyBytes = 64
	cfg.MaxTopicBytes = 32
	cfg.MaxBatchBytes = 1024
	cfg.SegmentMaxBytes = 1024
	cfg.MaxBatchRecords = 64
	cfg.MaxQueueRecords = 1024
	cfg.MaxQueueBytes = 1 << 20
	cfg.ReadBufferBytes = 256
	return cfg
}

func walOpenTest(t *testing.T, dir string, cfg WALConfig) *WAL {
	t.Helper()
	w, err := OpenWAL(dir, cfg)
	if err != nil {
		t.Fatalf("OpenWAL(%s): got %v, want nil", dir, err)
	}
	t.Cleanup(func() {
		if err := w.Close(); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close: got %v, want nil", err)
		}
	})
	return w
}

func walCloseTest(t *testing.T, w *WAL) {
	t.Helper()
	if err := w.Close(); err != nil {
		t.Fatalf("Close: got %v, want nil", err)
	}
}

// walTestRecord is record i of a test; its fields vary with i so that a record
// in the wrong place is noticed.
func walTestRecord(i int) WALRecord {
	rec := WALRecord{
		Topic:     fmt.Sprintf("topic-%d", i%3),
		Partition: int32(i%5) - 1,
		Body:      []byte(fmt.Sprintf("body of record %d %s", i, strings.Repeat("x", i%7))),
	}
	if i%2 == 0 {
		rec.Key = []byte(fmt.Sprintf("key-%d", i))
	}
	// Every third record has no incarnation, as an older node wrote them.
	if i%3 != 0 {
		rec.Incarnation = uint64(i) << 40
	}
	return rec
}

// walWithSeq returns rec as Replay would give it back.
func walWithSeq(rec WALRecord, seq uint64) WALRecord {
	rec.Seq = seq
	if rec.Body == nil {
		rec.Body = []byte{}
	}
	return rec
}

func walAppendOK(t *testing.T, w *WAL, rec WALRecord) uint64 {
	t.Helper()
	seq, err := w.Append(context.Background(), rec)
	if err != nil {
		t.Fatalf("Append: got %v, want nil", err)
	}
	return seq
}

// walAppendN appends walTestRecord(from..from+n-1) one by one and returns them as
// Replay should give them back.
func walAppendN(t *testing.T, w *WAL, from, n int) []WALRecord {
	t.Helper()
	var out []WALRecord
	for i := from; i < from+n; i++ {
		rec := walTestRecord(i)
		out = append(out, walWithSeq(rec, walAppendOK(t, w, rec)))
	}
	return out
}

func walReplayAll(t *testing.T, w *WAL) ([]WALRecord, WALReplayStats) {
	t.Helper()
	var got []WALRecord
	stats, err := w.Replay(func(r WALRecord) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Replay: got %v, want nil", err)
	}
	return got, stats
}

func walSameRecords(t *testing.T, what string, got, want []WALRecord) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d records (seqs %v), want %d (seqs %v)", what, len(got), walSeqs(got), len(want), walSeqs(want))
	}
	for i := range got {
		if !walRecordEqual(got[i], want[i]) {
			t.Fatalf("%s: record %d: got %+v, want %+v", what, i, got[i], want[i])
		}
	}
}

func walRecordEqual(a, b WALRecord) bool {
	return a.Seq == b.Seq && a.Topic == b.Topic && a.Incarnation == b.Incarnation && a.Partition == b.Partition &&
		bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Body, b.Body)
}

func walSeqs(recs []WALRecord) []uint64 {
	var s []uint64
	for _, r := range recs {
		s = append(s, r.Seq)
	}
	return s
}

func walSegmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*"+walSegmentSuffix))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(paths)
	return paths
}

func walCopyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func walFileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// walWaitQueued waits until n records wait for the writer.
func walWaitQueued(w *WAL, n int) {
	for {
		w.mu.Lock()
		q := w.queuedRecs
		w.mu.Unlock()
		if q >= n {
			return
		}
		runtime.Gosched()
	}
}

// walTestFile wraps the active segment file to watch and break the writer's
// I/O. Install it with walWrapActive while the writer is idle.
type walTestFile struct {
	walFile
	mu           sync.Mutex
	ops          []string
	holdSync     chan struct{} // if set, the first Sync waits for it to close
	syncHeld     chan struct{} // closed once that Sync is waiting
	held         bool
	failSyncs    int // the next failSyncs Syncs fail
	failTruncate bool
}

func walWrapActive(w *WAL, hold bool) *walTestFile {
	f := &walTestFile{walFile: w.file}
	if hold {
		f.holdSync, f.syncHeld = make(chan struct{}), make(chan struct{})
	}
	w.file = f
	return f
}

func (f *walTestFile) WriteAt(b []byte, off int64) (int, error) {
	f.mu.Lock()
	f.ops = append(f.ops, fmt.Sprintf("write %d+%d", off, len(b)))
	f.mu.Unlock()
	return f.walFile.WriteAt(b, off)
}

func (f *walTestFile) Sync() error {
	f.mu.Lock()
	hold := f.holdSync != nil && !f.held
	f.held = f.held || hold
	fail := f.failSyncs > 0
	if fail {
		f.failSyncs--
	}
	f.ops = append(f.ops, "sync")
	f.mu.Unlock()
	if hold {
		close(f.syncHeld)
		<-f.holdSync
	}
	if fail {
		return walErrInjected
	}
	return f.walFile.Sync()
}

func (f *walTestFile) Truncate(size int64) error {
	f.mu.Lock()
	f.ops = append(f.ops, fmt.Sprintf("truncate %d", size))
	fail := f.failTruncate
	f.mu.Unlock()
	if fail {
		return walErrInjected
	}
	return f.walFile.Truncate(size)
}

func (f *walTestFile) set(fn func(f *walTestFile)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

func (f *walTestFile) opsSoFar() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ops)
}

type walAppendResult struct {
	seq uint64
	err error
}

func walAppendAsync(w *WAL, ctx context.Context, rec WALRecord) <-chan walAppendResult {
	ch := make(chan walAppendResult, 1)
	go func() {
		seq, err := w.Append(ctx, rec)
		ch <- walAppendResult{seq, err}
	}()
	return ch
}

// --- config --------------------------------------------------------------

func TestWALConfigValidate(t *testing.T) {
	if err := DefaultWALConfig().Validate(); err != nil {
		t.Fatalf("DefaultWALConfig().Validate(): got %v, want nil", err)
	}
	if err := walSmallConfig().Validate(); err != nil {
		t.Fatalf("walSmallConfig().Validate(): got %v, want nil", err)
	}
	cases := []struct {
		field  string
		mutate func(c *WALConfig)
	}{
		{"SegmentMaxBytes", func(c *WALConfig) { c.SegmentMaxBytes = 0 }},
		{"SegmentMaxBytes", func(c *WALConfig) { c.SegmentMaxBytes = c.MaxBatchBytes - 1 }},
		{"MaxBatchRecords", func(c *WALConfig) { c.MaxBatchRecords = 0 }},
		{"MaxBatchBytes", func(c *WALConfig) { c.MaxBatchBytes = -1 }},
		{"MaxBatchBytes", func(c *WALConfig) { c.MaxBatchBytes = c.maxFrameBytes() - 1 }},
		{"MaxQueueRecords", func(c *WALConfig) { c.MaxQueueRecords = 0 }},
		{"MaxQueueRecords", func(c *WALConfig) { c.MaxQueueRecords = c.MaxBatchRecords - 1 }},
		{"MaxQueueBytes", func(c *WALConfig) { c.MaxQueueBytes = 0 }},
		{"MaxQueueBytes", func(c *WALConfig) { c.MaxQueueBytes = c.MaxBatchBytes - 1 }},
		{"MaxBodyBytes", func(c *WALConfig) { c.MaxBodyBytes = 0 }},
		{"MaxBodyBytes", func(c *WALConfig) { c.MaxBodyBytes = walMaxFrameBytes }},
		{"MaxKeyBytes", func(c *WALConfig) { c.MaxKeyBytes = -1 }},
		{"MaxTopicBytes", func(c *WALConfig) { c.MaxTopicBytes = 0 }},
		{"MaxTopicBytes", func(c *WALConfig) { c.MaxTopicBytes = 1 << 16 }},
		{"ReadBufferBytes", func(c *WALConfig) { c.ReadBufferBytes = walMinReadBufBytes - 1 }},
		{"MaxPositionRanges", func(c *WALConfig) { c.MaxPositionRanges = -1 }},
		{"MaxPositionRanges", func(c *WALConfig) { c.MaxPositionRanges = walMaxPositionRanges + 1 }},
	}
	for _, tc := range cases {
		cfg := DefaultWALConfig()
		tc.mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate: got %v, want an error wrapping ErrInvalid", tc.field, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: Validate: got %q, want it to name %s", tc.field, err, tc.field)
		}
	}
	if _, err := OpenWAL(t.TempDir(), WALConfig{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("OpenWAL with a zero config: got %v, want ErrInvalid", err)
	}
}

// --- appending -----------------------------------------------------------

func TestWALAppendIsDurableBeforeItReturns(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, DefaultWALConfig())
	f := walWrapActive(w, false)

	rec := walTestRecord(1)
	seq := walAppendOK(t, w, rec)
	if seq != 1 {
		t.Fatalf("first seq: got %d, want 1", seq)
	}
	frame := walEncodeFrame(nil, walWithSeq(rec, 1))
	wantOps := []string{fmt.Sprintf("write 0+%d", len(frame)), "sync"}
	if got := f.opsSoFar(); !slices.Equal(got, wantOps) {
		t.Fatalf("I/O before Append returned: got %v, want %v", got, wantOps)
	}
	onDisk, err := os.ReadFile(walSegmentFiles(t, dir)[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(onDisk, frame) {
		t.Fatalf("segment bytes: got %x, want %x", onDisk, frame)
	}
}

func TestWALGroupCommitSharesOneFsyncAcrossProducers(t *testing.T) {
	w := walOpenTest(t, t.TempDir(), DefaultWALConfig())
	f := walWrapActive(w, true)
	ctx := context.Background()

	// The first append holds the writer in its fsync while the others
	// queue up behind it.
	first := walAppendAsync(w, ctx, walTestRecord(0))
	<-f.syncHeld
	const producers = 32
	results := make([]<-chan walAppendResult, producers)
	for i := range results {
		results[i] = walAppendAsync(w, ctx, walTestRecord(i+1))
	}
	walWaitQueued(w, producers)
	close(f.holdSync)

	seen := map[uint64]bool{}
	for _, ch := range append(results, first) {
		res := <-ch
		if res.err != nil {
			t.Fatalf("Append: got %v, want nil", res.err)
		}
		seen[res.seq] = true
	}
	if len(seen) != producers+1 {
		t.Fatalf("distinct seqs: got %d, want %d", len(seen), producers+1)
	}
	if got := w.syncs.Load(); got != 2 {
		t.Fatalf("fsyncs for %d appends: got %d, want 2 (one for the first, one shared by the rest)", producers+1, got)
	}
}

func TestWALRefusesOversizedRecord(t *testing.T) {
	cfg := walSmallConfig()
	w := walOpenTest(t, t.TempDir(), cfg)
	cases := []struct {
		name string
		rec  WALRecord
		want error
	}{
		{"body over MaxBodyBytes", WALRecord{Topic: "t", Partition: -1, Body: make([]byte, cfg.MaxBodyBytes+1)}, ErrTooLarge},
		{"key over MaxKeyBytes", WALRecord{Topic: "t", Partition: -1, Key: make([]byte, cfg.MaxKeyBytes+1)}, ErrTooLarge},
		{"topic over MaxTopicBytes", WALRecord{Topic: strings.Repeat("t", cfg.MaxTopicBytes+1)}, ErrTooLarge},
		{"empty topic", WALRecord{Partition: 0, Body: []byte("x")}, ErrInvalid},
		{"partition below -1", WALRecord{Topic: "t", Partition: -2}, ErrInvalid},
	}
	for _, tc := range cases {
		if _, err := w.Append(context.Background(), tc.rec); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	atLimit := WALRecord{
		Topic: strings.Repeat("t", cfg.MaxTopicBytes), Partition: 3,
		Key: make([]byte, cfg.MaxKeyBytes), Body: make([]byte, cfg.MaxBodyBytes),
	}
	if seq := walAppendOK(t, w, atLimit); seq != 1 {
		t.Fatalf("seq of the record at every limit: got %d, want 1 (refused ones take no seq)", seq)
	}
}

func TestWALQueueFullIsRefused(t *testing.T) {
	cfg := DefaultWALConfig()
	cfg.MaxBatchRecords = 4
	cfg.MaxQueueRecords = 4
	w := walOpenTest(t, t.TempDir(), cfg)
	f := walWrapActive(w, true)
	ctx := context.Background()

	inFlight := walAppendAsync(w, ctx, walTestRecord(0))
	<-f.syncHeld
	var queued []<-chan walAppendResult
	for i := range cfg.MaxQueueRecords {
		queued = append(queued, walAppendAsync(w, ctx, walTestRecord(i+1)))
	}
	walWaitQueued(w, cfg.MaxQueueRecords)

	if _, err := w.Append(ctx, walTestRecord(99)); !errors.Is(err, ErrFull) {
		t.Fatalf("Append with %d queued: got %v, want ErrFull", cfg.MaxQueueRecords, err)
	}
	close(f.holdSync)
	for _, ch := range append(queued, inFlight) {
		if res := <-ch; res.err != nil {
			t.Fatalf("queued Append: got %v, want nil", res.err)
		}
	}
	if seq := walAppendOK(t, w, walTestRecord(100)); seq != uint64(cfg.MaxQueueRecords)+2 {
		t.Fatalf("seq once the queue drained: got %d, want %d", seq, cfg.MaxQueueRecords+2)
	}
}

func TestWALCancelledAppendReturnsAndMayStillBecomeDurable(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, DefaultWALConfig())
	f := walWrapActive(w, true)

	first := walAppendAsync(w, context.Background(), walTestRecord(1))
	<-f.syncHeld
	ctx, cancel := context.WithCancel(context.Background())
	cancelled := walAppendAsync(w, ctx, walTestRecord(2))
	walWaitQueued(w, 1)
	cancel()
	if res := <-cancelled; !errors.Is(res.err, context.Canceled) {
		t.Fatalf("cancelled Append: got %v, want context.Canceled", res.err)
	}
	close(f.holdSync)
	if res := <-first; res.err != nil {
		t.Fatalf("first Append: got %v, want nil", res.err)
	}
	if _, err := w.Append(ctx, walTestRecord(3)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a done ctx: got %v, want context.Canceled", err)
	}
	walCloseTest(t, w)

	// The cancelled record was queued: the writer may have written it
	// before Close, or Close may have failed it while still queued. Either
	// is allowed; anything else is not.
	got, _ := walReplayAll(t, walOpenTest(t, dir, DefaultWALConfig()))
	want := []WALRecord{walWithSeq(walTestRecord(1), 1), walWithSeq(walTestRecord(2), 2)}
	if len(got) == 1 {
		want = want[:1]
	}
	walSameRecords(t, "replay after a cancelled append (at-least-once)", got, want)
}

func TestWALFailedFsyncFailsTheWholeBatchAndCutsItOff(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, DefaultWALConfig())
	acked := walAppendN(t, w, 0, 1)
	sizeBefore := walFileSize(t, walSegmentFiles(t, dir)[0])

	f := walWrapActive(w, true)
	ctx := context.Background()
	held := walAppendAsync(w, ctx, walTestRecord(1))
	<-f.syncHeld
	var batch []<-chan walAppendResult
	for i := range 5 {
		batch = append(batch, walAppendAsync(w, ctx, walTestRecord(10+i)))
	}
	walWaitQueued(w, 5)
	f.set(func(f *walTestFile) { f.failSyncs = 1 })
	close(f.holdSync)

	if res := <-held; res.err != nil {
		t.Fatalf("Append before the fault: got %v, want nil", res.err)
	}
	acked = append(acked, walWithSeq(walTestRecord(1), 2))
	for i, ch := range batch {
		if res := <-ch; !errors.Is(res.err, walErrInjected) {
			t.Fatalf("Append %d of the failed batch: got %v, want the fsync error", i, res.err)
		}
	}
	sizeAfterHeld := sizeBefore + int64(len(walEncodeFrame(nil, walWithSeq(walTestRecord(1), 2))))
	if got := walFileSize(t, walSegmentFiles(t, dir)[0]); got != sizeAfterHeld {
		t.Fatalf("segment size after the failed batch: got %d, want %d (cut back to the batch start)", got, sizeAfterHeld)
	}

	// The failed batch was never acknowledged, so its seqs are handed out
	// again; anything else would leave a hole the watermark could not pass.
	if seq := walAppendOK(t, w, walTestRecord(20)); seq != 3 {
		t.Fatalf("seq after the failed batch: got %d, want 3", seq)
	}
	acked = append(acked, walWithSeq(walTestRecord(20), 3))
	walCloseTest(t, w)
	got, _ := walReplayAll(t, walOpenTest(t, dir, DefaultWALConfig()))
	walSameRecords(t, "replay after a failed batch", got, acked)
}

func TestWALFailedCutAfterFailedFsyncBreaksTheWAL(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, DefaultWALConfig())
	acked := walAppendN(t, w, 0, 2)
	f := walWrapActive(w, false)
	f.set(func(f *walTestFile) { f.failSyncs, f.failTruncate = 1, true })

	_, err := w.Append(context.Background(), walTestRecord(2))
	if !errors.Is(err, walErrInjected) || !errors.Is(err, ErrBroken) {
		t.Fatalf("Append whose fsync and cut fail: got %v, want the fsync error and ErrBroken", err)
	}
	if _, err := w.Append(context.Background(), walTestRecord(3)); !errors.Is(err, ErrBroken) {
		t.Fatalf("Append on a broken WAL: got %v, want ErrBroken", err)
	}
	walCloseTest(t, w)

	// Reopening recovers. The failed record's bytes did reach the file
	// here, so it may come back: it was never acknowledged, and duplicates
	// are allowed, but every acknowledged record must be there.
	w2 := walOpenTest(t, dir, DefaultWALConfig())
	got, _ := walReplayAll(t, w2)
	if len(got) < len(acked) {
		t.Fatalf("replay after reopening a broken WAL: got %d records, want at least %d", len(got), len(acked))
	}
	walSameRecords(t, "acknowledged records after reopening a broken WAL", got[:len(acked)], acked)
	if seq := walAppendOK(t, w2, walTestRecord(4)); seq != uint64(len(got))+1 {
		t.Fatalf("seq after reopening: got %d, want %d", seq, len(got)+1)
	}
}

func TestWALCloseFailsQueuedAppendsAndStopsTheWriter(t *testing.T) {
	w := walOpenTest(t, t.TempDir(), DefaultWALConfig())
	f := walWrapActive(w, true)
	ctx := context.Background()

	inFlight := walAppendAsync(w, ctx, walTestRecord(0))
	<-f.syncHeld
	var queued []<-chan walAppendResult
	for i := range 3 {
		queued = append(queued, walAppendAsync(w, ctx, walTestRecord(i+1)))
	}
	walWaitQueued(w, 3)

	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()
	for i, ch := range queued {
		if res := <-ch; !errors.Is(res.err, ErrClosed) {
			t.Fatalf("queued Append %d during Close: got %v, want ErrClosed", i, res.err)
		}
	}
	close(f.holdSync)
	if res := <-inFlight; res.err != nil || res.seq != 1 {
		t.Fatalf("Append being written during Close: got (%d, %v), want (1, nil)", res.seq, res.err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: got %v, want nil", err)
	}
	select {
	case <-w.done:
	default:
		t.Fatal("writer goroutine: still running after Close returned, want ended")
	}
	if _, err := w.Append(ctx, walTestRecord(9)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: got %v, want ErrClosed", err)
	}
	if _, err := w.Replay(func(WALRecord) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Replay after Close: got %v, want ErrClosed", err)
	}
	if err := w.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close: got %v, want ErrClosed", err)
	}
}

func TestWALSegmentsRollBeforeExceedingSegmentMaxBytes(t *testing.T) {
	dir := t.TempDir()
	cfg := walSmallConfig()
	w := walOpenTest(t, dir, cfg)
	walAppendN(t, w, 0, 60)
	walCloseTest(t, w)

	paths := walSegmentFiles(t, dir)
	if len(paths) < 3 {
		t.Fatalf("segments after 60 records: got %d, want at least 3", len(paths))
	}
	next := uint64(1)
	for _, p := range paths {
		if size := walFileSize(t, p); size > cfg.SegmentMaxBytes {
			t.Errorf("%s: size got %d, want at most %d", p, size, cfg.SegmentMaxBytes)
		}
		if got, want := filepath.Base(p), walSegmentName(next); got != want {
			t.Fatalf("segment name: got %s, want %s (its first seq)", got, want)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for len(b) > 0 {
			v, n, err := walParseFrame(b)
			if err != nil {
				t.Fatalf("%s: frame: got %v, want a valid frame", p, err)
			}
			if v.seq != next {
				t.Fatalf("%s: seq got %d, want %d", p, v.seq, next)
			}
			next++
			b = b[n:]
		}
	}
	if next != 61 {
		t.Fatalf("records across segments: got %d, want 60", next-1)
	}
}

// --- crash and recovery --------------------------------------------------

func TestWALReplayAfterCrashReturnsEveryAcknowledgedRecord(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, walSmallConfig())
	var acked []WALRecord
	var mu sync.Mutex
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Go(func() {
			for i := range 20 {
				rec := walTestRecord(p*100 + i)
				seq, err := w.Append(context.Background(), rec)
				if err != nil {
					t.Errorf("Append: got %v, want nil", err)
					return
				}
				mu.Lock()
				acked = append(acked, walWithSeq(rec, seq))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// The crash: the directory as it is, without Close.
	crashed := walCopyDir(t, dir)

	got, stats := walReplayAll(t, walOpenTest(t, crashed, walSmallConfig()))
	slices.SortFunc(acked, func(a, b WALRecord) int { return int(a.Seq) - int(b.Seq) })
	walSameRecords(t, "replay after a crash", got, acked)
	if stats.Records != int64(len(acked)) || stats.Corrupt != 0 || stats.Lost != 0 || stats.TornBytes != 0 {
		t.Fatalf("stats: got %+v, want %d records and no damage", stats, len(acked))
	}
}

func TestWALTornTailIsCutAtRecovery(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, DefaultWALConfig())
	acked := walAppendN(t, w, 0, 3)
	walCloseTest(t, w)

	seg := walSegmentFiles(t, dir)[0]
	good := walFileSize(t, seg)
	half := walEncodeFrame(nil, walWithSeq(walTestRecord(3), 4))
	half = half[:len(half)/2]
	file, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := file.Write(half); err != nil {
		t.Fatal(err)
	}
	file.Close()

	w = walOpenTest(t, dir, DefaultWALConfig())
	if got := walFileSize(t, seg); got != good {
		t.Fatalf("segment size after recovery: got %d, want %d", got, good)
	}
	acked = append(acked, walAppendN(t, w, 10, 1)...)
	got, stats := walReplayAll(t, w)
	walSameRecords(t, "replay after cutting the torn tail", got, acked)
	if stats.TornBytes != int64(len(half)) {
		t.Fatalf("TornBytes: got %d, want %d", stats.TornBytes, len(half))
	}
}

// TestWALCrashInsideLastBatchLeavesAValidPrefix cuts the last segment at
// every byte of its last three frames (the "batch"), and separately damages
// every byte of them, and checks that recovery keeps exactly the frames
// before the damage: all of the earlier ones, none of the garbage, and
// appends continue from there.
func TestWALCrashInsideLastBatchLeavesAValidPrefix(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultWALConfig()
	w := walOpenTest(t, dir, cfg)
	before := walAppendN(t, w, 0, 5)
	seg := walSegmentFiles(t, dir)[0]
	batchStart := walFileSize(t, seg)
	var batch []WALRecord
	for _, rec := range []WALRecord{walTestRecord(5), walTestRecord(6), walTestRecord(7)} {
		batch = append(batch, walWithSeq(rec, walAppendOK(t, w, rec)))
	}
	walCloseTest(t, w)
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	var frameEnds []int // end offset of each frame of the last batch
	for off := int(batchStart); off < len(data); {
		_, n, err := walParseFrame(data[off:])
		if err != nil {
			t.Fatalf("frame at %d: got %v, want valid", off, err)
		}
		off += n
		frameEnds = append(frameEnds, off)
	}

	// check reopens a copy whose segment holds damaged and expects the
	// records before the batch plus its first kept frames.
	check := func(what string, damaged []byte, kept int) {
		t.Helper()
		crashed := t.TempDir()
		if err := os.WriteFile(filepath.Join(crashed, filepath.Base(seg)), damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := OpenWAL(crashed, cfg)
		if err != nil {
			t.Fatalf("%s: OpenWAL: got %v, want nil", what, err)
		}
		want := append(slices.Clone(before), batch[:kept]...)
		got, _ := walReplayAll(t, w)
		walSameRecords(t, what, got, want)
		extra := walTestRecord(50)
		seq, err := w.Append(context.Background(), extra)
		if err != nil || seq != uint64(len(want))+1 {
			t.Fatalf("%s: Append after recovery: got (%d, %v), want (%d, nil)", what, seq, err, len(want)+1)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		w, err = OpenWAL(crashed, cfg)
		if err != nil {
			t.Fatalf("%s: second OpenWAL: got %v, want nil", what, err)
		}
		got, _ = walReplayAll(t, w)
		walSameRecords(t, what+", then one append", got, append(want, walWithSeq(extra, seq)))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}

	keptBefore := func(off int) int { // frames of the batch wholly before off
		k := 0
		for k < len(frameEnds) && frameEnds[k] <= off {
			k++
		}
		return k
	}
	for cut := int(batchStart); cut <= len(data); cut++ {
		check(fmt.Sprintf("cut at %d", cut), data[:cut], keptBefore(cut))
	}
	for i := int(batchStart); i < len(data); i++ {
		damaged := slices.Clone(data)
		damaged[i] ^= 0xff
		check(fmt.Sprintf("byte %d flipped", i), damaged, keptBefore(i))
	}
}

func TestWALReplaySkipsADamagedFrameInASealedSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := walSmallConfig()
	w := walOpenTest(t, dir, cfg)
	acked := walAppendN(t, w, 0, 40)
	walCloseTest(t, w)

	// Damage the body of seq 2, in the first (sealed) segment.
	first := walSegmentFiles(t, dir)[0]
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	_, n, err := walParseFrame(data)
	if err != nil {
		t.Fatal(err)
	}
	data[n+20] ^= 0x01
	if err := os.WriteFile(first, data, 0o644); err != nil {
		t.Fatal(err)
	}

	w = walOpenTest(t, dir, cfg)
	got, stats := walReplayAll(t, w)
	want := slices.Delete(slices.Clone(acked), 1, 2)
	walSameRecords(t, "replay with seq 2 damaged", got, want)
	if stats.Corrupt != 1 || stats.Lost != 1 {
		t.Fatalf("stats: got Corrupt %d Lost %d, want 1 and 1", stats.Corrupt, stats.Lost)
	}
	// The lost seq must not hold the watermark back forever.
	for _, r := range got {
		if err := w.MarkCommitted(r.Seq); err != nil {
			t.Fatalf("MarkCommitted(%d): got %v, want nil", r.Seq, err)
		}
	}
	if got := w.CommittedThrough(); got != 40 {
		t.Fatalf("CommittedThrough after committing every replayed record: got %d, want 40", got)
	}
}

func TestWALReplayCountsTheLostTailOfASealedSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := walSmallConfig()
	w := walOpenTest(t, dir, cfg)
	acked := walAppendN(t, w, 0, 40)
	walCloseTest(t, w)

	first := walSegmentFiles(t, dir)[0]
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	inFirst := 0
	for b := data; len(b) > 0; inFirst++ {
		_, n, err := walParseFrame(b)
		if err != nil {
			t.Fatal(err)
		}
		b = b[n:]
	}
	_, n, _ := walParseFrame(data)
	if err := os.WriteFile(first, data[:n+3], 0o644); err != nil { // one frame and a bit
		t.Fatal(err)
	}

	got, stats := walReplayAll(t, walOpenTest(t, dir, cfg))
	want := append(acked[:1:1], acked[inFirst:]...)
	walSameRecords(t, "replay with a sealed segment cut short", got, want)
	if stats.Lost != int64(inFirst-1) || stats.Corrupt != 1 || stats.CorruptBytes != 3 {
		t.Fatalf("stats: got Lost %d Corrupt %d CorruptBytes %d, want %d, 1, 3", stats.Lost, stats.Corrupt, stats.CorruptBytes, inFirst-1)
	}
}

func TestWALReplayStopsAtTheFirstErrorOfFn(t *testing.T) {
	w := walOpenTest(t, t.TempDir(), DefaultWALConfig())
	walAppendN(t, w, 0, 5)
	calls := 0
	stop := errors.New("stop")
	_, err := w.Replay(func(r WALRecord) error {
		calls++
		if r.Seq == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || calls != 3 {
		t.Fatalf("Replay with fn failing at seq 3: got (%v, %d calls), want (stop, 3 calls)", err, calls)
	}
}

// --- position and compaction ---------------------------------------------

func TestWALMarkCommittedKeepsTheLowWatermark(t *testing.T) {
	w := walOpenTest(t, t.TempDir(), DefaultWALConfig())
	walAppendN(t, w, 0, 6)
	steps := []struct {
		mark uint64
		want uint64
	}{{3, 0}, {2, 0}, {5, 0}, {1, 3}, {1, 3}, {4, 5}, {6, 6}}
	for _, s := range steps {
		if err := w.MarkCommitted(s.mark); err != nil {
			t.Fatalf("MarkCommitted(%d): got %v, want nil", s.mark, err)
		}
		if got := w.CommittedThrough(); got != s.want {
			t.Fatalf("CommittedThrough after marking %d: got %d, want %d", s.mark, got, s.want)
		}
	}
	for _, seq := range []uint64{0, 7} {
		if err := w.MarkCommitted(seq); !errors.Is(err, ErrInvalid) {
			t.Errorf("MarkCommitted(%d) of a seq never assigned: got %v, want ErrInvalid", seq, err)
		}
	}
}

func TestWALCommitSetStaysCompactUnderOutOfOrderCommits(t *testing.T) {
	const n = 200_000
	s := walCommitSet{blocks: map[uint64]uint64{}}
	order := rand.New(rand.NewPCG(1, 2)).Perm(n)
	for _, i := range order {
		if seq := uint64(i) + 1; seq != 1 {
			s.mark(seq)
		}
	}
	// Everything but seq 1 committed: one bit per seq, in 64-seq blocks.
	if s.through != 0 {
		t.Fatalf("through with seq 1 missing: got %d, want 0", s.through)
	}
	if got, most := len(s.blocks), n/64+1; got > most {
		t.Fatalf("blocks held: got %d, want at most %d", got, most)
	}
	s.mark(1)
	if s.through != n || len(s.blocks) != 0 {
		t.Fatalf("after marking seq 1: got through %d and %d blocks, want %d and 0", s.through, len(s.blocks), n)
	}
	// A huge lost range costs one entry, not a bit per seq.
	s.mark(n + 5)
	s.markRange(n+10, 1<<60)
	s.markRange(n+2, n+3)
	if s.through != n || len(s.lost) != 2 {
		t.Fatalf("with seq %d missing: got through %d and %d lost ranges, want %d and 2", n+1, s.through, len(s.lost), n)
	}
	s.mark(n + 1)
	s.mark(n + 4)
	if s.through != n+5 {
		t.Fatalf("through: got %d, want %d", s.through, n+5)
	}
	for seq := uint64(n + 6); seq < n+10; seq++ {
		s.mark(seq)
	}
	if s.through != 1<<60 || len(s.lost) != 0 || len(s.blocks) != 0 {
		t.Fatalf("after the gap closed: got through %d, %d lost, %d blocks, want %d, 0, 0", s.through, len(s.lost), len(s.blocks), uint64(1)<<60)
	}
}

func TestWALPositionSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, DefaultWALConfig())
	acked := walAppendN(t, w, 0, 10)
	for _, seq := range []uint64{7, 1, 2, 3, 5, 4, 6, 9} {
		if err := w.MarkCommitted(seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SavePosition(); err != nil {
		t.Fatalf("SavePosition: got %v, want nil", err)
	}
	walCloseTest(t, w)

	w = walOpenTest(t, dir, DefaultWALConfig())
	if got := w.CommittedThrough(); got != 7 {
		t.Fatalf("CommittedThrough after restart: got %d, want 7", got)
	}
	got, _ := walReplayAll(t, w)
	// 9 was committed above the watermark: the position lists it.
	walSameRecords(t, "replay after restart", got, []WALRecord{acked[7], acked[9]})
	if records, _ := w.Backlog(); records != 3 {
		t.Fatalf("Backlog records: got %d, want 3", records)
	}
}

func TestWALDamagedPositionFileFallsBackToTheOldestSegment(t *testing.T) {
	dir := t.TempDir()
	// Only the position file: with the live saver on, a live slot written
	// before Close may carry the same position, and whether it did is a
	// race the test must not depend on.
	cfg := DefaultWALConfig()
	cfg.PositionOnCommit = false
	w := walOpenTest(t, dir, cfg)
	acked := walAppendN(t, w, 0, 4)
	for seq := uint64(1); seq <= 3; seq++ {
		if err := w.MarkCommitted(seq); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.SavePosition(); err != nil {
		t.Fatal(err)
	}
	walCloseTest(t, w)
	pos := filepath.Join(dir, walPositionName)
	b, err := os.ReadFile(pos)
	if err != nil {
		t.Fatal(err)
	}
	b[len(walPositionMagic)] ^= 0x40
	if err := os.WriteFile(pos, b, 0o644); err != nil {
		t.Fatal(err)
	}

	w = walOpenTest(t, dir, cfg)
	got, stats := walReplayAll(t, w)
	walSameRecords(t, "replay with a damaged position (duplicates, nothing lost)", got, acked)
	if !stats.PositionDiscarded {
		t.Fatalf("PositionDiscarded: got false, want true")
	}
	if seq := walAppendOK(t, w, walTestRecord(9)); seq != 5 {
		t.Fatalf("seq after a damaged position: got %d, want 5", seq)
	}
}

func TestWALPositionFileIsWholeOrAbsent(t *testing.T) {
	for _, through := range []uint64{0, 1, 1 << 40} {
		got, ranges, err := walDecodePosition(walEncodePosition(through))
		if err != nil || got != through || len(ranges) != 0 {
			t.Fatalf("position round trip of %d: got (%d, %v, %v), want (%d, none, nil)", through, got, ranges, err, through)
		}
	}
	listed := []walSeqRange{{14, 14}, {20, 31}, {1 << 40, 1<<40 + 5}}
	got, ranges, err := walDecodePosition(walEncodePositionRanges(12, listed))
	if err != nil || got != 12 || !slices.Equal(ranges, listed) {
		t.Fatalf("v2 position round trip: got (%d, %v, %v), want (12, %v, nil)", got, ranges, err, listed)
	}
	for _, whole := range [][]byte{walEncodePosition(12345), walEncodePositionRanges(12, listed)} {
		for cut := range len(whole) {
			if _, _, err := walDecodePosition(whole[:cut]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("position cut at %d: got %v, want ErrCorrupt", cut, err)
			}
		}
		for i := range whole {
			b := slices.Clone(whole)
			b[i] ^= 0x01
			if _, _, err := walDecodePosition(b); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("position with byte %d flipped: got %v, want ErrCorrupt", i, err)
			}
		}
	}
	// A range that would skip the watermark's own seqs, or overlap, is
	// refused even with a good checksum: it would hide records at replay.
	for _, bad := range [][]walSeqRange{{{12, 14}}, {{14, 13}}, {{14, 20}, {20, 21}}, {{14, 20}, {16, 30}}} {
		if _, _, err := walDecodePosition(walEncodePositionRanges(12, bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("position ranges %v above 12: got %v, want ErrCorrupt", bad, err)
		}
	}
}

// walWaitSaved waits until the position saver wrote every mark so far.
func walWaitSaved(t *testing.T, w *WAL) {
	t.Helper()
	for range 10000 {
		w.mu.Lock()
		saved := w.marks == w.liveMarks
		w.mu.Unlock()
		if saved {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("the position saver did not catch up with the marks")
}

// Issue 15: after a crash (the WAL's files as they were, no Close), Replay
// hands back only the records not committed, however out of order the
// commits came, once the position saver caught up: not everything above
// the watermark since the last Compact. Without PositionOnCommit nothing
// is saved between Compacts, so everything comes back, as before.
func TestWALCrashReplaysOnlyUncommittedRecordsWithPositionOnCommit(t *testing.T) {
	for _, onCommit := range []bool{true, false} {
		t.Run(fmt.Sprintf("PositionOnCommit=%v", onCommit), func(t *testing.T) {
			cfg := walSmallConfig()
			cfg.PositionOnCommit = onCommit
			dir := t.TempDir()
			w := walOpenTest(t, dir, cfg)
			acked := walAppendN(t, w, 0, 40)
			var pending []WALRecord
			for _, r := range acked {
				// Partition-like holes: seq 3 and every seventh stay out.
				if r.Seq == 3 || r.Seq%7 == 0 {
					pending = append(pending, r)
					continue
				}
				if err := w.MarkCommitted(r.Seq); err != nil {
					t.Fatal(err)
				}
			}
			want := acked
			if onCommit {
				walWaitSaved(t, w)
				want = pending
			} else {
				want = acked // nothing saved since the open: every record comes back
			}
			crashed := walCopyDir(t, dir)
			got, _ := walReplayAll(t, walOpenTest(t, crashed, cfg))
			walSameRecords(t, "replay after a crash", got, want)
		})
	}
}

// A clean Close persists every mark made before it, so a graceful restart
// replays only what was never committed, whatever the mode.
func TestWALCloseSavesThePosition(t *testing.T) {
	for _, onCommit := range []bool{true, false} {
		cfg := walSmallConfig()
		cfg.PositionOnCommit = onCommit
		dir := t.TempDir()
		w := walOpenTest(t, dir, cfg)
		acked := walAppendN(t, w, 0, 30)
		for _, r := range acked {
			if r.Seq != 5 && r.Seq != 17 {
				if err := w.MarkCommitted(r.Seq); err != nil {
					t.Fatal(err)
				}
			}
		}
		walCloseTest(t, w)
		got, _ := walReplayAll(t, walOpenTest(t, dir, cfg))
		walSameRecords(t, fmt.Sprintf("PositionOnCommit=%v: replay after Close", onCommit), got, []WALRecord{acked[4], acked[16]})
	}
}

// Past MaxPositionRanges the lowest ranges are kept: the rest come back at
// replay (duplicates), and no record that was not committed is ever lost.
func TestWALPositionKeepsTheLowestRangesPastItsBound(t *testing.T) {
	cfg := walSmallConfig()
	cfg.MaxPositionRanges = 2
	dir := t.TempDir()
	w := walOpenTest(t, dir, cfg)
	acked := walAppendN(t, w, 0, 10)
	for _, seq := range []uint64{2, 4, 6, 8} {
		if err := w.MarkCommitted(seq); err != nil {
			t.Fatal(err)
		}
	}
	walCloseTest(t, w)
	got, _ := walReplayAll(t, walOpenTest(t, dir, cfg))
	// 2 and 4 listed; 6 and 8 past the bound are replayed.
	walSameRecords(t, "replay past the range bound", got, []WALRecord{acked[0], acked[2], acked[4], acked[5], acked[6], acked[7], acked[8], acked[9]})
}

// A seq a position lists as committed is never handed out again, even
// when the disk lost its frame (as TestWALPositionAheadOfTheDiskStillNeverReusesSeqs
// for the watermark): a new record under it would be skipped at replay.
func TestWALListedRangeAheadOfTheDiskNeverReusesSeqs(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, walPositionName), walEncodePositionRanges(0, []walSeqRange{{4, 6}}), 0o644); err != nil {
		t.Fatal(err)
	}
	w := walOpenTest(t, dir, DefaultWALConfig())
	if seq := walAppendOK(t, w, walTestRecord(1)); seq != 7 {
		t.Fatalf("seq after a listed range 4..6 on an empty disk: got %d, want 7", seq)
	}
	walCloseTest(t, w)
	got, _ := walReplayAll(t, walOpenTest(t, dir, DefaultWALConfig()))
	walSameRecords(t, "replay", got, []WALRecord{walWithSeq(walTestRecord(1), 7)})
}

func TestWALCommitSetRangesAbove(t *testing.T) {
	s := walCommitSet{blocks: map[uint64]uint64{}}
	for _, seq := range []uint64{1, 2, 5, 6, 7, 64, 65, 66, 130, 200} {
		s.mark(seq)
	}
	s.markRange(100, 120)
	s.markRange(300, 1<<40)
	want := []walSeqRange{{5, 7}, {64, 66}, {100, 120}, {130, 130}, {200, 200}, {300, 1 << 40}}
	if got := s.rangesAbove(100); !slices.Equal(got, want) || s.through != 2 {
		t.Fatalf("ranges above %d: got %v, want %v above 2", s.through, got, want)
	}
	if got := s.rangesAbove(2); !slices.Equal(got, want[:2]) {
		t.Fatalf("the lowest two ranges: got %v, want %v", got, want[:2])
	}
	// Marks below through left in a block through is inside are not listed.
	for _, seq := range []uint64{3, 4} {
		s.mark(seq)
	}
	if got := s.rangesAbove(100); s.through != 7 || !slices.Equal(got, want[1:]) {
		t.Fatalf("after 3, 4: got through %d, ranges %v, want 7, %v", s.through, got, want[1:])
	}
}

func TestWALCompactNeverDropsUncommittedRecords(t *testing.T) {
	dir := t.TempDir()
	cfg := walSmallConfig()
	// The watermark alone persists, so the restart below replays what
	// was committed above it and the second half has records to commit.
	cfg.MaxPositionRanges = 0
	w := walOpenTest(t, dir, cfg)
	acked := walAppendN(t, w, 0, 100)
	var bases []uint64
	for _, p := range walSegmentFiles(t, dir) {
		var base uint64
		if _, err := fmt.Sscanf(filepath.Base(p), "%d.wal", &base); err != nil {
			t.Fatal(err)
		}
		bases = append(bases, base)
	}
	if len(bases) < 5 {
		t.Fatalf("segments: got %d, want at least 5", len(bases))
	}
	// Leave uncommitted the last seq of the first segment and the first seq
	// of the fourth: the edges where an off-by-one would drop a record.
	holeA, holeB := bases[1]-1, bases[3]
	commitAllBut := func(recs []WALRecord, keep uint64) {
		for i := len(recs) - 1; i >= 0; i-- { // newest first: out of order
			if recs[i].Seq != keep {
				if err := w.MarkCommitted(recs[i].Seq); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	commitAllBut(acked, holeA)
	if err := w.MarkCommitted(holeB); err != nil { // undone by the restart below
		t.Fatal(err)
	}
	if got := w.CommittedThrough(); got != holeA-1 {
		t.Fatalf("CommittedThrough with %d uncommitted: got %d, want %d", holeA, got, holeA-1)
	}
	if err := w.Compact(); err != nil {
		t.Fatalf("Compact: got %v, want nil", err)
	}
	if got := walSegmentFiles(t, dir); len(got) != len(bases) {
		t.Fatalf("segments after Compact through %d: got %d, want all %d (the first holds %d)", holeA-1, len(got), len(bases), holeA)
	}
	walCloseTest(t, w)
	w = walOpenTest(t, dir, cfg)
	got, _ := walReplayAll(t, w)
	walSameRecords(t, fmt.Sprintf("replay after compacting through %d", holeA-1), got, acked[holeA-1:])

	if err := w.MarkCommitted(holeA); err != nil {
		t.Fatal(err)
	}
	commitAllBut(got, holeB)
	if err := w.Compact(); err != nil {
		t.Fatalf("Compact: got %v, want nil", err)
	}
	left := walSegmentFiles(t, dir)
	if len(left) != len(bases)-3 || filepath.Base(left[0]) != walSegmentName(holeB) {
		t.Fatalf("segments after Compact through %d: got %d starting with %s, want %d starting with %s",
			holeB-1, len(left), filepath.Base(left[0]), len(bases)-3, walSegmentName(holeB))
	}
	walCloseTest(t, w)
	got, _ = walReplayAll(t, walOpenTest(t, dir, cfg))
	walSameRecords(t, fmt.Sprintf("replay after compacting through %d", holeB-1), got, acked[holeB-1:])
}

// TestWALCompactNeverDropsUncommittedRecordsUnderRandomCommits commits in a
// random order, compacting and restarting along the way, and checks after
// each step that every record not yet committed is still replayed.
func TestWALCompactNeverDropsUncommittedRecordsUnderRandomCommits(t *testing.T) {
	dir := t.TempDir()
	cfg := walSmallConfig()
	rng := rand.New(rand.NewPCG(7, 7))
	w := walOpenTest(t, dir, cfg)
	acked := walAppendN(t, w, 0, 150)
	committed := map[uint64]bool{}
	order := rng.Perm(len(acked))
	for step, i := range order {
		seq := acked[i].Seq
		if err := w.MarkCommitted(seq); err != nil {
			t.Fatal(err)
		}
		committed[seq] = true
		if step%10 != 9 {
			continue
		}
		if err := w.Compact(); err != nil {
			t.Fatalf("Compact: got %v, want nil", err)
		}
		walCloseTest(t, w)
		w = walOpenTest(t, dir, cfg)
		got, _ := walReplayAll(t, w)
		replayed := map[uint64]bool{}
		for _, r := range got {
			replayed[r.Seq] = true
			if !walRecordEqual(r, acked[r.Seq-1]) {
				t.Fatalf("replayed seq %d: got %+v, want %+v", r.Seq, r, acked[r.Seq-1])
			}
		}
		for _, r := range acked {
			if !committed[r.Seq] && !replayed[r.Seq] {
				t.Fatalf("step %d: uncommitted seq %d not replayed after Compact and restart", step, r.Seq)
			}
		}
		// What restart forgot (commits above the watermark) is marked again.
		for seq := range committed {
			if err := w.MarkCommitted(seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := w.CommittedThrough(); got != 150 {
		t.Fatalf("CommittedThrough after committing all: got %d, want 150", got)
	}
	if records, _ := w.Backlog(); records != 0 {
		t.Fatalf("Backlog records after committing all: got %d, want 0", records)
	}
}

func TestWALSeqNeverReused(t *testing.T) {
	dir := t.TempDir()
	cfg := walSmallConfig()
	next := uint64(1)
	for round := range 4 {
		w := walOpenTest(t, dir, cfg)
		for i := range 25 {
			if seq := walAppendOK(t, w, walTestRecord(i)); seq != next {
				t.Fatalf("round %d: seq got %d, want %d", round, seq, next)
			}
			next++
		}
		// Commit and compact everything, so nothing on disk remembers the
		// old seqs but the position and the active segment's name.
		for seq := uint64(1); seq < next; seq++ {
			if err := w.MarkCommitted(seq); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Compact(); err != nil {
			t.Fatal(err)
		}
		if got, _ := walReplayAll(t, w); len(got) != 0 {
			t.Fatalf("round %d: replay after committing everything: got %v, want none", round, walSeqs(got))
		}
		walCloseTest(t, w)
	}
	// Even with the active segment gone, the position keeps seqs going up.
	for _, p := range walSegmentFiles(t, dir) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	w := walOpenTest(t, dir, cfg)
	if seq := walAppendOK(t, w, walTestRecord(0)); seq != next {
		t.Fatalf("seq with no segments left: got %d, want %d", seq, next)
	}
}

func TestWALBacklogCountsUncommittedRecords(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir, walSmallConfig())
	if records, bytes := w.Backlog(); records != 0 || bytes != 0 {
		t.Fatalf("Backlog of an empty WAL: got (%d, %d), want (0, 0)", records, bytes)
	}
	walAppendN(t, w, 0, 30)
	records, bytes := w.Backlog()
	var total int64
	for _, p := range walSegmentFiles(t, dir) {
		total += walFileSize(t, p)
	}
	if records != 30 || bytes != total {
		t.Fatalf("Backlog after 30 appends: got (%d, %d), want (30, %d)", records, bytes, total)
	}
	for seq := uint64(1); seq <= 30; seq++ {
		if err := w.MarkCommitted(seq); err != nil {
			t.Fatal(err)
		}
	}
	if records, bytes := w.Backlog(); records != 0 || bytes != 0 {
		t.Fatalf("Backlog after committing all: got (%d, %d), want (0, 0)", records, bytes)
	}
}

// --- frames --------------------------------------------------------------

func TestWALFrameRoundTripsAndRejectsEveryTruncation(t *testing.T) {
	for i := range 20 {
		rec := walWithSeq(walTestRecord(i), uint64(i)+1)
		frame := walEncodeFrame(nil, rec)
		if want := walFrameBytes(len(rec.Topic), len(rec.Key), len(rec.Body), rec.Incarnation); int64(len(frame)) != want {
			t.Fatalf("frame size: got %d, want %d", len(frame), want)
		}
		got, n, err := walDecodeFrame(append(frame, 0xAA)) // trailing bytes are the next frame's
		if err != nil || n != len(frame) || !walRecordEqual(got, rec) {
			t.Fatalf("decode: got (%+v, %d, %v), want (%+v, %d, nil)", got, n, err, rec, len(frame))
		}
		for cut := range len(frame) {
			if _, _, err := walDecodeFrame(frame[:cut]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("frame cut at %d: got %v, want ErrCorrupt", cut, err)
			}
		}
		for b := range len(frame) {
			damaged := slices.Clone(frame)
			damaged[b] ^= 0x10
			if _, _, err := walDecodeFrame(damaged); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("frame with byte %d flipped: got %v, want ErrCorrupt", b, err)
			}
		}
	}
}

func TestWALPositionAheadOfTheDiskStillNeverReusesSeqs(t *testing.T) {
	for _, keep := range []int{0, 1} { // frames left in the active segment
		dir := t.TempDir()
		w := walOpenTest(t, dir, DefaultWALConfig())
		walAppendN(t, w, 0, 5)
		for seq := uint64(1); seq <= 5; seq++ {
			if err := w.MarkCommitted(seq); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.SavePosition(); err != nil {
			t.Fatal(err)
		}
		walCloseTest(t, w)
		// The disk loses committed records the position already covers.
		seg := walSegmentFiles(t, dir)[0]
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		end := 0
		for range keep {
			_, n, err := walParseFrame(data[end:])
			if err != nil {
				t.Fatal(err)
			}
			end += n
		}
		if err := os.Truncate(seg, int64(end)); err != nil {
			t.Fatal(err)
		}

		w = walOpenTest(t, dir, DefaultWALConfig())
		if got, _ := walReplayAll(t, w); len(got) != 0 {
			t.Fatalf("keep %d: replay of committed records: got %v, want none", keep, walSeqs(got))
		}
		if seq := walAppendOK(t, w, walTestRecord(9)); seq != 6 {
			t.Fatalf("keep %d: seq after the position: got %d, want 6", keep, seq)
		}
		walCloseTest(t, w)
		got, _ := walReplayAll(t, walOpenTest(t, dir, DefaultWALConfig()))
		walSameRecords(t, fmt.Sprintf("keep %d: replay", keep), got, []WALRecord{walWithSeq(walTestRecord(9), 6)})
	}
}

// The live position file's slots are written in place by turns: a torn
// or damaged slot is ignored, and what the other slot and the position
// file say is used, so no record that was not committed is ever skipped.
func TestWALDamagedLivePositionSlotNeverHidesAnUncommittedRecord(t *testing.T) {
	for _, damage := range []string{"latest", "both", "none"} {
		t.Run(damage, func(t *testing.T) {
			cfg := walSmallConfig()
			dir := t.TempDir()
			w := walOpenTest(t, dir, cfg)
			acked := walAppendN(t, w, 0, 30)
			var pending []uint64
			for _, r := range acked {
				if r.Seq%4 == 0 {
					pending = append(pending, r.Seq)
					continue
				}
				if err := w.MarkCommitted(r.Seq); err != nil {
					t.Fatal(err)
				}
			}
			walWaitSaved(t, w)
			w.maint.Lock()
			latest := w.liveSlot ^ 1
			w.maint.Unlock()
			crashed := walCopyDir(t, dir)
			live := filepath.Join(crashed, walLiveName)
			b, err := os.ReadFile(live)
			if err != nil {
				t.Fatal(err)
			}
			slot := cfg.liveSlotBytes()
			switch damage {
			case "latest":
				b[latest*slot+len(walPositionMagic2)+2] ^= 0x40
			case "both":
				b[len(walPositionMagic2)+2] ^= 0x40
				if len(b) > slot {
					b[slot+len(walPositionMagic2)+2] ^= 0x40
				}
			}
			if err := os.WriteFile(live, b, 0o644); err != nil {
				t.Fatal(err)
			}
			got, _ := walReplayAll(t, walOpenTest(t, crashed, cfg))
			replayed := walSeqs(got)
			for _, seq := range pending {
				if !slices.Contains(replayed, seq) {
					t.Fatalf("damage %s: replayed %v: want uncommitted seq %d among them", damage, replayed, seq)
				}
			}
			if damage == "none" && !slices.Equal(replayed, pending) {
				t.Fatalf("intact slots: replayed %v, want exactly the uncommitted %v", replayed, pending)
			}
		})
	}
}

// Every position read lists only committed seqs, so OpenWAL takes their
// union: the position file's watermark with a live slot's ranges.
func TestWALOpenTakesTheUnionOfThePositionFileAndTheLiveSlots(t *testing.T) {
	cfg := walSmallConfig()
	dir := t.TempDir()
	w := walOpenTest(t, dir, cfg)
	acked := walAppendN(t, w, 0, 12)
	walCloseTest(t, w)
	if err := os.WriteFile(filepath.Join(dir, walPositionName), walEncodePosition(3), 0o644); err != nil {
		t.Fatal(err)
	}
	slots := make([]byte, 2*cfg.liveSlotBytes())
	copy(slots, walEncodePositionRanges(1, []walSeqRange{{6, 7}}))
	copy(slots[cfg.liveSlotBytes():], walEncodePositionRanges(2, []walSeqRange{{9, 10}}))
	if err := os.WriteFile(filepath.Join(dir, walLiveName), slots, 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ := walReplayAll(t, walOpenTest(t, dir, cfg))
	walSameRecords(t, "replay of the union", got, []WALRecord{acked[3], acked[4], acked[7], acked[10], acked[11]})
}

// The position saver writes at most once per PositionSaveInterval however
// many marks arrive, and the last of a burst still reaches the disk.
func TestWALPositionSaveIntervalBoundsThePositionWrites(t *testing.T) {
	cfg := walSmallConfig()
	cfg.PositionOnCommit, cfg.PositionSaveInterval = true, time.Second
	dir := t.TempDir()
	w := walOpenTest(t, dir, cfg)
	acked := walAppendN(t, w, 0, 200)
	before := w.positions.Load()
	start := time.Now()
	for _, r := range acked {
		if err := w.MarkCommitted(r.Seq); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Microsecond) // room for the saver to run between marks
	}
	elapsed := time.Since(start)
	// One write may be under way as the burst starts, one more per interval.
	if got, most := w.positions.Load()-before, 2+int64(elapsed/cfg.PositionSaveInterval); got > most {
		t.Fatalf("%d marks over %v: got %d position writes, want at most %d (one per %v)", len(acked), elapsed, got, most, cfg.PositionSaveInterval)
	}
	walWaitSaved(t, w)
	got, _ := walReplayAll(t, walOpenTest(t, walCopyDir(t, dir), cfg))
	walSameRecords(t, "replay after a crash once the last write landed", got, nil)
}

// AppendMany queues a batch's records together: a refused record fails
// alone, the others take consecutive seqs and one fsync, and a reopen
// replays them all. A batch past the queue's bound is refused whole.
func TestWALAppendManyMakesABatchDurableTogether(t *testing.T) {
	cfg := walSmallConfig()
	dir := t.TempDir()
	w := walOpenTest(t, dir, cfg)
	recs := []WALRecord{
		{Topic: "t", Partition: 0, Key: []byte("a"), Body: []byte("one")},
		{Topic: "t", Partition: 1, Key: []byte("b"), Body: make([]byte, cfg.MaxBodyBytes+1)},
		{Topic: "t", Partition: 2, Key: []byte("c"), Body: []byte("three")},
		{Topic: "t", Partition: 0, Key: []byte("d"), Body: []byte("four")},
	}
	before := w.syncs.Load()
	seqs, errs := w.AppendMany(context.Background(), recs)
	if !errors.Is(errs[1], ErrTooLarge) {
		t.Fatalf("the oversized record: got %v, want ErrTooLarge", errs[1])
	}
	for _, i := range []int{0, 2, 3} {
		if errs[i] != nil {
			t.Fatalf("record %d: got %v, want nil", i, errs[i])
		}
	}
	if seqs[2] != seqs[0]+1 || seqs[3] != seqs[2]+1 {
		t.Fatalf("seqs: got %v, want consecutive ones for records 0, 2 and 3", seqs)
	}
	if got := w.syncs.Load() - before; got != 1 {
		t.Fatalf("fsyncs for a batch of three: got %d, want 1", got)
	}
	big := make([]WALRecord, cfg.MaxQueueRecords+1)
	for i := range big {
		big[i] = WALRecord{Topic: "t", Body: []byte("x")}
	}
	if _, errs := w.AppendMany(context.Background(), big); !errors.Is(errs[0], ErrFull) || !errors.Is(errs[len(big)-1], ErrFull) {
		t.Fatalf("a batch past the queue's bound: got %v ... %v, want ErrFull for every record", errs[0], errs[len(big)-1])
	}
	w.Close()
	w = walOpenTest(t, dir, cfg)
	var bodies []string
	if _, err := w.Replay(func(r WALRecord) error { bodies = append(bodies, string(r.Body)); return nil }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(bodies, " ") != "one three four" {
		t.Fatalf("replayed: got %q, want [one three four]", bodies)
	}
}

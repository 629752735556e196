package storage

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/naradmq/narad/actors/clock"
)

// SyncLaneConfig bounds a node's SyncLane. Every field has its unit in its name.
type SyncLaneConfig struct {
	// Disabled turns the lane off: each partition fsyncs its own log
	// (Log.Sync), one fsync per commit. For measuring the lane against its
	// absence, and as an escape hatch.
	Disabled bool
	// PerFileSync makes a batch durable with an fdatasync of each file in
	// it instead of one syncfs(2) of the data filesystem. It is forced where
	// syncfs cannot be trusted to report writeback errors (Linux before 5.8,
	// other systems). One syncfs costs about a tenth of the round at 5,000
	// files, but it also writes back whatever else is dirty on that
	// filesystem, so a node sharing its disk with a writer of bulk data may
	// prefer the round.
	PerFileSync bool
	// SyncFSMinRequests is the smallest batch that one syncfs makes
	// durable; a smaller one gets the per-file round. A syncfs costs what
	// dozens of fdatasyncs do (it walks the whole filesystem: about 10 ms on
	// this shared disk when little is dirty, where an fdatasync is about
	// 0.2 ms), so a lone partition's commit would pay it twice.
	SyncFSMinRequests int
	// MaxParallelFileSyncs bounds the fdatasyncs of a per-file round in
	// flight at once. Concurrent fdatasyncs share the journal's commits
	// (one file after another, a round of six costs six commits), and each
	// holds a goroutine until the disk answers.
	MaxParallelFileSyncs int
	// MaxWait is how long the first request of a batch waits, with the lane
	// idle, for others to join before its sync starts. Requests that arrive
	// while a sync runs join the next one anyway; the wait only helps when
	// syncs are cheap next to the gap between requests, and every commit of
	// a lone partition pays it.
	MaxWait time.Duration
	// MaxQueuedRequests bounds the requests waiting for the lane; a caller
	// past it blocks until there is room (see SyncLane.Sync for why it does
	// not refuse).
	MaxQueuedRequests int
	// MaxBatchRequests bounds the requests one sync answers: a per-file
	// round's length, and so the wait of the request at its end.
	MaxBatchRequests int
	// Clock times MaxWait; nil is the wall clock.
	Clock clock.Clock
}

// DefaultSyncLaneConfig is the lane a node runs unless told otherwise.
func DefaultSyncLaneConfig() SyncLaneConfig {
	return SyncLaneConfig{
		MaxWait: 0,
		// At most one request per open partition is out at a time, so this
		// never fills below 65,536 partitions on one node; a request is a
		// few dozen bytes.
		MaxQueuedRequests:    1 << 16,
		MaxBatchRequests:     8192,
		SyncFSMinRequests:    64,
		MaxParallelFileSyncs: 64,
	}
}

// Validate reports the first field that is out of range.
func (c SyncLaneConfig) Validate() error {
	switch {
	case c.MaxWait < 0 || c.MaxWait > 10*time.Millisecond:
		return fmt.Errorf("sync lane config: MaxWait %v outside 0..10ms (every commit may pay it): %w", c.MaxWait, ErrInvalid)
	case c.MaxQueuedRequests < 1 || c.MaxQueuedRequests > 1<<20:
		return fmt.Errorf("sync lane config: MaxQueuedRequests %d outside 1..1Mi: %w", c.MaxQueuedRequests, ErrInvalid)
	case c.MaxBatchRequests < 1 || c.MaxBatchRequests > c.MaxQueuedRequests:
		return fmt.Errorf("sync lane config: MaxBatchRequests %d outside 1..MaxQueuedRequests: %w", c.MaxBatchRequests, ErrInvalid)
	case c.SyncFSMinRequests < 1 || c.SyncFSMinRequests > c.MaxBatchRequests:
		return fmt.Errorf("sync lane config: SyncFSMinRequests %d outside 1..MaxBatchRequests: %w", c.SyncFSMinRequests, ErrInvalid)
	case c.MaxParallelFileSyncs < 1 || c.MaxParallelFileSyncs > 1024:
		return fmt.Errorf("sync lane config: MaxParallelFileSyncs %d outside 1..1024: %w", c.MaxParallelFileSyncs, ErrInvalid)
	}
	return nil
}

// SyncLane makes the writes of many logs durable with few syncs: every
// request that queued while a sync ran, or within MaxWait of the first,
// is answered by one syncfs(2) of the data filesystem (or, for a batch
// under SyncFSMinRequests or with PerFileSync, one fdatasync round over
// their files). A request is answered only by a sync that
// started after it was queued, so after the write it follows returned.
// Safe for concurrent use; one goroutine runs the syncs and ends on Close.
type SyncLane struct {
	cfg   SyncLaneConfig
	clock clock.Clock // cfg.Clock, or the wall
	// dir is held open for syncfs: the kernel reports a writeback error to
	// each open file once, so a descriptor kept across batches sees every
	// error since the previous batch.
	dir *os.File
	dev uint64 // the data filesystem; a log elsewhere syncs alone
	// testing skips the device check (a test lane holds no directory).
	testing bool
	// syncAll and syncEach make files durable and set errs[i] for
	// files[i]: one syncfs, or file by file. Tests replace them.
	syncAll, syncEach func(files []*os.File, errs []error)
	// syncFSFailed is set by the first failed syncfs, after which every
	// batch gets the per-file round. That syncfs may have consumed the
	// writeback error of a file whose request sits in a later batch (its
	// dirty pages written back, and failed, during the sync), and the
	// kernel reports the error to the lane's descriptor only once, so a
	// later syncfs would answer that request with success. Each log's own
	// descriptor still holds the error for its fdatasync.
	syncFSFailed atomic.Bool

	queue   chan *syncRequest
	closing chan struct{}
	done    chan struct{}
	once    sync.Once

	batches, requests atomic.Uint64
}

type syncRequest struct {
	file   *os.File
	queued time.Time
	answer chan error // buffered: the lane never waits for a caller that left
}

// SyncLaneStats counts the lane's work since it opened.
type SyncLaneStats struct {
	// Batches is the number of syncs (syncfs calls or per-file rounds).
	Batches uint64
	// Requests is the number of requests those syncs answered.
	Requests uint64
}

// OpenSyncLane starts a lane for the logs under dataDir. It syncs with
// syncfs unless cfg asks for the per-file round or this system's syncfs
// does not report writeback errors.
func OpenSyncLane(dataDir string, cfg SyncLaneConfig) (*SyncLane, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dir, err := os.Open(dataDir)
	if err != nil {
		return nil, fmt.Errorf("open %s for the sync lane: %w", dataDir, err)
	}
	dev, err := fileDevice(dir)
	if err != nil {
		dir.Close()
		return nil, fmt.Errorf("sync lane: %w", err)
	}
	s := &SyncLane{dir: dir, dev: dev}
	s.syncAll, s.syncEach = s.syncFilesystem, s.syncFiles
	if !syncFSReportsErrors() {
		cfg.PerFileSync = true
	}
	s.start(cfg)
	return s, nil
}

// newTestSyncLane is a lane whose syncs are syncAll and syncEach, for
// tests; it checks no device (none is held).
func newTestSyncLane(cfg SyncLaneConfig, syncAll, syncEach func(files []*os.File, errs []error)) *SyncLane {
	s := &SyncLane{syncAll: syncAll, syncEach: syncEach, testing: true}
	s.start(cfg)
	return s
}

func (s *SyncLane) start(cfg SyncLaneConfig) {
	s.cfg = cfg
	s.clock = clock.Or(cfg.Clock)
	s.queue = make(chan *syncRequest, cfg.MaxQueuedRequests)
	s.closing = make(chan struct{})
	s.done = make(chan struct{})
	go s.run()
}

// PerFile reports whether the lane syncs every batch file by file
// (fdatasync), never with syncfs: by its config, on a system whose syncfs
// cannot be trusted, or since a syncfs failed.
func (s *SyncLane) PerFile() bool { return s.cfg.PerFileSync || s.syncFSFailed.Load() }

// Stats reads the lane's counters.
func (s *SyncLane) Stats() SyncLaneStats {
	return SyncLaneStats{Batches: s.batches.Load(), Requests: s.requests.Load()}
}

// Sync makes everything written to l so far durable, with the other logs
// whose syncs are queued. It returns nil only after a sync that started
// after this call covered l's active segment.
//
// A full queue blocks rather than refuses: the callers are the partitions'
// sync goroutines, at most one per open partition, each of which has
// nothing else to do, and a refusal would fail the commit back to the
// dispatcher for a retry a second later, which under a burst over many
// partitions is exactly the write pass the lane exists to shorten. ctx
// bounds the wait; an error (ctx done, the lane closed, a failed sync)
// means nothing is known durable, and the caller aborts the write.
func (s *SyncLane) Sync(ctx context.Context, l *Log) error {
	f, release, err := l.syncFile()
	if err != nil {
		return err
	}
	defer release()
	if f == nil {
		return nil // the cache closed it, synced: nothing to sync
	}
	of, onOS := f.(*os.File)
	if !onOS {
		// A log on a file system of its own (LogConfig.FS): neither the
		// lane's syncfs nor its fdatasync reach it.
		return f.Sync()
	}
	if !s.cfg.PerFileSync && !s.testing {
		if dev, err := fileDevice(of); err != nil || dev != s.dev {
			// Another filesystem (a mount inside the data dir): the lane's
			// syncfs would not cover it.
			return datasync(of)
		}
	}
	r := &syncRequest{file: of, queued: s.clock.Now(), answer: make(chan error, 1)}
	select {
	case s.queue <- r:
	case <-s.closing:
		return fmt.Errorf("sync lane: %w", ErrClosed)
	case <-ctx.Done():
		return fmt.Errorf("sync lane: %w", ctx.Err())
	}
	select {
	case err := <-r.answer:
		return err
	case <-s.done:
		select {
		case err := <-r.answer:
			return err
		default:
			// Queued as the lane ended: no sync will answer it.
			return fmt.Errorf("sync lane: %w", ErrClosed)
		}
	case <-ctx.Done():
		return fmt.Errorf("sync lane: %w", ctx.Err())
	}
}

// Close finishes the sync under way, fails every request still queued with
// ErrClosed and ends the lane's goroutine. Close it after the logs whose
// syncs it runs.
func (s *SyncLane) Close() error {
	s.once.Do(func() { close(s.closing) })
	<-s.done
	if s.dir != nil {
		return s.dir.Close()
	}
	return nil
}

func (s *SyncLane) run() {
	defer close(s.done)
	batch := make([]*syncRequest, 0, s.cfg.MaxBatchRequests)
	files := make([]*os.File, 0, s.cfg.MaxBatchRequests)
	errs := make([]error, 0, s.cfg.MaxBatchRequests)
	for {
		batch = batch[:0]
		select {
		case <-s.closing:
			// Checked first: a select with both ready picks at random,
			// and a busy queue would keep Close waiting.
			s.failQueued()
			return
		default:
		}
		select {
		case r := <-s.queue:
			batch = append(batch, r)
		case <-s.closing:
			s.failQueued()
			return
		}
		batch = s.gather(batch)
		files, errs = files[:0], errs[:0]
		for _, r := range batch {
			files = append(files, r.file)
			errs = append(errs, nil)
		}
		if !s.cfg.PerFileSync && !s.syncFSFailed.Load() && len(files) >= s.cfg.SyncFSMinRequests {
			s.syncAll(files, errs)
			if errs[0] != nil { // a syncfs fails its whole batch alike
				s.syncFSFailed.Store(true)
			}
		} else {
			s.syncEach(files, errs)
		}
		// Counted before the answers: a caller answered sees its batch in
		// Stats.
		s.batches.Add(1)
		s.requests.Add(uint64(len(batch)))
		for i, r := range batch {
			r.answer <- errs[i]
		}
		clear(batch) // nothing pinned (files of closed logs) until the next batch
		clear(files)
	}
}

// gather adds to batch what is queued, and then what arrives until the
// first request has waited MaxWait or the batch is full.
func (s *SyncLane) gather(batch []*syncRequest) []*syncRequest {
	max := s.cfg.MaxBatchRequests
queued:
	for len(batch) < max {
		select {
		case r := <-s.queue:
			batch = append(batch, r)
		default:
			break queued
		}
	}
	wait := s.cfg.MaxWait - clock.Since(s.clock, batch[0].queued)
	if len(batch) >= max || wait <= 0 {
		return batch
	}
	t := clock.NewAlarm(s.clock, wait)
	defer t.Stop()
	for len(batch) < max {
		select {
		case r := <-s.queue:
			batch = append(batch, r)
		case <-t.C:
			return batch
		case <-s.closing:
			return batch // synced and answered; run then fails the rest
		}
	}
	return batch
}

func (s *SyncLane) failQueued() {
	for {
		select {
		case r := <-s.queue:
			r.answer <- fmt.Errorf("sync lane: %w", ErrClosed)
		default:
			return
		}
	}
}

// syncFilesystem is one syncfs for the whole batch: it covers every file on
// the data filesystem, and its error cannot be pinned on one file, so it
// fails them all.
func (s *SyncLane) syncFilesystem(_ []*os.File, errs []error) {
	err := syncFSFile(s.dir)
	if err != nil {
		err = fmt.Errorf("sync lane: %w", err)
	}
	for i := range errs {
		errs[i] = err
	}
}

// syncFiles is the per-file round, MaxParallelFileSyncs at a time: each
// file's error is its own. Its goroutines end with the round.
func (s *SyncLane) syncFiles(files []*os.File, errs []error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(len(files), s.cfg.MaxParallelFileSyncs) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(files); i = int(next.Add(1) - 1) {
				if err := datasync(files[i]); err != nil {
					errs[i] = fmt.Errorf("sync lane: %w", err)
				}
			}
		})
	}
	wg.Wait()
}

package storage

import (
	"fmt"

	"github.com/naradmq/narad/actors/clock"
)

// LogConfig bounds one partition log. Every field has its unit in its name.
type LogConfig struct {
	// SegmentMaxBytes is where a segment rolls. Retention and transfers work
	// in whole segments, so this is also the granularity of deletion and of
	// the "sealed" part of a copy that needs no boundary walk.
	SegmentMaxBytes int64
	// MaxBodyBytes is the largest record body: the client API's 1 MiB limit.
	MaxBodyBytes int
	// MaxKeyBytes is the largest record key. Keys travel in URLs; 64 KiB is
	// far past any sane key and keeps a frame under frameMaxBytes.
	MaxKeyBytes int
	// MaxBatchRecords caps the records one group commit writes, so a commit's
	// latency and the memory it pins stay bounded.
	MaxBatchRecords int
	// MaxBatchBytes caps the encoded bytes of one group commit for the same reason.
	MaxBatchBytes int
	// IndexIntervalBytes is the spacing of the in-memory sparse offset index:
	// a read scans at most this many bytes to find its first record.
	IndexIntervalBytes int
	// ReadBufferBytes is the window a read or a recovery walk pulls from the
	// file at once; larger windows mean fewer system calls. A frame larger
	// than the window is read whole on its own.
	ReadBufferBytes int
	// MaxOpenSegmentFiles is node-wide, not per log: the active segment
	// files the node's logs hold open at once (NewFiles); idle ones close
	// and reopen at their next write. 2,048 is half of 4,096, the smallest
	// hard RLIMIT_NOFILE in common use (Go raises the soft limit to the
	// hard one), leaving the other half to the WAL, the metastore, sockets
	// and the files reads open for a call. A log opened alone (OpenLog)
	// holds its own file and ignores it.
	MaxOpenSegmentFiles int
	// RecentOriginsMax is how many of its last committed records' origins
	// a log remembers (16 bytes each, grown on demand), so a record its
	// ingress WAL replays after a crash, or its dispatcher sends again
	// after a lost answer, is answered as committed instead of stored
	// twice. It needs to cover what an ingress node commits to one
	// partition between two saves of its WAL position (10 ms) plus the
	// commits in flight; 1,024 is that at 100,000 records a second to one
	// partition. 0 remembers none (every resend is stored again).
	RecentOriginsMax int
	// Faults, when not nil, fails the log's writes or fsyncs on purpose
	// (a fault-injection run); a node hands every log the same switch.
	Faults *Faults
	// Clock is what a log's record and segment times are read from: the
	// log's functions are handed now, and everyone who hands it (the
	// partition actor, the sweep, a move's install) reads this clock, so
	// that they agree. The node gives it its steady clock (actors/clock):
	// clients compare these times with their own. Nil is the wall clock.
	Clock clock.Clock
	// Origins says whether a record's origin may go into its frame (kind
	// 3): a node answers yes once the cluster version has reached the one
	// every member reads such frames at (messages.ClusterVersionOrigins).
	// Until then a record is written as kind 1, without its origin, as if
	// it had none: a copy of it sent again after a crash is then not
	// recognised and stored twice, which at-least-once allows, while a
	// node of an older binary can still read every frame. Asked once per
	// batch; nil writes origins.
	Origins func() bool
	// FS is the file system of the log's segments; nil is the OS's. A
	// crash test hands one that forgets what was not synced (fs.go).
	FS FS
	// InstallSyncs is how a batch of moves' copies (StageBatch,
	// InstallBatch) is made durable in rule V6's order: one syncfs(2) of
	// the data file system a step (InstallSyncFS, the zero value), or an
	// fsync of each file and directory the batch wrote (InstallSyncPerFile).
	// A syncfs also writes back whatever else is dirty on the file system
	// (other nodes or programs sharing the disk); the per-file syncs wait
	// only for the batch's own files, but for many journal commits.
	// Measured (BenchmarkInstallSyncs, bench/syncs/run.sh): syncfs takes
	// 0.2-0.9 of per-file's time a partition on this machine's shared disk
	// and on an ext4 of its own, with and without a writer dirtying 32 or
	// 128 MiB/s beside it, and with three such benches at once (the three
	// nodes of one disk); per-file wins only for 1 MiB copies beside a
	// writer of 512 MiB/s, the choice for a node sharing its disk with
	// bulk writes.
	InstallSyncs InstallSyncMode
}

// InstallSyncMode is how a batch of staged copies is made durable
// (LogConfig.InstallSyncs). Either keeps rule V6's order: every file of
// every copy, then every marker and staging directory, then the renames
// and the directories they touched, each step complete before the next.
type InstallSyncMode int

const (
	// InstallSyncFS is one syncfs(2) barrier a step: for the files, for
	// the markers and staging directories, and for the renames when they
	// touched more than two directories (else an fsync of each).
	InstallSyncFS InstallSyncMode = iota
	// InstallSyncPerFile is an fsync of each file, marker and staging
	// directory of the batch, and one of each directory the renames
	// touched, at most maxParallelInstallSyncs in flight.
	InstallSyncPerFile
)

// DefaultLogConfig is the configuration a node uses unless told otherwise.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentMaxBytes:     64 << 20,
		MaxBodyBytes:        1 << 20,
		MaxKeyBytes:         64 << 10,
		MaxBatchRecords:     4096,
		MaxBatchBytes:       16 << 20,
		IndexIntervalBytes:  4 << 10,
		ReadBufferBytes:     256 << 10,
		MaxOpenSegmentFiles: 2048,
		RecentOriginsMax:    1024,
	}
}

// maxFrameBytes is the largest frame this config can write.
func (c LogConfig) maxFrameBytes() int {
	return frameSize(c.MaxKeyBytes, c.MaxBodyBytes) + frameOriginBytes
}

// Validate reports the first field that is out of range.
func (c LogConfig) Validate() error {
	switch {
	case c.SegmentMaxBytes < 4<<10:
		return fmt.Errorf("log config: SegmentMaxBytes %d below 4 KiB: %w", c.SegmentMaxBytes, ErrInvalid)
	case c.MaxBodyBytes < 1 || c.MaxBodyBytes > 1<<20:
		return fmt.Errorf("log config: MaxBodyBytes %d outside 1..1 MiB: %w", c.MaxBodyBytes, ErrInvalid)
	case c.MaxKeyBytes < 0 || c.MaxKeyBytes > 64<<10:
		return fmt.Errorf("log config: MaxKeyBytes %d outside 0..64 KiB: %w", c.MaxKeyBytes, ErrInvalid)
	case c.maxFrameBytes() > frameMaxBytes:
		return fmt.Errorf("log config: frames of %d bytes exceed the decoder's %d: %w", c.maxFrameBytes(), frameMaxBytes, ErrInvalid)
	case c.MaxBatchRecords < 1:
		return fmt.Errorf("log config: MaxBatchRecords %d below 1: %w", c.MaxBatchRecords, ErrInvalid)
	case c.MaxBatchBytes < c.maxFrameBytes()+frameHeaderBytes:
		return fmt.Errorf("log config: MaxBatchBytes %d cannot hold one largest record: %w", c.MaxBatchBytes, ErrInvalid)
	case c.IndexIntervalBytes < 64:
		return fmt.Errorf("log config: IndexIntervalBytes %d below 64: %w", c.IndexIntervalBytes, ErrInvalid)
	case c.ReadBufferBytes < 4<<10:
		return fmt.Errorf("log config: ReadBufferBytes %d below 4 KiB: %w", c.ReadBufferBytes, ErrInvalid)
	case c.MaxOpenSegmentFiles < 1 || c.MaxOpenSegmentFiles > 1<<20:
		// 1<<20 is Linux's default ceiling on any process's descriptors (nr_open).
		return fmt.Errorf("log config: MaxOpenSegmentFiles %d outside 1..1048576: %w", c.MaxOpenSegmentFiles, ErrInvalid)
	case c.RecentOriginsMax < 0 || c.RecentOriginsMax > 1<<20:
		// 1<<20 is 16 MiB a partition: past any window a resend needs.
		return fmt.Errorf("log config: RecentOriginsMax %d outside 0..1048576: %w", c.RecentOriginsMax, ErrInvalid)
	case c.InstallSyncs != InstallSyncFS && c.InstallSyncs != InstallSyncPerFile:
		return fmt.Errorf("log config: InstallSyncs %d is neither InstallSyncFS (0) nor InstallSyncPerFile (1): %w", c.InstallSyncs, ErrInvalid)
	}
	return nil
}

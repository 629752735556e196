package mover

import (
	"fmt"
	"time"
)

// Config is the move runner's and its workers' part of the node's
// configuration (actors.Config composes it as Mover). Every limit has its
// unit in its name. What the node's other actors read as well (the tick,
// which the partitions supervisor retries on, the chunk size the source
// serves, move.Config, the request timeout) stays in actors.Config and
// comes in Deps.
type Config struct {
	// FullScanEvery forces a runner scan that often even when nothing
	// changed (rule R3: 30 s); at least the node's MoveTick, which
	// actors.Config.Validate checks.
	FullScanEvery time.Duration
	// SweepEveryTicks is how many runner ticks, skipped or not, lie
	// between two stale-copy sweeps (rule R5: the seed's 30). A sweep asks
	// the owner of every copy it judges for a listing, so it is rare.
	SweepEveryTicks int
	// WorkerMaxRestarts, WorkerRestartWindow and WorkerRestartBackoff
	// supervise the move workers: past the limit a worker is stopped and
	// the runner starts a new one on a later tick, keeping its verify
	// count (rule V4). The back-off keeps a worker failing on a bad disk
	// from hammering the source. The node builds the runner's strategy
	// from them.
	WorkerMaxRestarts    int
	WorkerRestartWindow  time.Duration
	WorkerRestartBackoff time.Duration
	// ChunkWindow is how many chunk reads of one move are in flight: they
	// hide the round trips; each holds the node's MoveChunkBytes in
	// memory. Within 1..64.
	ChunkWindow int
	// InlineBytes: a partition whose committed bytes total at most this
	// comes whole in its listing, and its move reads no chunk (2 KiB: a
	// group of MoveGroupMaxItems such listings stays far under NATS's
	// 1 MiB, and one too large is sent again item by item). 0 turns it
	// off; at most 64 KiB.
	InlineBytes int
	// FlipBatchWindow and MaxFlipBatch: the flips of moves that finish
	// together are proposed in one Raft entry per shard (Store.FlipMany);
	// a flip waits at most FlipBatchWindow for others to join it, and a
	// batch holds at most MaxFlipBatch.
	FlipBatchWindow time.Duration
	MaxFlipBatch    int
	// InstallBatchWindow and MaxInstallBatch: the installs of moves that
	// reach their install together share one syncfs per step
	// (storage.InstallBatch); an install waits at most InstallBatchWindow
	// for others, and a batch holds at most MaxInstallBatch copies.
	InstallBatchWindow time.Duration
	MaxInstallBatch    int
}

// DefaultConfig is the runner's and workers' limits as a node runs them.
func DefaultConfig() Config {
	return Config{
		FullScanEvery:        30 * time.Second,
		SweepEveryTicks:      30,
		WorkerMaxRestarts:    5,
		WorkerRestartWindow:  time.Minute,
		WorkerRestartBackoff: time.Second,
		ChunkWindow:          4,
		InlineBytes:          2 << 10,
		FlipBatchWindow:      2 * time.Millisecond,
		MaxFlipBatch:         512,
		InstallBatchWindow:   2 * time.Millisecond,
		MaxInstallBatch:      256,
	}
}

// Validate reports the first field out of range, naming it.
func (c Config) Validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("mover config: %s %v %s", field, v, why)
	}
	switch {
	case c.FullScanEvery <= 0:
		return bad("FullScanEvery", c.FullScanEvery, "must be positive")
	case c.SweepEveryTicks < 1 || c.SweepEveryTicks > 100000:
		return bad("SweepEveryTicks", c.SweepEveryTicks, "must be 1 to 100000")
	case c.WorkerMaxRestarts < 0 || c.WorkerRestartWindow <= 0 || c.WorkerRestartBackoff <= 0:
		return bad("WorkerMaxRestarts/WorkerRestartWindow/WorkerRestartBackoff", fmt.Sprint(c.WorkerMaxRestarts, c.WorkerRestartWindow, c.WorkerRestartBackoff), "must be non-negative, positive, positive")
	case c.ChunkWindow < 1 || c.ChunkWindow > 64:
		return bad("ChunkWindow", c.ChunkWindow, "must be within 1..64")
	case c.InlineBytes < 0 || c.InlineBytes > 64<<10:
		return bad("InlineBytes", c.InlineBytes, "must be within 0..65536")
	case c.FlipBatchWindow < 0 || c.FlipBatchWindow > time.Second:
		return bad("FlipBatchWindow", c.FlipBatchWindow, "must be within 0..1s")
	case c.MaxFlipBatch < 1 || c.MaxFlipBatch > 10000:
		return bad("MaxFlipBatch", c.MaxFlipBatch, "must be within 1..10000")
	case c.InstallBatchWindow < 0 || c.InstallBatchWindow > time.Second:
		return bad("InstallBatchWindow", c.InstallBatchWindow, "must be within 0..1s")
	case c.MaxInstallBatch < 1 || c.MaxInstallBatch > 10000:
		return bad("MaxInstallBatch", c.MaxInstallBatch, "must be within 1..10000")
	}
	return nil
}

// Package diskhealth is a node's verdict on its disk (issue 15). A node
// whose disk has no space left says so: a produce it cannot write answers
// 503 naming the cause, /readyz answers 503 with it so that a load
// balancer sends producers elsewhere, and narad_disk_full reads 1 for an
// alert. Since a node out of rotation gets no produce that could show the
// space is back, Probe writes a small file every ProbeInterval until one
// succeeds.
//
// Start with Health: the produce path appends to the ingress WAL through
// it (Append) and reports each append's outcome to it (Failed,
// Succeeded), and /readyz reads Failure.
package diskhealth

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/storage"
)

// ProbeInterval is how often a node whose disk was full tries a write.
const ProbeInterval = time.Second

// WAL is the ingress WAL as the produce path appends to it.
type WAL interface {
	Append(ctx context.Context, wr storage.WALRecord) (uint64, error)
	AppendMany(ctx context.Context, wrs []storage.WALRecord) ([]uint64, []error)
}

// Deps is what a Health needs of its node. Every field is set before the
// first call and only read afterwards.
type Deps struct {
	// Dir is where the probe writes its file: the ingress WAL's directory,
	// the first write a produce makes.
	Dir    string
	WAL    WAL
	Logger *slog.Logger
	// NoSpace, when set and while it returns true, fails the WAL's
	// appends and the probe as a full disk does (ENOSPC): a test's switch,
	// nil in production.
	NoSpace func() bool
	// Clock paces the probe. The wall clock: a full disk is a fact of the
	// machine, and a test's fake clock would leave it unprobed (nil is
	// the wall clock).
	Clock clock.Clock
}

// Health is the node's last verdict on its disk. Safe for concurrent use;
// the produce path reads one atomic when all is well.
type Health struct {
	d    Deps
	full atomic.Bool
	mu   sync.Mutex
	why  string
}

// New is the verdict of a disk that takes writes.
func New(d Deps) *Health {
	d.Clock = clock.Or(d.Clock)
	return &Health{d: d}
}

// Append appends wr to the ingress WAL, or fails as a full disk would
// while NoSpace says so.
func (h *Health) Append(ctx context.Context, wr storage.WALRecord) (uint64, error) {
	if h.noSpace() {
		return 0, fmt.Errorf("write wal: %w", syscall.ENOSPC)
	}
	// Detached from the request: a client that goes away must not leave a
	// record durable in the WAL that the dispatcher never heard of (it would
	// hold the WAL's watermark until the next restart).
	return h.d.WAL.Append(context.WithoutCancel(ctx), wr)
}

// AppendMany is Append for a batch (storage.WAL.AppendMany).
func (h *Health) AppendMany(ctx context.Context, wrs []storage.WALRecord) ([]uint64, []error) {
	if h.noSpace() {
		errs := make([]error, len(wrs))
		for i := range errs {
			errs[i] = fmt.Errorf("write wal: %w", syscall.ENOSPC)
		}
		return make([]uint64, len(wrs)), errs
	}
	return h.d.WAL.AppendMany(context.WithoutCancel(ctx), wrs)
}

// noSpace is the test's switch, off without one.
func (h *Health) noSpace() bool { return h.d.NoSpace != nil && h.d.NoSpace() }

// Failed records a write that found no space, logged at error once per
// episode.
func (h *Health) Failed(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.full.Load() {
		h.d.Logger.Error("disk full: this node refuses produce and reads not ready until a write succeeds", "err", err)
	}
	h.why = "no space left on the disk"
	h.full.Store(true)
}

// Succeeded clears a full verdict.
func (h *Health) Succeeded() {
	if !h.full.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.full.Load() {
		h.d.Logger.Warn("disk writes succeed again: serving produce and ready")
	}
	h.full.Store(false)
	h.why = ""
}

// Full is the verdict narad_disk_full reads.
func (h *Health) Full() bool { return h.full.Load() }

// Failure is "" while writes succeed, else why they do not.
func (h *Health) Failure() string {
	if !h.full.Load() {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.why
}

// Probe tries a small synced write in Dir every ProbeInterval while the
// disk reads full, and clears the verdict once one succeeds. It ends with
// ctx.
func (h *Health) Probe(ctx context.Context) {
	for {
		if clock.Sleep(ctx, h.d.Clock, ProbeInterval) != nil {
			return
		}
		if !h.full.Load() {
			continue
		}
		if err := h.probeWrite(); err != nil {
			continue
		}
		h.Succeeded()
	}
}

// probeWrite writes, syncs and removes a small file in Dir.
func (h *Health) probeWrite() error {
	if h.noSpace() {
		return fmt.Errorf("probe write: %w", syscall.ENOSPC)
	}
	p := filepath.Join(h.d.Dir, ".write-probe")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, 4096))
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	os.Remove(p)
	return err
}

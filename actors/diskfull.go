package actors

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

	"github.com/naradmq/narad/storage"
)

// A node whose disk has no space left says so (issue 15): a produce it
// cannot write answers 503 naming the cause, /readyz answers 503 with it
// so a load balancer sends producers elsewhere, and narad_disk_full reads
// 1 for an alert. Since a node out of rotation gets no produce that could
// show the space is back, a probe writes a small file every
// writeProbeInterval until one succeeds.

// writeProbeInterval is how often a node whose disk was full tries a write.
const writeProbeInterval = time.Second

// writeHealth is the node's last verdict on its disk. Safe for concurrent
// use; the produce path reads one atomic when all is well.
type writeHealth struct {
	full atomic.Bool
	mu   sync.Mutex
	why  string
}

// failed records a write that found no space, logged at error once per
// episode.
func (h *writeHealth) failed(err error, log *slog.Logger) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.full.Load() {
		log.Error("disk full: this node refuses produce and reads not ready until a write succeeds", "err", err)
	}
	h.why = "no space left on the disk"
	h.full.Store(true)
}

// succeeded clears a full verdict.
func (h *writeHealth) succeeded(log *slog.Logger) {
	if !h.full.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.full.Load() {
		log.Warn("disk writes succeed again: serving produce and ready")
	}
	h.full.Store(false)
	h.why = ""
}

// failure is "" while writes succeed, else why they do not.
func (h *writeHealth) failure() string {
	if !h.full.Load() {
		return ""
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.why
}

// WriteFailure is "" while the node's disk takes writes, else why not.
func (n *Node) WriteFailure() string { return n.writes.failure() }

// appendWAL appends to the ingress WAL, or fails as a full disk would when
// a test says so (faultHooks.noSpace).
func (n *Node) appendWAL(ctx context.Context, wr storage.WALRecord) (uint64, error) {
	if f := n.cfg.faults; f != nil && f.noSpace != nil && f.noSpace() {
		return 0, fmt.Errorf("write wal: %w", syscall.ENOSPC)
	}
	// Detached from the request: a client that goes away must not leave a
	// record durable in the WAL that the dispatcher never heard of (it would
	// hold the WAL's watermark until the next restart).
	return n.wal.Append(context.WithoutCancel(ctx), wr)
}

// appendWALMany is appendWAL for a batch (WAL.AppendMany).
func (n *Node) appendWALMany(ctx context.Context, wrs []storage.WALRecord) ([]uint64, []error) {
	if f := n.cfg.faults; f != nil && f.noSpace != nil && f.noSpace() {
		errs := make([]error, len(wrs))
		for i := range errs {
			errs[i] = fmt.Errorf("write wal: %w", syscall.ENOSPC)
		}
		return make([]uint64, len(wrs)), errs
	}
	return n.wal.AppendMany(context.WithoutCancel(ctx), wrs)
}

// probeWrites tries a small synced write in the WAL's directory every
// writeProbeInterval while the disk reads full, and clears the verdict
// once one succeeds. It ends with ctx.
func (n *Node) probeWrites(ctx context.Context) {
	t := time.NewTicker(writeProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !n.writes.full.Load() {
			continue
		}
		if err := n.probeWrite(); err != nil {
			continue
		}
		n.writes.succeeded(n.log)
	}
}

// probeWrite writes, syncs and removes a small file next to the WAL.
func (n *Node) probeWrite() error {
	if f := n.cfg.faults; f != nil && f.noSpace != nil && f.noSpace() {
		return fmt.Errorf("probe write: %w", syscall.ENOSPC)
	}
	p := filepath.Join(n.cfg.DataDir, "wal", ".write-probe")
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

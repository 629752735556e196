package diskhealth

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/storage"
)

// wal is an ingress WAL that remembers whether the context of its last
// append was already cancelled.
type wal struct{ lastCtxErr error }

func (w *wal) Append(ctx context.Context, _ storage.WALRecord) (uint64, error) {
	w.lastCtxErr = ctx.Err()
	return 7, nil
}

func (w *wal) AppendMany(ctx context.Context, wrs []storage.WALRecord) ([]uint64, []error) {
	w.lastCtxErr = ctx.Err()
	return make([]uint64, len(wrs)), make([]error, len(wrs))
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// An append outlives the request that made it (a client gone must not
// leave a durable record the dispatcher never heard of), and fails as a
// full disk does while the test's switch says so.
func TestAppendIsDetachedFromTheRequestAndFailsAsAFullDiskOnTheSwitch(t *testing.T) {
	var full atomic.Bool
	w := &wal{}
	h := New(Deps{Dir: t.TempDir(), WAL: w, Logger: quiet(), NoSpace: full.Load})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if seq, err := h.Append(ctx, storage.WALRecord{}); err != nil || seq != 7 || w.lastCtxErr != nil {
		t.Fatalf("an append whose request went away: got %d, %v, the WAL saw %v; want 7, nil, a live context", seq, err, w.lastCtxErr)
	}
	full.Store(true)
	if _, err := h.Append(t.Context(), storage.WALRecord{}); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("an append on a full disk: got %v, want ENOSPC", err)
	}
	_, errs := h.AppendMany(t.Context(), make([]storage.WALRecord, 3))
	for i, err := range errs {
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("record %d of a batch on a full disk: got %v, want ENOSPC", i, err)
		}
	}
}

// A full verdict holds until a write succeeds: the probe tries one each
// ProbeInterval of the clock it is given, and clears the verdict once the
// space is back, with no produce needed to tell it.
func TestAFullDiskIsSaidUntilTheProbeFindsTheSpaceBack(t *testing.T) {
	var full atomic.Bool
	full.Store(true)
	clk := testnet.NewClock()
	h := New(Deps{Dir: t.TempDir(), WAL: &wal{}, Logger: quiet(), NoSpace: full.Load, Clock: clk})
	if h.Failure() != "" || h.Full() {
		t.Fatal("a new verdict: got full, want writes taken")
	}
	h.Failed(syscall.ENOSPC)
	if h.Failure() != "no space left on the disk" || !h.Full() {
		t.Fatalf("after a failed write: got %q, want the lack of space named", h.Failure())
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); h.Probe(ctx) }()
	armed := func() bool { return clk.Pending() == 1 }
	testnet.Eventually(t, 10*time.Second, "the probe's first timer", armed)
	clk.Advance(ProbeInterval) // the disk is still full: the probe fails
	testnet.Eventually(t, 10*time.Second, "the probe's second timer", armed)
	if !h.Full() {
		t.Fatal("a probe on a full disk cleared the verdict")
	}
	full.Store(false)
	clk.Advance(ProbeInterval)
	testnet.Eventually(t, 10*time.Second, "the probe to clear the verdict", func() bool { return !h.Full() })
	if h.Failure() != "" {
		t.Fatalf("after a probe write succeeded: got %q, want none", h.Failure())
	}
	cancel()
	<-done
}

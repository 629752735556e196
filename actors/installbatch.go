package actors

import (
	"fmt"

	"github.com/naradmq/narad/storage"
)

// The installs of moves that reach their install together share their
// syncs: the node's installBatcher gathers the copies staged within
// InstallBatchWindow, up to MaxInstallBatch, and installs them with
// storage.InstallBatch, one syncfs barrier per step for the whole batch
// instead of a file and directory fsync per copy. Each copy keeps
// Install's order (data, then marker, then rename) and its own outcome.

// installsInFlight bounds the batches installing at once.
const installsInFlight = 4

type installOutcome struct {
	res storage.InstallResult
	err error
}

type installBatcher struct {
	b *batcher[storage.InstallItem, installOutcome]
}

func newInstallBatcher(c Config) *installBatcher {
	return &installBatcher{b: newBatcher(c.InstallBatchWindow, c.MaxInstallBatch, installsInFlight, func(items []storage.InstallItem) []installOutcome {
		res, errs := storage.InstallBatch(items)
		out := make([]installOutcome, len(items))
		for i := range items {
			out[i] = installOutcome{res: res[i], err: errs[i]}
		}
		return out
	})}
}

// install installs s at target in the next batch. It takes no context on
// purpose: once queued, the install runs to its end, and the worker waits
// for it, so that a worker that stops never clears a copy an install is
// still renaming (its stop waits for its I/O).
func (ib *installBatcher) install(s *storage.Staging, target string, opts storage.InstallOptions) (storage.InstallResult, error) {
	if ib == nil {
		return s.Install(target, opts)
	}
	done, ok := ib.b.submit(storage.InstallItem{Staging: s, Target: target, Options: opts})
	if !ok {
		return storage.InstallResult{}, fmt.Errorf("install at %s: the node is stopping: %w", target, ErrUnavailable)
	}
	o := <-done
	return o.res, o.err
}

// close stops gathering and waits for the installs under way.
func (ib *installBatcher) close() {
	if ib != nil {
		ib.b.close()
	}
}

package mover

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The installs of moves that reach their install together share their
// syncs: the node's InstallBatcher gathers the copies staged within
// InstallBatchWindow, up to MaxInstallBatch, and installs them with
// storage.InstallBatch: each step's syncs shared by the whole batch (one
// syncfs a step, or each path's fsync in parallel: the node's
// Log.InstallSyncs). Each copy keeps Install's order (data, then marker,
// then rename) and its own outcome.

// installsInFlight bounds the batches installing (and, apart, staging) at
// once. An install under a freeze is mostly a wait on one sync barrier of
// the disk, and a batch waiting for a slot waits inside its moves'
// freezes: with 4 a staged install spent a third of its time queued, and
// 16 cut the frozen window by a tenth on the bulk stop (issue 46). Each
// batch holds at most MaxInstallBatch copies' descriptors closed: the
// bound is on goroutines and concurrent syncs, not memory.
const installsInFlight = 16

// errInvariant is an invariant the code should make impossible, caught
// where it would have broken (logged at error and counted): an install
// that did not leave its copy whole. Its text is the node's ErrInvariant's.
var errInvariant = errors.New("invariant broken")

type installOutcome struct {
	res storage.InstallResult
	err error
}

// guardedInstall is one copy to install at its partition's path.
type guardedInstall struct {
	key  messages.PartitionKey
	item storage.InstallItem
}

// InstallBatcher is the node's batcher of its move workers' installs. The
// node makes it (NewInstallBatcher), hands it to the runner in
// Deps.Installs, and closes it once the runner stopped.
type InstallBatcher struct {
	b *batcher[guardedInstall, installOutcome]
	// stages gathers the stages of copies that caught up, before their
	// freeze (storage.StageBatch), in batches as the installs.
	stages *batcher[storage.StageItem, error]
}

// NewInstallBatcher batches installs for the node of d (its Config's
// InstallBatchWindow and MaxInstallBatch, its DataDir, LogConfig and
// Guards). Each batch runs under the guards of its topics (rule V9), taken
// in name order.
func NewInstallBatcher(d Deps) *InstallBatcher {
	return &InstallBatcher{b: newBatcher(d.Clock, d.Config.InstallBatchWindow, d.Config.MaxInstallBatch, installsInFlight, func(batch []guardedInstall) []installOutcome {
		return installGuarded(d, batch, storage.InstallBatch)
	}), stages: newBatcher(d.Clock, d.Config.InstallBatchWindow, d.Config.MaxInstallBatch, installsInFlight, storage.StageBatch)}
}

// stage makes s durable with marker m in the next batch of stages (a nil
// batcher stages it alone). It runs outside the topic's guard: it writes
// only into the staging directory, which belongs to this move's worker.
func (ib *InstallBatcher) stage(s *storage.Staging, m storage.Marker, now time.Time) error {
	if ib == nil {
		return s.Stage(m, now)
	}
	done, ok := ib.stages.submit(storage.StageItem{Staging: s, Marker: m, Now: now})
	if !ok {
		return fmt.Errorf("stage %s: the node is stopping: %w", s.Dir(), errs.ErrUnavailable)
	}
	return <-done
}

// installGuarded installs the copies under their topics' guards: a copy
// whose topic directory's marker no longer names its incarnation, or whose
// path has a log open, is refused and left staged (the move retries).
// install is storage.InstallBatch, or each copy's own Install.
func installGuarded(d Deps, batch []guardedInstall, install func([]storage.InstallItem) ([]storage.InstallResult, []error)) []installOutcome {
	out := make([]installOutcome, len(batch))
	topics := make([]string, len(batch))
	for i, g := range batch {
		topics[i] = g.key.Topic
	}
	unlock := d.Guards.LockAll(topics)
	defer unlock()
	var items []storage.InstallItem
	var at []int
	for i, g := range batch {
		if err := d.Guards.PathFree(d.DataDir, g.key.Topic, g.key.Incarnation, g.key.Partition, false); err != nil {
			out[i].err = fmt.Errorf("install: %w", err)
			continue
		}
		items, at = append(items, g.item), append(at, i)
	}
	res, errs := install(items)
	for j, i := range at {
		if errs[j] == nil {
			errs[j] = installedWhole(d.LogConfig, items[j])
		}
		out[i] = installOutcome{res: res[j], err: errs[j]}
	}
	return out
}

// installedWhole checks, still under the guard, that the partition's path
// holds the copy just installed at exactly the HWM it is to be flipped at:
// the flip that follows hands the partition to whatever is there, so an
// install that left anything else (a copy set aside by a second install of
// the same move, issue 26) must not count as done. A copy that cannot be
// read back counts as not whole: its staging copy is gone, so there is
// nothing to install again either.
func installedWhole(cfg storage.LogConfig, it storage.InstallItem) error {
	want := it.Options.Marker.PromotedHWM
	ls, err := storage.ListClosed(it.Target, cfg, it.Options.Now)
	if errors.Is(err, storage.ErrNotFound) && want == 0 {
		// A copy of an empty partition may hold no segment: opened, it
		// starts one at offset 0. Its directory must be there all the same.
		if _, serr := os.Stat(it.Target); serr == nil {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("install at %s: read the installed copy back: %v: %w", it.Target, err, errInvariant)
	}
	if ls.HWM != want {
		return fmt.Errorf("install at %s: the copy there ends at %d, want %d: %w", it.Target, ls.HWM, want, errInvariant)
	}
	return nil
}

// install installs s at k's path in the next batch. It takes no context on
// purpose: once queued, the install runs to its end, and the worker waits
// for it, so that a worker that stops never clears a copy an install is
// still renaming (its stop waits for its I/O). A nil batcher installs the
// copy alone, under the guard all the same.
func (ib *InstallBatcher) install(d Deps, k messages.PartitionKey, s *storage.Staging, opts storage.InstallOptions) (storage.InstallResult, error) {
	target := storage.PartitionPath(d.DataDir, k.Topic, k.Partition)
	g := guardedInstall{key: k, item: storage.InstallItem{Staging: s, Target: target, Options: opts}}
	if ib == nil {
		o := installGuarded(d, []guardedInstall{g}, installEach)[0]
		return o.res, o.err
	}
	done, ok := ib.b.submit(g)
	if !ok {
		return storage.InstallResult{}, fmt.Errorf("install at %s: the node is stopping: %w", target, errs.ErrUnavailable)
	}
	o := <-done
	return o.res, o.err
}

// Close stops gathering and waits for the installs under way.
func (ib *InstallBatcher) Close() {
	if ib != nil {
		ib.b.close()
		ib.stages.close()
	}
}

// installEach installs each copy with its own syncs (no batcher).
func installEach(items []storage.InstallItem) ([]storage.InstallResult, []error) {
	res, errs := make([]storage.InstallResult, len(items)), make([]error, len(items))
	for i, it := range items {
		res[i], errs[i] = it.Staging.Install(it.Target, it.Options)
	}
	return res, errs
}

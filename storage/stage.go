package storage

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// A move stages its copy before it freezes the source (issue 46): once the
// pre-copy has caught up, Stage makes the copy durable as it stands, in
// Install's order of syncs (rule V6: every file, then the marker, then the
// staging directory). The install under the freeze then finds a copy that
// is already durable with the marker it wants and only renames it into
// place and syncs the directories the rename touched. Anything written to
// the copy after Stage (a final tail, a consumer position that moved, a
// cursor) takes the copy out of its staged state, and Install does the
// whole sequence again, so the order of syncs holds whatever happened in
// between.

// Stage makes the copy durable as it stands with m as its marker: every
// file not known durable is fsynced, then the marker is written with its
// durability stamp (now) and fsynced, then the staging directory is synced.
// Until something is written to the copy again, Durable reports true and
// an Install with the same marker skips those steps.
func (s *Staging) Stage(m Marker, now time.Time) error {
	if s.done {
		return fmt.Errorf("stage %s: %w", s.dir, ErrClosed)
	}
	if s.installed {
		return s.stageInPlace(m, now)
	}
	if err := s.syncFiles(); err != nil {
		return err
	}
	m.DurableAt = now
	if err := writeMarker(s.fs, s.dir, m, true, s.cfg.Faults); err != nil {
		return err
	}
	if err := s.cfg.Faults.syncDir(s.fs, s.dir); err != nil {
		return err
	}
	s.staged = &m
	return nil
}

// stageInPlace is Stage of a copy already installed at the partition's
// path, whose marker is there, durable, from its install: the files first,
// then the new marker through a temporary file renamed over the old one and
// the directory synced. Overwritten in place, the marker would be durable
// by its own fsync while the names of segments the tail created are not
// yet (a power loss then leaves a marker promising records the copy does
// not hold), and a torn overwrite would leave no marker at all.
func (s *Staging) stageInPlace(m Marker, now time.Time) error {
	if err := s.syncFiles(); err != nil {
		return err
	}
	m.DurableAt = now
	b, err := encodeMarker(m)
	if err != nil {
		return err
	}
	if err := s.cfg.Faults.writeFileSync(s.fs, filepath.Join(s.dir, MarkerFile), b); err != nil {
		return fmt.Errorf("stage %s in place: %w", s.dir, err)
	}
	if err := s.syncRename(); err != nil {
		return err
	}
	s.markSynced()
	s.staged = &m
	return nil
}

// Durable reports whether the copy is staged (Stage) with nothing written
// to it since.
func (s *Staging) Durable() bool { return s.staged != nil && !s.done }

// StagedHWM is the HWM the copy was staged at (its marker's promoted
// HWM), when it is staged and nothing was written to it since; ok is
// false otherwise. A copy staged after a Verify at that HWM is, while ok,
// the same bytes that Verify read.
func (s *Staging) StagedHWM() (hwm int64, ok bool) {
	if !s.Durable() {
		return 0, false
	}
	return s.staged.PromotedHWM, true
}

// stagedAs reports whether the copy is staged with marker m (its
// durability stamp aside) and nothing written since: Install then only
// renames it.
func (s *Staging) stagedAs(m Marker) bool {
	if !s.Durable() {
		return false
	}
	st := *s.staged
	return st.PromotedHWM == m.PromotedHWM && st.ForcePromoted == m.ForcePromoted &&
		st.SourceNode == m.SourceNode && slices.Equal(st.Children, m.Children)
}

// touched records a write to the copy: it is no longer as staged.
func (s *Staging) touched() { s.staged = nil }

// touchedSide records a write to a file that is not a segment (the consumer
// state, a cursor): every such file is synced again before the marker.
func (s *Staging) touchedSide() {
	s.staged = nil
	for name := range s.synced {
		if _, ok := parseSegmentName(name); !ok {
			delete(s.synced, name)
		}
	}
}

// SaveConsumerState writes the copy's consumer state, unsynced (Stage and
// Install sync it before the marker). The same state written again through
// this Staging writes nothing and leaves a staged copy staged.
func (s *Staging) SaveConsumerState(st ConsumerState) error {
	if s.done {
		return fmt.Errorf("save consumer state in %s: %w", s.dir, ErrClosed)
	}
	if s.consumer != nil && sameConsumerState(*s.consumer, st) {
		return nil
	}
	if s.consumer == nil && s.fresh && sameConsumerState(st, EmptyConsumerState()) {
		// A directory this move created holds no consumer state, which
		// reads as the empty one: writing it would only cost a partition
		// nobody consumed from five system calls and a sync.
		c := EmptyConsumerState()
		s.consumer = &c
		return nil
	}
	s.touchedSide()
	if err := saveConsumerState(s.fs, s.dir, st, false); err != nil {
		s.consumer = nil
		return err
	}
	c := st
	c.AckedAhead, c.Recent, c.Leases = slices.Clone(st.AckedAhead), slices.Clone(st.Recent), slices.Clone(st.Leases)
	s.consumer = &c
	return nil
}

func sameConsumerState(a, b ConsumerState) bool {
	return a.Frontier == b.Frontier && slices.Equal(a.AckedAhead, b.AckedAhead) &&
		slices.Equal(a.Recent, b.Recent) && slices.Equal(a.Leases, b.Leases)
}

// ReplaceCursors is ReplaceCursors on the copy's directory, unsynced (Stage
// and Install sync the files before the marker). The same records at the
// same hwm written again through this Staging write nothing.
func (s *Staging) ReplaceCursors(raws [][]byte, hwm int64) error {
	if s.done {
		return fmt.Errorf("replace cursors in %s: %w", s.dir, ErrClosed)
	}
	if s.cursors != nil && s.cursorsHWM == hwm && slices.EqualFunc(*s.cursors, raws, bytes.Equal) {
		return nil
	}
	s.touchedSide()
	if _, err := replaceCursors(s.fs, s.dir, raws, hwm, false); err != nil {
		s.cursors = nil
		return err
	}
	c := make([][]byte, len(raws))
	for i, r := range raws {
		c[i] = bytes.Clone(r)
	}
	s.cursors, s.cursorsHWM = &c, hwm
	return nil
}

// StageItem is one copy of a StageBatch.
type StageItem struct {
	Staging *Staging
	Marker  Marker
	Now     time.Time
}

// StageBatch stages many copies on one file system, each in Stage's order,
// with the syncs of the whole batch shared: every file of every copy, then
// every marker and staging directory. errs[i] is items[i]'s outcome; an
// item that fails a step skips the rest. A batch of one is Stage.
func StageBatch(items []StageItem) []error {
	errs := make([]error, len(items))
	if len(items) == 1 {
		errs[0] = items[0].Staging.Stage(items[0].Marker, items[0].Now)
		return errs
	}
	// Copies installed already are staged in place, each with its own
	// syncs (stageInPlace), side by side, bounded as a barrier's fsyncs.
	// A copy asked twice (issue 26) is staged once more after, alone: a
	// Staging is not used from two goroutines.
	var rest []StageItem
	var at, again []int
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxParallelInstallSyncs)
	busy := map[*Staging]bool{}
	for i, it := range items {
		switch {
		case !it.Staging.installed || it.Staging.done:
			rest, at = append(rest, it), append(at, i)
			continue
		case busy[it.Staging]:
			again = append(again, i)
			continue
		}
		busy[it.Staging] = true
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = it.Staging.Stage(it.Marker, it.Now)
			<-slots
		}()
	}
	wg.Wait()
	for _, i := range again {
		errs[i] = items[i].Staging.Stage(items[i].Marker, items[i].Now)
	}
	if len(rest) < len(items) {
		if len(rest) > 0 {
			for j, err := range StageBatch(rest) {
				errs[at[j]] = err
			}
		}
		return errs
	}
	each := func(step func(it StageItem) error) {
		for i, it := range items {
			if errs[i] == nil {
				errs[i] = step(it)
			}
		}
	}
	each(func(it StageItem) error {
		if it.Staging.done {
			return fmt.Errorf("stage %s: %w", it.Staging.dir, ErrClosed)
		}
		return it.Staging.closeFiles()
	})
	stageBarrier(items, errs, func(it StageItem) []string { return it.Staging.unsyncedFiles() })
	markers := make([]Marker, len(items))
	for i, it := range items {
		markers[i] = it.Marker
		markers[i].DurableAt = it.Now
		if errs[i] == nil {
			errs[i] = writeMarker(it.Staging.fs, it.Staging.dir, markers[i], false, it.Staging.cfg.Faults)
		}
	}
	stageBarrier(items, errs, func(it StageItem) []string {
		return []string{filepath.Join(it.Staging.dir, MarkerFile), it.Staging.dir}
	})
	for i, it := range items {
		if errs[i] == nil {
			it.Staging.markSynced()
			it.Staging.staged = &markers[i]
		}
	}
	return errs
}

// stageBarrier makes the paths each item names durable (files and
// directories alike), for every item that has not failed, as the first
// item's config says (LogConfig.InstallSyncs): one syncfs for the batch,
// or an fsync of each path. Either way every path is durable when it
// returns, which is all V6's order asks of a step.
func stageBarrier(items []StageItem, errs []error, paths func(StageItem) []string) {
	first := items[0].Staging
	if first.cfg.InstallSyncs == InstallSyncFS {
		// One barrier for the batch: on the OS one syncfs; on a crash
		// test's file system, everything written so far made durable.
		err := first.cfg.Faults.syncAll(first.fs, filepath.Dir(first.dir))
		for i := range errs {
			if errs[i] == nil {
				errs[i] = err
			}
		}
		return
	}
	var jobs []syncJob
	for i, it := range items {
		if errs[i] != nil {
			continue
		}
		for _, p := range paths(it) {
			jobs = append(jobs, syncJob{owner: i, path: p, faults: it.Staging.cfg.Faults, fs: it.Staging.fs})
		}
	}
	for i, err := range syncEach(len(items), jobs) {
		if errs[i] == nil {
			errs[i] = err
		}
	}
}

// maxParallelInstallSyncs bounds the fsyncs of a per-file barrier in
// flight at once. Concurrent fsyncs on one file system share its journal
// commits, where one after another each waits for a commit of its own: a
// batch of 64 small copies took 3.4 times as long one fsync at a time,
// and no less with 128 in flight than with 32 (BenchmarkInstallSyncs).
// Each holds a goroutine until the disk answers.
const maxParallelInstallSyncs = 32

// syncJob is one path of a per-file barrier, of the item numbered owner.
type syncJob struct {
	owner  int
	path   string
	faults *Faults
	fs     FS
}

// syncEach fsyncs every job's path (a file's bytes or a directory's
// entries), at most maxParallelInstallSyncs at once, and returns the first
// error of each owner (of n). It returns once every sync has: its
// goroutines end with their sync.
func syncEach(n int, jobs []syncJob) []error {
	errs := make([]error, n)
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxParallelInstallSyncs)
	for _, j := range jobs {
		slots <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := j.faults.syncDir(j.fs, j.path)
			<-slots
			if err != nil {
				mu.Lock()
				if errs[j.owner] == nil {
					errs[j.owner] = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errs
}

// unsyncedFiles are the copy's regular files not known durable.
func (s *Staging) unsyncedFiles() []string {
	ents, err := regularFiles(s.fs, s.dir)
	if err != nil {
		return []string{s.dir} // the sync of the directory reports it
	}
	var out []string
	for _, e := range ents {
		if !s.synced[e] {
			out = append(out, filepath.Join(s.dir, e))
		}
	}
	return out
}

// markSynced records every regular file of the copy as durable, after a
// barrier that made it so.
func (s *Staging) markSynced() {
	ents, err := regularFiles(s.fs, s.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		s.synced[e] = true
	}
}

// regularFiles lists the regular files of dir.
func regularFiles(fsys FS, dir string) ([]string, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// renameDirSyncs is how many directories an install batch's renames may
// touch before their barrier is one syncfs instead of an fsync of each.
var renameDirSyncs = 2

package storage

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// stagedCopy is a copy of a fresh source log with n batches of 3 records,
// verified and staged with a marker at its HWM stamped t0.
func stagedCopy(t *testing.T, data string, p int, batches int) (*Log, *Staging, Listing) {
	t.Helper()
	src := openTestLog(t, filepath.Join(data, "src", string(rune('a'+p))), smallLogConfig())
	appendN(t, src, batches, 3)
	st := openTestStaging(t, StagingPath(data, "t", p))
	ls, _ := copyPass(t, src, st, t0)
	if err := st.Verify(ls.HWM); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveConsumerState(ConsumerState{Frontier: 1}); err != nil {
		t.Fatal(err)
	}
	if err := st.Stage(Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, t0); err != nil {
		t.Fatal(err)
	}
	if !st.Durable() {
		t.Fatal("staged copy: got Durable false, want true")
	}
	if at, ok := st.StagedHWM(); !ok || at != ls.HWM {
		t.Fatalf("staged copy: got StagedHWM %d, %v, want %d, true", at, ok, ls.HWM)
	}
	return src, st, ls
}

// rule V6: a copy staged before the freeze and untouched since installs with
// the marker Stage made durable (its stamp is the stage's, not the
// install's: nothing was written again), at the exact HWM.
func TestInstallOfAStagedCopyOnlyRenamesIt(t *testing.T) {
	data := t.TempDir()
	_, st, ls := stagedCopy(t, data, 0, 2)
	// The same consumer state written again is no write.
	if err := st.SaveConsumerState(ConsumerState{Frontier: 1}); err != nil {
		t.Fatal(err)
	}
	if !st.Durable() {
		t.Fatal("the same consumer state again took the copy out of its staged state")
	}
	target := PartitionPath(data, "t", 0)
	later := t0.Add(time.Minute)
	if _, err := st.Install(target, InstallOptions{Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, Now: later}); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMarker(target)
	if err != nil {
		t.Fatal(err)
	}
	if !m.DurableAt.Equal(t0) || m.PromotedHWM != ls.HWM {
		t.Fatalf("marker: got %+v, want the stage's (durable at %s, hwm %d)", m, t0, ls.HWM)
	}
	if got := openTestLog(t, target, smallLogConfig()).HWM(); got != ls.HWM {
		t.Fatalf("installed hwm: got %d, want %d", got, ls.HWM)
	}
}

// rule V6: anything written to a staged copy (a final tail, a consumer
// position that moved, a cursor, a verify's cut) takes it out of its staged
// state, so its install syncs the files and writes the marker again, after
// them; a marker other than the staged one does too.
func TestAnyWriteAfterStageMakesTheInstallSyncAgain(t *testing.T) {
	later := t0.Add(time.Minute)
	for _, tc := range []struct {
		name  string
		touch func(t *testing.T, src *Log, st *Staging, ls *Listing) Marker
	}{
		{"final tail", func(t *testing.T, src *Log, st *Staging, ls *Listing) Marker {
			appendN(t, src, 1, 3)
			*ls, _ = copyPass(t, src, st, t0)
			if err := st.Verify(ls.HWM); err != nil {
				t.Fatal(err)
			}
			return Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}
		}},
		{"a chunk rewritten at the same HWM", func(t *testing.T, src *Log, st *Staging, ls *Listing) Marker {
			seg := ls.Segments[len(ls.Segments)-1]
			buf := make([]byte, seg.Size)
			if _, err := src.ReadChunk(seg.Name, 0, buf); err != nil {
				t.Fatal(err)
			}
			if err := st.WriteChunk(seg.Name, 0, buf); err != nil {
				t.Fatal(err)
			}
			return Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}
		}},
		{"consumer position", func(t *testing.T, _ *Log, st *Staging, ls *Listing) Marker {
			if err := st.SaveConsumerState(ConsumerState{Frontier: 2}); err != nil {
				t.Fatal(err)
			}
			return Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}
		}},
		{"cursors", func(t *testing.T, _ *Log, st *Staging, ls *Listing) Marker {
			if err := st.ReplaceCursors(nil, ls.HWM); err != nil {
				t.Fatal(err)
			}
			return Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}
		}},
		{"another marker", func(_ *testing.T, _ *Log, _ *Staging, ls *Listing) Marker {
			return Marker{PromotedHWM: ls.HWM, SourceNode: "n1", Children: []ChildLink{{Child: "c", AttachEpoch: 1}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			src, st, ls := stagedCopy(t, data, 0, 2)
			m := tc.touch(t, src, st, &ls)
			// A move verifies a staged copy again only when this says
			// nothing was written since its stage.
			if at, ok := st.StagedHWM(); ok && m.PromotedHWM == at && m.SourceNode == "n1" && len(m.Children) == 0 {
				t.Fatalf("after %s: got StagedHWM %d, true, want the copy out of its staged state", tc.name, at)
			}
			target := PartitionPath(data, "t", 0)
			if _, err := st.Install(target, InstallOptions{Marker: m, Now: later}); err != nil {
				t.Fatal(err)
			}
			got, err := ReadMarker(target)
			if err != nil {
				t.Fatal(err)
			}
			if !got.DurableAt.Equal(later) || got.PromotedHWM != ls.HWM {
				t.Fatalf("marker: got %+v, want one written by the install (durable at %s, hwm %d)", got, later, ls.HWM)
			}
			if hwm := openTestLog(t, target, smallLogConfig()).HWM(); hwm != ls.HWM {
				t.Fatalf("installed hwm: got %d, want %d", hwm, ls.HWM)
			}
		})
	}
}

// rule V6: a batch mixing copies staged ahead (untouched), staged and then
// written to, and never staged installs each whole; only the touched and
// unstaged ones get a marker of the install's time.
func TestInstallBatchMixesStagedAndUnstagedCopies(t *testing.T) {
	for _, mode := range []InstallSyncMode{InstallSyncPerFile, InstallSyncFS} {
		t.Run(map[InstallSyncMode]string{InstallSyncPerFile: "fsync each", InstallSyncFS: "syncfs"}[mode], func(t *testing.T) {
			data := t.TempDir()
			later := t0.Add(time.Minute)
			var items []InstallItem
			var want []time.Time
			var hwms []int64
			for p := 0; p < 6; p++ {
				src, st, ls := stagedCopy(t, data, p, 1+p%3)
				st.cfg.InstallSyncs = mode
				stamp := t0
				switch p % 3 {
				case 1: // a tail after the stage
					appendN(t, src, 1, 2)
					ls, _ = copyPass(t, src, st, t0)
					if err := st.Verify(ls.HWM); err != nil {
						t.Fatal(err)
					}
					stamp = later
				case 2: // staged at another HWM than it installs at
					ls.HWM--
					if err := st.Verify(ls.HWM); err != nil {
						t.Fatal(err)
					}
					stamp = later
				}
				items = append(items, InstallItem{Staging: st, Target: PartitionPath(data, "t", p),
					Options: InstallOptions{Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, Now: later}})
				want, hwms = append(want, stamp), append(hwms, ls.HWM)
			}
			_, errs := InstallBatch(items)
			for p, err := range errs {
				if err != nil {
					t.Fatalf("install %d: %v", p, err)
				}
				m, err := ReadMarker(items[p].Target)
				if err != nil || !m.DurableAt.Equal(want[p]) || m.PromotedHWM != hwms[p] {
					t.Fatalf("partition %d marker: got %+v (%v), want durable at %s, hwm %d", p, m, err, want[p], hwms[p])
				}
				if got := openTestLog(t, items[p].Target, smallLogConfig()).HWM(); got != hwms[p] {
					t.Fatalf("partition %d: hwm %d, want %d", p, got, hwms[p])
				}
			}
		})
	}
}

// A StageBatch stages every copy: each is Durable after it, with its marker
// on disk.
func TestStageBatchStagesEveryCopy(t *testing.T) {
	for _, mode := range []InstallSyncMode{InstallSyncPerFile, InstallSyncFS} {
		data := t.TempDir()
		var items []StageItem
		for p := 0; p < 4; p++ {
			src := openTestLog(t, filepath.Join(data, "src", string(rune('a'+p))), smallLogConfig())
			appendN(t, src, 1, 2)
			st := openTestStaging(t, StagingPath(data, "t", p))
			st.cfg.InstallSyncs = mode
			ls, _ := copyPass(t, src, st, t0)
			items = append(items, StageItem{Staging: st, Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, Now: t0})
		}
		for p, err := range StageBatch(items) {
			if err != nil {
				t.Fatalf("stage %d: %v", p, err)
			}
			if !items[p].Staging.Durable() {
				t.Fatalf("copy %d: got Durable false after its stage, want true", p)
			}
			if m, err := ReadMarker(items[p].Staging.Dir()); err != nil || m.PromotedHWM != items[p].Marker.PromotedHWM {
				t.Fatalf("copy %d marker: %+v (%v)", p, m, err)
			}
		}
	}
}

// syncLog records, in order, each path a copy's syncs went to.
type syncLog struct{ paths []string }

func (l *syncLog) index(t *testing.T, path string) int {
	t.Helper()
	for i, p := range l.paths {
		if p == path {
			return i
		}
	}
	t.Fatalf("%s was never synced (syncs: %v)", path, l.paths)
	return -1
}

// rule V6, by the syncs themselves: the install of a copy staged and
// untouched since syncs no file of it, only the directories its rename
// touched; one a tail was written to after its stage syncs that segment,
// then the marker, then the staging directory, and only then the
// directories of the rename.
func TestTheSyncsOfAStagedInstallKeepV6sOrder(t *testing.T) {
	for _, tail := range []bool{false, true} {
		t.Run(map[bool]string{false: "untouched", true: "tail after the stage"}[tail], func(t *testing.T) {
			data := t.TempDir()
			cfg := smallLogConfig()
			cfg.Faults = NewFaults(nil)
			log := &syncLog{}
			cfg.Faults.synced = func(p string) { log.paths = append(log.paths, p) }
			src := openTestLog(t, filepath.Join(data, "src"), smallLogConfig())
			appendN(t, src, 2, 3)
			st, _, err := OpenStaging(StagingPath(data, "t", 0), cfg, "m")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			ls, _ := copyPass(t, src, st, t0)
			if err := st.Verify(ls.HWM); err != nil {
				t.Fatal(err)
			}
			if err := st.Stage(Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, t0); err != nil {
				t.Fatal(err)
			}
			staged := len(log.paths)
			if tail {
				appendN(t, src, 1, 2)
				ls, _ = copyPass(t, src, st, t0)
				if err := st.Verify(ls.HWM); err != nil {
					t.Fatal(err)
				}
			}
			active := filepath.Join(st.Dir(), ls.Segments[len(ls.Segments)-1].Name)
			stagingDir, target := st.Dir(), PartitionPath(data, "t", 0)
			if _, err := st.Install(target, InstallOptions{Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, Now: t0}); err != nil {
				t.Fatal(err)
			}
			install := &syncLog{paths: log.paths[staged:]}
			parent := install.index(t, filepath.Dir(target))
			if !tail {
				for _, p := range install.paths {
					if strings.HasPrefix(p, stagingDir+string(filepath.Separator)) || p == stagingDir {
						t.Fatalf("install of an untouched staged copy synced %s (syncs: %v), want only the rename's directories", p, install.paths)
					}
				}
				return
			}
			seg, marker, dir := install.index(t, active), install.index(t, filepath.Join(stagingDir, MarkerFile)), install.index(t, stagingDir)
			if !(seg < marker && marker < dir && dir < parent) {
				t.Fatalf("syncs %v: got the tail's segment at %d, the marker at %d, the staging directory at %d, the target's parent at %d; want them in that order", install.paths, seg, marker, dir, parent)
			}
		})
	}
}

// LogConfig.InstallSyncs takes its two modes; Validate refuses any other,
// and so does the staging that would run on it.
func TestLogConfigValidateTakesOnlyTheTwoInstallSyncModes(t *testing.T) {
	for _, mode := range []InstallSyncMode{InstallSyncFS, InstallSyncPerFile} {
		cfg := smallLogConfig()
		cfg.InstallSyncs = mode
		if err := cfg.Validate(); err != nil {
			t.Fatalf("InstallSyncs %d: got %v, want valid", mode, err)
		}
	}
	for _, mode := range []InstallSyncMode{-1, InstallSyncPerFile + 1} {
		cfg := smallLogConfig()
		cfg.InstallSyncs = mode
		if err := cfg.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "InstallSyncs") {
			t.Fatalf("InstallSyncs %d: got %v, want ErrInvalid naming InstallSyncs", mode, err)
		}
		if _, _, err := OpenStaging(StagingPath(t.TempDir(), "t", 0), cfg, "m"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("OpenStaging with InstallSyncs %d: got %v, want ErrInvalid", mode, err)
		}
	}
}

// rule V6 under InstallSyncFS, by the barriers themselves: an install
// batch of copies in three topics makes three, the first with every file
// written and no marker yet, the second with every marker written and no
// copy renamed yet, the third with every copy renamed. (A power loss on
// crashfs cannot tell the first barrier from the second: a marker's name
// there is never durable before the barrier that makes the files durable
// too, where a real file system's journal may commit it any time.)
func TestASyncFSInstallBatchSyncsFilesThenMarkersThenRenames(t *testing.T) {
	data := t.TempDir()
	cfg := smallLogConfig()
	cfg.Faults = NewFaults(nil)
	type seen struct{ markers, renamed int }
	var barriers []seen
	var items []InstallItem
	var stagingDirs []string // an installed Staging's Dir is its target
	cfg.Faults.synced = func(p string) {
		if !strings.HasPrefix(p, syncAllNote) {
			return
		}
		var s seen
		for i, it := range items {
			if _, err := os.Stat(filepath.Join(stagingDirs[i], MarkerFile)); err == nil {
				s.markers++
			}
			if _, err := os.Stat(filepath.Join(it.Target, MarkerFile)); err == nil {
				s.renamed++
			}
		}
		barriers = append(barriers, s)
	}
	for p, topic := range []string{"t", "u", "v"} {
		src := openTestLog(t, filepath.Join(data, "src", topic), smallLogConfig())
		appendN(t, src, 2, 3)
		st, _, err := OpenStaging(StagingPath(data, topic, p), cfg, "m")
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ls, _ := copyPass(t, src, st, t0)
		if err := st.Verify(ls.HWM); err != nil {
			t.Fatal(err)
		}
		stagingDirs = append(stagingDirs, st.Dir())
		items = append(items, InstallItem{Staging: st, Target: PartitionPath(data, topic, p),
			Options: InstallOptions{Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, Now: t0}})
	}
	for p, err := range func() []error { _, errs := InstallBatch(items); return errs }() {
		if err != nil {
			t.Fatalf("install %d: %v", p, err)
		}
	}
	want := []seen{{0, 0}, {3, 0}, {0, 3}}
	if !slices.Equal(barriers, want) {
		t.Fatalf("barriers saw (markers in staging, copies renamed) %v, want %v", barriers, want)
	}
}

// rule V6, issue 46: an install whose rename went through but whose
// directory syncs failed answers the error, and the copy stays installed
// at the path; the next Install of it (the seal under the freeze) syncs
// both directories the rename touched before it answers, so no flip
// follows a rename that may not be durable.
func TestAnInstallRetriedAfterAFailedDirectorySyncSyncsTheRenameFirst(t *testing.T) {
	data := t.TempDir()
	_, st, ls := stagedCopy(t, data, 0, 2)
	faults := NewFaults(nil)
	st.cfg.Faults = faults
	var synced []string
	faults.synced = func(p string) { synced = append(synced, p) }
	target := PartitionPath(data, "t", 0)
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := InstallOptions{Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, Now: t0}
	stagedIn := filepath.Dir(st.Dir())
	faults.Set(FaultFsync)
	if _, err := st.Install(target, opts); err == nil {
		t.Fatal("install with every fsync failing: got nil, want the error")
	}
	if !st.Installed() || st.Dir() != target {
		t.Fatalf("after the failed sync: got Installed %v at %s, want the copy renamed to %s", st.Installed(), st.Dir(), target)
	}
	faults.Set(FaultsOff)
	synced = nil
	if _, err := st.Install(target, opts); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Dir(target), stagedIn} {
		if !slices.Contains(synced, dir) {
			t.Fatalf("the retried install synced %q, want %s among them", synced, dir)
		}
	}
}

// A staging directory this move created gets no consumer state file for
// a position nobody consumed from: none reads as the empty state. Any
// other position is written, and a later empty one over it is too.
func TestAFreshStagingWritesNoEmptyConsumerState(t *testing.T) {
	data := t.TempDir()
	st, _, err := OpenStaging(StagingPath(data, "t", 0), smallLogConfig(), "m")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.SaveConsumerState(EmptyConsumerState()); err != nil {
		t.Fatal(err)
	}
	if files, _ := regularFiles(st.fs, st.Dir()); slices.ContainsFunc(files, func(n string) bool { return strings.HasPrefix(n, "consumer") }) {
		t.Fatalf("files after an empty state: got %v, want no consumer state", files)
	}
	if got, err := LoadConsumerState(st.Dir()); err != nil || !got.Equal(EmptyConsumerState()) {
		t.Fatalf("loaded: got %+v (%v), want the empty state", got, err)
	}
	want := ConsumerState{Frontier: 3}
	if err := st.SaveConsumerState(want); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadConsumerState(st.Dir()); err != nil || got.Frontier != 3 {
		t.Fatalf("loaded: got %+v (%v), want frontier 3", got, err)
	}
	if err := st.SaveConsumerState(EmptyConsumerState()); err != nil {
		t.Fatal(err)
	}
	if got, err := LoadConsumerState(st.Dir()); err != nil || !got.Equal(EmptyConsumerState()) {
		t.Fatalf("loaded after the empty state over frontier 3: got %+v (%v), want the empty state", got, err)
	}
}

package storage_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/naradmq/narad/storage"
	"github.com/naradmq/narad/storage/crashfs"
)

// rule V6, issue 46: a move installs its caught-up copy before the freeze
// and writes the freeze's tail into it where it is; the second Install
// makes that tail durable in place (files, then the marker at the final
// HWM, then the directory) before it returns, so before the flip. The
// power goes at a random operation of the install, the tail and the seal.
// After it: whatever marker the path holds, the copy holds at least the
// records it promises, all of them the source's; an acknowledged seal left
// the whole copy with the final HWM in its marker.
//
// It fails when the seal acknowledges a tail it has not synced, or
// overwrites the marker in place: durable by its own fsync, it can then
// reach the disk before the names of the segments the tail created.
func TestPowerLossATailWrittenIntoAnInstalledCopy(t *testing.T) {
	runs, crashes := crashRuns(t, 200), 0
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		ops := inPlaceCrashRun(t, seed, -1)
		inPlaceCrashRun(t, seed, ops)
		crashes += 2
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	t.Logf("%d power losses", crashes)
}

func inPlaceCrashRun(t *testing.T, seed uint64, ops int) int {
	rng := rand.New(rand.NewPCG(seed, 146))
	fsys := crashfs.New()
	if seed%2 == 0 {
		fsys.TearOnCrash(seed)
	}
	cfg := installLogConfig(fsys)
	if seed%3 == 0 {
		cfg.InstallSyncs = storage.InstallSyncPerFile
	}
	src, target := "/source/t/0", storage.PartitionPath(installData, "t", 0)
	first := fillLog(t, src, cfg, "first", 1+rng.IntN(40))
	if err := fsys.MkdirAll(installData, 0o755); err != nil { // the node's data directory
		t.Fatal(err)
	}
	if err := fsys.SyncAll("/"); err != nil {
		t.Fatal(err)
	}
	start := fsys.Ops()
	if ops >= 0 {
		crashPoint(rng, fsys, ops)
	}
	now := time.Unix(1000, 0)
	var st *storage.Staging
	installed, sealed := false, false
	all := first
	func() {
		stop := func(what string, err error) bool {
			if err != nil && !fsys.Crashed() {
				t.Fatalf("%s: %v, with the power on", what, err)
			}
			return err != nil
		}
		var err error
		st, _, err = storage.OpenStaging(storage.StagingPath(installData, "t", 0), cfg, "move")
		if stop("open staging", err) {
			return
		}
		hwm := int64(len(first))
		if stop("copy", copyAll(fsys, cfg, src, st, now)) || stop("verify", st.Verify(hwm)) ||
			stop("stage", st.Stage(storage.Marker{PromotedHWM: hwm, SourceNode: "n1"}, now)) {
			return
		}
		// The install before the freeze.
		_, err = st.Install(target, storage.InstallOptions{Marker: storage.Marker{PromotedHWM: hwm, SourceNode: "n1"}, Now: now})
		if stop("install", err) {
			return
		}
		installed = true
		if !st.Installed() || st.Dir() != target {
			t.Fatalf("after the install: got Installed %v at %s, want true at %s", st.Installed(), st.Dir(), target)
		}
		// The freeze's tail, written to the source and copied in place.
		tail, err := appendBodies(src, cfg, "tail", 1+rng.IntN(30))
		if stop("source tail", err) {
			return
		}
		all = append(slices.Clone(first), tail...)
		hwm = int64(len(all))
		if stop("copy the tail", copyAll(fsys, cfg, src, st, now)) || stop("verify at the tail", st.Verify(hwm)) ||
			stop("consumer state", st.SaveConsumerState(storage.EmptyConsumerState())) {
			return
		}
		items := []storage.InstallItem{{Staging: st, Target: target, Options: storage.InstallOptions{
			Marker: storage.Marker{PromotedHWM: hwm, SourceNode: "n1"}, Now: now.Add(time.Second)}}}
		if seed%2 == 1 {
			_, err = st.Install(target, items[0].Options)
		} else {
			// A batch of two: the in-place seal beside nothing else still
			// takes InstallBatch's path.
			_, errs := storage.InstallBatch(append(items, storage.InstallItem{Staging: st, Target: target, Options: items[0].Options}))
			err = errors.Join(errs...)
		}
		if stop("seal in place", err) {
			return
		}
		sealed = true
	}()
	took := fsys.Ops() - start
	if ops < 0 && fsys.Crashed() {
		t.Fatalf("the counting run crashed")
	}
	if st != nil {
		st.Close()
	}
	powerBack(fsys)

	m, merr := storage.ReadMarkerOn(fsys, target)
	at, found := logAt(t, fsys, cfg, target)
	switch {
	case installed && (!found || merr != nil):
		t.Fatalf("an acknowledged install left %s: found %v, marker %v", target, found, merr)
	case sealed && (m.PromotedHWM != int64(len(all)) || !slices.Equal(at, all)):
		t.Fatalf("an acknowledged seal left %d records and a marker at %d, want %d and %d", len(at), m.PromotedHWM, len(all), len(all))
	case !found:
		return took
	}
	if len(at) > len(all) || !slices.Equal(at, all[:len(at)]) {
		t.Fatalf("%s holds %d records that are not the source's first ones", target, len(at))
	}
	if merr == nil && int64(len(at)) < m.PromotedHWM {
		t.Fatalf("%s: the marker promises %d records, the copy holds %d (installed %v, sealed %v, ops %d of %d): the marker got to the disk before the tail", target, m.PromotedHWM, len(at), installed, sealed, fsys.Ops()-start, ops)
	}
	return took
}

// copyAll copies every segment of the log at src into st, sealing all but
// the last: a pass that finds the copy behind by any amount.
func copyAll(fsys *crashfs.FS, cfg storage.LogConfig, src string, st *storage.Staging, now time.Time) error {
	ls, err := storage.ListClosed(src, cfg, now)
	if err != nil {
		return err
	}
	if err := st.Reconcile(ls); err != nil {
		return err
	}
	for j, seg := range ls.Segments {
		buf, err := readAll(fsys, filepath.Join(src, seg.Name), seg.Size)
		if err != nil {
			return err
		}
		for pos := 0; pos < len(buf); pos += 1500 {
			if err := st.WriteChunk(seg.Name, int64(pos), buf[pos:min(pos+1500, len(buf))]); err != nil {
				return err
			}
		}
		if j < len(ls.Segments)-1 {
			if err := st.SealSegment(seg.Name); err != nil {
				return err
			}
		}
	}
	return nil
}

func readAll(fsys *crashfs.FS, path string, size int64) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && size > 0 {
		return nil, err
	}
	return buf, nil
}

// appendBodies appends n records to the log at dir and closes it.
func appendBodies(dir string, cfg storage.LogConfig, prefix string, n int) ([]string, error) {
	l, err := storage.OpenLog(dir, cfg)
	if err != nil {
		return nil, err
	}
	var bodies []string
	for i := range n {
		body := fmt.Sprintf("%s record %d %s", prefix, i, make([]byte, 40+i%90))
		if _, err := l.Append(time.Unix(0, 0), []storage.Entry{{Key: []byte("k"), Body: []byte(body)}}); err != nil {
			l.Close()
			return nil, err
		}
		bodies = append(bodies, body)
	}
	return bodies, l.Close()
}

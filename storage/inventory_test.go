package storage

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// writeTree creates each file (relative to root) with size bytes.
func writeTree(t *testing.T, root string, files map[string]int) {
	t.Helper()
	for rel, size := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A data dir with every kind of copy set aside beside live data that looks
// like it: the inventory lists exactly the set-aside copies, with their
// sizes.
// rule S8
func TestQuarantinedListsEveryKindOfCopySetAsideAndNothingLive(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]int{
		// Live: a partition, its marker, a staging copy in use, the WAL.
		"topics/orders/incarnation":         2,
		"topics/orders/0/00000000.seg":      100,
		"topics/orders/1/00000000.seg":      10,
		".moves/orders-3/00000000.seg":      50,
		"wal/00000000.wal":                  64,
		"topics/orders/0.quarantine.1/x":    1, // k starts at 2
		"topics/orders/0.quarantine.02/x":   1, // not as quarantine writes it
		"topics/orders/07.quarantine/x":     1,
		"topics/bad@name/0.quarantine/x":    1,
		".stale/orders@01/x":                1,
		".stale/orders@unmarked.1/x":        1,
		".stale/orders/x":                   1,
		".moves/orders-3.quarantine.x/seg":  1,
		".moves/-3.quarantine/seg":          1,
		"topics/orders/2.quarantine.tmp/x":  1,
		"topics/orders/incarnation.quarant": 1,
		// Set aside.
		"topics/orders/0.quarantine/00000000.seg":         1000,
		"topics/orders/0.quarantine/consumer":             24,
		"topics/orders/0.quarantine.2/00000000.seg":       7,
		"topics/my.topic-2/11.quarantine/sub/deep":        3,
		".moves/my-topic-4.quarantine/00000000.seg":       40,
		".moves/orders-3.quarantine.3/00000000.seg":       5,
		".stale/orders@17/incarnation":                    3,
		".stale/orders@17/0/00000000.seg":                 300,
		".stale/orders@17.2/1/00000000.seg":               30,
		".stale/my.topic-2@unmarked/5/00000000.seg":       9,
		".stale/my.topic-2@unmarked.4/5/00000000.seg.tmp": 2,
	})
	// A file by a copy's name is not a copy.
	writeTree(t, dir, map[string]int{"topics/orders/5.quarantine": 8})

	got, err := Quarantined(dir)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Path        string
		Kind        CopyKind
		Topic       string
		Partition   int
		Incarnation uint64
		Bytes       int64
	}
	want := []row{
		{".moves/my-topic-4.quarantine", KindStaging, "my-topic", 4, 0, 40},
		{".moves/orders-3.quarantine.3", KindStaging, "orders", 3, 0, 5},
		{".stale/my.topic-2@unmarked", KindUnmarkedTopic, "my.topic-2", -1, 0, 9},
		{".stale/my.topic-2@unmarked.4", KindUnmarkedTopic, "my.topic-2", -1, 0, 2},
		{".stale/orders@17", KindStaleTopic, "orders", -1, 17, 303},
		{".stale/orders@17.2", KindStaleTopic, "orders", -1, 17, 30},
		{"topics/my.topic-2/11.quarantine", KindPartition, "my.topic-2", 11, 0, 3},
		{"topics/orders/0.quarantine", KindPartition, "orders", 0, 0, 1024},
		{"topics/orders/0.quarantine.2", KindPartition, "orders", 0, 0, 7},
	}
	var rows []row
	for _, c := range got {
		rows = append(rows, row{c.Path, c.Kind, c.Topic, c.Partition, c.Incarnation, c.Bytes})
		if c.Modified.IsZero() || time.Since(c.Modified) > time.Hour {
			t.Errorf("%s: modified %v, want the time of its last write", c.Path, c.Modified)
		}
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("inventory:\ngot  %+v\nwant %+v", rows, want)
	}
}

func TestQuarantinedOfAnEmptyDataDirIsEmpty(t *testing.T) {
	got, err := Quarantined(filepath.Join(t.TempDir(), "none"))
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("got %v, %v, want an empty list", got, err)
	}
}

// The modification time is the latest of anything in the copy.
func TestQuarantinedModifiedIsTheLastWriteInTheCopy(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]int{"topics/t/0.quarantine/a": 1, "topics/t/0.quarantine/b": 1})
	old, recent := time.Now().Add(-3*time.Hour), time.Now().Add(-time.Hour)
	for _, p := range []string{"topics/t/0.quarantine", "topics/t/0.quarantine/a"} {
		if err := os.Chtimes(filepath.Join(dir, p), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(filepath.Join(dir, "topics/t/0.quarantine/b"), recent, recent); err != nil {
		t.Fatal(err)
	}
	got, err := Quarantined(dir)
	if err != nil || len(got) != 1 {
		t.Fatalf("got %v, %v, want one copy", got, err)
	}
	if !got[0].Modified.Equal(recent) {
		t.Errorf("modified: got %v, want %v (b's)", got[0].Modified, recent)
	}
}

// rule S7
func TestOrphanTopicDirsAreTheUnmarkedOnesHoldingFiles(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]int{
		"topics/marked/incarnation":     2,
		"topics/marked/0/seg":           1,
		"topics/orphan/0/seg":           1,
		"topics/orphan2/stray":          1,
		"topics/onlymarker/incarnation": 2,
		"topics/afile":                  1,
	})
	if err := os.MkdirAll(filepath.Join(dir, "topics/empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := OrphanTopicDirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"topics/orphan", "topics/orphan2"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, err := OrphanTopicDirs(filepath.Join(dir, "none")); err != nil || len(got) != 0 {
		t.Fatalf("no data dir: got %q, %v, want none", got, err)
	}
}

func TestDirBytesSumsRegularFilesAndFollowsNoSymlink(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]int{"a/x": 10, "a/sub/y": 5, "outside/big": 1000})
	if err := os.Symlink(filepath.Join(dir, "outside"), filepath.Join(dir, "a/link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "outside/big"), filepath.Join(dir, "a/filelink")); err != nil {
		t.Fatal(err)
	}
	if got, err := DirBytes(filepath.Join(dir, "a")); err != nil || got != 15 {
		t.Fatalf("got %d, %v, want 15", got, err)
	}
	if got, err := DirBytes(filepath.Join(dir, "missing")); err != nil || got != 0 {
		t.Fatalf("missing dir: got %d, %v, want 0", got, err)
	}
}

func TestReleaseQuarantinedRemovesOnlyAnInventoryEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		rel  string
		want error // nil: removed
	}{
		{"a partition copy", "topics/orders/0.quarantine", nil},
		{"a numbered partition copy", "topics/orders/0.quarantine.2", nil},
		{"a staging copy", ".moves/orders-3.quarantine", nil},
		{"a stale topic", ".stale/orders@17", nil},
		{"an unmarked topic", ".stale/orders@unmarked.2", nil},
		{"the live partition", "topics/orders/0", ErrInvalid},
		{"the topic dir", "topics/orders", ErrInvalid},
		{"the staging copy in use", ".moves/orders-3", ErrInvalid},
		{"the wal", "wal", ErrInvalid},
		{"the data dir", ".", ErrInvalid},
		{"empty", "", ErrInvalid},
		{"dot dot", "topics/orders/../orders/0.quarantine", ErrInvalid},
		{"out of the data dir", "../x/topics/orders/0.quarantine", ErrInvalid},
		{"absolute", "/topics/orders/0.quarantine", ErrInvalid},
		{"trailing slash", "topics/orders/0.quarantine/", ErrInvalid},
		{"inside a copy", "topics/orders/0.quarantine/00000000.seg", ErrInvalid},
		{"not there", "topics/orders/9.quarantine", ErrNotFound},
		{"a symlinked topic dir", "topics/linked/0.quarantine", ErrInvalid},
		{"a symlink by a copy's name", "topics/orders/4.quarantine", ErrInvalid},
		{"a file by a copy's name", "topics/orders/5.quarantine", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "data")
			writeTree(t, dir, map[string]int{
				"topics/orders/incarnation":               2,
				"topics/orders/0/00000000.seg":            10,
				"topics/orders/0.quarantine/00000000.seg": 10,
				"topics/orders/0.quarantine.2/seg":        10,
				"topics/orders/5.quarantine":              1,
				".moves/orders-3/00000000.seg":            10,
				".moves/orders-3.quarantine/seg":          10,
				".stale/orders@17/0/seg":                  10,
				".stale/orders@unmarked.2/0/seg":          10,
				"wal/00000000.wal":                        10,
			})
			// Outside the data dir, reachable only through symlinks.
			writeTree(t, root, map[string]int{"x/topics/orders/0.quarantine/seg": 1, "elsewhere/0.quarantine/seg": 1})
			if err := os.Symlink(filepath.Join(root, "elsewhere"), filepath.Join(dir, "topics/linked")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(root, "elsewhere/0.quarantine"), filepath.Join(dir, "topics/orders/4.quarantine")); err != nil {
				t.Fatal(err)
			}
			before := inventoryPaths(t, dir)

			err := ReleaseQuarantined(dir, tc.rel)
			after := inventoryPaths(t, dir)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("release %q: got %v, want %v", tc.rel, err, tc.want)
				}
				if !reflect.DeepEqual(after, before) {
					t.Fatalf("a refused release changed the inventory: got %q, want %q", after, before)
				}
				for _, p := range []string{"data/topics/orders/0/00000000.seg", "data/.moves/orders-3/00000000.seg", "data/wal/00000000.wal",
					"x/topics/orders/0.quarantine/seg", "elsewhere/0.quarantine/seg"} {
					if _, err := os.Stat(filepath.Join(root, p)); err != nil {
						t.Errorf("after a refused release: %s: %v, want it kept", p, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("release %q: got %v, want it removed", tc.rel, err)
			}
			if _, err := os.Lstat(filepath.Join(dir, tc.rel)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("after release: stat %s: got %v, want it gone", tc.rel, err)
			}
			if len(after) != len(before)-1 {
				t.Fatalf("inventory after release: got %q, want %q less one", after, before)
			}
		})
	}
}

func inventoryPaths(t *testing.T, dir string) []string {
	t.Helper()
	cs, err := Quarantined(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cs {
		out = append(out, c.Path)
	}
	return out
}

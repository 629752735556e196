package storage

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPrepareTopicDirKeepsItsIncarnationAndRemovesAnyOther(t *testing.T) {
	data := t.TempDir()
	part := PartitionPath(data, "t", 0)
	mustWrite := func(path string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exists := func(path string) bool { _, err := os.Stat(path); return err == nil }

	// A fresh directory is created and marked.
	if res, err := PrepareTopicDir(data, "t", 7); err != nil || res.Removed {
		t.Fatalf("fresh: got %+v, %v, want nothing removed", res, err)
	}
	mustWrite(filepath.Join(part, "seg"))
	// The same incarnation keeps its data.
	if res, err := PrepareTopicDir(data, "t", 7); err != nil || res.Removed || !exists(filepath.Join(part, "seg")) {
		t.Fatalf("same incarnation: got %+v, %v, data kept %v; want it kept", res, err, exists(filepath.Join(part, "seg")))
	}
	// Another incarnation's directory goes, and says whose it was.
	if res, err := PrepareTopicDir(data, "t", 8); err != nil || !res.Removed || res.Found != "7" || exists(part) {
		t.Fatalf("other incarnation: got %+v, %v, partition left %v; want incarnation 7 removed", res, err, exists(part))
	}
	// A directory with files and no marker goes too.
	if err := os.Remove(filepath.Join(TopicPath(data, "t"), incarnationFile)); err != nil {
		t.Fatal(err)
	}
	mustWrite(filepath.Join(part, "seg"))
	if res, err := PrepareTopicDir(data, "t", 8); err != nil || !res.Removed || res.Found != "" || exists(part) {
		t.Fatalf("unmarked: got %+v, %v, partition left %v; want it removed", res, err, exists(part))
	}
	b, err := os.ReadFile(filepath.Join(TopicPath(data, "t"), incarnationFile))
	if err != nil || string(b) != "8\n" {
		t.Fatalf("marker: got %q, %v, want 8", b, err)
	}
}

func TestPurgePartitionRemovesTheTopicDirWithItsLastPartition(t *testing.T) {
	data := t.TempDir()
	if _, err := PrepareTopicDir(data, "t", 1); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{0, 1} {
		if err := os.MkdirAll(PartitionPath(data, "t", p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := PurgePartition(data, "t", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(TopicPath(data, "t")); err != nil {
		t.Fatalf("topic dir after purging one of two partitions: %v, want it kept", err)
	}
	if err := PurgePartition(data, "t", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(TopicPath(data, "t")); !os.IsNotExist(err) {
		t.Fatalf("topic dir after purging the last partition: got %v, want it gone", err)
	}
}

func TestPrepareTopicDirDoesNotClaimARemovalThatFailed(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root removes files in a read-only directory")
	}
	data := t.TempDir()
	if _, err := PrepareTopicDir(data, "t", 7); err != nil {
		t.Fatal(err)
	}
	part := PartitionPath(data, "t", 0)
	if err := os.MkdirAll(part, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(part, "seg"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A read-only partition directory keeps its segment from RemoveAll.
	if err := os.Chmod(part, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(part, 0o755) })
	res, err := PrepareTopicDir(data, "t", 8)
	if err == nil || res.Removed || res.Found != "7" {
		t.Fatalf("failed removal: got %+v, %v; want an error, Found 7 and Removed false", res, err)
	}
}

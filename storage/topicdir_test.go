package storage

import (
	"os"
	"path/filepath"
	"testing"
)

// rule V10: a directory of another incarnation, or one without a marker
// that holds files, is set aside, never deleted: the preparation may act on
// a stale view, and the data may be the only copy.
func TestRuleV10PrepareTopicDirKeepsItsIncarnationAndSetsAnyOtherAside(t *testing.T) {
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
	if res, err := PrepareTopicDir(data, "t", 7); err != nil || res.SetAside != "" {
		t.Fatalf("fresh: got %+v, %v, want nothing set aside", res, err)
	}
	mustWrite(filepath.Join(part, "seg"))
	// The same incarnation keeps its data.
	if res, err := PrepareTopicDir(data, "t", 7); err != nil || res.SetAside != "" || !exists(filepath.Join(part, "seg")) {
		t.Fatalf("same incarnation: got %+v, %v, data kept %v; want it kept", res, err, exists(filepath.Join(part, "seg")))
	}
	// Another incarnation's directory is set aside with its data, named.
	res, err := PrepareTopicDir(data, "t", 8)
	want := filepath.Join(StalePath(data), "t@7")
	if err != nil || res.SetAside != want || res.Found != "7" || exists(part) {
		t.Fatalf("other incarnation: got %+v, %v, partition left %v; want incarnation 7 set aside at %s", res, err, exists(part), want)
	}
	if !exists(filepath.Join(want, "0", "seg")) {
		t.Fatalf("other incarnation: its segment is not at %s", want)
	}
	// A directory with files and no marker is set aside too.
	if err := os.Remove(filepath.Join(TopicPath(data, "t"), incarnationFile)); err != nil {
		t.Fatal(err)
	}
	mustWrite(filepath.Join(part, "seg"))
	res, err = PrepareTopicDir(data, "t", 8)
	want = filepath.Join(StalePath(data), "t@unmarked")
	if err != nil || res.SetAside != want || res.Found != "" || exists(part) || !exists(filepath.Join(want, "0", "seg")) {
		t.Fatalf("unmarked: got %+v, %v, partition left %v; want it set aside at %s", res, err, exists(part), want)
	}
	b, err := os.ReadFile(filepath.Join(TopicPath(data, "t"), incarnationFile))
	if err != nil || string(b) != "8\n" {
		t.Fatalf("marker: got %q, %v, want 8", b, err)
	}
	// A second set-aside of the same name never overwrites the first.
	if err := os.WriteFile(filepath.Join(TopicPath(data, "t"), incarnationFile), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = PrepareTopicDir(data, "t", 8)
	if want := filepath.Join(StalePath(data), "t@7.2"); err != nil || res.SetAside != want {
		t.Fatalf("second set-aside of incarnation 7: got %+v, %v, want %s", res, err, want)
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

func TestPrepareTopicDirDoesNotClaimASetAsideThatFailed(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root renames in a read-only directory")
	}
	data := t.TempDir()
	if _, err := PrepareTopicDir(data, "t", 7); err != nil {
		t.Fatal(err)
	}
	// A read-only topics directory keeps the topic from being renamed.
	topics := filepath.Dir(TopicPath(data, "t"))
	if err := os.Chmod(topics, 0o555); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(topics, 0o755) })
	res, err := PrepareTopicDir(data, "t", 8)
	if err == nil || res.SetAside != "" || res.Found != "7" {
		t.Fatalf("failed set-aside: got %+v, %v; want an error, Found 7 and nothing set aside", res, err)
	}
}

package storage

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Issue 48 item 6: every name derived from a topic name fits in one file
// name (255 bytes), with the largest partition number and set-aside
// counter, for every topic name length the API accepts; a name short
// enough keeps the flat form it always had.
func TestIssue48EveryNameDerivedFromATopicFitsTheFileSystem(t *testing.T) {
	data := t.TempDir()
	maxInt := strconv.Itoa(math.MaxInt)
	for _, n := range []int{1, stagingFlatMaxTopicBytes, stagingFlatMaxTopicBytes + 1, staleFlatMaxTopicBytes, staleFlatMaxTopicBytes + 1, 255} {
		topic := strings.Repeat("t", n)
		staging := StagingPath(data, topic, math.MaxInt)
		stale := filepath.Join(StalePath(data), staleName(topic, strconv.FormatUint(math.MaxUint64, 10)))
		for _, p := range []string{staging + ".quarantine." + maxInt, stale + "." + maxInt} {
			rel, _ := filepath.Rel(data, p)
			for _, name := range strings.Split(rel, string(filepath.Separator)) {
				if len(name) > nameMaxBytes {
					t.Errorf("topic of %d bytes: %s holds a name of %d bytes, want at most %d", n, rel[:40]+"...", len(name), nameMaxBytes)
				}
			}
		}
	}
	if got, want := StagingPath(data, "orders", 3), filepath.Join(data, ".moves", "orders-3"); got != want {
		t.Errorf("staging path of a short name: got %s, want %s", got, want)
	}
	flat := strings.Repeat("s", stagingFlatMaxTopicBytes)
	if got, want := StagingPath(data, flat, 0), filepath.Join(data, ".moves", flat+"-0"); got != want {
		t.Errorf("staging path of a %d-byte name: got %s, want the flat form %s", len(flat), got, want)
	}
}

// Issue 48 item 6: a topic whose name has the API's longest length (255
// bytes) stages a move's copy, quarantines it, and has its directory set
// aside twice by a newer incarnation; the inventory lists each copy under
// the topic's name, the sweep's listing finds the set-aside directories
// with their incarnations, and a release removes one. The old flat names
// (.moves/<topic>-<N>, .stale/<topic>@<inc>) were past the 255-byte limit
// and every one of these failed.
func TestIssue48ALongestTopicNameStagesAndSetsAside(t *testing.T) {
	data := t.TempDir()
	topic := strings.Repeat("x", 250) + ".-_9Z" // 255 bytes, the API's longest
	if len(topic) != 255 {
		t.Fatalf("topic name of %d bytes, want 255", len(topic))
	}

	st, _, err := OpenStaging(StagingPath(data, topic, 107), smallLogConfig(), "m")
	if err != nil {
		t.Fatalf("open the staging copy of a 255-byte topic name: got %v, want none", err)
	}
	if err := os.WriteFile(filepath.Join(st.Dir(), "00000000.seg"), make([]byte, 10), 0o644); err != nil {
		t.Fatal(err)
	}
	quarantined, err := st.Quarantine()
	if err != nil {
		t.Fatalf("quarantine the staging copy: got %v, want none", err)
	}

	for inc := uint64(1); inc <= 3; inc++ {
		res, err := PrepareTopicDir(data, topic, inc)
		if err != nil {
			t.Fatalf("prepare incarnation %d: got %v, want none", inc, err)
		}
		if inc > 1 && res.SetAside == "" {
			t.Fatalf("prepare incarnation %d: nothing set aside, want incarnation %d's directory", inc, inc-1)
		}
		if err := os.MkdirAll(PartitionPath(data, topic, 0), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(PartitionPath(data, topic, 0), "00000000.seg"), make([]byte, inc), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	copies, err := Quarantined(data)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range copies {
		if c.Topic != topic {
			t.Errorf("copy %s: got topic %q, want the 255-byte name", c.Path, c.Topic)
		}
		got = append(got, string(c.Kind)+" "+strconv.Itoa(c.Partition)+" "+strconv.FormatUint(c.Incarnation, 10)+" "+strconv.FormatInt(c.Bytes, 10))
	}
	want := []string{"staging 107 0 11", "stale_topic -1 1 3", "stale_topic -1 2 4"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Fatalf("inventory: got %q, want %q", got, want)
	}
	if rel, _ := filepath.Rel(data, quarantined); copies[0].Path != rel {
		t.Errorf("staging copy listed at %s, want where Quarantine put it, %s", copies[0].Path, rel)
	}

	stale, err := StaleDirs(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) != 2 || stale[0].Topic != topic || !stale[0].Marked || stale[0].Incarnation != 1 || stale[1].Incarnation != 2 {
		t.Fatalf("set-aside directories: got %+v, want incarnations 1 and 2 of the 255-byte topic", stale)
	}

	if err := ReleaseQuarantined(data, copies[1].Path); err != nil {
		t.Fatalf("release %s: got %v, want none", copies[1].Path, err)
	}
	if after := inventoryPaths(t, data); len(after) != 2 {
		t.Fatalf("inventory after a release: got %q, want the two others", after)
	}
}

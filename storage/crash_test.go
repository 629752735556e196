package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// crashImage is the bytes of a partition's only segment at one moment, plus
// the HWM that was visible in memory at that moment.
type crashImage struct {
	data    []byte
	visible int64
}

// recoverImage writes data as the segment of a fresh partition and reopens it.
// segmentAroundCommit is a log with 12 records visible (3 batches of 4),
// and its segment's bytes before and after one more batch of n records
// committed: what a crash test cuts or damages.
func segmentAroundCommit(t *testing.T, n int) (l *Log, before, after []byte) {
	t.Helper()
	dir := t.TempDir()
	l = openTestLog(t, dir, DefaultLogConfig())
	appendN(t, l, 3, 4)
	path := filepath.Join(dir, segmentName(0))
	before, _ = os.ReadFile(path)
	if _, err := l.Append(t0, entriesFrom(12, n)); err != nil {
		t.Fatal(err)
	}
	after, _ = os.ReadFile(path)
	if !bytes.HasPrefix(after, before) {
		t.Fatal("test setup: the commit rewrote earlier bytes")
	}
	return l, before, after
}

func recoverImage(t *testing.T, data []byte) *Log {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, segmentName(0)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return openTestLog(t, dir, smallLogConfig())
}

// checkValidPrefix asserts that a recovered log is a valid prefix of the
// records entriesFrom makes and never exceeds the HWM visible before the crash.
// With appendToo it also checks that the log takes appends again at its HWM
// (an fsync: done for a sample of the images to keep the test quick).
func checkValidPrefix(t *testing.T, l *Log, visible int64, what string, appendToo bool) {
	t.Helper()
	if got := l.HWM(); got > visible {
		t.Fatalf("%s: recovered hwm %d exceeds the %d visible before the crash", what, got, visible)
	}
	checkRecords(t, readAll(t, l, 0), 0, l.HWM())
	if !appendToo {
		return
	}
	if _, err := l.Append(t0, entriesFrom(l.HWM(), 1)); err != nil {
		t.Fatalf("%s: append after recovery: %v", what, err)
	}
	checkRecords(t, readAll(t, l, 0), 0, l.HWM())
}

// TestCrashAtEveryBytePositionOfACommitRecoversAValidPrefix cuts the segment
// at every byte of a batch being committed (its record frames, then its
// commit frame) and flips every byte of it, and checks that recovery never
// exposes more than was visible before the cut.
func TestCrashAtEveryBytePositionOfACommitRecoversAValidPrefix(t *testing.T) {
	l, before, after := segmentAroundCommit(t, 5)
	for cut := len(before); cut < len(after); cut++ {
		checkValidPrefix(t, recoverImage(t, after[:cut]), 12, "cut", cut%16 == 0)
		if got := l.HWM(); got != 17 {
			t.Fatalf("source hwm changed: %d", got)
		}
	}
	// A cut that keeps the whole commit frame is the commit having happened.
	if got := recoverImage(t, after).HWM(); got != 17 {
		t.Fatalf("whole batch: recovered hwm %d, want 17", got)
	}
	for i := len(before); i < len(after); i++ {
		for _, bit := range []byte{0x01, 0x80} {
			img := append([]byte(nil), after...)
			img[i] ^= bit
			// Flipped bytes inside the batch: the batch is lost, nothing else.
			rec := recoverImage(t, img)
			if got := rec.HWM(); got != 12 {
				t.Fatalf("flip at byte %d: recovered hwm %d, want 12", i, got)
			}
			checkValidPrefix(t, rec, 12, "flip", false)
		}
	}
}

// A batch is one write: its record frames, then its commit frame, made
// durable by one fsync. A power loss during that fsync may keep any subset
// of the write's pages, in any order: the commit frame's page without the
// pages of the records before it, say. Recovery must expose the batch only
// when every page of it reached the disk, and otherwise cut it whole.
func TestCrashKeepingAnySubsetOfABatchsPagesExposesItOnlyWhole(t *testing.T) {
	const page = 4096
	_, before, after := segmentAroundCommit(t, 250)
	first, last := len(before)/page, (len(after)-1)/page
	pages := last - first + 1
	if pages < 4 || pages > 8 {
		t.Fatalf("test setup: the batch spans %d pages, want 4 to 8", pages)
	}
	for kept := 0; kept < 1<<pages; kept++ {
		// The file's new size reached the disk; each page of the write did
		// or did not (a page not kept reads as it was: zeros past the old
		// end, the old bytes before it).
		img := make([]byte, len(after))
		copy(img, before)
		for p := 0; p < pages; p++ {
			if kept&(1<<p) == 0 {
				continue
			}
			lo, hi := max((first+p)*page, len(before)), min((first+p+1)*page, len(after))
			copy(img[lo:hi], after[lo:hi])
		}
		rec := recoverImage(t, img)
		want := int64(12)
		if kept == 1<<pages-1 {
			want = 262
		}
		if got := rec.HWM(); got != want {
			t.Fatalf("pages kept %0*b: recovered hwm %d, want %d", pages, kept, got, want)
		}
		checkValidPrefix(t, rec, 262, "pages kept", kept%7 == 0)
	}
}

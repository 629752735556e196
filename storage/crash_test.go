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
// (two fsyncs: done for a sample of the images to keep the test quick).
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
	dir := t.TempDir()
	l := openTestLog(t, dir, DefaultLogConfig())
	appendN(t, l, 3, 4) // 12 records visible
	path := filepath.Join(dir, segmentName(0))
	before, _ := os.ReadFile(path)
	if _, err := l.Append(t0, entriesFrom(12, 5)); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.HasPrefix(after, before) {
		t.Fatal("test setup: the commit rewrote earlier bytes")
	}
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

// In a busy partition the commit frame of batch N rides in the same write as
// the frames of batch N+1. A crash during that write exposes at most batch N
// (whose frames were already durable and verified), never batch N+1.
func TestCrashDuringAPipelinedWriteNeverExposesTheBatchItCarries(t *testing.T) {
	dir := t.TempDir()
	l := openTestLog(t, dir, DefaultLogConfig())
	appendN(t, l, 2, 3) // 6 visible
	path := filepath.Join(dir, segmentName(0))
	b1, _ := l.Write(t0, entriesFrom(6, 4))
	l.Sync()
	if err := l.Publish(b1); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path) // b1's frames durable, no commit frame
	b2, _ := l.Write(t0, entriesFrom(10, 4))
	l.Sync()
	after, _ := os.ReadFile(path) // b1's commit frame and b2's frames
	commitEnd := len(before) + frameHeaderBytes
	for cut := len(before); cut <= len(after); cut++ {
		want := int64(6)
		if cut >= commitEnd {
			want = 10 // b1's commit frame is whole: b1 was durable and verified
		}
		rec := recoverImage(t, after[:cut])
		if got := rec.HWM(); got != want {
			t.Fatalf("cut at %d: recovered hwm %d, want %d", cut, got, want)
		}
		checkValidPrefix(t, rec, 10, "pipelined cut", cut%16 == 0)
	}
	if err := l.Publish(b2); err != nil {
		t.Fatal(err)
	}
	if err := l.Flush(t0); err != nil {
		t.Fatal(err)
	}
	checkRecords(t, readAll(t, l, 0), 0, 14)
}

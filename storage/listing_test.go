package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// rule C4
func TestListingListsTheActiveSegmentOnlyUpToItsCommittedBoundary(t *testing.T) {
	dir, l := filledLog(t, 2, 3)
	committed := fileSize(t, filepath.Join(dir, segmentName(0)))
	l.Write(t0, entriesFrom(6, 4)) // durable frames and their commit frame, not yet published
	l.Sync()
	if fileSize(t, filepath.Join(dir, segmentName(0))) <= committed {
		t.Fatal("test setup: the pending batch is not on disk")
	}
	ls, err := l.List(t0)
	if err != nil {
		t.Fatal(err)
	}
	if ls.HWM != 6 || ls.Segments[0].Size != committed {
		t.Fatalf("listing: hwm %d, active size %d; want 6 and %d", ls.HWM, ls.Segments[0].Size, committed)
	}
	buf := make([]byte, 1<<20)
	n, err := l.ReadChunk(segmentName(0), 0, buf)
	if err != nil || int64(n) != committed {
		t.Fatalf("chunk from 0: got %d bytes (%v), want %d", n, err, committed)
	}
	if n, err := l.ReadChunk(segmentName(0), committed, buf); n != 0 || err != nil {
		t.Fatalf("chunk at the boundary: got %d bytes (%v), want 0", n, err)
	}
	if _, err := l.ReadChunk(segmentName(0), committed+1, buf); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("chunk past the boundary: got %v, want ErrOutOfRange", err)
	}
	if _, err := l.ReadChunk(segmentName(999), 0, buf); !errors.Is(err, ErrNotFound) {
		t.Fatalf("chunk of an unknown segment: got %v, want ErrNotFound", err)
	}
}

// rule C5
func TestListClosedWalksFrameHeadersUpToTheRecoveredHWMWithoutChangingFiles(t *testing.T) {
	cfg := smallLogConfig()
	dir, l := filledLog(t, 30, 5)
	open, _ := l.List(t0)
	writeTorn(t, l, entriesFrom(150, 2)) // crashed with a hidden tail on disk
	active := open.Segments[len(open.Segments)-1]
	onDisk := fileSize(t, filepath.Join(dir, active.Name))

	ls, err := ListClosed(dir, cfg, t0)
	if err != nil {
		t.Fatal(err)
	}
	if ls.HWM != 150 || len(ls.Segments) != len(open.Segments) {
		t.Fatalf("closed listing: hwm %d with %d segments, want 150 with %d", ls.HWM, len(ls.Segments), len(open.Segments))
	}
	for i, s := range ls.Segments {
		if s != open.Segments[i] && s.Size != open.Segments[i].Size {
			t.Fatalf("segment %s: closed listing says %d bytes, open listing said %d", s.Name, s.Size, open.Segments[i].Size)
		}
	}
	if got := fileSize(t, filepath.Join(dir, active.Name)); got != onDisk {
		t.Fatalf("ListClosed changed the active segment: %d bytes, want %d", got, onDisk)
	}
	buf := make([]byte, 1<<20)
	n, err := ReadClosedChunk(dir, ls.Segments[len(ls.Segments)-1], 0, buf)
	if err != nil || int64(n) != active.Size {
		t.Fatalf("closed chunk: got %d bytes (%v), want %d", n, err, active.Size)
	}
}

// rule G1
func TestListingCarriesEachSegmentsModTimeAndTheSourceClock(t *testing.T) {
	dir, l := filledLog(t, 30, 5)
	stamp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	os.Chtimes(filepath.Join(dir, segmentName(0)), stamp, stamp)
	clock := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	ls, err := l.List(clock)
	if err != nil {
		t.Fatal(err)
	}
	if !ls.Clock.Equal(clock) || !ls.Segments[0].ModTime.Equal(stamp) {
		t.Fatalf("listing: clock %v, first segment time %v; want %v and %v", ls.Clock, ls.Segments[0].ModTime, clock, stamp)
	}
	if got, want := ls.Bytes(), l.Bytes(); got != want {
		t.Fatalf("listed bytes: got %d, want %d", got, want)
	}
}

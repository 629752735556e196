package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// countedFaults is a switch that counts what it made up, by mode.
func countedFaults() (*Faults, *[3]atomic.Int64) {
	var n [3]atomic.Int64
	return NewFaults(func(m FaultMode) { n[m].Add(1) }), &n
}

func TestFaultModeNamesReadBackAndAnythingElseIsInvalid(t *testing.T) {
	for _, m := range []FaultMode{FaultsOff, FaultFsync, FaultWrite} {
		got, err := ParseFaultMode(m.String())
		if err != nil || got != m {
			t.Fatalf("ParseFaultMode(%q): got %v, %v, want %v", m.String(), got, err, m)
		}
	}
	for _, s := range []string{"", "OFF", "sync", "disk", "fsync "} {
		if _, err := ParseFaultMode(s); !errors.Is(err, ErrInvalid) {
			t.Fatalf("ParseFaultMode(%q): got %v, want ErrInvalid", s, err)
		}
	}
	var none *Faults
	if got := none.Mode(); got != FaultsOff {
		t.Fatalf("mode of a nil switch: got %v, want off", got)
	}
}

func TestFaultFsyncFailsALogCommitAndOffLetsItCommitAgainWithoutAReopen(t *testing.T) {
	dir := t.TempDir()
	faults, injected := countedFaults()
	cfg := smallLogConfig()
	cfg.Faults = faults
	l := openTestLog(t, dir, cfg)
	appendN(t, l, 2, 3) // acknowledged: offsets 0..5
	seg := filepath.Join(dir, segmentName(0))
	before := fileSize(t, seg)

	faults.Set(FaultFsync)
	for i := range 3 {
		if _, err := l.Append(t0, entriesFrom(6, 2)); !errors.Is(err, ErrInjected) || errors.Is(err, ErrBroken) {
			t.Fatalf("append %d under fsync faults: got %v, want ErrInjected and the log not broken", i, err)
		}
		if got := l.HWM(); got != 6 {
			t.Fatalf("hwm after failed append %d: got %d, want 6 (nothing that failed is visible)", i, got)
		}
	}
	if got := fileSize(t, seg); got != before {
		t.Fatalf("segment after failed appends: got %d bytes, want %d (cut back)", got, before)
	}
	if injected[FaultFsync].Load() == 0 {
		t.Fatalf("injected fsync failures: got 0, want some counted")
	}
	checkRecords(t, readAll(t, l, 0), 0, 6)

	faults.Set(FaultsOff)
	// The failed records' offsets were never visible: they go to these.
	appendN(t, l, 1, 4)
	checkRecords(t, readAll(t, l, 0), 0, 10)
	l.Close()
	checkRecords(t, readAll(t, openTestLog(t, dir, cfg), 0), 0, 10)
}

func TestFaultFsyncThroughTheSyncLaneFailsOnlyTheWriteNotYetVisible(t *testing.T) {
	dir := t.TempDir()
	faults, _ := countedFaults()
	cfg := smallLogConfig()
	cfg.Faults = faults
	l := openTestLog(t, dir, cfg)
	lane, err := OpenSyncLane(dir, DefaultSyncLaneConfig())
	if err != nil {
		t.Fatalf("open sync lane: %v", err)
	}
	defer lane.Close()
	ctx := context.Background()

	// The partition actor's pipeline: batch 0..2 written, synced through the
	// lane and published; then batch 3..4, whose sync fails.
	b1, err := l.Write(t0, entriesFrom(0, 3))
	if err != nil {
		t.Fatal(err)
	}
	if err := lane.Sync(ctx, l); err != nil {
		t.Fatalf("lane sync: got %v, want nil", err)
	}
	if err := l.Publish(b1); err != nil {
		t.Fatal(err)
	}
	visibleBytes := fileSize(t, filepath.Join(dir, segmentName(0)))
	if _, err := l.Write(t0, entriesFrom(3, 2)); err != nil {
		t.Fatal(err)
	}
	faults.Set(FaultFsync)
	err = lane.Sync(ctx, l)
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("lane sync under fsync faults: got %v, want ErrInjected", err)
	}
	if err := l.Abort(err); errors.Is(err, ErrBroken) {
		t.Fatalf("abort under fsync faults: got %v, want the log writable", err)
	}
	if got := l.HWM(); got != 3 {
		t.Fatalf("hwm after the failed sync: got %d, want 3 (3..4 was never synced)", got)
	}

	// Still failing: the write after the abort syncs the cut first.
	if _, err := l.Write(t0, entriesFrom(3, 1)); !errors.Is(err, ErrInjected) {
		t.Fatalf("write while the cut cannot be synced: got %v, want ErrInjected", err)
	}
	if got := fileSize(t, filepath.Join(dir, segmentName(0))); got != visibleBytes {
		t.Fatalf("segment while the cut cannot be synced: got %d bytes, want %d (nothing written past 0..2)", got, visibleBytes)
	}

	faults.Set(FaultsOff)
	appendN(t, l, 1, 2)
	checkRecords(t, readAll(t, l, 0), 0, 5)
}

func TestFaultWriteFailsBeforeAnythingIsWritten(t *testing.T) {
	dir := t.TempDir()
	faults, injected := countedFaults()
	cfg := smallLogConfig()
	cfg.Faults = faults
	l := openTestLog(t, dir, cfg)
	appendN(t, l, 1, 2)
	seg := filepath.Join(dir, segmentName(0))
	before := fileSize(t, seg)

	faults.Set(FaultWrite)
	if _, err := l.Append(t0, entriesFrom(2, 3)); !errors.Is(err, ErrInjected) {
		t.Fatalf("append under write faults: got %v, want ErrInjected", err)
	}
	if got := fileSize(t, seg); got != before {
		t.Fatalf("segment under write faults: got %d bytes, want %d", got, before)
	}
	if got := injected[FaultWrite].Load(); got != 1 {
		t.Fatalf("injected write failures: got %d, want 1", got)
	}
	faults.Set(FaultsOff)
	appendN(t, l, 1, 3)
	checkRecords(t, readAll(t, l, 0), 0, 5)
}

func TestFaultFsyncFailsWALAppendsAndOffServesAgainWithoutAReopen(t *testing.T) {
	dir := t.TempDir()
	faults, _ := countedFaults()
	cfg := DefaultWALConfig()
	cfg.Faults = faults
	w := walOpenTest(t, dir, cfg)
	acked := walAppendN(t, w, 0, 3)

	for _, m := range []FaultMode{FaultFsync, FaultWrite} {
		faults.Set(m)
		for i := range 3 {
			if _, err := w.Append(context.Background(), walTestRecord(100+i)); !errors.Is(err, ErrInjected) || errors.Is(err, ErrBroken) {
				t.Fatalf("append %d under %v faults: got %v, want ErrInjected and not ErrBroken", i, m, err)
			}
		}
		faults.Set(FaultsOff)
		// The failed seqs were never acknowledged: they are handed out again.
		acked = append(acked, walAppendN(t, w, len(acked), 1)...)
		if got, want := acked[len(acked)-1].Seq, uint64(len(acked)); got != want {
			t.Fatalf("seq after %v faults: got %d, want %d", m, got, want)
		}
	}
	walCloseTest(t, w)
	got, _ := walReplayAll(t, walOpenTest(t, dir, cfg))
	walSameRecords(t, "replay after fault episodes", got, acked)
}

func TestFaultFsyncFailsConsumerStateAndCursorWritesUntilOff(t *testing.T) {
	dir := t.TempDir()
	faults, _ := countedFaults()
	ccfg := DefaultConsumerConfig()
	ccfg.Faults = faults
	c, err := NewOffsetCommitter(dir, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	st := EmptyConsumerState()
	st.Ack(0)
	st.Ack(1)
	c.Update(st)
	if _, err := c.Flush(t0); err != nil {
		t.Fatalf("flush before faults: got %v, want nil", err)
	}
	cur := Cursor{Child: "child", Epoch: 1, Offset: 2}
	if err := WriteCursor(dir, cur, true, faults); err != nil {
		t.Fatalf("cursor write before faults: got %v, want nil", err)
	}

	st.Ack(2)
	c.Update(st)
	for _, m := range []FaultMode{FaultFsync, FaultWrite} {
		faults.Set(m)
		if err := c.FlushSync(); !errors.Is(err, ErrInjected) {
			t.Fatalf("consumer flush under %v faults: got %v, want ErrInjected", m, err)
		}
		if err := WriteCursor(dir, Cursor{Child: "child", Epoch: 1, Offset: 9}, true, faults); !errors.Is(err, ErrInjected) {
			t.Fatalf("cursor write under %v faults: got %v, want ErrInjected", m, err)
		}
	}
	faults.Set(FaultsOff)
	if err := c.FlushSync(); err != nil {
		t.Fatalf("flush after faults: got %v, want nil", err)
	}
	if got, err := LoadConsumerState(dir); err != nil || !got.Equal(ackedThrough(2)) {
		t.Fatalf("consumer state after off: got %+v, %v, want acked through 2", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, cursorFileName("child"))); err != nil {
		t.Fatal(err)
	}
	// A write fault writes nothing; an fsync fault may leave the bytes in
	// the file, unsynced, like a real one: either value verifies.
	if got, err := ReadCursor(dir, "child", 1); err != nil || (got != cur && got.Offset != 9) {
		t.Fatalf("cursor after faults: got %+v, %v, want %+v or offset 9", got, err, cur)
	}
}

func ackedThrough(off int64) ConsumerState {
	s := EmptyConsumerState()
	for o := int64(0); o <= off; o++ {
		s.Ack(o)
	}
	return s
}

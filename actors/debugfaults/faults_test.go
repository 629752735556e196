package debugfaults

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/storage"
)

func switches(base *testnet.Clock) *Switches {
	return New(base, slog.New(slog.NewTextHandler(io.Discard, nil)), NewInjected(metrics.NewSet(), "n1"))
}

// A step moves the clock's Now, forward and back, but not the timers
// already running: a stepped wall clock moves the deadlines computed from
// Now, not the durations of its timers.
func TestAClockStepMovesNowAndNotTheTimers(t *testing.T) {
	base := testnet.NewClock()
	s := switches(base)
	fired := false
	s.Clock().AfterFunc(time.Minute, func() { fired = true })
	s.StepClock(time.Hour)
	if got := s.Clock().Now().Sub(base.Now()); got != time.Hour {
		t.Fatalf("after a step of 1h: Now is %v ahead of the base, want 1h", got)
	}
	if fired {
		t.Fatal("a step fired a timer")
	}
	base.Advance(time.Minute)
	if !fired {
		t.Fatal("a timer did not fire after its real duration")
	}
	s.StepClock(-90 * time.Minute)
	if got := s.FaultsStatus().ClockOffsetMs; got != (-30 * time.Minute).Milliseconds() {
		t.Fatalf("after steps of 1h and -90m: offset %d ms, want -30m", got)
	}
}

// The disk switch takes the storage's modes and refuses any other as
// invalid; the status says which is on.
func TestTheDiskSwitchTakesTheStoragesModes(t *testing.T) {
	s := switches(testnet.NewClock())
	if err := s.SetDiskFault("fsync"); err != nil || s.Disk().Mode() != storage.FaultFsync || s.FaultsStatus().Disk != "fsync" {
		t.Fatalf("fsync: got %v, mode %v", err, s.Disk().Mode())
	}
	if err := s.SetDiskFault("sometimes"); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("an unknown mode: got %v, want ErrInvalid", err)
	}
	if err := s.SetDiskFault("off"); err != nil || s.FaultsStatus().Disk != "off" {
		t.Fatalf("off: got %v, status %+v", err, s.FaultsStatus())
	}
}

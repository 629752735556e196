package storage

import (
	"fmt"
	"sync/atomic"
)

// FaultMode is what a Faults makes the storage of a node do, for a
// fault-injection run (narad serve --debug-faults): nothing, fail every
// fsync, or fail every write.
type FaultMode uint32

const (
	// FaultsOff injects nothing.
	FaultsOff FaultMode = iota
	// FaultFsync fails every fsync (files, directories, syncfs) without
	// syncing. The writes before it went to the page cache: a failed fsync
	// says nothing about whether their bytes reach the disk, as a real one.
	FaultFsync
	// FaultWrite fails every write to a file before anything is written.
	// A truncation is not a write here: it is how the storage gives a
	// failed write up, and a fault that blocked it too would test nothing
	// the fsync mode does not.
	FaultWrite
)

// String is the mode's name in the debug API: off, fsync, write.
func (m FaultMode) String() string {
	switch m {
	case FaultsOff:
		return "off"
	case FaultFsync:
		return "fsync"
	case FaultWrite:
		return "write"
	}
	return fmt.Sprintf("FaultMode(%d)", uint32(m))
}

// ParseFaultMode reads a mode's name; any other is ErrInvalid.
func ParseFaultMode(s string) (FaultMode, error) {
	for _, m := range []FaultMode{FaultsOff, FaultFsync, FaultWrite} {
		if s == m.String() {
			return m, nil
		}
	}
	return FaultsOff, fmt.Errorf("fault mode %q: want off, fsync or write: %w", s, ErrInvalid)
}

// Faults is the fault switch of one node's storage, handed to its logs,
// WAL and consumer state through their configs (LogConfig.Faults,
// WALConfig.Faults, ConsumerConfig.Faults) and to cursor writes. A nil
// *Faults injects nothing and costs a nil check; every method is safe on
// nil and for concurrent use.
type Faults struct {
	mode atomic.Uint32
	// injected is told each failure made up, by its mode (a metric).
	injected func(FaultMode)
	// synced, set by tests only, is told the path of each file or
	// directory synced through the switch, after the sync, and of the
	// directory of each barrier (syncAllNote+dir): the order of a copy's
	// syncs is what rule V6 is about.
	synced func(path string)
}

// noteSynced tells the test's observer, if any, that path was synced.
func (f *Faults) noteSynced(path string) {
	if f != nil && f.synced != nil {
		f.synced(path)
	}
}

// NewFaults returns a switch that is off. injected, if not nil, is
// called once per failure the switch makes up, from the failing goroutine.
func NewFaults(injected func(FaultMode)) *Faults {
	return &Faults{injected: injected}
}

// Set turns the mode on (or off) for every write or fsync that starts
// from now on.
func (f *Faults) Set(m FaultMode) { f.mode.Store(uint32(m)) }

// Mode is the mode now; FaultsOff for a nil switch.
func (f *Faults) Mode() FaultMode {
	if f == nil {
		return FaultsOff
	}
	return FaultMode(f.mode.Load())
}

// fail returns an error wrapping ErrInjected when the switch is in mode m.
func (f *Faults) fail(m FaultMode, what string) error {
	if f == nil || FaultMode(f.mode.Load()) != m {
		return nil
	}
	if f.injected != nil {
		f.injected(m)
	}
	return fmt.Errorf("%s: %w", what, ErrInjected)
}

// failSync is the injected failure of an fsync of what, or nil.
func (f *Faults) failSync(what string) error { return f.fail(FaultFsync, "sync "+what) }

// failWrite is the injected failure of a write to what, or nil.
func (f *Faults) failWrite(what string) error { return f.fail(FaultWrite, "write "+what) }

// sync fsyncs file unless the switch fails it.
func (f *Faults) sync(file File) error {
	if err := f.failSync(file.Name()); err != nil {
		return err
	}
	if err := file.Sync(); err != nil {
		return err
	}
	f.noteSynced(file.Name())
	return nil
}

// writeAt writes to file unless the switch fails it.
func (f *Faults) writeAt(file File, b []byte, at int64) (int, error) {
	if err := f.failWrite(file.Name()); err != nil {
		return 0, err
	}
	return file.WriteAt(b, at)
}

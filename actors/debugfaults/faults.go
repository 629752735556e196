// Package debugfaults is the switches of a node started with
// Config.DebugFaults (narad serve --debug-faults), which a nemesis run
// flips over HTTP (/debug/faults, issue 30): the node's storage's writes
// or fsyncs fail (storage.Faults, in every log, the WAL, consumer state
// and cursors), and its injected clock steps. Nothing else changes: the
// node answers the faults as it answers a real disk error or a stepped
// wall clock. Never for production.
//
// Start with Switches: the node hands Disk to its storage configs and
// Clock to its actors, and actors/api serves the rest (api.Faults).
package debugfaults

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// steppedClock is base with the sum of the steps made so far added to
// Now. AfterFunc keeps base's real durations: a stepped wall clock moves
// the deadlines computed from Now, not the timers already running.
type steppedClock struct {
	base   clock.Clock
	offset atomic.Int64 // nanoseconds
}

func (c *steppedClock) Now() time.Time { return c.base.Now().Add(time.Duration(c.offset.Load())) }
func (c *steppedClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.base.AfterFunc(d, f)
}

// Injected counts the failures a switch made up, by storage.FaultMode:
// narad_faults_injected_total{node,kind}. Every node registers them, so
// that a dashboard reads zeros on a node without the switches.
type Injected map[storage.FaultMode]*metrics.Counter

// NewInjected registers node's counters in set.
func NewInjected(set *metrics.Set, node string) Injected {
	out := Injected{}
	for _, mode := range []storage.FaultMode{storage.FaultFsync, storage.FaultWrite} {
		out[mode] = set.GetOrCreateCounter(fmt.Sprintf(`narad_faults_injected_total{node=%q,kind=%q}`, node, mode))
	}
	return out
}

// Switches is the node's api.Faults. Safe for concurrent use.
type Switches struct {
	disk  *storage.Faults
	clock *steppedClock
	log   *slog.Logger
}

// New makes the switches of a node whose clock is base, each injected
// failure counted in injected.
func New(base clock.Clock, log *slog.Logger, injected Injected) *Switches {
	return &Switches{
		disk: storage.NewFaults(func(m storage.FaultMode) {
			if c := injected[m]; c != nil {
				c.Inc()
			}
		}),
		clock: &steppedClock{base: base},
		log:   log,
	}
}

// Disk is the switch the node's storage configs take (Log, WAL,
// Consumer).
func (s *Switches) Disk() *storage.Faults { return s.disk }

// Clock is base stepped by StepClock: the clock the node's actors take.
func (s *Switches) Clock() clock.Clock { return s.clock }

// SetDiskFault fails the disk's writes or fsyncs from now on, or none
// ("off"); an unknown mode is errs.ErrInvalid.
func (s *Switches) SetDiskFault(fail string) error {
	m, err := storage.ParseFaultMode(fail)
	if err != nil {
		return fmt.Errorf("disk fault: %v: %w", err, errs.ErrInvalid)
	}
	s.disk.Set(m)
	s.log.Warn("debug fault: disk", "fail", m.String())
	return nil
}

// StepClock moves the clock's Now by step, forward or back.
func (s *Switches) StepClock(step time.Duration) {
	offset := time.Duration(s.clock.offset.Add(int64(step)))
	s.log.Warn("debug fault: clock stepped", "step", step, "offset", offset)
}

// FaultsStatus is the switches as they stand.
func (s *Switches) FaultsStatus() messages.FaultsStatus {
	return messages.FaultsStatus{Disk: s.disk.Mode().String(), ClockOffsetMs: time.Duration(s.clock.offset.Load()).Milliseconds()}
}

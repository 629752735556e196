package actors

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// A node started with Config.DebugFaults (narad serve --debug-faults)
// takes two faults from a nemesis run over HTTP (/debug/faults, issue 30):
// its storage's writes or fsyncs fail (storage.Faults, in every log, the
// WAL, consumer state and cursors), and its injected clock steps. Nothing
// else changes: the node answers the faults as it answers a real disk
// error or a stepped wall clock.

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

// debugFaults is the node's api.Faults.
type debugFaults struct {
	disk  *storage.Faults
	clock *steppedClock
	log   *slog.Logger
}

// newDebugFaults makes the switches of a node whose clock is base, each
// injected failure counted in injected (by storage.FaultMode).
func newDebugFaults(base clock.Clock, log *slog.Logger, injected map[storage.FaultMode]*metrics.Counter) *debugFaults {
	return &debugFaults{
		disk: storage.NewFaults(func(m storage.FaultMode) {
			if c := injected[m]; c != nil {
				c.Inc()
			}
		}),
		clock: &steppedClock{base: base},
		log:   log,
	}
}

// withFaults is cfg with the switches of d in its storage configs and as
// its clock.
func (d *debugFaults) withFaults(cfg Config) Config {
	cfg.Log.Faults, cfg.WAL.Faults, cfg.Consumer.Faults = d.disk, d.disk, d.disk
	cfg.clock = d.clock
	return cfg
}

func (d *debugFaults) SetDiskFault(fail string) error {
	m, err := storage.ParseFaultMode(fail)
	if err != nil {
		return fmt.Errorf("disk fault: %v: %w", err, ErrInvalid)
	}
	d.disk.Set(m)
	d.log.Warn("debug fault: disk", "fail", m.String())
	return nil
}

func (d *debugFaults) StepClock(step time.Duration) {
	offset := time.Duration(d.clock.offset.Add(int64(step)))
	d.log.Warn("debug fault: clock stepped", "step", step, "offset", offset)
}

func (d *debugFaults) FaultsStatus() messages.FaultsStatus {
	return messages.FaultsStatus{Disk: d.disk.Mode().String(), ClockOffsetMs: time.Duration(d.clock.offset.Load()).Milliseconds()}
}

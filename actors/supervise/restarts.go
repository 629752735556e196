package supervise

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
)

// Restarts restarts a failed child after a back-off that grows with
// each failure in the window, and stops it once it failed more than
// maxRestarts times in the window. Unlike protoactor's own strategies it
// logs every failure at error and counts it: protoactor logs a recovered
// panic at Info with no stack.
type Restarts struct {
	MaxRestarts int
	Window      time.Duration
	Backoff     time.Duration
	Log         *slog.Logger
	// Clock times the back-off (nil: the wall clock).
	Clock clock.Clock
	// Restarted counts the restarts, Stopped the children given up on.
	Restarted, Stopped *metrics.Counter
}

// HandleFailure restarts child after its back-off, or stops it past
// MaxRestarts in Window (protoactor's actor.SupervisorStrategy).
func (s *Restarts) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	if rs.NumberOfFailures(s.Window) == 0 {
		rs.Reset()
	}
	rs.Fail()
	n := rs.NumberOfFailures(s.Window)
	if n > s.MaxRestarts {
		s.Log.Error("actor keeps failing; stopped", "actor", child.Id, "failures", n, "window", s.Window, "reason", fmt.Sprint(reason), "message", fmt.Sprintf("%T", message))
		s.Stopped.Inc()
		sup.StopChildren(child)
		return
	}
	delay := time.Duration(n) * s.Backoff
	s.Log.Error("actor failed; restarting", "actor", child.Id, "failures", n, "after", delay, "reason", fmt.Sprint(reason), "message", fmt.Sprintf("%T", message))
	s.Restarted.Inc()
	clock.Or(s.Clock).AfterFunc(delay, func() { sup.RestartChildren(child) })
}

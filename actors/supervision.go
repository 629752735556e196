package actors

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
)

// restartStrategy restarts a failed child after a back-off that grows with
// each failure in the window, and stops it once it failed more than
// maxRestarts times in the window. Unlike protoactor's own strategies it
// logs every failure at error and counts it: protoactor logs a recovered
// panic at Info with no stack.
type restartStrategy struct {
	maxRestarts int
	window      time.Duration
	backoff     time.Duration
	log         *slog.Logger
	// clock times the back-off (nil: the wall clock).
	clock clock.Clock
	// restarts counts the restarts, stopped the children given up on.
	restarts, stopped *metrics.Counter
}

func (s *restartStrategy) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	if rs.NumberOfFailures(s.window) == 0 {
		rs.Reset()
	}
	rs.Fail()
	n := rs.NumberOfFailures(s.window)
	if n > s.maxRestarts {
		s.log.Error("actor keeps failing; stopped", "actor", child.Id, "failures", n, "window", s.window, "reason", fmt.Sprint(reason), "message", fmt.Sprintf("%T", message))
		s.stopped.Inc()
		sup.StopChildren(child)
		return
	}
	delay := time.Duration(n) * s.backoff
	s.log.Error("actor failed; restarting", "actor", child.Id, "failures", n, "after", delay, "reason", fmt.Sprint(reason), "message", fmt.Sprintf("%T", message))
	s.restarts.Inc()
	clock.Or(s.clock).AfterFunc(delay, func() { sup.RestartChildren(child) })
}

// Package supervise is how the node's actors fail. Every Receive defers
// LogPanic, so a panic is logged with its stack and raised again for the
// actor's supervisor to decide (restart, or stop and escalate); nothing is
// recovered to hide a bug. protoactor's mailbox would otherwise log a
// panic at Info, without its stack. Restarts is the strategy the
// partitions supervisor and the move runner restart their children by:
// a back-off that grows with each failure in a window, then a stop.
package supervise

import (
	"fmt"
	"log/slog"
	"runtime/debug"
)

// LogPanic is deferred at the top of a Receive: it logs a panic with its
// stack and the actor's name, then panics again.
func LogPanic(log *slog.Logger, who string) {
	if r := recover(); r != nil {
		log.Error("actor panicked", "actor", who, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		panic(r)
	}
}

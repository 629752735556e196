package partition

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/messages"
)

// A partition at rest (passivation, issue 50). A partition with nothing in
// flight for Config.RestAfter closes its door (Running.rest), tells the
// supervisor (resting), and the supervisor stops it: its close flushes and
// syncs the consumer state and closes the log, as any stop does. What it
// keeps, the supervisor keeps in a few bytes (atRest). The next request
// through Ask finds the door closed and asks the supervisor to wake it
// (Wake): a new actor opens the log and restores leases, acked-ahead
// offsets and the recent acks from the consumer state, exactly as after a
// restart.

// Wake asks the supervisor to start the actor of a partition this node
// owns and that rests, or has none yet; answered Woken.
type Wake struct{ Key messages.PartitionKey }

// Woken answers Wake: Err is empty once the partition's door is open.
type Woken struct{ Err string }

// resting is an actor telling its supervisor that it closed its door to
// rest: the supervisor stops it and keeps oldest, the modification time
// of its oldest sealed segment (ok false: none), to wake it when retention
// has something to remove.
type resting struct {
	key    messages.PartitionKey
	pid    *actor.PID
	oldest time.Time
	sealed bool
}

// atRest is what the supervisor keeps of a resting partition. cold: it
// has rested since the node started (startCold) and its oldest sealed
// segment is not known yet; the retention pass reads it from the
// partition's directory (probeCold).
type atRest struct {
	oldest time.Time
	sealed bool
	cold   bool
}

// restCheck is an actor's own timer: time to see whether it may rest.
// survey: the supervisor's, right after a survey opened the partition
// (Supervisor.survey): rest now if nothing is in flight, idle or not.
type restCheck struct{ survey bool }

// opened is an actor telling its supervisor that its log opened: a wake
// that fails after it is a failure like any other (the supervisor gives up
// on a partition that keeps failing), one before it sends the partition
// back to rest.
type opened struct {
	key messages.PartitionKey
	pid *actor.PID
}

// maxWakes bounds the wakes of one request: a partition that rests again
// before the request gets in (a RestAfter far below a request's trip) is
// refused as not served, which its sender retries.
const maxWakes = 3

// Ask sends msg to partition k's actor on this node and waits for its
// answer, within ctx's deadline and at most timeout. It passes k's door
// (running): a partition at rest is woken first through the supervisor
// (sup); one with no door is sent to as is, a dead letter when no actor
// serves it. A refusal wraps actor.ErrDeadLetter (surely not processed)
// and errs.ErrUnavailable. A nil running sends to the actor's address as
// is.
func Ask(ctx context.Context, root *actor.RootContext, running *Running, sup *actor.PID, k messages.PartitionKey, msg any, timeout time.Duration) (any, error) {
	pid := PID(root.ActorSystem(), k)
	if running == nil {
		return Request(ctx, root, pid, msg, timeout)
	}
	for wakes := 0; ; wakes++ {
		if d := running.enter(k); d != nil {
			res, err := Request(ctx, root, pid, msg, timeout)
			running.leave(d)
			return res, err
		}
		stats, drained, resting := running.closedDoor(k)
		if !resting {
			// No actor and not at rest: not served here, or not started
			// yet. Sent as ever, it is a dead letter, refused at once
			// rather than behind the supervisor's work.
			return Request(ctx, root, pid, msg, timeout)
		}
		switch msg.(type) {
		case *messages.GetStats:
			if stats != nil {
				return stats, nil // what it was as it rested: nothing changed since
			}
		case *messages.Reserve:
			if drained {
				// Nothing to lease: no lease is out at rest, and a record
				// comes only with a commit, which wakes the partition.
				return &messages.Reserved{Status: messages.StatusEmpty}, nil
			}
		}
		if wakes == maxWakes {
			return nil, fmt.Errorf("%T to %s: woken %d times and at rest again: %w: %w", msg, pid.Id, wakes, actor.ErrDeadLetter, errs.ErrUnavailable)
		}
		res, err := Request(ctx, root, sup, Wake{Key: k}, timeout)
		if err != nil {
			// Not sent: the partition's actor never saw it.
			return nil, fmt.Errorf("%T to %s: wake: %w: %w", msg, pid.Id, err, actor.ErrDeadLetter)
		}
		if w := res.(Woken); w.Err != "" {
			return nil, fmt.Errorf("%T to %s: %s: %w: %w", msg, pid.Id, w.Err, actor.ErrDeadLetter, errs.ErrUnavailable)
		}
	}
}

// Request sends msg to a local actor and waits for its answer, within ctx's
// deadline and at most timeout. A context already done is refused with
// its own error; once the wait has begun only the deadline ends it, since
// an actor's answer cannot be withdrawn.
func Request(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%T to %s: %w: %w", msg, pid.Id, err, errs.ErrUnavailable)
	}
	if left, ok := clock.Left(ctx); ok {
		timeout = min(timeout, left)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%T to %s: %w: %w", msg, pid.Id, context.DeadlineExceeded, errs.ErrUnavailable)
	}
	res, err := root.RequestFuture(pid, msg, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("%T to %s: %w: %w", msg, pid.Id, err, errs.ErrUnavailable)
	}
	return res, nil
}

// SupervisorPID is the address of the partitions supervisor on this node.
func SupervisorPID(sys *actor.ActorSystem) *actor.PID {
	return actor.NewPID(sys.Address(), SupervisorName)
}

// armRest schedules the actor's next rest check after d; nothing without
// Config.RestAfter.
func (p *Actor) armRest(ctx actor.Context, d time.Duration) {
	if p.deps.Config.RestAfter <= 0 || p.resting {
		return
	}
	p.lastActive = p.steady.Now()
	self, root := ctx.Self(), ctx.ActorSystem().Root
	if p.restTimer != nil {
		p.restTimer.Stop()
	}
	p.restTimer = p.steady.AfterFunc(d, func() { root.Send(self, restCheck{}) })
}

// checkRest rests the partition once it was idle for RestAfter with
// nothing in flight and no request on its way through its door; otherwise
// it looks again when RestAfter may next have passed. A survey's check
// (survey) rests it at once if it can, and otherwise leaves the timer
// armed at the open to look again.
func (p *Actor) checkRest(ctx actor.Context, survey bool) {
	if p.restTimer == nil || p.resting {
		return
	}
	after := p.deps.Config.RestAfter
	if idle := p.steady.Now().Sub(p.lastActive); idle < after && !survey {
		p.rearmRest(ctx, after-idle)
		return
	}
	// Nothing is leased at rest (quiet), so every offset past the
	// frontier and below the HWM would be delivered: drained is none.
	if !p.quiet() || !p.deps.Running.rest(p.key, p.stats(), p.table.frontier+1 >= p.log.HWM()) {
		if !survey {
			p.rearmRest(ctx, after)
		}
		return
	}
	if survey {
		p.restTimer.Stop() // armed at the open, not yet fired
	}
	oldest, sealed, err := p.log.OldestSealed()
	if err != nil {
		// Not known: woken at the next retention pass to find out.
		p.deps.Logger.Warn("partition at rest: oldest segment unknown", "partition", p.name, "err", err)
		oldest, sealed = time.Time{}, true
	}
	p.resting = true
	p.restTimer = nil
	if p.deps.Metrics.Rests != nil {
		p.deps.Metrics.Rests.Inc()
	}
	ctx.Send(ctx.Parent(), resting{key: p.key, pid: ctx.Self(), oldest: oldest, sealed: sealed})
}

func (p *Actor) rearmRest(ctx actor.Context, d time.Duration) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	p.restTimer = p.steady.AfterFunc(d, func() { root.Send(self, restCheck{}) })
}

// quiet reports whether nothing is in flight that a rest would cut short
// or that lives only in memory: no lease out or record waiting to be
// delivered again, no write, answer or state write pending, no freeze or
// owner read, no move targeting it when it started, no fan-out, no chunk
// read, no hand-over. The consumer state the close writes and syncs holds
// everything else (frontier, acked-ahead offsets, recent acks).
func (p *Actor) quiet() bool {
	g := p.gate
	return p.log != nil && p.table != nil && len(p.table.leases) == 0 && len(p.table.pending) == 0 &&
		len(p.stash) == 0 && len(p.writing) == 0 && p.syncing == nil && !p.writeQueued && len(p.held) == 0 &&
		!g.Closed() && !g.Waiting && !g.Polling && !g.Unconfirmed && !g.Confirming && p.freezer == nil &&
		!p.moving && len(p.readCancels) == 0 && p.fanout == nil && len(p.links) == 0 &&
		len(p.chunkReads) == 0 && p.handover == nil
}

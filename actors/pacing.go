package actors

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/messages"
)

// The freeze pacing of a move's source (seed 003, rule B5): the node's
// partitions share one freeze.Pacer, so that a bulk move off this node arms
// at most MaxNewFreezesPerTick freezes a tick and none while
// MaxFrozenPartitions are frozen. The pacer is an actor (pacerActor), the
// one owner of that freeze.Pacer: a partition tells it of each prepare
// (paceAsk) and parks the prepare (freeze.go: parkPrepare) until the pacer
// grants it with a freezeTurn, or answers it "held" after FreezeHoldFor
// (paceUnpark: its move asks again and keeps its turn); each change of a
// partition's freeze reaches it as a paceFrozen. Between one partition and
// the pacer the messages keep their order, so the pacer never counts a
// freeze that its partition already told it ended.

// freezeTurn wakes a partition whose parked prepare the pacer granted.
type freezeTurn struct{}

// freezeHoldEnd is a parked prepare's FreezeHoldFor timer firing; seq names
// the park it ends.
type freezeHoldEnd struct{ seq uint64 }

// paceAsk is a prepare of key arriving at its partition, parked there until
// the pacer answers with a freezeTurn.
type paceAsk struct{ key messages.PartitionKey }

// paceUnpark is key's parked prepare answered "held": it keeps its turn.
type paceUnpark struct{ key messages.PartitionKey }

// paceFrozen is key's freeze holding until then (armed, re-armed, fenced,
// or opened frozen); a zero until says it no longer holds.
type paceFrozen struct {
	key   messages.PartitionKey
	until time.Time
}

// paceTick is the pacer's own timer: the next tick's room.
type paceTick struct{}

// paceCounts asks for the partitions frozen and the moves held; the answer
// is a paceCountsAnswer.
type paceCounts struct{}

// paceCountsAnswer is the pacer's figures now.
type paceCountsAnswer struct{ frozen, held int }

const pacerName = "pacer"

// pacer is a partition's handle on the node's pacer actor; a nil one paces
// nothing (rigs), and each prepare arms at once.
type pacer struct{ pid *actor.PID }

// ask tells the pacer of a prepare of k and reports whether it may arm at
// once (there is no pacer); otherwise the caller parks it and waits for a
// freezeTurn.
func (pc *pacer) ask(ctx actor.Context, k messages.PartitionKey) bool {
	if pc == nil {
		return true
	}
	ctx.Send(pc.pid, paceAsk{key: k})
	return false
}

// unpark: k's parked prepare was answered "held".
func (pc *pacer) unpark(ctx actor.Context, k messages.PartitionKey) {
	if pc != nil {
		ctx.Send(pc.pid, paceUnpark{key: k})
	}
}

// frozenUntil tells the pacer k's freeze holds until then (zero: it ended).
func (pc *pacer) frozenUntil(ctx actor.Context, k messages.PartitionKey, until time.Time) {
	if pc != nil {
		ctx.Send(pc.pid, paceFrozen{key: k, until: until})
	}
}

// pacerActor owns the node's freeze.Pacer, its tick timer and its gauges.
type pacerActor struct {
	p     *freeze.Pacer[messages.PartitionKey]
	clock clock
	tick  time.Duration
	// wake delivers a freezeTurn to partition k.
	wake func(ctx actor.Context, k messages.PartitionKey)
	// pumping: a tick timer is armed (one at a time, only while a parked
	// prepare waits).
	pumping bool
	// stopped: no timer is armed again.
	stopped bool
	frozen  func(float64)
	held    func(float64)
	log     *slog.Logger
}

// paceConfig is the pacer's part of the node's configuration. The line
// holds at most twice the moves the controller keeps in flight: every
// move in flight may ask this one source, and an aborted move's retry may
// still hold its place.
func paceConfig(c Config) freeze.PaceConfig {
	return freeze.PaceConfig{Tick: c.FreezePaceTick, PerTick: c.MaxNewFreezesPerTick, MaxFrozen: c.MaxFrozenPartitions,
		FreezeTTL: c.Move.FreezeTTL, KeepTurnFor: c.FreezeTurnKeepFor, MaxLine: 2 * c.MaxInFlightMoves}
}

// newPacerActor is the pacer for d's node; its freezeTurns go to the
// partition actors by name.
func newPacerActor(d deps) *pacerActor {
	a := &pacerActor{p: freeze.NewPacer[messages.PartitionKey](paceConfig(d.cfg)), clock: d.cfg.clockOrWall(), tick: d.cfg.FreezePaceTick,
		wake: func(ctx actor.Context, k messages.PartitionKey) {
			ctx.Send(partitionPID(ctx.ActorSystem(), k), freezeTurn{})
		}, log: d.log}
	if d.metrics != nil {
		a.frozen, a.held = d.metrics.partitionsFrozen.Set, d.metrics.movesHeld.Set
	}
	return a
}

func (a *pacerActor) Receive(ctx actor.Context) {
	defer logPanic(a.log, pacerName)
	switch m := ctx.Message().(type) {
	case *actor.Stopping:
		a.stopped = true
	case paceAsk:
		a.asked(ctx, m)
	case paceUnpark:
		a.p.Unpark(a.clock.Now(), m.key)
		a.after(ctx)
	case paceFrozen:
		a.frozenUntil(ctx, m)
	case paceTick:
		a.pumping = false
		a.pump(ctx)
	case paceCounts:
		frozen, held := a.p.Counts(a.clock.Now())
		ctx.Respond(paceCountsAnswer{frozen: frozen, held: held})
	}
}

// asked grants k's prepare now when there is room (the partition's parked
// prepare then arms), with any other the ask let through.
func (a *pacerActor) asked(ctx actor.Context, m paceAsk) {
	ok, wake := a.p.Ask(a.clock.Now(), m.key)
	if ok {
		a.wake(ctx, m.key)
	}
	a.deliver(ctx, wake)
	a.after(ctx)
}

func (a *pacerActor) frozenUntil(ctx actor.Context, m paceFrozen) {
	if m.until.IsZero() {
		a.p.Thaw(m.key)
	} else {
		a.p.Frozen(m.key, m.until)
	}
	a.pump(ctx)
}

func (a *pacerActor) pump(ctx actor.Context) {
	a.deliver(ctx, a.p.Pump(a.clock.Now()))
	a.after(ctx)
}

func (a *pacerActor) deliver(ctx actor.Context, keys []messages.PartitionKey) {
	for _, k := range keys {
		a.wake(ctx, k)
	}
}

// after updates the gauges and arms the tick timer while a parked prepare
// waits for room.
func (a *pacerActor) after(ctx actor.Context) {
	frozen, held := a.p.Counts(a.clock.Now())
	if a.frozen != nil {
		a.frozen(float64(frozen))
		a.held(float64(held))
	}
	if a.pumping || a.stopped || !a.p.Waiting() {
		return
	}
	a.pumping = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	a.clock.AfterFunc(a.tick, func() { root.Send(self, paceTick{}) })
}

package freeze

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/messages"
)

// The freeze pacing of a move's source (seed 003, rule B5): a node's
// partitions share one Pacer, so that a bulk move off the node arms at most
// PerTick freezes a tick and none while MaxFrozen are frozen. PacerActor is
// the one owner of that Pacer: a freeze actor tells it of each prepare
// (PaceAsk) and parks the prepare until the pacer grants it a Turn, or
// answers it "held" after its hold (PaceUnpark: its move asks again and
// keeps its turn); each change of a partition's freeze reaches it as a
// PaceFrozen. Between one freeze actor and the pacer the messages keep
// their order, so the pacer never counts a freeze that its partition
// already told it ended.

// PacerName is the pacer's name under the node's actor system root.
const PacerName = "pacer"

// PaceAsk is a prepare of Key arriving at its freeze actor, Freeze, parked
// there until the pacer answers with a Turn.
type PaceAsk struct {
	Key    messages.PartitionKey
	Freeze *actor.PID
}

// PaceUnpark is Key's parked prepare answered "held": it keeps its turn.
type PaceUnpark struct{ Key messages.PartitionKey }

// PaceFrozen is Key's freeze holding until Until (armed, re-armed, fenced,
// or opened frozen); a zero Until says it no longer holds.
type PaceFrozen struct {
	Key   messages.PartitionKey
	Until time.Time
}

// PaceCounts asks for the partitions frozen and the moves held; the answer
// is a PaceCountsAnswer.
type PaceCounts struct{}

// PaceCountsAnswer is the pacer's figures now.
type PaceCountsAnswer struct{ Frozen, Held int }

// paceTick is the pacer's own timer: the next tick's room.
type paceTick struct{}

// PacerDeps is what the pacer needs of its node.
type PacerDeps struct {
	Config PaceConfig
	Clock  clock.Clock
	// Frozen and Held set the node's gauges of partitions frozen and
	// moves held; nil sets none.
	Frozen, Held func(float64)
	Log          *slog.Logger
}

// PacerActor owns the node's Pacer, its tick timer and its gauges.
type PacerActor struct {
	d PacerDeps
	p *Pacer[messages.PartitionKey]
	// freezes is where each waiting prepare's Turn goes: the freeze actor
	// that asked, until it is granted or its freeze ends (a held move keeps
	// its turn, and its place here). A freeze actor tells the pacer its
	// freeze ended as it stops, so this holds no more than the partitions
	// with a freeze actor.
	freezes map[messages.PartitionKey]*actor.PID
	// pumping: a tick timer is armed (one at a time, only while a parked
	// prepare waits).
	pumping bool
	// stopped: no timer is armed again.
	stopped bool
}

// NewPacerActor is the pacer for d's node.
func NewPacerActor(d PacerDeps) *PacerActor {
	return &PacerActor{d: d, p: NewPacer[messages.PartitionKey](d.Config), freezes: map[messages.PartitionKey]*actor.PID{}}
}

// Receive takes one message at a time.
func (a *PacerActor) Receive(ctx actor.Context) {
	defer supervise.LogPanic(a.d.Log, PacerName)
	switch m := ctx.Message().(type) {
	case *actor.Stopping:
		a.stopped = true
	case PaceAsk:
		a.asked(ctx, m)
	case PaceUnpark:
		a.p.Unpark(a.d.Clock.Now(), m.Key)
		a.after(ctx)
	case PaceFrozen:
		a.frozenUntil(ctx, m)
	case paceTick:
		a.pumping = false
		a.pump(ctx)
	case PaceCounts:
		frozen, held := a.p.Counts(a.d.Clock.Now())
		ctx.Respond(PaceCountsAnswer{Frozen: frozen, Held: held})
	}
}

// asked grants the prepare now when there is room (its freeze actor then
// arms it), with any other the ask let through.
func (a *PacerActor) asked(ctx actor.Context, m PaceAsk) {
	a.freezes[m.Key] = m.Freeze
	ok, wake := a.p.Ask(a.d.Clock.Now(), m.Key)
	if ok {
		a.deliver(ctx, []messages.PartitionKey{m.Key})
	}
	a.deliver(ctx, wake)
	a.after(ctx)
}

func (a *PacerActor) frozenUntil(ctx actor.Context, m PaceFrozen) {
	if m.Until.IsZero() {
		a.p.Thaw(m.Key)
		delete(a.freezes, m.Key)
	} else {
		a.p.Frozen(m.Key, m.Until)
	}
	a.pump(ctx)
}

func (a *PacerActor) pump(ctx actor.Context) {
	a.deliver(ctx, a.p.Pump(a.d.Clock.Now()))
	a.after(ctx)
}

// deliver sends each granted prepare its Turn. A grant with no freeze
// actor to take it (gone meanwhile) is handed back at once, as a freeze
// actor with nothing parked hands it back.
func (a *PacerActor) deliver(ctx actor.Context, keys []messages.PartitionKey) {
	for _, k := range keys {
		pid := a.freezes[k]
		delete(a.freezes, k)
		if pid == nil {
			a.p.Thaw(k)
			continue
		}
		ctx.Send(pid, Turn{})
	}
}

// after updates the gauges and arms the tick timer while a parked prepare
// waits for room.
func (a *PacerActor) after(ctx actor.Context) {
	frozen, held := a.p.Counts(a.d.Clock.Now())
	if a.d.Frozen != nil {
		a.d.Frozen(float64(frozen))
		a.d.Held(float64(held))
	}
	if a.pumping || a.stopped || !a.p.Waiting() {
		return
	}
	a.pumping = true
	self, root := ctx.Self(), ctx.ActorSystem().Root
	a.d.Clock.AfterFunc(a.d.Config.Tick, func() { root.Send(self, paceTick{}) })
}

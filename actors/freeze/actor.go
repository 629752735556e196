package freeze

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/messages"
)

// The freeze actor: a child of the partition actor, spawned with the
// partition's first prepare (or opened frozen, Reopen), living as long as
// its parent. It carries out HoldStep: it takes the destination's handoff
// requests the partition forwards (Request), asks the node's pacer for a
// prepare's turn and parks it meanwhile (rule B5), keeps the TTL timer, and
// tells its parent's gate when a freeze closes, lapses or is released.
// Its timers run on Deps.Clock and come back as messages, so every
// decision runs in its mailbox.

// Request is a destination's handoff request, forwarded by the partition
// actor with the original sender, so the freeze actor answers it directly.
// LogHWM is the partition's HWM as it forwarded a fence (rule F9): the gate
// pins it while the freeze it reported holds.
type Request struct {
	Handoff *messages.Handoff
	LogHWM  int64
}

// Ask asks the freeze actor for its Status (tests, and the moves summary's
// diagnostics); the partition actor forwards it, or answers a zero Status
// without a freeze actor.
type Ask struct{}

// Status is the freeze actor's state now.
type Status struct {
	Token  string
	Until  time.Time
	Parked bool
}

// Turn is the pacer granting a parked prepare its freeze.
type Turn struct{}

// expire is the TTL timer firing; holdEnd is a parked prepare's
// FreezeHoldFor timer firing, seq naming the park it ends.
type (
	expire  struct{}
	holdEnd struct{ seq uint64 }
)

// Deps is what a freeze actor needs of its partition and node.
type Deps struct {
	Config Config
	Clock  clock.Clock
	// Key is the partition's, as the pacer knows it.
	Key messages.PartitionKey
	// Pacer is the node's pacer actor; nil paces nothing (rigs), and each
	// prepare arms at once.
	Pacer *actor.PID
	// HoldFor is how long a parked prepare waits for its turn before it
	// is answered "held" (FreezeHoldFor, at most half the asker's
	// timeout).
	HoldFor time.Duration
	// Nonce tells the partition actor's lives apart: tokens never repeat
	// across its restarts.
	Nonce uint64
	Log   *slog.Logger
	Name  string
	Knobs Knobs
}

// Knobs are a test's hooks into a freeze actor; zero in production.
type Knobs struct {
	// BeforeStep runs before each event the hold steps; it may panic, as
	// a bug would.
	BeforeStep func(ev any)
}

// Actor is the freeze actor.
type Actor struct {
	d Deps
	h Hold
	// parked is a prepare waiting for the pacer's turn (rule B5),
	// parkedFrom its destination; parkSeq names the latest park.
	parked     *actor.PID
	parkedFrom string
	parkSeq    uint64
	// pacedUntil is what the pacer was last told (zero: not frozen).
	pacedUntil time.Time
	stopped    bool
}

// New is a freeze actor for d's partition.
func New(d Deps) *Actor { return &Actor{d: d} }

// Receive takes one message at a time.
func (a *Actor) Receive(ctx actor.Context) {
	defer supervise.LogPanic(a.d.Log, a.d.Name)
	switch m := ctx.Message().(type) {
	case *actor.Stopping:
		a.stop(ctx)
	case Request:
		a.request(ctx, m)
	case Turn:
		a.turn(ctx)
	case holdEnd:
		a.holdEnd(ctx, m)
	case expire:
		a.step(ctx, nil, Expire{})
	case Pinned:
		a.step(ctx, nil, m)
	case Reopened:
		a.step(ctx, nil, m)
	case Ask:
		ctx.Respond(Status{Token: a.h.Token, Until: a.h.Until, Parked: a.parked != nil})
	}
}

func (a *Actor) request(ctx actor.Context, m Request) {
	h := m.Handoff
	switch h.Op {
	case messages.HandoffPrepare:
		if a.d.Pacer == nil {
			a.step(ctx, ctx.Sender(), Prepare{Asker: ctx.Sender(), Nonce: a.d.Nonce, From: h.From})
			return
		}
		ctx.Send(a.d.Pacer, PaceAsk{Key: a.d.Key, Freeze: ctx.Self()})
		a.park(ctx, h.From)
	case messages.HandoffRearm:
		a.step(ctx, ctx.Sender(), Rearm{Token: h.Token})
	case messages.HandoffFence:
		a.step(ctx, ctx.Sender(), Fence{Token: h.Token, HWM: h.HWM, LogHWM: m.LogHWM})
	case messages.HandoffRelease:
		a.step(ctx, ctx.Sender(), Release{Token: h.Token})
	default:
		ctx.Respond(&messages.HandoffResult{Status: messages.StatusFailed, Err: fmt.Sprintf("unknown handoff op %d", h.Op)})
	}
}

// park holds a prepare until the pacer grants it (rule B5): it waits here
// for a Turn, or is answered "held" after HoldFor. A newer prepare
// replaces an older one, which is answered "held" now.
func (a *Actor) park(ctx actor.Context, from string) {
	if a.parked != nil {
		ctx.Send(a.parked, heldResult())
	}
	a.parked, a.parkedFrom = ctx.Sender(), from
	a.parkSeq++
	self, root, end := ctx.Self(), ctx.ActorSystem().Root, holdEnd{seq: a.parkSeq}
	a.d.Clock.AfterFunc(a.d.HoldFor, func() { root.Send(self, end) })
}

// turn is the pacer granting the parked prepare its freeze. With no
// prepare parked (it was answered held meanwhile) the grant is handed
// back at once.
func (a *Actor) turn(ctx actor.Context) {
	if a.parked == nil {
		a.pacedUntil = time.Time{}
		ctx.Send(a.d.Pacer, PaceFrozen{Key: a.d.Key})
		return
	}
	asker := a.parked
	a.parked = nil
	a.pacedUntil = time.Time{} // the pacer counts the grant; the step below records the freeze
	a.step(ctx, asker, Prepare{Asker: asker, Nonce: a.d.Nonce, From: a.parkedFrom})
}

// holdEnd answers a prepare parked too long "held": its move asks again
// and keeps its turn meanwhile.
func (a *Actor) holdEnd(ctx actor.Context, m holdEnd) {
	if a.parked == nil || m.seq != a.parkSeq {
		return
	}
	ctx.Send(a.parked, heldResult())
	a.parked = nil
	ctx.Send(a.d.Pacer, PaceUnpark{Key: a.d.Key})
}

func heldResult() *messages.HandoffResult {
	return &messages.HandoffResult{Status: messages.StatusHeld, Err: "freeze held by the source's pacing; ask again"}
}

// step feeds one event to the hold and carries out what it decides;
// replyTo is whom an answer goes to (nil: the event answers nobody).
func (a *Actor) step(ctx actor.Context, replyTo *actor.PID, ev any) {
	if a.d.Knobs.BeforeStep != nil {
		a.d.Knobs.BeforeStep(ev)
	}
	var fx []any
	a.h, fx = HoldStep(a.d.Config, a.h, a.d.Clock.Now(), ev)
	for _, f := range fx {
		switch f := f.(type) {
		case Close, Lapsed, Released:
			ctx.Send(ctx.Parent(), f)
		case Answer:
			a.answer(ctx, replyTo, &messages.HandoffResult{Status: messages.StatusOK, Token: f.Token})
		case Gone:
			a.answer(ctx, replyTo, &messages.HandoffResult{Status: messages.StatusGone, Err: f.Why})
		case Timer:
			self, root := ctx.Self(), ctx.ActorSystem().Root
			a.d.Clock.AfterFunc(f.At.Sub(a.d.Clock.Now()), func() { root.Send(self, expire{}) })
		case Paced:
			a.pace(ctx, f.Until)
		default:
			panic(fmt.Sprintf("partition %s: freeze effect %T not carried out", a.d.Name, f))
		}
	}
}

func (a *Actor) answer(ctx actor.Context, to *actor.PID, r *messages.HandoffResult) {
	if to != nil {
		ctx.Send(to, r)
	}
}

// pace tells the pacer when this partition's freeze holds until, each time
// that changes (rule B5 counts frozen partitions).
func (a *Actor) pace(ctx actor.Context, until time.Time) {
	if a.d.Pacer == nil || a.stopped || until.Equal(a.pacedUntil) {
		return
	}
	a.pacedUntil = until
	ctx.Send(a.d.Pacer, PaceFrozen{Key: a.d.Key, Until: until})
}

// stop ends the freeze with the partition actor (a restarted one opens
// frozen again if a move still targets it): a parked prepare is answered
// "held", and the pacer hears the freeze ended.
func (a *Actor) stop(ctx actor.Context) {
	if a.parked != nil {
		ctx.Send(a.parked, heldResult())
		a.parked = nil
	}
	if a.d.Pacer != nil {
		ctx.Send(a.d.Pacer, PaceFrozen{Key: a.d.Key})
	}
	a.stopped = true
}

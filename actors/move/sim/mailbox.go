package sim

import (
	"fmt"
	"time"

	"github.com/naradmq/narad/actors/freeze"
)

// The two mailboxes of a freeze: the partition actor's and its freeze
// actor's (actors/freeze: the gate in one, the hold in the other). A
// message between them waits in the receiver's mailbox behind whatever is
// there, so it arrives some time later (mailboxLag), in the order it was
// sent, while everything else that reaches either actor (a commit, a
// destination's request, a timer) may come between.

// mailboxLag bounds how long a message between the two waits.
const mailboxLag = 3 * time.Millisecond

// mailbox is one direction's queue: the instant its last message arrives,
// so none overtakes another.
type mailbox struct{ last time.Duration }

// send delivers fn after a drawn lag, never before the one sent before it.
func (m *mailbox) send(w *world, fn func()) {
	at := max(w.now+w.between(10*time.Microsecond, mailboxLag), m.last)
	m.last = at
	w.at(at-w.now, fn)
}

// toFreeze sends the freeze actor a message, lost if either actor is gone
// by then (they end together).
func (pa *partActor) toFreeze(fn func()) {
	pa.fz.inbox.send(pa.n.w, func() {
		if !pa.closed {
			fn()
		}
	})
}

// toGate sends the partition actor a message from its freeze actor.
func (fz *fzActor) toGate(fn func()) {
	pa := fz.pa
	pa.gateInbox.send(pa.n.w, func() {
		if !pa.closed {
			fn()
		}
	})
}

// fzActor is a partition's freeze actor: the real hold (freeze.HoldStep),
// its TTL timer and its turn at the node's pacing.
type fzActor struct {
	pa    *partActor
	h     freeze.Hold
	nonce uint64
	// inbox is the partition actor's messages to this one.
	inbox mailbox
	// lapsed is the token of the last freeze the hold lapsed.
	lapsed string
}

// lapsedOrDue reports whether the hold lapsed the freeze token names, or
// holds it past its TTL (the lapse due, not yet found).
func (fz *fzActor) lapsedOrDue(token string, now time.Time) bool {
	return token == fz.lapsed || (token == fz.h.Token && !fz.h.Holds(now))
}

// request is a destination's handoff request, forwarded by the partition.
func (fz *fzActor) request(ev any, reply func(any)) {
	pa, n := fz.pa, fz.pa.n
	if e, ok := ev.(freeze.Prepare); ok {
		now := base.Add(n.w.now)
		if ok, _ := n.pacer.Ask(now, pa.p); !ok {
			// Held (rule B5): answered at once here rather than parked;
			// the move asks again after RetryAfter and keeps its turn.
			n.pacer.Unpark(now, pa.p)
			n.w.stats.Held++
			n.w.note("held", int64(n.index), int64(pa.p))
			reply(handoffAnswer{})
			return
		}
		e.Asker, e.Nonce = reply, fz.nonce
		ev = e
	}
	fz.step(reply, ev)
}

// step feeds one event to the hold and carries out what it decides; reply
// answers the request being stepped (nil: none).
func (fz *fzActor) step(reply func(any), ev any) {
	pa, w := fz.pa, fz.pa.n.w
	now := base.Add(w.now)
	var fx []any
	fz.h, fx = freeze.HoldStep(gateCfg, fz.h, now, ev)
	for _, f := range fx {
		switch f := f.(type) {
		case freeze.Close:
			fz.toGate(func() {
				pa.step(freeze.Close{Token: f.Token, Asker: f.Asker, Partition: pa.pipeline()})
				if w.cfg.Breaks.GateClock {
					w.at(gateCfg.FreezeTTL, func() {
						if !pa.closed && pa.gate.Token == f.Token {
							pa.step(freeze.Lapsed{Token: f.Token})
						}
					})
				}
			})
		case freeze.Lapsed:
			fz.lapsed = f.Token
			fz.toGate(func() { pa.step(f) })
		case freeze.Released:
			fz.toGate(func() { pa.step(f) })
		case freeze.Answer:
			reply(handoffAnswer{ok: true, token: f.Token})
		case freeze.Gone:
			reply(handoffAnswer{gone: true})
		case freeze.Timer:
			w.at(f.At.Sub(now), func() {
				if !pa.closed {
					fz.step(nil, freeze.Expire{})
				}
			})
		case freeze.Paced:
			if f.Until.IsZero() {
				pa.n.pacer.Thaw(pa.p)
			} else {
				pa.n.pacer.Frozen(pa.p, f.Until)
			}
		default:
			panic(fmt.Sprintf("sim: freeze actor effect %T not carried out", f))
		}
	}
}

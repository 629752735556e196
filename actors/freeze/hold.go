package freeze

import (
	"fmt"
	"time"
)

// Hold is the freeze actor's state: the freeze a destination holds on this
// partition. The zero value holds nothing.
type Hold struct {
	// Token names the freeze a prepare armed; "" once it lapsed or was
	// released. Seq counts the prepares this actor armed, so a token never
	// repeats within a nonce.
	Token string
	Seq   uint64
	// Until is when the freeze lapses unless renewed (rule F5).
	Until time.Time
	// Reported: the gate reported Token's HWM to its asker (Pinned).
	Reported bool
	// Holder is the destination whose prepare armed the freeze: while a
	// reported freeze holds, only it may prepare again (Prepare.From).
	Holder string
}

// Holds reports whether the freeze is armed and has not lapsed.
func (h Hold) Holds(now time.Time) bool { return h.Token != "" && now.Before(h.Until) }

// active reports whether token names the freeze that holds now.
func (h Hold) active(token string, now time.Time) bool {
	return token != "" && token == h.Token && h.Holds(now)
}

// Events the freeze actor feeds to HoldStep: a destination's handoff
// requests (forwarded by the partition actor), its own timer, and the
// gate's messages.
type (
	// Prepare is PrepareHandoff, granted its turn by the pacing: arm a
	// fresh freeze, which closes the gate. Nonce makes the token unique
	// across the partition actor's restarts.
	Prepare struct {
		Asker any
		Nonce uint64
		// From names the destination asking. While a freeze another
		// destination was reported holds, the prepare is refused: that
		// move may have fenced and proposed its flip, which counts on
		// this freeze holding until it commits, and a prepare of a move
		// aborted meanwhile (its destination cut off, unaware) would take
		// the freeze over and release it. "" is a destination that does
		// not say (an older release): it takes over, as before.
		From string
	}
	// Rearm presents a token to extend its freeze (rule F6).
	Rearm struct{ Token string }
	// Fence presents a token with the HWM of the destination's copy;
	// LogHWM is the partition's HWM as the partition actor forwarded the
	// fence (rule F9).
	Fence struct {
		Token       string
		HWM, LogHWM int64
	}
	// Release lifts the freeze a token names.
	Release struct{ Token string }
	// Expire is the freeze actor's TTL timer firing (Timer).
	Expire struct{}
)

// Effects of HoldStep the freeze actor carries out. Close, Lapsed and
// Released are messages to the partition actor's gate.
type (
	// Answer answers the handoff request OK, with Token ("" for a
	// release).
	Answer struct{ Token string }
	// Gone answers the handoff request 409: that freeze is no longer
	// active, or the HWM is not the copy's.
	Gone struct{ Why string }
	// Timer asks for an Expire at At: the freeze lapses then unless
	// renewed meanwhile.
	Timer struct{ At time.Time }
	// Paced tells the node's freeze pacing the freeze holds until Until; a
	// zero Until says it ended (rule B5 counts frozen partitions).
	Paced struct{ Until time.Time }
)

// HoldStep is the freeze actor's transition function: the next hold and the
// effects to carry out, given the hold, the caller's now and an event.
func HoldStep(c Config, h Hold, now time.Time, ev any) (Hold, []any) {
	var lapse []any
	if h.Token != "" && !h.Holds(now) {
		// Lapsed (rules F5, F12): from here on the token renews nothing,
		// and only then may the gate open.
		lapse = []any{Lapsed{Token: h.Token}, Paced{}}
		h.Token, h.Reported = "", false
	}
	h, fx := holdStep(c, h, now, ev)
	return h, append(lapse, fx...)
}

func holdStep(c Config, h Hold, now time.Time, ev any) (Hold, []any) {
	switch e := ev.(type) {
	case Prepare:
		if h.Reported && h.Holds(now) && e.From != "" && h.Holder != "" && e.From != h.Holder {
			return h, []any{Gone{Why: "frozen for another destination's move"}}
		}
		// rules F1, F5: a fresh token; the gate closes for it.
		h.Seq++
		h.Token, h.Until, h.Reported, h.Holder = fmt.Sprintf("%x-%x", e.Nonce, h.Seq), now.Add(c.FreezeTTL), false, e.From
		return h, []any{Close{Token: h.Token, Asker: e.Asker}, Timer{At: h.Until}, Paced{Until: h.Until}}
	case Reopened:
		// The gate opened frozen (Reopen); the hold keeps its time.
		h.Token, h.Until, h.Reported, h.Holder = e.Token, now.Add(c.FreezeTTL), true, ""
		return h, []any{Timer{At: h.Until}, Paced{Until: h.Until}}
	case Pinned:
		if h.active(e.Token, now) {
			h.Reported = true
		}
	case Rearm:
		// Presenting a token extends the freeze it names and never arms a
		// new one (rule F6).
		if !h.active(e.Token, now) {
			return h, []any{Gone{Why: "that freeze is no longer active"}}
		}
		h.Until = now.Add(c.FreezeTTL)
		return h, []any{Answer{Token: e.Token}, Timer{At: h.Until}, Paced{Until: h.Until}}
	case Fence:
		// rule F9: the freeze still holds and the HWM is the copy's; the
		// fence renews the TTL.
		if !h.active(e.Token, now) {
			return h, []any{Gone{Why: "that freeze is no longer active"}}
		}
		if e.LogHWM != e.HWM {
			return h, []any{Gone{Why: fmt.Sprintf("high watermark moved: %d, the copy has %d", e.LogHWM, e.HWM)}}
		}
		h.Until = now.Add(c.FreezeTTL)
		return h, []any{Answer{Token: e.Token}, Timer{At: h.Until}, Paced{Until: h.Until}}
	case Release:
		if e.Token == "" || e.Token != h.Token {
			return h, []any{Answer{}}
		}
		h.Token, h.Reported = "", false
		return h, []any{Released{Token: e.Token}, Paced{}, Answer{}}
	case Expire:
		// The lapse, if due, was found above; an earlier Until's timer
		// finds a renewed freeze and does nothing.
	}
	return h, nil
}

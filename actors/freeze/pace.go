package freeze

import (
	"fmt"
	"slices"
	"time"
)

// Pacer paces the freezes one node arms as the source of moves (seed 003,
// rule B5): at most PerTick new freezes in a tick, and none while
// MaxFrozen of its partitions are frozen. A bulk move of thousands of
// partitions off a node would otherwise freeze them all at once, and every
// frozen partition refuses writes until its move flips.
//
// A prepare the pacer cannot grant waits in a line, parked at the source
// (Park: its asker is present and is granted as soon as there is room,
// in line order). A parked prepare that waited too long is answered
// "held" (Unpark) and keeps its place for KeepTurnFor: when its move asks
// again it is served before the moves that asked after it (a held move
// keeps its turn).
//
// Pacer is pure: the caller passes the time and carries out the grants
// it returns (waking the parked prepares). It is not safe for concurrent
// use; the node's partitions share one under a mutex.
type Pacer[K comparable] struct {
	cfg    PaceConfig
	tick   int64 // the tick armed counts in
	armed  int
	frozen map[K]time.Time // partition -> when its freeze lapses
	line   []turn[K]
	// inLine holds the keys of line, so that the thaw of a partition not
	// waiting (most of them) costs no walk; expireAt is no later than
	// the first lapse or kept place to end, so that expire walks nothing
	// before it. At a source handing off thousands of partitions these
	// walks, at every freeze change, were a twentieth of its CPU.
	inLine   map[K]struct{}
	expireAt time.Time
}

// PaceConfig bounds the freezes of one node.
type PaceConfig struct {
	// Tick is the pacing tick; PerTick new freezes are granted per tick.
	Tick    time.Duration
	PerTick int
	// MaxFrozen: no freeze is granted while this many partitions are
	// frozen.
	MaxFrozen int
	// FreezeTTL is how long a granted freeze counts as frozen until the
	// partition reports its own lapse time (Frozen) or its end (Thaw).
	FreezeTTL time.Duration
	// KeepTurnFor is how long a held move keeps its place in the line
	// without asking again.
	KeepTurnFor time.Duration
	// MaxLine bounds the line: a prepare beyond it is held without a
	// place (it asks again later).
	MaxLine int
}

// Validate reports the first field out of range.
func (c PaceConfig) Validate() error {
	if c.Tick <= 0 || c.PerTick < 1 || c.MaxFrozen < c.PerTick || c.FreezeTTL <= 0 || c.KeepTurnFor <= 0 || c.MaxLine < 1 {
		return fmt.Errorf("pace config %+v: tick, per tick, max frozen (at least per tick), freeze ttl, keep turn and max line must be positive", c)
	}
	return nil
}

// turn is one prepare waiting in the line.
type turn[K comparable] struct {
	key K
	// parked: its asker waits at the source now; otherwise it keeps its
	// place until asked+KeepTurnFor.
	parked bool
	asked  time.Time
}

// NewPacer returns a pacer with nothing frozen and nobody waiting.
func NewPacer[K comparable](c PaceConfig) *Pacer[K] {
	return &Pacer[K]{cfg: c, frozen: map[K]time.Time{}, inLine: map[K]struct{}{}}
}

// Ask is a prepare for k arriving: it joins the line (or takes up its
// place there again) parked, and the line is served. It reports whether
// k was granted its freeze now, and the other parked prepares granted
// with it, which the caller wakes. A partition already frozen is granted
// at once: a new prepare replaces its freeze and freezes nothing more.
func (p *Pacer[K]) Ask(now time.Time, k K) (granted bool, wake []K) {
	p.expire(now)
	if _, ok := p.frozen[k]; ok {
		p.drop(k)
		return true, p.serve(now)
	}
	if i := p.find(k); i >= 0 {
		p.line[i].parked, p.line[i].asked = true, now
	} else if len(p.line) < p.cfg.MaxLine {
		p.line = append(p.line, turn[K]{key: k, parked: true, asked: now})
		p.inLine[k] = struct{}{}
		p.expireBy(now.Add(p.cfg.KeepTurnFor))
	} else {
		return false, p.serve(now)
	}
	for _, g := range p.serve(now) {
		if g == k {
			granted = true
			continue
		}
		wake = append(wake, g)
	}
	return granted, wake
}

// Pump serves the line: the parked prepares granted now, in line order.
// The caller runs it every tick while Waiting.
func (p *Pacer[K]) Pump(now time.Time) []K {
	p.expire(now)
	return p.serve(now)
}

// Unpark is k's parked prepare answered "held": it keeps its place for
// KeepTurnFor from now.
func (p *Pacer[K]) Unpark(now time.Time, k K) {
	if i := p.find(k); i >= 0 {
		p.line[i].parked, p.line[i].asked = false, now
	}
}

// Frozen records that k's freeze holds until until (armed, re-armed or
// fenced; or a partition that opened frozen).
func (p *Pacer[K]) Frozen(k K, until time.Time) {
	p.frozen[k] = until
	p.expireBy(until)
}

// expireBy makes expire look again no later than t.
func (p *Pacer[K]) expireBy(t time.Time) {
	if p.expireAt.IsZero() || t.Before(p.expireAt) {
		p.expireAt = t
	}
}

// Thaw records that k is no longer frozen (released, handed over,
// closed), and that it no longer waits: it frees its room at once.
func (p *Pacer[K]) Thaw(k K) {
	delete(p.frozen, k)
	p.drop(k)
}

// Counts reports the partitions frozen and the prepares waiting, as of
// now.
func (p *Pacer[K]) Counts(now time.Time) (frozen, held int) {
	p.expire(now)
	return len(p.frozen), len(p.line)
}

// Waiting reports whether a parked prepare waits for room: the caller
// pumps every tick while it does.
func (p *Pacer[K]) Waiting() bool {
	return slices.ContainsFunc(p.line, func(t turn[K]) bool { return t.parked })
}

// serve grants the parked prepares at the head of the line while there is
// room in this tick and under MaxFrozen; a prepare not parked keeps its
// place without taking room.
func (p *Pacer[K]) serve(now time.Time) []K {
	if t := now.UnixNano() / int64(p.cfg.Tick); t != p.tick {
		p.tick, p.armed = t, 0
	}
	var granted []K
	kept := p.line[:0]
	for _, t := range p.line {
		if t.parked && p.armed < p.cfg.PerTick && len(p.frozen) < p.cfg.MaxFrozen {
			p.armed++
			p.Frozen(t.key, now.Add(p.cfg.FreezeTTL))
			delete(p.inLine, t.key)
			granted = append(granted, t.key)
			continue
		}
		kept = append(kept, t)
	}
	clear(p.line[len(kept):])
	p.line = kept
	return granted
}

// expire forgets the freezes that lapsed and the places kept too long.
// Nothing lapses before expireAt; the walk sets it to the next lapse.
func (p *Pacer[K]) expire(now time.Time) {
	if !p.expireAt.IsZero() && now.Before(p.expireAt) {
		return
	}
	p.expireAt = time.Time{}
	for k, until := range p.frozen {
		if !now.Before(until) {
			delete(p.frozen, k)
			continue
		}
		p.expireBy(until)
	}
	// A parked prepare is answered "held" well before KeepTurnFor
	// (FreezeHoldFor is shorter); one still parked that long belongs to a
	// partition that stopped without thawing.
	p.line = slices.DeleteFunc(p.line, func(t turn[K]) bool {
		end := t.asked.Add(p.cfg.KeepTurnFor)
		if !now.Before(end) {
			delete(p.inLine, t.key)
			return true
		}
		p.expireBy(end)
		return false
	})
}

func (p *Pacer[K]) find(k K) int {
	if _, ok := p.inLine[k]; !ok {
		return -1
	}
	return slices.IndexFunc(p.line, func(t turn[K]) bool { return t.key == k })
}

func (p *Pacer[K]) drop(k K) {
	if i := p.find(k); i >= 0 {
		p.line = slices.Delete(p.line, i, i+1)
		delete(p.inLine, k)
	}
}

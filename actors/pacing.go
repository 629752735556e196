package actors

import (
	"sync"
	"time"

	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/messages"
)

// The freeze pacing of a move's source (seed 003, rule B5): the node's
// partitions share one freeze.Pacer, so that a bulk move off this node arms
// at most MaxNewFreezesPerTick freezes a tick and none while
// MaxFrozenPartitions are frozen. A prepare the pacer holds is parked in
// its partition actor (partition.go: parkPrepare) until the pacer wakes it
// with a freezeTurn, or answered "held" after FreezeHoldFor; its move asks
// again and keeps its turn.
//
// The pacer is shared state outside the actors, like the WAL: one mutex,
// held for a few microseconds per prepare, freeze change and tick.

// freezeTurn wakes a partition whose parked prepare the pacer granted.
type freezeTurn struct{}

// freezeHoldEnd is a parked prepare's FreezeHoldFor timer firing; seq names
// the park it ends.
type freezeHoldEnd struct{ seq uint64 }

type freezePacer struct {
	mu    sync.Mutex
	p     *freeze.Pacer[messages.PartitionKey]
	clock clock
	tick  time.Duration
	// wake delivers a freezeTurn to a partition actor; set once the actor
	// system exists.
	wake func(messages.PartitionKey)
	// pumping: a tick timer is armed (one at a time, only while a parked
	// prepare waits).
	pumping bool
	closed  bool
	frozen  func(float64)
	held    func(float64)
}

// paceConfig is the pacer's part of the node's configuration. The line
// holds at most twice the moves the controller keeps in flight: every
// move in flight may ask this one source, and an aborted move's retry may
// still hold its place.
func paceConfig(c Config) freeze.PaceConfig {
	return freeze.PaceConfig{Tick: c.FreezePaceTick, PerTick: c.MaxNewFreezesPerTick, MaxFrozen: c.MaxFrozenPartitions,
		FreezeTTL: c.Move.FreezeTTL, KeepTurnFor: c.FreezeTurnKeepFor, MaxLine: 2 * c.MaxInFlightMoves}
}

func newFreezePacer(c Config, m *nodeMetrics) *freezePacer {
	fp := &freezePacer{p: freeze.NewPacer[messages.PartitionKey](paceConfig(c)), clock: c.clockOrWall(), tick: c.FreezePaceTick}
	if m != nil {
		fp.frozen, fp.held = m.partitionsFrozen.Set, m.movesHeld.Set
	}
	return fp
}

// ask is a prepare of k arriving: true when it may arm its freeze now;
// otherwise the caller parks it.
func (fp *freezePacer) ask(k messages.PartitionKey) bool {
	if fp == nil {
		return true
	}
	fp.mu.Lock()
	ok, wake := fp.p.Ask(fp.clock.Now(), k)
	fp.afterLocked()
	fp.mu.Unlock()
	fp.deliver(wake)
	return ok
}

// unpark: k's parked prepare was answered "held"; it keeps its turn.
func (fp *freezePacer) unpark(k messages.PartitionKey) {
	if fp == nil {
		return
	}
	fp.mu.Lock()
	fp.p.Unpark(fp.clock.Now(), k)
	fp.afterLocked()
	fp.mu.Unlock()
}

// frozenUntil records k's freeze (armed, re-armed, fenced, or opened
// frozen); a zero until records that it no longer holds.
func (fp *freezePacer) frozenUntil(k messages.PartitionKey, until time.Time) {
	if fp == nil {
		return
	}
	fp.mu.Lock()
	if until.IsZero() {
		fp.p.Thaw(k)
	} else {
		fp.p.Frozen(k, until)
	}
	wake := fp.p.Pump(fp.clock.Now())
	fp.afterLocked()
	fp.mu.Unlock()
	fp.deliver(wake)
}

// counts reports the partitions frozen and the moves held.
func (fp *freezePacer) counts() (frozen, held int) {
	if fp == nil {
		return 0, 0
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.p.Counts(fp.clock.Now())
}

// close stops the tick timer; the partitions are stopping.
func (fp *freezePacer) close() {
	if fp == nil {
		return
	}
	fp.mu.Lock()
	fp.closed = true
	fp.mu.Unlock()
}

// afterLocked updates the gauges and arms the tick timer while a parked
// prepare waits for room.
func (fp *freezePacer) afterLocked() {
	frozen, held := fp.p.Counts(fp.clock.Now())
	if fp.frozen != nil {
		fp.frozen(float64(frozen))
		fp.held(float64(held))
	}
	if fp.pumping || fp.closed || !fp.p.Waiting() {
		return
	}
	fp.pumping = true
	fp.clock.AfterFunc(fp.tick, fp.pump)
}

func (fp *freezePacer) pump() {
	fp.mu.Lock()
	fp.pumping = false
	wake := fp.p.Pump(fp.clock.Now())
	fp.afterLocked()
	fp.mu.Unlock()
	fp.deliver(wake)
}

func (fp *freezePacer) deliver(keys []messages.PartitionKey) {
	if fp.wake == nil {
		return
	}
	for _, k := range keys {
		fp.wake(k)
	}
}

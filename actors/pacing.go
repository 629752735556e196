package actors

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/freeze"
)

// The node's freeze pacing (seed 003, rule B5) is freeze.PacerActor, spawned
// in startActors; the freeze actors ask it for their turns. The node keeps
// a handle on it for the moves summary, and hands its PID to the
// partitions (partition.Deps.Pacer) for their freezes and the hand-over's
// thaw.

// pacer is the node's handle on its pacer actor; a nil one paces nothing
// (rigs), and each prepare arms at once.
type pacer struct{ pid *actor.PID }

// pidOrNil is the pacer's actor, nil without one.
func (pc *pacer) pidOrNil() *actor.PID {
	if pc == nil {
		return nil
	}
	return pc.pid
}

// paceConfig is the pacer's part of the node's configuration. The line
// holds at most twice the moves the controller keeps in flight: every
// move in flight may ask this one source, and an aborted move's retry may
// still hold its place.
func paceConfig(c Config) freeze.PaceConfig {
	return freeze.PaceConfig{Tick: c.FreezePaceTick, PerTick: c.MaxNewFreezesPerTick, MaxFrozen: c.MaxFrozenPartitions,
		FreezeTTL: c.Move.FreezeTTL, KeepTurnFor: c.FreezeTurnKeepFor, MaxLine: 2 * c.MaxInFlightMoves}
}

// newPacerActor is the pacer for d's node.
func newPacerActor(d deps) *freeze.PacerActor {
	pd := freeze.PacerDeps{Config: paceConfig(d.cfg), Clock: d.cfg.clockOrWall(), Log: d.log}
	if d.metrics != nil {
		pd.Frozen, pd.Held = d.metrics.partitionsFrozen.Set, d.metrics.movesHeld.Set
	}
	return freeze.NewPacerActor(pd)
}

// Package freeze is a partition's handoff freeze on the source of a move
// (seed 000, rules F1-F6, F9, F12), and the node's pacing of freezes (rule
// B5). Two actors share a freeze, each with a pure core of its own:
//
//   - the partition actor keeps the gate (Gate, GateStep, gate.go): what it
//     refuses (commits, leases, a publish past a reported HWM) and when a
//     prepare reports the HWM the move will flip at. It has no clock of its
//     own for the freeze: it closes and opens only on its freeze actor's
//     word, so a commit is refused or included in the partition's own
//     mailbox order;
//   - the freeze actor, the partition actor's child (Hold, HoldStep,
//     hold.go; Actor, actor.go), owns what has time in it: the token, the
//     TTL and its timer, the re-arm, the fence and the pacing turn.
//
// Start with hold.go, then gate.go. Each Step is a function of the config,
// the state, the caller's now and an event, returning the next state and the
// effects to carry out; none reads a clock, does I/O or draws a random
// number (the token's nonce comes with the prepare). Some effects are
// messages to the other side (Close, Lapsed, Released from the hold; Pinned,
// Reopened from the gate), fed to the other Step as they arrive, in the
// order they were sent.
//
// Why the gate never lapses on its own clock: a re-arm or a fence extends the
// freeze in the hold, and the gate would learn of it a mailbox later. A gate
// that opened when its copy of the deadline passed could take a commit past
// the HWM a fenced flip counts on. So the gate opens only on Lapsed or
// Released, which the hold sends once it refuses every later re-arm and
// fence of that token: the gate is closed for at least as long as the hold
// promises.
//
// The ordering that makes the reported HWM final (rule F3):
//
//  1. The gate: once a prepare closes it, no commit is written. New ones
//     are refused (RefuseCommit), stashed ones are refused with nothing
//     appended (RefuseStash), and a write about to start checks the gate
//     again (Write).
//  2. The lock is the partition actor itself: GateStep runs for one
//     message at a time.
//  3. A batch already written passed the gate before it closed; the
//     prepare's answer waits until every such batch has become visible or
//     failed (Partition.Settling, looked at again on Settled).
//  4. Only then is the HWM read, with the listing, and reported (Report,
//     then Reported, which pins it and tells the hold). From then until the
//     hold says the freeze lapsed or was released the HWM is pinned: a
//     publish that would move it is refused (RefusePublish), which nothing
//     reaches unless 1-3 are broken.
package freeze

import "time"

// Config is the source's part of the seed's constants table.
type Config struct {
	// FreezeTTL is how long a freeze holds unless a token renews it (the
	// seed's 30 s): a destination that dies leaves nothing to clean up
	// (rule F12).
	FreezeTTL time.Duration
	// LeaseDrainTimeout bounds how long a prepare waits for leases out to
	// be acked or released before it reports (the seed's 500 ms); a quarter
	// of FreezeTTL bounds it too (rule F2).
	LeaseDrainTimeout time.Duration
	// LeaseDrainPoll is how often a waiting prepare looks at the leases
	// again: an ack does not tell the gate, the poll does.
	LeaseDrainPoll time.Duration
	// ConfirmRetry paces the leader reads of a partition whose reported
	// freeze lapsed, while they fail (see Gate.Unconfirmed).
	ConfirmRetry time.Duration
}

// Partition is what the gate must know of its partition when a prepare
// may report.
type Partition struct {
	// Settling: a batch written before the gate armed is still on its way
	// to visibility (its fsync or read-back under way). Reporting now would
	// hand out an HWM it is about to pass (rule F3).
	Settling bool
	// LeasesOut is how many leases are out (rule F2).
	LeasesOut int
}

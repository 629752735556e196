// Package partition is a node's partitions: the partitions supervisor,
// one partition actor per partition the node owns, and the pure
// reservation table that decides a partition's leases and acks.
//
// Start with Actor (actor.go): the only code that touches one partition's
// log and consumer state. Commits, reservations, acks, replay reads,
// stats and retention arrive as messages, one at a time; only a write's
// fsync runs off the actor. reservations.go is its consume core
// (reservationTable: leases, acks, nacks, redeliveries, the acked-ahead
// set), pure and tested alone. freeze.go is the source side of a move:
// listings, chunk reads and the gate of the handoff freeze, whose rules
// actors/freeze decides (the freeze actor is this actor's child).
// fanout.go is its side of the fan-out: the cursor files, and what the
// fan-out actor (actors/fanout, its other child) reads and advances.
//
// Supervisor (supervisor.go) keeps one child per partition the metastore
// says this node owns: it reconciles on each change, hands a partition
// that moved away over (telling it the HWM its new owner's copy ends at),
// and purges a deleted topic's data. guard.go is the topic open guard
// every act on a partition's directory runs under (rules V9, V10), which
// the root package's mover uses too (Guard). figures.go sums each topic's
// backlog and leases into the node's gauges. rest.go lets an idle
// partition rest (passivation, issue 50): it closes its door in Running
// and the supervisor stops it; Ask, which every local request goes
// through, wakes it again.
//
// The package knows no Node: what it needs of its node comes in Deps (the
// Config it owns, node-wide settings copied in, the node's series as
// Metrics, a Store interface of its own over the metastore's replica, the
// commit notices as a func, the pacer's PID, Knobs for tests). The root
// package actors builds Deps (actors/partitions.go), spawns the
// supervisor, and reaches a partition through Ask (its door, then its
// address, PID).
package partition

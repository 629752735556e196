// Package fanout is a parent partition's fan-out to its topic's children
// (seed 000 "Fan-out", rules K6, K8, K9): the fan-out actor that copies
// the partition's committed records to each child, and the pure decisions
// about a link's cursor that its partition actor takes.
//
// Start with Actor (actor.go): one per parent partition with links, the
// partition actor's child, running one copy loop per link off the
// messages in messages.go (what it asks its partition actor, Read and
// Advance, and what it is told, Links and Wake). copy.go is a copy's
// batch: the prefix a delay child may have (duePrefix), its records
// grouped by the child partition of each key (groupRecords), and the
// commits on a goroutine of its own. anchor.go is where a link's cursor
// starts (AnchorCursor, pure, for the partition actor, which owns the
// cursor files) and the links a partition serves (LinksOf,
// LinksSignature, for the partitions supervisor). metrics.go holds the
// lag gauges (Lags).
//
// The package knows no Node and no partition actor: what it needs of its
// node comes in Deps (a Route interface of its own, which the root package
// adapts its router to, the Metrics the node registered, the contract's
// PartitionOf), and the partition actor (actors/partition/fanout.go)
// spawns the actor and answers its messages.
package fanout

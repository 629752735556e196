// Package sweeper is a node's stale-copy sweep (seed 000 "Stale copies",
// rules R5, S1-S8, P6) and the quarantine book it owns: the one actor of
// the node that removes or sets aside copies of partitions the node no
// longer owns, and the one owner of the node's inventory of copies set
// aside.
//
// Start with Actor (actor.go): what it takes by message and what it runs
// off its mailbox. A pass (pass.go) walks the data dir, asks each copy's
// owner for its listing, lets the pure sweep.Judge (package actors/sweep)
// decide, and carries the verdict out under the topic's guard
// (storage.Guards). The two sides of a judgement are built in sides.go,
// which the move worker's install also asks (VouchedBy). The book, its
// gauges and its listing are book.go; the asks the node's quarantine verbs
// send, and the walks and releases that answer them, are asks.go; what a
// node runs on its data dir before it serves is start.go.
//
// The package knows no Node: what it needs of its node comes in Deps (a
// Store and Owners interface of its own, the Metrics the node registered,
// the node's Guards), and the root package actors spawns the actor, sends
// it Due from the move runner and asks it from its NATS services and admin
// verbs.
package sweeper

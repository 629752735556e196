// Package actors is one node of the broker: its actor tree (protoactor-go)
// and the Node that wires storage, the metastore, the transport and the
// actors together, and answers the client API (actors/api) and the NATS
// admin verbs (actors/admin) in domain terms.
//
// Where to start: node.go (Node, what runs and in which order), then
// actors/route (where a partition lives, and how a request reaches it, here
// or on a peer), actors/partition (the one actor that touches a
// partition's log, and its supervisor; its handoff freeze is decided by
// actors/freeze), actors/dispatch (ingress WAL to partition commits),
// actors/mover (moves onto this node, decided by actors/move; moverdeps.go
// wires it), and the Node's domain methods, most of them promoted from
// the subsystems it embeds: actors/produce, actors/consume, actors/topics,
// actors/auth (users); the cluster operations are packages of their own,
// built and adapted in operations.go; a node gets into its cluster through
// actors/startup.
// Each actor sees the metastore through the small interfaces of roles.go,
// so it can be run against a fake (partitions_test.go); the packages
// split out of this one declare their own.
//
// The tree on one node:
//
//	root
//	├── partitions      one child per partition this node owns (actors/partition)
//	│   └── p:<incarnation>:<n>   partition.Actor
//	│       ├── freeze<id>        its handoff freeze (actors/freeze)
//	│       └── fanout<id>        its copies to the topic's children (actors/fanout)
//	├── dispatcher      ingress WAL -> owner commits (actors/dispatch)
//	├── sweeper         the stale-copy sweep (actors/sweeper)
//	├── pacer           the freeze pacing of this node as a source (actors/freeze)
//	├── mover           the move runner (actors/mover, runner.go)
//	│   └── move-p:<incarnation>:<n>   one worker per incoming move (actors/mover, worker.go)
//	└── controller      acts while this node leads the metadata shard (actors/controller)
//
// No actor's code is in this package any more: it is the composition root
// (node.go) and the adapters between the actors and the API and the admin
// verbs; the peers are reached through actors/route.
//
// HTTP handlers and NATS handlers run on their own goroutines and reach the
// actors by request/response messages. What they share with the actors
// besides messages is short and safe for concurrent use, each listed in
// ARCHITECTURE.md §8: the ingress WAL, the metastore replica, the node-wide
// helpers in the actors' Deps, and the consume hints' ready book
// (actors/hints).
package actors

// Package actors is one node of the broker: its actor tree (protoactor-go),
// the HTTP API that talks to it through messages, and the Node that wires
// storage, the metastore and the actors together.
//
// Where to start: node.go (Node, what runs and in which order), then
// partition.go (the one actor that touches a partition's log), dispatcher.go
// (ingress WAL to partition commits) and api.go (the client HTTP API).
//
// The tree on one node:
//
//	root
//	├── partitions      one child per partition this node owns (partition.go)
//	│   └── p:<incarnation>:<n>
//	└── dispatcher      ingress WAL -> owner commits, retried about once a second
//
// HTTP handlers run on net/http's goroutines and reach the actors only by
// request/response messages; no state is shared with an actor.
package actors

// Package messages holds the plain structs that cross a boundary, one file
// per protocol, with no behaviour beyond encoding:
//
//   - metastore.go: the metastore's commands and records (topics, members,
//     assignments, the flip);
//   - partition.go: what a partition actor takes and answers, and
//     partitionwire.go, its binary form between nodes (record bytes raw);
//   - move.go: the move protocol (listings, chunks, the handoff freeze);
//   - controller.go: requests to the controller on the metadata leader;
//   - api.go: every /v1 HTTP body, shared by the server, the CLI, bench/
//     and the tests; admin.go: the NATS admin verbs' bodies;
//   - wire.go: the transport's headers and error envelope.
//
// Start with metastore.go for the cluster's state, api.go for the client
// contract.
package messages

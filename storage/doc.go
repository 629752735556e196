// Package storage is everything that touches a node's disk: the partition log
// (Log), the node's ingress write-ahead log (WAL), consumer state and fan-out
// cursor files, and the receiving side of a partition move (Staging, the move
// marker, install and quarantine).
//
// It is plain Go: no actors, no network, no goroutines except the WAL's one
// group-commit writer and the SyncLane's (with its per-file round's
// helpers), which end on Close. Callers (the partition actors)
// serialise access to a Log; the WAL is safe for concurrent producers.
//
// Where to start: log.go (Open, Append, Read, the high watermark), then
// frame.go (the bytes on disk) and recover.go (what a reopened log may
// expose). listing.go and staging.go are the two ends of a partition copy.
// ARCHITECTURE.md at the repository root explains why the formats are what
// they are.
package storage

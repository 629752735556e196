package metastore

import (
	_ "unsafe" // go:linkname
)

// raftStreams is how many TCP connections a NodeHost keeps to each peer.
// Dragonboat's default is 4, taken from a settings file in the working
// directory or nowhere, and it costs twice over here:
//   - restart: a peer notices that the connections to a restarted node are
//     dead only when it writes on each, and every such failure trips its
//     circuit breaker for up to 1.5 s, stopping all sends to that node, so
//     the node's first heartbeats arrive one breaker cycle per stale
//     connection late (seconds to /readyz);
//   - memory: each connection holds a 2 MiB send buffer on the sender and a
//     receive buffer on the receiver.
//
// The metastore's traffic is a few shards of small entries: one connection
// per peer carries it.
const raftStreams = 1

// streamConnections is Dragonboat's own setting (nodehost.go), read by
// every NewNodeHost; it is set before any, at this package's init, so no
// NodeHost ever reads another value and no write races a read.
//
//go:linkname streamConnections github.com/lni/dragonboat/v4.streamConnections
var streamConnections uint64

func init() { streamConnections = raftStreams }

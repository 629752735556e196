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

// raftBufferBytes is the buffer each Raft connection keeps for sending
// (Dragonboat: 2 MiB) and each accepted one for receiving (2 MiB and a
// snapshot chunk's margin). A larger message still goes through: it gets a
// buffer of its own for the while (Dragonboat's own tests run with 64 KiB
// and 8 KiB). 256 KiB holds a batch of several thousand assignments.
const raftBufferBytes = 256 << 10

// raftReceiveQueue and raftProposalQueue are each replica's queues of
// incoming Raft messages (Dragonboat: 1,024) and of pending proposals
// (2,048), allocated at full length per shard. A full receive queue drops a
// message that Raft sends again; a full proposal queue is ErrSystemBusy,
// which proposals retry (notAppended). The metastore's few shards see a few
// messages per tick, and the callers that propose in bulk batch first
// (FlipMany, PutAssignments).
const (
	raftReceiveQueue  = 256
	raftProposalQueue = 512
)

// streamConnections is Dragonboat's own setting (nodehost.go), read by
// every NewNodeHost; it is set before any, at this package's init, so no
// NodeHost ever reads another value and no write races a read.
//
//go:linkname streamConnections github.com/lni/dragonboat/v4.streamConnections
var streamConnections uint64

// sendBufferBytes and receiveBufferBytes are Dragonboat's transport
// settings (internal/transport/tcp.go), read at each new connection.
//
//go:linkname sendBufferBytes github.com/lni/dragonboat/v4/internal/transport.perConnBufSize
var sendBufferBytes uint64

//go:linkname receiveBufferBytes github.com/lni/dragonboat/v4/internal/transport.payloadBufferSize
var receiveBufferBytes uint64

// receiveQueueLen and incomingProposalsMaxLen are Dragonboat's (nodehost.go,
// node.go), read at each replica's start; Dragonboat's own tests set them
// the same way (monkey.go).
//
//go:linkname receiveQueueLen github.com/lni/dragonboat/v4.receiveQueueLen
var receiveQueueLen uint64

//go:linkname incomingProposalsMaxLen github.com/lni/dragonboat/v4.incomingProposalsMaxLen
var incomingProposalsMaxLen uint64

func init() {
	streamConnections = raftStreams
	sendBufferBytes, receiveBufferBytes = raftBufferBytes, raftBufferBytes
	receiveQueueLen, incomingProposalsMaxLen = raftReceiveQueue, raftProposalQueue
}

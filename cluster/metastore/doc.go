// Package metastore is Narad's replicated metadata: one Dragonboat v4
// NodeHost per node, running a replica of the metadata shard (shard 1:
// topics and members) and of K assignment shards (shards 2..K+1: {Owner,
// Target} per partition, spread by AssignmentShard). Every shard has the
// same voters; later nodes join as non-voters and are promoted.
//
// Where to start:
//
//   - store.go: Open, WaitReady and the Store's methods: proposals
//     (CreateTopic, Flip, ...), local reads for routing (Topic,
//     Assignments, OwnedBy, ...), leader reads (LeaderTopic,
//     LeaderAssignment) and the change feed (Version, Changed).
//   - metastate.go and assignstate.go: the two state machines as pure
//     functions, apply(command, index) -> result on an in-memory struct.
//     All the rules live there and are table-tested without Raft.
//   - members.go: member records (register, heartbeat, status, draining,
//     leaving, role) in the metadata shard.
//   - raftmembers.go: the Raft configuration of every shard: joins as
//     non-voters, promotion, removal, leadership transfer, and how Open
//     tells a restart from a first join.
//   - fsm.go: the thin statemachine.IStateMachine adapters Dragonboat
//     drives (decode, lock, apply, encode, notify).
//   - config.go, shard.go, errors.go, logger.go, metrics.go: the edges.
//
// Errors: a proposal that returns an error wrapping ErrUnavailable has an
// unknown outcome (it may or may not have been applied); read back with a
// leader read before acting on it. A refused compare-and-swap is not an
// error: it is a result whose Code is messages.ResultRefused or
// messages.ResultNotFound.
package metastore

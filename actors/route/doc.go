// Package route takes a partition request to the partition's owner,
// whichever node that is, and answers peers' requests for the partitions
// owned here: the one place of a node that knows where a partition lives.
// It knows no Node: its node builds a Router of its actor system, its
// replica (Reader), its NATS transport and its timeouts (actors/node.go's
// startActors), and hands it, or the groups made of it, to whoever asks a
// partition: the API's methods, the dispatcher, the move workers, the
// sweeper and the fan-out actors.
//
// Where to start: router.go (Router: Ask, owner lookups, ReadChunk, and
// Serve, a peer's side: ServePartition), then peergroups.go (the lanes
// that carry requests waiting for the same peer in one group request, no
// timer), which the two kinds of group share: movegroup.go (MoveGroups,
// the move workers' mover.Source) and commitgroup.go (GroupedOwners, the
// dispatcher's dispatch.Owners, whose commits to a peer travel in commit
// groups). GroupConfig and GroupMetrics are the node's bounds and series
// of the groups, built by the node from its Config and its series.
//
// Every Router method may be called from any goroutine: it holds no state
// beyond its wiring, and requests go through actor mailboxes or NATS. The
// groups' lanes are behind a mutex; their senders are goroutines of their
// own (ARCHITECTURE.md §8).
package route

package metastore

import (
	"sync"

	"github.com/lni/dragonboat/v4/raftio"
)

// removal watches Dragonboat's system events for the one that says this
// replica applied its own removal from the metadata shard (a config change
// or a snapshot that lists it removed). Only that event fires it: a replica
// that restarts, loads or is still waiting to be added never does, so a
// node cannot mistake a slow start for having left.
type removal struct {
	replicaID uint64
	once      sync.Once
	done      chan struct{}
}

func newRemoval(replicaID uint64) *removal {
	return &removal{replicaID: replicaID, done: make(chan struct{})}
}

// NodeDeleted is called on a Dragonboat goroutine; it must not block.
func (r *removal) NodeDeleted(info raftio.NodeInfo) {
	if info.ShardID == MetaShard && info.ReplicaID == r.replicaID {
		r.once.Do(func() { close(r.done) })
	}
}

// The other events are of no interest here.
func (*removal) NodeHostShuttingDown()                       {}
func (*removal) NodeUnloaded(raftio.NodeInfo)                {}
func (*removal) NodeReady(raftio.NodeInfo)                   {}
func (*removal) MembershipChanged(raftio.NodeInfo)           {}
func (*removal) ConnectionEstablished(raftio.ConnectionInfo) {}
func (*removal) ConnectionFailed(raftio.ConnectionInfo)      {}
func (*removal) SendSnapshotStarted(raftio.SnapshotInfo)     {}
func (*removal) SendSnapshotCompleted(raftio.SnapshotInfo)   {}
func (*removal) SendSnapshotAborted(raftio.SnapshotInfo)     {}
func (*removal) SnapshotReceived(raftio.SnapshotInfo)        {}
func (*removal) SnapshotRecovered(raftio.SnapshotInfo)       {}
func (*removal) SnapshotCreated(raftio.SnapshotInfo)         {}
func (*removal) SnapshotCompacted(raftio.SnapshotInfo)       {}
func (*removal) LogCompacted(raftio.EntryInfo)               {}
func (*removal) LogDBCompacted(raftio.EntryInfo)             {}

// Removed is closed once this replica has applied its own removal from
// the metadata shard (Store.RemoveReplica on another member, the end of a
// decommission): from then on it receives nothing and proposes nothing,
// and the node it serves is no longer a member of the cluster.
func (s *Store) Removed() <-chan struct{} { return s.removal.done }

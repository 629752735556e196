package metastore

import (
	"errors"
	"fmt"
	"github.com/VictoriaMetrics/metrics"
	"maps"
	"slices"
	"time"

	"github.com/naradmq/narad/actors/clock"
)

// Config is one node's metastore replica. Zero values of the tuning fields
// take the defaults of WithDefaults; Open applies them before Validate.
type Config struct {
	// NodeID is the Narad node id ("n1"). It labels logs and metrics; it is
	// not the Raft replica id, which must never be reused (ReplicaID).
	NodeID string
	// Metrics is the node's metrics set, which holds the store's series;
	// nil is the process-wide default set.
	Metrics *metrics.Set `json:"-"`
	// Clock paces the store's waits (its retries, back-offs and the
	// leadership transfer's asks) and times its proposals for the
	// metrics; Dragonboat keeps its own time. The node gives it its
	// steady clock (actors/clock); nil is the wall clock.
	Clock clock.Clock `json:"-"`
	// ReplicaID is this node's Raft replica id in every shard. Dragonboat
	// never accepts a deleted replica id again, so a node that left and
	// comes back empty needs a fresh one.
	ReplicaID uint64
	// RaftAddr is host:port where this NodeHost listens for Raft traffic.
	// A NodeHost directory is bound to it: reopen a Dir with the same one.
	RaftAddr string
	// Dir is the NodeHost directory (Raft log, snapshots). With InMemory it
	// is a path inside the in-memory filesystem and may be empty.
	Dir string
	// InMemory keeps everything in an in-memory filesystem (vfs.NewMem):
	// for tests and benchmarks only, nothing survives Close.
	InMemory bool
	// InitialMembers maps replica id to Raft address for the initial voters
	// of every shard; it must contain ReplicaID -> RaftAddr. Empty means a
	// single-voter cluster of this node alone. Only a shard's first start
	// uses it: a restart takes the membership Dragonboat saved. It must be
	// empty with Join.
	InitialMembers map[uint64]string
	// Join starts a node that is not an initial member: a running member
	// adds ReplicaID at RaftAddr to every shard as a non-voter
	// (Store.AddNonVoter), before or after this node opens with Join; its
	// replicas wait until the leaders contact them and send the state. A node that joined keeps Join set on every
	// later start (it always starts its replicas as non-voters; Dragonboat
	// turns one into a voter while it recovers if it was promoted).
	// Starting a joined node without Join may crash Dragonboat.
	Join bool
	// AssignmentShards is K, the number of assignment shards. Assignments
	// spread over them by AssignmentShard, so it must be the same on every
	// node for the life of the cluster.
	AssignmentShards int
	// RTTMillisecond is the Raft tick and the expected round trip between
	// nodes; ElectionRTT and HeartbeatRTT count in these ticks.
	RTTMillisecond uint64
	// ElectionRTT is the election timeout in ticks: how long followers wait
	// without a heartbeat before they elect (failover time).
	ElectionRTT uint64
	// HeartbeatRTT is the leader's heartbeat interval in ticks; it must be
	// well under ElectionRTT so a live leader is never deposed.
	HeartbeatRTT uint64
	// SnapshotEntries: each shard snapshots every this many applied entries,
	// which bounds both the Raft log on disk and the replay time at restart.
	SnapshotEntries uint64
	// CompactionOverhead is a count of entries: how many entries below a
	// snapshot stay in the log, so a slightly lagging follower catches up
	// from the log instead of receiving a whole snapshot.
	CompactionOverhead uint64
	// ProposalTimeout bounds each proposal and leader read (on top of the
	// caller's context): past it the outcome is unknown (ErrUnavailable).
	ProposalTimeout time.Duration
	// TLSCAFile, TLSCertFile and TLSKeyFile (PEM) turn on Dragonboat's
	// MutualTLS for Raft traffic: every replica presents the certificate
	// and accepts only peers whose certificate chains to the CA, so a host
	// that reaches the Raft port cannot pose as a replica. All three or none.
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// LogDBShards is a count of LogDB (pebble) instances that a new Raft
	// directory is made with; each holds its own memtables, WAL and files.
	// Dragonboat's 16 are for thousands of shards, the metastore has a
	// handful. A directory that exists keeps the count it was made with,
	// which Dragonboat records and holds it to ("hard setting changed").
	LogDBShards uint64
	// LogDBWriteBufferBytes is one memtable's size; each LogDB instance
	// holds up to four, so the LogDB's memory is bounded by
	// LogDBShards*4*LogDBWriteBufferBytes.
	LogDBWriteBufferBytes uint64
}

// MutualTLS reports whether Raft traffic runs over mutual TLS.
func (c Config) MutualTLS() bool { return c.TLSCAFile != "" }

// Defaults of Config's tuning fields, for a LAN.
const (
	DefaultAssignmentShards = 4
	// 50 ms ticks, a 500 ms election timeout, a heartbeat every tick: a
	// failover of well under a second on a LAN without flapping on a GC
	// pause. Ticks of 10 ms (issue 45) cost an idle node about 3.5% of a
	// core for the same timeouts, 2.2% now, nearly all of it the
	// heartbeats of its five shards; 100 ms ticks would bring it to 1.5%
	// and double the failover and every read try's bound.
	DefaultRTTMillisecond     = 50
	DefaultElectionRTT        = 10
	DefaultHeartbeatRTT       = 1
	DefaultSnapshotEntries    = 10_000
	DefaultCompactionOverhead = 5_000
	DefaultLogDBShards        = 1
	// Dragonboat's "tiny" LogDB memtable.
	DefaultLogDBWriteBufferBytes = 4 << 20
	DefaultProposalTimeout       = 5 * time.Second
	// defaultMemDir is the NodeHost directory inside the in-memory
	// filesystem when Dir is empty.
	defaultMemDir = "/narad-metastore"
)

// WithDefaults returns c with every zero tuning field set to its default and
// an empty InitialMembers set to this node alone (unless Join).
func (c Config) WithDefaults() Config {
	if c.AssignmentShards == 0 {
		c.AssignmentShards = DefaultAssignmentShards
	}
	if c.RTTMillisecond == 0 {
		c.RTTMillisecond = DefaultRTTMillisecond
	}
	if c.ElectionRTT == 0 {
		c.ElectionRTT = DefaultElectionRTT
	}
	if c.HeartbeatRTT == 0 {
		c.HeartbeatRTT = DefaultHeartbeatRTT
	}
	if c.SnapshotEntries == 0 {
		c.SnapshotEntries = DefaultSnapshotEntries
	}
	if c.CompactionOverhead == 0 {
		c.CompactionOverhead = DefaultCompactionOverhead
	}
	if c.LogDBShards == 0 {
		c.LogDBShards = DefaultLogDBShards
	}
	if c.LogDBWriteBufferBytes == 0 {
		c.LogDBWriteBufferBytes = DefaultLogDBWriteBufferBytes
	}
	if c.ProposalTimeout == 0 {
		c.ProposalTimeout = DefaultProposalTimeout
	}
	if c.InMemory && c.Dir == "" {
		c.Dir = defaultMemDir
	}
	if !c.Join && len(c.InitialMembers) == 0 && c.ReplicaID != 0 && c.RaftAddr != "" {
		c.InitialMembers = map[uint64]string{c.ReplicaID: c.RaftAddr}
	}
	return c
}

// Validate reports every problem of c (after WithDefaults) at once; each
// wraps ErrInvalid.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("metastore config: "+format+": %w", append(args, ErrInvalid)...))
	}
	if c.NodeID == "" {
		bad("NodeID is empty")
	}
	if c.ReplicaID == 0 {
		bad("ReplicaID is 0, want >= 1")
	}
	if c.RaftAddr == "" {
		bad("RaftAddr is empty")
	}
	if c.Dir == "" {
		bad("Dir is empty and InMemory is false")
	}
	if c.Join && len(c.InitialMembers) > 0 {
		bad("Join with %d InitialMembers, want none (a joining node learns its peers from the leaders)", len(c.InitialMembers))
	}
	if addr, ok := c.InitialMembers[c.ReplicaID]; !c.Join && c.ReplicaID != 0 && (!ok || addr != c.RaftAddr) {
		bad("InitialMembers[%d] is %q, want RaftAddr %q", c.ReplicaID, addr, c.RaftAddr)
	}
	seen := make(map[string]uint64, len(c.InitialMembers))
	for _, id := range slices.Sorted(maps.Keys(c.InitialMembers)) {
		addr := c.InitialMembers[id]
		if id == 0 {
			bad("InitialMembers has replica id 0")
		}
		if addr == "" {
			bad("InitialMembers[%d] has no address", id)
		}
		if other, dup := seen[addr]; dup && addr != "" {
			bad("InitialMembers[%d] and [%d] share address %q", other, id, addr)
		}
		seen[addr] = id
	}
	if c.AssignmentShards < 1 {
		bad("AssignmentShards is %d, want >= 1", c.AssignmentShards)
	}
	if c.HeartbeatRTT*2 >= c.ElectionRTT {
		bad("ElectionRTT %d must exceed twice HeartbeatRTT %d", c.ElectionRTT, c.HeartbeatRTT)
	}
	if c.CompactionOverhead >= c.SnapshotEntries {
		bad("CompactionOverhead %d must be below SnapshotEntries %d", c.CompactionOverhead, c.SnapshotEntries)
	}
	if set := c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSKeyFile != ""; set && (c.TLSCAFile == "" || c.TLSCertFile == "" || c.TLSKeyFile == "") {
		bad("TLSCAFile %q, TLSCertFile %q, TLSKeyFile %q: want all three or none", c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile)
	}
	if c.ProposalTimeout < time.Duration(c.RTTMillisecond)*time.Millisecond {
		bad("ProposalTimeout %s is below one tick (%d ms)", c.ProposalTimeout, c.RTTMillisecond)
	}
	if c.LogDBShards > 64 {
		bad("LogDBShards %d, want 1 to 64", c.LogDBShards)
	}
	if c.LogDBWriteBufferBytes < 256<<10 || c.LogDBWriteBufferBytes > 256<<20 {
		bad("LogDBWriteBufferBytes %d, want 256 KiB to 256 MiB", c.LogDBWriteBufferBytes)
	}
	return errors.Join(errs...)
}

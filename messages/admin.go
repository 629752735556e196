package messages

// The admin verbs: NATS request/reply on narad.<cluster>.admin.<verb>, JSON
// both ways, answered by any one node of the queue group from its local
// replica. The nodes and `narad cluster` share these types; anyone else
// may ask with the stock `nats req`, so they are kept as readable as the
// /v1 bodies (api.go), whose types the moves and decommission verbs reuse.
// Members, status and topics take an empty request ({}).

// MovesRequest asks the "moves" verb for the listing, with each
// destination's progress when Detail is set and the summary (a request
// per live member) when Summary is; the answer is a MoveList.
type MovesRequest struct {
	Detail  bool `json:"detail"`
	Summary bool `json:"summary,omitempty"`
}

// AbortMoveRequest asks the "moves-abort" verb to give up on the move of
// one partition; the answer is an AbortMoveReply. A non-empty Target makes
// the abort conditional: a move that now targets another node is refused
// rather than aborted by someone who meant the earlier one.
type AbortMoveRequest struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Target    string `json:"target,omitempty"`
}

// DecommissionRequest asks the "decommission" verb to start draining
// member ID, to judge it only (DryRun), or to stop draining (Cancel); the
// answer is a DecommissionReply.
type DecommissionRequest struct {
	ID     string `json:"id"`
	DryRun bool   `json:"dry_run"`
	Cancel bool   `json:"cancel"`
}

// ForgetRequest asks the "forget" verb to forget member ID, whose disk is
// lost for good: its partitions are re-created empty on live nodes and it
// leaves the cluster. AcceptDataLoss must be set, unless DryRun: every
// record only that member held is gone.
type ForgetRequest struct {
	ID             string `json:"id"`
	DryRun         bool   `json:"dry_run"`
	AcceptDataLoss bool   `json:"accept_data_loss"`
}

// ForgetReply answers a forget. Verdict is "ok" (a dry run that found
// nothing against it), "refused" (Reason says why) or "forgotten".
// Partitions is how many partitions it owns, each re-created empty on a
// live node. Removal says what its leaving Raft waits for, when it must
// wait (for example a node to join and take its vote); "" when nothing.
type ForgetReply struct {
	Member     string `json:"member"`
	Verdict    string `json:"verdict"`
	Reason     string `json:"reason,omitempty"`
	Partitions int    `json:"partitions"`
	Removal    string `json:"removal,omitempty"`
}

// AdminMemberInfo is one member in the "members" answer: the /v1 fields,
// then what the member record holds beyond them, which an operator needs
// and the client contract does not promise.
type AdminMemberInfo struct {
	MemberInfo
	Leaving  bool   `json:"leaving"`
	Role     string `json:"role"` // voter or nonvoter
	RaftAddr string `json:"raft_addr"`
	// DecommissionBlocked says why a draining member's decommission waits,
	// as the controller last saw it (rule D7); only the controller knows,
	// so it is empty when the controller could not be asked.
	DecommissionBlocked string `json:"decommission_blocked,omitempty"`
	// Lost: an operator forgot the member (its disk is lost); it leaves
	// the cluster once its partitions are re-created elsewhere.
	Lost bool `json:"lost,omitempty"`
}

// AdminMemberList answers the "members" verb.
type AdminMemberList struct {
	Members []AdminMemberInfo `json:"members"`
}

// AdminTopicInfo is one topic in the "topics" answer: the /v1 record, its
// incarnation (what tells a recreated name from its predecessor) and where
// its partitions are.
type AdminTopicInfo struct {
	TopicInfo
	Incarnation uint64 `json:"incarnation"`
	// Owners counts the topic's partitions per owner; Unplaced those
	// without an owner yet.
	Owners   map[string]int `json:"owners"`
	Unplaced int            `json:"unplaced"`
}

// AdminTopicList answers the "topics" verb, sorted by name.
type AdminTopicList struct {
	Topics []AdminTopicInfo `json:"topics"`
}

// AdminStatus answers the "status" verb: the cluster as the answering node
// sees it, to tell which node to look at when something is stuck.
type AdminStatus struct {
	Cluster    string `json:"cluster"`
	AnsweredBy string `json:"answered_by"`
	Ready      bool   `json:"ready"`
	// MetadataLeader is the node leading the metadata shard, where the
	// controller runs ("" while none is known).
	MetadataLeader string        `json:"metadata_leader"`
	Members        int           `json:"members"`
	Alive          int           `json:"alive"`
	Topics         int           `json:"topics"`
	Shards         []ShardStatus `json:"shards"`
}

// ShardStatus is one metastore shard in AdminStatus.
type ShardStatus struct {
	Shard  uint64 `json:"shard"`
	Leader uint64 `json:"leader_replica,omitempty"`
	// Term is the leader's Raft term as the answering node knows it.
	Term uint64 `json:"term,omitempty"`
	// Role is the answering node's role in the shard: leader, follower,
	// non-voter ("" while loading).
	Role string `json:"role"`
}

// JoinRequest asks the "join" verb to add a starting node's metastore
// replicas as non-voters. A node sends it until a ready member answers
// JoinReply{Admitted: true}: the verb is idempotent. Without a ReplicaID
// (0) it asks for one instead: the answer carries an id never used in the
// cluster and admits nothing; the node keeps it and asks again with it.
type JoinRequest struct {
	NodeID    string `json:"node_id"`
	ReplicaID uint64 `json:"replica_id"`
	RaftAddr  string `json:"raft_addr"`
}

// JoinReply answers JoinRequest: Admitted with the request's ReplicaID, or
// a fresh ReplicaID for a request without one.
type JoinReply struct {
	Admitted  bool   `json:"admitted"`
	ReplicaID uint64 `json:"replica_id,omitempty"`
}

// QuarantineRequest asks the "quarantine" verb for the copies set aside on
// member Node, or on every member not marked dead when Node is empty; the
// answer is a QuarantineList.
type QuarantineRequest struct {
	Node string `json:"node,omitempty"`
}

// QuarantinedCopy is one copy a node set aside instead of deleting it: it
// may hold records no other node has, so only an operator releases it.
type QuarantinedCopy struct {
	// Path is relative to the node's data dir: what a release names.
	Path string `json:"path"`
	// Kind is partition, staging, stale_topic or unmarked_topic.
	Kind        string `json:"kind"`
	Topic       string `json:"topic"`
	Partition   int    `json:"partition"` // -1 for a whole topic directory
	Incarnation uint64 `json:"incarnation,omitempty"`
	Bytes       int64  `json:"bytes"`
	// ModifiedMs is the last write into the copy (Unix ms); AgeMs is how
	// long before the answer that was, on the node's own clock, so that
	// a caller's clock does not skew it.
	ModifiedMs int64 `json:"modified_ms"`
	AgeMs      int64 `json:"age_ms"`
}

// NodeQuarantine is one node's copies set aside, sorted by path. Copies
// stops at the node's QuarantineListMaxCopies; the totals count them all.
type NodeQuarantine struct {
	Node        string            `json:"node"`
	Copies      []QuarantinedCopy `json:"copies"`
	TotalCopies int               `json:"total_copies"`
	TotalBytes  int64             `json:"total_bytes"`
	// OrphanTopicDirs are topic directories with files but no incarnation
	// marker (rule S7), cut at the same bound.
	OrphanTopicDirs []string `json:"orphan_topic_dirs,omitempty"`
	// ReclaimedBytes is what the stale-copy sweep reclaimed since the node
	// started.
	ReclaimedBytes int64 `json:"reclaimed_bytes"`
}

// QuarantineList answers the "quarantine" verb, sorted by node; Errors
// names the members asked that gave no listing, and why.
type QuarantineList struct {
	Nodes  []NodeQuarantine  `json:"nodes"`
	Errors map[string]string `json:"errors,omitempty"`
}

// QuarantineReleaseRequest asks the "quarantine-release" verb to remove the
// copy at Path (as listed) on member Node, or only to say what it would
// remove (DryRun); the answer is a QuarantineReleaseReply.
type QuarantineReleaseRequest struct {
	Node   string `json:"node"`
	Path   string `json:"path"`
	DryRun bool   `json:"dry_run"`
}

// QuarantineReleaseReply says which copy a release removed (Released), or
// would remove (a dry run), and its size.
type QuarantineReleaseReply struct {
	Node     string `json:"node"`
	Path     string `json:"path"`
	Kind     string `json:"kind"`
	Bytes    int64  `json:"bytes"`
	DryRun   bool   `json:"dry_run"`
	Released bool   `json:"released"`
}

// QuarantineCounts is one node's share of the members listing: the bytes
// it holds set aside, as of its last inventory, and the bytes its sweep
// reclaimed since it started.
type QuarantineCounts struct {
	QuarantinedBytes int64 `json:"quarantined_bytes"`
	ReclaimedBytes   int64 `json:"reclaimed_bytes"`
}

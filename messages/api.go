package messages

import "encoding/json"

// The /v1 HTTP wire types: the JSON bodies of api/CONTRACT.md, defined once
// for the server (actors), the CLI (cmd/narad) and the load driver
// (bench/load), so that none of them can drift from the others.
//
// The contract is fixed: existing Narad clients decode these bodies, so a
// key, its type or its omitempty never changes here. Fields are declared in
// the contract's order because encoding/json writes them in that order, and
// both the contract tests and the CLI's printed output show it. An "Info"
// type is the API's view of a record (TopicInfo of a Topic, PartitionInfo
// of a partition's PartitionStats): never the record itself, which holds
// what the API must not show (incarnations, schemas).

// ErrorBody is the body of every JSON error answer. Clients read only this
// key, and must not count on it: cluster forwarding errors are text/plain.
type ErrorBody struct {
	Error string `json:"error"`
}

// HealthBody answers GET /healthz, and GET /readyz once ready (before
// that, /readyz answers an ErrorBody).
type HealthBody struct {
	Status string `json:"status"`
}

// CreateTopicRequest is the body of POST /v1/topics. The optional numbers
// are pointers so a client sends only what its user set: the contract's
// docs give an explicit retention_ms 0 a meaning of its own (keep forever)
// even though Narad's code reads it as "the default". The server reads
// absent, null and 0 alike.
type CreateTopicRequest struct {
	Name                      string `json:"name"`
	Partitions                int    `json:"partitions,omitempty"`
	RetentionMs               *int64 `json:"retention_ms,omitempty"`
	VisibilityTimeoutMs       *int64 `json:"visibility_timeout_ms,omitempty"`
	MaxInFlightPerPartition   *int64 `json:"max_in_flight_per_partition,omitempty"`
	MaxAckedAheadPerPartition *int64 `json:"max_acked_ahead_per_partition,omitempty"`
	// Schema is a JSON Schema document itself, not a string holding one.
	Schema        json.RawMessage `json:"schema,omitempty"`
	Parent        string          `json:"parent,omitempty"`
	FanoutDelayMs *int64          `json:"fanout_delay_ms,omitempty"`
	// Owner is accepted because Narad accepts it, and then discarded: the
	// server fills in the caller.
	Owner string `json:"owner,omitempty"`
}

// AlterTopicRequest is the body of PATCH /v1/topics/{topic}. A nil field
// is left unchanged, which is why they are pointers; visibility_timeout_ms
// is missing on purpose (Narad refuses it as an unknown field).
type AlterTopicRequest struct {
	Partitions                *int            `json:"partitions,omitempty"`
	RetentionMs               *int64          `json:"retention_ms,omitempty"`
	MaxInFlightPerPartition   *int64          `json:"max_in_flight_per_partition,omitempty"`
	MaxAckedAheadPerPartition *int64          `json:"max_acked_ahead_per_partition,omitempty"`
	Schema                    json.RawMessage `json:"schema,omitempty"`
}

// TopicInfo is the topic record (contract 5.1): the answer to create and
// alter, and each item of a topic list.
type TopicInfo struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	// RetentionMs is the effective value, defaults resolved; 0 keeps
	// records forever.
	RetentionMs               int64 `json:"retention_ms"`
	VisibilityTimeoutMs       int64 `json:"visibility_timeout_ms"`
	MaxInFlightPerPartition   int64 `json:"max_in_flight_per_partition"`
	MaxAckedAheadPerPartition int64 `json:"max_acked_ahead_per_partition"`
	CreatedAt                 int64 `json:"created_at"` // Unix seconds
	// Owner is empty, so left out, while security is off.
	Owner string `json:"owner,omitempty"`
	// Role is standalone, parent or child. Reads fill it in; the create
	// answer of a plain topic leaves it out, as Narad's does.
	Role string `json:"role,omitempty"`
	// The fan-out links: a parent's children in attach order; a child's
	// parent, attach epoch (the Raft index of the attach, as a decimal
	// string, as Narad sends it) and delay.
	Children      []string `json:"children,omitempty"`
	Parent        string   `json:"parent,omitempty"`
	AttachEpoch   string   `json:"attach_epoch,omitempty"`
	FanoutDelayMs int64    `json:"fanout_delay_ms,omitempty"`
}

// AttachChildRequest is the body of POST /v1/topics/{parent}/children.
type AttachChildRequest struct {
	Child   string `json:"child"`
	DelayMs *int64 `json:"delay_ms,omitempty"`
}

// ChildList answers GET /v1/topics/{parent}/children; Children is []
// rather than null when the parent has none.
type ChildList struct {
	Parent   string      `json:"parent"`
	Children []ChildInfo `json:"children"`
}

// ChildInfo is one child of a ChildList. LagMessages sums, over the
// parent's partitions, the committed records not yet copied to the child;
// LagComplete says every partition's owner answered with a cursor for it.
type ChildInfo struct {
	Name        string `json:"name"`
	DelayMs     int64  `json:"delay_ms"`
	LagMessages int64  `json:"lag_messages"`
	LagComplete bool   `json:"lag_complete"`
}

// PartitionInfo is one entry of a topic's partition_stats (contract 5.2).
type PartitionInfo struct {
	Index        int   `json:"index"`
	Segments     int   `json:"segments"`
	OldestOffset int64 `json:"oldest_offset"`
	// NextOffset counts every record ever appended; HighWatermark bounds
	// the committed ones consumers may see, which is what the load
	// driver's history check holds its deliveries against.
	NextOffset      int64  `json:"next_offset"`
	HighWatermark   int64  `json:"high_watermark"`
	SizeBytes       int64  `json:"size_bytes"`
	OldestSegmentAt int64  `json:"oldest_segment_at,omitempty"` // Unix seconds
	OwnerNode       string `json:"owner_node,omitempty"`
	// InFlightLeases is beyond the contract: the records leased and not
	// yet settled, as the owner counts them; left out at 0.
	InFlightLeases int `json:"in_flight_leases,omitempty"`
}

// TopicDetails answers GET /v1/topics/{topic}. Clients poll it until
// PartitionStats has one entry per partition (their "topic is ready"
// signal), so the server sends [] rather than null before that.
type TopicDetails struct {
	TopicInfo
	PartitionStats []PartitionInfo `json:"partition_stats"`
}

// TopicPage is one page of GET /v1/topics. Both keys are always present
// (topics [] when empty, next_page_token "" on the last page): clients
// page until the token is empty.
type TopicPage struct {
	Topics        []TopicInfo `json:"topics"`
	NextPageToken string      `json:"next_page_token"`
}

// MessageInfo is one consume answer (contract 9). The CLI prints it
// re-encoded, so the field order here is the order its users see.
type MessageInfo struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Offset    int64  `json:"offset"`
	// Key is left out only when empty: a key the server made up is sent.
	Key string `json:"key,omitempty"`
	// Payload is the stored body verbatim when it is valid JSON, a JSON
	// string when it is other UTF-8, and base64 otherwise, with
	// PayloadEncoding "base64" saying so: the bytes decide, not the client.
	Payload         json.RawMessage `json:"payload"`
	PayloadEncoding string          `json:"payload_encoding,omitempty"`
	// Timestamp is the commit time in Unix seconds (Narad's own CLI shows
	// it as milliseconds; it is not).
	Timestamp int64 `json:"timestamp"`
	// ReceiptHandle is opaque to clients and left out of a replay, which
	// leases nothing.
	ReceiptHandle string `json:"receipt_handle,omitempty"`
}

// MemberInfo is one member of GET /v1/cluster/members, as the answering
// node's replica has it (it may lag the leader by milliseconds).
type MemberInfo struct {
	ID              string `json:"id"`
	Addr            string `json:"addr"`   // the member's client HTTP address
	Status          string `json:"status"` // alive or dead
	Draining        bool   `json:"draining"`
	OwnedPartitions int    `json:"owned_partitions"`
	// OutboundMoves counts the owned partitions that have a target.
	OutboundMoves int `json:"outbound_moves"`
	// Beyond the contract: the member's Raft role (voter, non-voter) and
	// whether it is handing its partitions off before it stops.
	Role    string `json:"role,omitempty"`
	Leaving bool   `json:"leaving,omitempty"`
	// Beyond the contract: the bytes the member's stale-copy sweep
	// reclaimed since it started, and those it holds set aside. Each
	// member reports its own; absent, never 0, when it did not answer
	// (or reads dead).
	ReclaimedBytes   *int64 `json:"reclaimed_bytes,omitempty"`
	QuarantinedBytes *int64 `json:"quarantined_bytes,omitempty"`
}

// ClusterVersionInfo answers GET /v1/cluster/version and the finalize
// (beyond the contract): the cluster version nodes write at, the highest
// every member reads (what a finalize moves it to), the newest this
// node's binary reads, and what each member said it reads.
type ClusterVersionInfo struct {
	Version     int             `json:"version"`
	Finalizable int             `json:"finalizable"`
	Newest      int             `json:"newest"`
	Members     []MemberVersion `json:"members"`
}

// MemberVersion is one member's Member.Reads, 0 for a binary older than
// cluster versions.
type MemberVersion struct {
	ID    string `json:"id"`
	Reads int    `json:"reads"`
}

// FinalizeClusterVersion is the body of POST /v1/cluster/version: the
// version to move to, which every member must read.
type FinalizeClusterVersion struct {
	Version int `json:"version"`
}

// MemberList answers GET /v1/cluster/members, sorted by id.
type MemberList struct {
	Members []MemberInfo `json:"members"`
}

// ShardLeader is one Raft shard of GET /v1/cluster/leaders (beyond the
// contract): the metadata shard or an assignment shard, and the member
// that leads it as the answering node's replica knows it; Leader is ""
// while none is known.
type ShardLeader struct {
	Shard  uint64 `json:"shard"`
	Kind   string `json:"kind"` // metadata or assignments
	Leader string `json:"leader"`
	Term   uint64 `json:"term,omitempty"`
}

// LeaderList answers GET /v1/cluster/leaders, the metadata shard first.
type LeaderList struct {
	Shards []ShardLeader `json:"shards"`
}

// WhoAmI answers GET /v1/whoami (beyond the contract): the caller as the
// node authenticated it, so a client such as the console shows only the
// actions the caller's grants allow. Admin is true for root and an admin
// grant.
type WhoAmI struct {
	Username string  `json:"username"`
	Admin    bool    `json:"admin"`
	Grants   []Grant `json:"grants"`
}

// MoveInfo is one partition being moved, in GET /v1/cluster/moves and the
// admin "moves" verb.
type MoveInfo struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
	// Beyond the contract (new optional keys are allowed): each side's
	// status (alive, dead, draining, not_a_member) and why the move may
	// need an abort, so an operator sees a stuck move without asking
	// every node (rule T5). Progress is the destination's own report,
	// only when asked for (?detail=1): it costs a request per destination.
	FromStatus string        `json:"from_status,omitempty"`
	ToStatus   string        `json:"to_status,omitempty"`
	Blocked    []string      `json:"blocked,omitempty"`
	Progress   *MoveProgress `json:"progress,omitempty"`
}

// MoveList answers GET /v1/cluster/moves and the admin "moves" verb,
// sorted by topic then partition; moves is [] when nothing moves.
type MoveList struct {
	Moves []MoveInfo `json:"moves"`
	// Summary is beyond the contract: the admin "moves" verb fills it when
	// asked (MovesRequest.Summary), and GET /v1/cluster/moves?summary=1,
	// since it costs a request per member; without it the /v1 answer
	// stays as the contract has it.
	Summary *MoveSummary `json:"summary,omitempty"`
}

// MoveSummary is the line `narad cluster moves --watch` prints above the
// rows. Done and BytesCopied are counters summed over the nodes that
// answered (each counts what it did as a destination since it started:
// narad_moves_done_total and narad_move_bytes_copied_total), so a watcher
// takes rates from their differences; Frozen and Held are the nodes'
// freeze pacers' figures now (narad_partitions_frozen, narad_moves_held);
// InFlight is the moves listed. Nodes counts the members whose figures are
// in; Missing names the live ones that did not answer in time, whose
// share is left out.
type MoveSummary struct {
	Done        int64    `json:"done"`
	InFlight    int      `json:"in_flight"`
	Held        int      `json:"held"`
	Frozen      int      `json:"frozen"`
	BytesCopied int64    `json:"bytes_copied"`
	Nodes       int      `json:"nodes"`
	Missing     []string `json:"missing,omitempty"`
}

// MoveCounts is one node's share of a MoveSummary, as its "move-counts"
// service answers it to the node that gathers the summary.
type MoveCounts struct {
	Done        int64 `json:"done"`
	BytesCopied int64 `json:"bytes_copied"`
	Held        int   `json:"held"`
	Frozen      int   `json:"frozen"`
}

// AbortResult is what became of an abort of a move; its text is what
// clients read in AbortMoveReply's Result.
type AbortResult string

// The results of an abort.
const (
	// Aborted: the move to that target is gone and the owner unchanged.
	Aborted AbortResult = "aborted"
	// AbortNoMove: the partition had no move to abort.
	AbortNoMove AbortResult = "no_move"
	// AbortRefused: the move targets another node, or the partition moved.
	AbortRefused AbortResult = "refused"
	// AbortNotFound: no such topic or partition.
	AbortNotFound AbortResult = "not_found"
	// AbortUnknown: the outcome could not be read from the leader.
	AbortUnknown AbortResult = "unknown"
)

// AbortOutcome is an abort's result with the partition's assignment as the
// leader read it last: what holds now, not what the caller asked for.
type AbortOutcome struct {
	Result        AbortResult
	Owner, Target string
	// Reason says why, for every result but Aborted.
	Reason string
}

// AbortMoveReply answers an abort, over HTTP and the admin "moves-abort"
// verb alike. Owner and Target are the assignment as the leader read it
// back after the abort: what holds now, not what the caller asked for.
// Refusals carry the contract's "error" key, so a client that reads only
// that still gets a reason.
type AbortMoveReply struct {
	Topic     string `json:"topic"`
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Target    string `json:"target,omitempty"`
	// Result is aborted, no_move, refused, not_found or unknown.
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
}

// DecommissionReply answers a decommission dry run over HTTP, and every
// admin "decommission" request.
type DecommissionReply struct {
	Member string `json:"member"`
	// Verdict is ok or refused for a dry run, draining once started,
	// cancelled once cancelled.
	Verdict         string `json:"verdict"`
	Reason          string `json:"reason,omitempty"`
	OwnedPartitions int    `json:"owned_partitions"`
}

// Grant is one permission of a user (§11): Action is produce, consume,
// create or admin; Patterns are exact topic names or prefixes ending in
// "*", and are left out for admin.
type Grant struct {
	Action   string   `json:"action"`
	Patterns []string `json:"patterns,omitempty"`
}

// UserInfo is a user as /v1/users shows it: never the password hash.
type UserInfo struct {
	Username    string  `json:"username"`
	Grants      []Grant `json:"grants,omitempty"`
	Root        bool    `json:"root,omitempty"`
	CreatedAtMs int64   `json:"created_at_ms,omitempty"`
	UpdatedAtMs int64   `json:"updated_at_ms,omitempty"`
}

// CreateUserRequest is the body of POST /v1/users.
type CreateUserRequest struct {
	Username string  `json:"username"`
	Password string  `json:"password"`
	Grants   []Grant `json:"grants,omitempty"`
}

// GrantsRequest is the body of PUT /v1/users/{username}/grants.
type GrantsRequest struct {
	Grants []Grant `json:"grants"`
}

// PasswordRequest is the body of PUT /v1/users/{username}/password;
// CurrentPassword is what a user changing their own password must send.
type PasswordRequest struct {
	NewPassword     string `json:"new_password"`
	CurrentPassword string `json:"current_password,omitempty"`
}

// DiskFaultRequest is the body of POST /debug/faults/disk (narad serve
// --debug-faults): Fail is "fsync", "write" or "off".
type DiskFaultRequest struct {
	Fail string `json:"fail"`
}

// ClockStepRequest is the body of POST /debug/faults/clock: the node's
// injected clock jumps by StepMs milliseconds (negative: back), on top of
// the steps before. A pointer, so a body without it is refused.
type ClockStepRequest struct {
	StepMs *int64 `json:"step_ms"`
}

// FaultsStatus is the answer of GET /debug/faults: the disk fault mode
// ("off", "fsync", "write") and the sum of the clock steps.
type FaultsStatus struct {
	Disk          string `json:"disk"`
	ClockOffsetMs int64  `json:"clock_offset_ms"`
}

// The batch routes (issue 45), beside the contract's one-record routes and
// additive to them: a client of the public Narad never sends these.

// ProduceBatchRequest is the body of POST /v1/topics/{topic}/produce/batch:
// the records to produce, in order.
type ProduceBatchRequest struct {
	Records []BatchRecord `json:"records"`
}

// BatchRecord is one record of a produce batch. Key and Partition mean
// what the one-record produce's query parameters do. Payload is a JSON
// value whose encoding PayloadEncoding names: "" stores the value's bytes
// as sent (a JSON body), "text" the contents of a JSON string (a body of
// UTF-8 text), "base64" the bytes a JSON string holds in standard base64
// (any body).
type BatchRecord struct {
	Key             string          `json:"key,omitempty"`
	Partition       *int            `json:"partition,omitempty"`
	Payload         json.RawMessage `json:"payload"`
	PayloadEncoding string          `json:"payload_encoding,omitempty"`
}

// BatchResult is one record's or one handle's outcome in a batch answer:
// the status its one-record request would have got (202 produced, 204
// settled), and that request's error text when it failed.
type BatchResult struct {
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

// ProduceBatchResponse answers a produce batch: Accepted counts the 202s,
// Results has one entry per record, in order. A record accepted is durable
// in the answering node's ingress WAL, as a one-record produce's 202 says.
type ProduceBatchResponse struct {
	Accepted int           `json:"accepted"`
	Results  []BatchResult `json:"results"`
}

// ConsumeBatchResponse answers GET /v1/topics/{topic}/consume/batch: up to
// max leased records, each as a one-record consume shows it.
type ConsumeBatchResponse struct {
	Messages []MessageInfo `json:"messages"`
}

// AckBatchRequest is the body of POST /v1/topics/{topic}/ack/batch: the
// handles to settle and what to do with each, "ack" (the default),
// "extend" or "nack".
type AckBatchRequest struct {
	ReceiptHandles []string `json:"receipt_handles"`
	Action         string   `json:"action,omitempty"`
}

// AckBatchResponse answers an ack batch, one result per handle, in order.
type AckBatchResponse struct {
	Results []BatchResult `json:"results"`
}

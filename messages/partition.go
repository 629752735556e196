package messages

import "time"

// PartitionKey names one partition of one topic incarnation. Actors and
// routes use it; the incarnation keeps a recreated topic's partitions apart
// from its predecessor's.
type PartitionKey struct {
	Topic       string
	Incarnation uint64
	Partition   int
}

// Status is the outcome of a request to a partition actor. Each maps to one
// HTTP status in the API layer.
type Status int

const (
	StatusOK Status = iota
	// StatusEmpty: nothing to deliver (consume) or nothing at that offset yet (replay).
	StatusEmpty
	// StatusGone: a receipt handle that no longer matches a lease, or a replay
	// offset removed by retention.
	StatusGone
	// StatusFull: the acked-ahead set is full; the client retries.
	StatusFull
	// StatusUnavailable: the partition cannot serve now (frozen, closing,
	// failed); the caller retries.
	StatusUnavailable
	// StatusFailed: an error the caller cannot fix; Err says what.
	StatusFailed
	// StatusFrozen: a commit refused because the partition is frozen for a
	// move (rule F1). Nothing was appended; the dispatcher holds the
	// records, and only a freeze that outlasts the reroute grace sends them
	// to a sibling partition (rule K3).
	StatusFrozen
	// StatusHeld: a move's prepare the source's freeze pacing held (rule
	// B5); the destination asks again and keeps its turn.
	StatusHeld
)

// CommitRecord is one record the dispatcher asks a partition to commit.
type CommitRecord struct {
	// Seq is the record's ingress WAL sequence number, echoed back so the
	// dispatcher can release it from the WAL.
	Seq uint64
	// Again: the record may be committed here already: the WAL replayed it
	// after a restart, or a commit carrying it got no answer. The partition
	// then looks its origin (Commit.WAL, Seq) up among what it committed
	// last and answers a record it finds without writing it again. Only
	// these are looked up, so a fresh record costs nothing.
	Again bool `json:",omitempty"`
	// Key and Body travel outside the JSON header of the wire form
	// (partitionwire.go); omitempty keeps the header to the seq.
	Key  []byte `json:",omitempty"`
	Body []byte `json:",omitempty"`
}

// Commit asks a partition actor to append records as one group commit.
type Commit struct {
	Key     PartitionKey
	Records []CommitRecord
	// WAL is the ID of the ingress WAL life that handed out every record's
	// Seq (storage.Origin): the partition keeps (WAL, Seq) with each record
	// so that one sent again is known. 0 is unknown: a fan-out copy, a
	// record of a life its WAL forgot, an older node's commit; such records
	// are never looked up and never found.
	WAL uint64 `json:",omitempty"`
	// NotAfter, when set, is the last instant (the owner's wall clock) at
	// which the partition may begin writing Records: past it the sender
	// has stopped waiting for the answer and will send them again, so a
	// late write would store them twice. The partition refuses such a
	// commit unwritten. The owner's node sets it (it does not travel).
	NotAfter time.Time `json:"-"`
}

// Expired reports whether c may no longer begin writing at now.
func (c *Commit) Expired(now time.Time) bool { return !c.NotAfter.IsZero() && now.After(c.NotAfter) }

// CommitDeadline is the NotAfter of a commit whose sender waits until
// waitUntil: three quarters of the wait from now, so that a write begun by
// then has the last quarter to be synced and answered.
func CommitDeadline(now, waitUntil time.Time) time.Time {
	return now.Add(waitUntil.Sub(now) * 3 / 4)
}

// CommitResult answers Commit. On StatusOK every record is durable and
// visible from FirstOffset on; otherwise none was appended.
type CommitResult struct {
	Key         PartitionKey
	Status      Status
	FirstOffset int64
	Seqs        []uint64
	Err         string
}

// ConsumeLimits are the topic settings a reservation obeys; the API layer
// reads them from the topic record on every request, so an alter applies at once.
type ConsumeLimits struct {
	Visibility    time.Duration
	MaxInFlight   int64
	MaxAckedAhead int64
}

// Reserve asks for the next deliverable record under a new lease.
type Reserve struct {
	Limits ConsumeLimits
}

// ReserveAny asks one node for a record of any of several partitions of a
// topic that it owns, leased from the first of them, in the order given,
// that has one. A queue-mode consume that lands on another node then costs
// one request to each owner at most, rather than one per partition. The
// key of the PartitionRequest carrying it names the topic incarnation; its
// partition is ignored.
type ReserveAny struct {
	Partitions []int
	Limits     ConsumeLimits
}

// Delivery is a record handed to a consumer.
type Delivery struct {
	Partition int
	Offset    int64
	// Key and Body travel outside the JSON header of the wire form
	// (partitionwire.go).
	Key  []byte `json:",omitempty"`
	Body []byte `json:",omitempty"`
	// Time is the commit time, Unix nanoseconds.
	Time int64
	// Nonce identifies the lease; zero for a replay read.
	Nonce uint64
}

// Reserved answers Reserve and ReadAt: StatusOK with a Delivery, or
// StatusEmpty, StatusGone (replay of a removed offset), StatusUnavailable.
type Reserved struct {
	Status   Status
	Delivery Delivery
	Err      string
	// More (StatusOK of a Reserve): another record of the partition was
	// deliverable right after this one was leased. A routing node keeps the
	// partition among those it asks first; a hint, never a promise.
	More bool `json:",omitempty"`
	// ExpiresIn (StatusOK or StatusEmpty of a Reserve): how long until the
	// partition's earliest lease out expires and its record becomes
	// deliverable again; 0 when no lease is out. A duration, not a time, so
	// that the clocks of the two nodes need not agree.
	ExpiresIn time.Duration `json:",omitempty"`
	// Empty (ReserveAny): the partitions asked that had nothing to lease,
	// each with its ExpiresIn.
	Empty map[int]time.Duration `json:",omitempty"`
}

// ReadAt is a replay read at one offset: no lease.
type ReadAt struct {
	Offset int64
}

// LeaseAction is what a consumer does with a lease.
type LeaseAction int

const (
	LeaseAck LeaseAction = iota
	LeaseExtend
	LeaseNack
)

// Lease acts on a lease named by a receipt handle.
type Lease struct {
	Action LeaseAction
	Offset int64
	Nonce  uint64
	Limits ConsumeLimits
}

// LeaseResult answers Lease: StatusOK, StatusGone, StatusFull, StatusUnavailable.
type LeaseResult struct {
	Status Status
	Err    string
}

// GetStats asks a partition actor for its stats.
type GetStats struct{}

// PartitionStats answers GetStats; field meanings follow the API contract.
type PartitionStats struct {
	Index         int
	Segments      int
	OldestOffset  int64
	NextOffset    int64
	HighWatermark int64
	SizeBytes     int64
	// OldestSegmentAt is the oldest segment's modification time, Unix seconds.
	OldestSegmentAt int64
	InFlight        int
	// Cursors are the partition's fan-out cursors by child name: the next
	// parent offset to copy to that child. A link the owner has not
	// anchored yet has no entry.
	Cursors map[string]int64 `json:",omitempty"`
}

// Retain asks a partition actor to apply its topic's retention now.
type Retain struct {
	MaxAge time.Duration
}

// PartitionRequest carries one partition request to the node that owns the
// partition, over the "partition" service of the NATS transport, in the
// wire form of partitionwire.go (record bytes raw, not base64). Exactly
// one of the request fields is set.
type PartitionRequest struct {
	Key     PartitionKey `json:"key"`
	Commit  *Commit      `json:"commit,omitempty"`
	Reserve *Reserve     `json:"reserve,omitempty"`
	// ReserveAny is answered in Reply, with Delivery.Partition naming the
	// partition leased.
	ReserveAny *ReserveAny `json:"reserve_any,omitempty"`
	ReadAt     *ReadAt     `json:"read_at,omitempty"`
	Lease      *Lease      `json:"lease,omitempty"`
	Stats      *GetStats   `json:"stats,omitempty"`
	// The move protocol (move.go); chunks have a raw service of their own.
	List    *ListPartition `json:"list,omitempty"`
	Handoff *Handoff       `json:"handoff,omitempty"`
}

// PartitionReply is the owner's answer: the field matching the request.
type PartitionReply struct {
	Commit *CommitResult   `json:"commit,omitempty"`
	Reply  *Reserved       `json:"reply,omitempty"`
	Lease  *LeaseResult    `json:"lease,omitempty"`
	Stats  *PartitionStats `json:"stats,omitempty"`
	// The move protocol (move.go).
	Listing *PartitionListing `json:"listing,omitempty"`
	Handoff *HandoffResult    `json:"handoff,omitempty"`
}

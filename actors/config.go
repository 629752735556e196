package actors

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/auth"
	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/consume"
	"github.com/naradmq/narad/actors/controller"
	"github.com/naradmq/narad/actors/dispatch"
	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/actors/mover"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/actors/produce"
	"github.com/naradmq/narad/actors/route"
	"github.com/naradmq/narad/actors/sweeper"
	"github.com/naradmq/narad/actors/topics"
	"github.com/naradmq/narad/cluster/membership"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/storage"
)

// Config is one node's configuration. Every limit has its unit in its name.
type Config struct {
	// NodeID names this node in the metastore (owner of partitions).
	NodeID string
	// DataDir holds the node's partitions, ingress WAL and metastore.
	DataDir string
	// HTTPAddr is where the client API listens.
	HTTPAddr string
	// Version is the node binary's version, for narad_build_info; "" reads
	// as "unknown". Not a setting: the binary knows it.
	Version string
	// Cluster names the cluster in NATS subjects (narad.<cluster>....).
	Cluster string
	// NATSURL is the NATS server nodes talk through; empty runs the node
	// without NATS (no admin subjects).
	NATSURL string
	// NATSAuth is how the node proves itself to NATS (an nkey seed or
	// .creds file, or user and password) and the TLS files it connects
	// with; zero only reaches an open server (tests).
	NATSAuth transport.Auth
	// HTTPTLSCertFile and HTTPTLSKeyFile, PEM files, serve the client API
	// over TLS: both or neither.
	HTTPTLSCertFile, HTTPTLSKeyFile string

	Log      storage.LogConfig
	WAL      storage.WALConfig
	Consumer storage.ConsumerConfig
	// SyncLane batches the partitions' fsyncs into few syncs (DESIGN.md
	// "Disk I/O"); Disabled gives each partition its own fsync again.
	SyncLane storage.SyncLaneConfig

	// TopicDefaultPartitions is used when a create names none (the API's 3).
	TopicDefaultPartitions int
	// TopicMaxPartitions bounds a topic's partitions (the API's 108).
	TopicMaxPartitions int
	// TopicDefaultRetention replaces a retention of 0 (the API's 7 days).
	TopicDefaultRetention time.Duration
	// MaxConsumeWait caps a long poll; it must stay below the HTTP write
	// timeout or the poll is cut off mid-response.
	MaxConsumeWait time.Duration
	// ConsumeRotateEvery: one queue-mode consume in this many asks the
	// partitions in plain rotation; the others ask this node's own first
	// (a local consume and its ack cost no NATS round trip). The rotation
	// lets a consumer talking to one node still drain every partition
	// while its node's own keep it busy. 1 always rotates. At most 1,024.
	ConsumeRotateEvery int
	// ConsumeRescanInterval is how long a long poll sleeps without looking
	// again when no notice wakes it: a lease that expires makes a record
	// deliverable without a commit. ConsumeFullScanInterval is how often a
	// long poll asks every partition, whatever the ready book believes (a
	// commit notice may be lost). Each within 1ms..1min.
	ConsumeRescanInterval, ConsumeFullScanInterval time.Duration
	// CommitNoticeInterval is the least time between two commit notices
	// this node sends its peers (actors/hints): a busy node names every
	// partition committed meanwhile in one. A peer's long poll wakes up to
	// this much later than a local one. Within 100µs..1s.
	CommitNoticeInterval time.Duration
	// Partition is the partition actors' own settings (actors/partition):
	// how often a partition writes its consumer position, how long a
	// freeze waits for leases out and the chunk reads served off a
	// partition's actor.
	Partition partition.Config
	// Fanout is the fan-out's limits (actors/fanout): the records and
	// bytes of one copy per link (BatchRecords, BatchBytes) and the
	// back-off of a link whose child did not commit (RetryMin, RetryMax).
	Fanout fanout.Config
	// HTTPWriteTimeout bounds writing one response.
	HTTPWriteTimeout time.Duration
	// SecurityEnabled turns on HTTP Basic, users and grants (§2.1 of the
	// API contract) and seeds the root user admin; off, every request acts
	// as root (§2.2, narad dev).
	SecurityEnabled bool
	// DebugFaults serves /debug/faults, an admin's switches that fail this
	// node's disk writes or fsyncs and step its injected clock
	// (actors/debugfaults):
	// for fault-injection runs, never production.
	DebugFaults bool
	// AdminPassword is the seeded admin's password; "" generates one and
	// writes it to AdminPasswordFileName in DataDir (mode 0600), never to
	// the log.
	AdminPassword string
	// PasswordHashCost is bcrypt's cost: each step doubles the work of a
	// login that misses the credential cache (10 is about 50 ms here).
	PasswordHashCost int
	// MaxCachedCredentials bounds the verified credentials kept, so that a
	// produce pays the slow hash once per user and password, not per
	// request; past it the cache forgets one at random.
	MaxCachedCredentials int
	// MaxPasswordChecksInFlight bounds the slow hashes running at once, so
	// a flood of wrong passwords cannot take every core.
	MaxPasswordChecksInFlight int
	// MaxAuthFailureUsers bounds the usernames whose failed attempts are
	// remembered for the 429 limit; MaxAuthFailureSources the sources (a
	// client address trying one username). Past either, the entries whose
	// attempts all came back are forgotten first, so a spray of names or
	// addresses costs a bounded table.
	MaxAuthFailureUsers, MaxAuthFailureSources int
	// HTTPReadHeaderTimeout bounds reading a request's headers, so that a
	// client sending them a byte at a time cannot hold connections open
	// (slowloris). Within the read timeout, which covers the body too.
	HTTPReadHeaderTimeout time.Duration
	// MaxHTTPConnections caps the client API's open connections, so that
	// one client cannot take every file descriptor or goroutine: a
	// connection past it is answered 503 with Retry-After and closed.
	// Within 2..1<<20.
	MaxHTTPConnections int
	// MaxConsumeLongPolls caps the consumes waiting at once (each holds a
	// connection up to MaxConsumeWait); one past it that finds nothing is
	// answered 503 with Retry-After at once. Below MaxHTTPConnections, so
	// waiting consumers never hold every connection.
	MaxConsumeLongPolls int
	// MaxAdminTimeout caps the budget a NATS admin request names
	// (transport.Config.MaxAdminTimeout): admin and viewer clients share
	// the node's handler pool. Within 1s..10m.
	MaxAdminTimeout time.Duration

	// RequestTimeout bounds one request to a partition, a local actor's or
	// a peer's (the transport's own bound is set to it): a partition busy
	// with a large commit answers well within it.
	RequestTimeout time.Duration
	// LeaseRequestTimeout bounds an ack, nack or extend sent on to the
	// peer that owns its partition. The owner answers one within a write
	// of its consumer state, so one unanswered for this long has almost
	// always lost its owner in flight (a process killed while the request
	// was on its way); the client, told 503, sends it again, and the next
	// life, which brought the lease back with a visibility timeout counted
	// from its open, answers it (204 too for an ack the first life had
	// applied). Under RequestTimeout (10 s) the retry came after that
	// restored lease had expired and the record had gone to another
	// consumer. A RequestTimeout below it caps it (leaseRequestTimeout).
	LeaseRequestTimeout time.Duration
	// Dispatch is the dispatcher's settings (actors/dispatch): its retry
	// interval, reroute grace and commit batch records and commits in
	// flight. The byte caps below stay here: the NATS payload check at
	// start (payload.go) reads them too.
	Dispatch dispatch.Config
	// MaxCommitBatchBytes caps one dispatcher commit, counting each record's
	// key, body and recordOverheadBytes, so that the partition log never
	// refuses a batch as too large (it would be retried forever).
	MaxCommitBatchBytes int
	// MaxRemoteCommitBytes caps a dispatcher commit sent to a peer, counted
	// like MaxCommitBatchBytes (the lower of the two applies). A commit
	// crosses NATS as one message, and one that exceeds the server's
	// max_payload can never be sent; a node refuses to start on a server
	// whose max_payload cannot carry a commit of this size with its
	// envelope and headers (payload.go). A config field, not the connection's
	// limit read at each send, so the bound is checked once at start and a
	// reconnect to a server with a smaller limit shows as held commits and
	// an error, not as silently smaller batches. 2 MiB holds the largest
	// record (1 MiB body, 64 KiB key) and fits narad's embedded NATS (8 MiB).
	MaxRemoteCommitBytes int
	// MaxBacklogRecords is how many accepted records may wait for their
	// owner before produce answers 503: the dispatcher holds them in memory.
	MaxBacklogRecords int64
	// MaxBatchRecords bounds the records of one produce batch, the handles
	// of one ack batch and the max of one consume batch (the batch routes
	// beside the contract's, actors/api/batch.go), and MaxBatchBytes a
	// batch request's body: a batch is decoded whole in memory, and its
	// records wait in one WAL group.
	MaxBatchRecords int
	MaxBatchBytes   int
	// RetentionInterval is how often partitions apply age retention.
	RetentionInterval time.Duration
	// ShutdownDrainTimeout bounds how long a stopping node waits for the
	// dispatcher to commit what its WAL holds.
	ShutdownDrainTimeout time.Duration
	// PartitionMaxRestarts within PartitionRestartWindow: past that a failing
	// partition actor is stopped and reported, and the node keeps serving.
	PartitionMaxRestarts int
	// PartitionRestartWindow is the window PartitionMaxRestarts counts in.
	PartitionRestartWindow time.Duration
	// PartitionRestartBackoff is the first restart delay; each further
	// failure in the window waits one more of it.
	PartitionRestartBackoff time.Duration

	// Membership: HeartbeatInterval (how often this node heartbeats into
	// the metadata shard) and DeadTimeout (how long the metadata leader
	// waits without a heartbeat before it marks a member dead).
	Membership membership.Config

	// Controller is the controller's settings (actors/controller): the
	// voters it keeps, the creates it groups, how often it plans and
	// whether it may, and when it clears a dead destination's move.
	Controller controller.Config
	// ControllerTimeout bounds one request to the controller, forwarding
	// and retries while the metadata leadership moves included. It stays
	// here, not in Controller: the node's asks read it, and the controller
	// gets it in controller.Deps to bound its own passes.
	ControllerTimeout time.Duration
	// FanoutAnchorWait bounds how long an attach (and a create under a
	// parent) waits for every parent partition's owner to anchor the new
	// link's cursor before it answers: past it the answer is 200 anyway
	// (an owner that is down commits nothing meanwhile, so it anchors at
	// the same place when it returns). Below HTTPWriteTimeout, so the
	// answer still reaches the client.
	FanoutAnchorWait time.Duration

	// Move is the move worker's part of the seed's constants (catch-up
	// bounds, FreezeTTL, ForcePromoteAfter, ...); the source uses its
	// FreezeTTL too.
	Move move.Config
	// Mover is the move runner's and its workers' limits (actors/mover):
	// the full scan and the sweep's turn (FullScanEvery, SweepEveryTicks),
	// the workers' restarts (WorkerMaxRestarts, WorkerRestartWindow,
	// WorkerRestartBackoff), a copy's chunk window and inline bytes
	// (ChunkWindow, InlineBytes) and the flip and install batches
	// (FlipBatchWindow, MaxFlipBatch, InstallBatchWindow,
	// MaxInstallBatch). What other actors read too stays here: MoveTick,
	// MoveChunkBytes, Move, RequestTimeout.
	Mover mover.Config
	// MoveChunkBytes bounds one chunk read of a copy: chunks travel as raw
	// bytes, so 768 KiB plus headers stays under NATS's default 1 MiB max
	// payload.
	MoveChunkBytes int
	// MoveGroupMaxItems and MoveGroupsInFlight carry the move requests
	// waiting for the same source in one request
	// (actors/route/movegroup.go): at most MoveGroupMaxItems in a group (a group's reply holds that many
	// listings, well under NATS's 1 MiB at a few hundred bytes each), and
	// at most MoveGroupsInFlight groups out to one source, so a request
	// never waits long behind a slow group. Within 1..1024 and 1..64.
	MoveGroupMaxItems  int
	MoveGroupsInFlight int
	// CommitGroupMaxItems and CommitGroupsInFlight carry the dispatcher's
	// commits waiting for the same peer owner in one request
	// (actors/route/commitgroup.go): at most CommitGroupMaxItems commits in a group, and
	// at most CommitGroupsInFlight groups out to one owner, so a commit
	// goes at once while fewer are out and otherwise with the next group.
	// A commit carries about one record under a steady load (one is in
	// flight per partition), so each paid a NATS round trip of its own.
	// A group larger than NATS carries is sent again commit by commit.
	// Within 1..1024 and 1..64.
	CommitGroupMaxItems  int
	CommitGroupsInFlight int
	// MoveGroupWaitFor bounds how long a source's answer to a group waits
	// for any one item (1 s): an item still unanswered then (its partition
	// actor busy) answers 504, unknown, and its worker asks again, so a
	// fence never waits in a group behind another partition's slow listing
	// for longer. A listing or a fence takes milliseconds; a re-arm every
	// FreezeTTL/4 has seconds to spare. At least 10 ms; RequestTimeout
	// caps it.
	MoveGroupWaitFor time.Duration
	// MoveTick is the move runner's tick (the seed's 1 s; its full scan is
	// Mover.FullScanEvery), which the partitions supervisor retries a
	// failed reconcile on too.
	MoveTick time.Duration
	// Sweep is the stale-copy sweeper's limits (actors/sweeper): the copies
	// a pass judges and the owners it asks at once, and the quarantine
	// listings and asks it holds.
	Sweep sweeper.Config
	// MaxInFlightMoves caps the moves the controller keeps in flight (rule
	// B1: seed 003's 512, what a bulk hand-off needs to move a node's
	// partitions in seconds; the freeze pacing below, not this cap, bounds
	// how many partitions a move makes unwritable at once). The freeze
	// pacing reads it too, so it stays here; the controller gets it in
	// controller.Deps.
	MaxInFlightMoves int
	// FreezePaceTick, MaxNewFreezesPerTick and MaxFrozenPartitions pace the
	// freezes a node arms as a move's source (rule B5, seed 003's 4 and
	// 128): at most MaxNewFreezesPerTick new freezes per tick, and none
	// while MaxFrozenPartitions of its partitions are frozen, so a bulk
	// move never makes more than that many partitions refuse writes at once.
	// The tick is 1 ms: 4 per ms is 4,000 freezes a second, above the
	// 3,334/s that hand 10,000 partitions off in 3 s, so the frozen cap
	// (how fast freezes end) is what paces a bulk move, not the tick.
	FreezePaceTick       time.Duration
	MaxNewFreezesPerTick int
	MaxFrozenPartitions  int
	// FreezeHoldFor is how long a prepare the pacing holds waits at the
	// source for its turn before it is answered "held" (the destination
	// asks again after Move.RetryAfter and keeps its place in the line for
	// FreezeTurnKeepFor). It is capped at half of RequestTimeout
	// (freezeHold), so that no freeze is armed for a request its sender
	// gave up on.
	FreezeHoldFor     time.Duration
	FreezeTurnKeepFor time.Duration
	// ShutdownHandoffTimeout bounds the hand-off at shutdown (rule B9:
	// 15 s): on the first stop signal the node leaves and waits this long
	// at most for its partitions to move; 0 skips the hand-off.
	ShutdownHandoffTimeout time.Duration
	// MaxParallelPartitionOpens bounds the partitions that open their log
	// at once, a count (8): each recovery walk holds a Log.ReadBufferBytes
	// window (256 KiB) while it reads its active segment, so the hundreds
	// a node reopens at start would hold tens of MiB at once and queue on
	// the disk all the same. A partition waiting its turn keeps its
	// requests in its mailbox and answers them once open. The node holds
	// the bound (partition.Deps.Opens), as it holds its open files.
	MaxParallelPartitionOpens int

	// clock is the time partition actors (the handoff freeze, leases, the
	// consumer-flush timer) and the dispatcher (retries, reroute grace)
	// decide by; nil is the wall clock. Tests set a fake one to move time
	// themselves instead of sleeping.
	clock clock.Clock
	// steady is the node's clock for what must never be stepped or moved
	// by a node-wide fake: the cluster's cadences, record times, the
	// durations metrics measure (package clock says why); nil is the wall
	// clock.
	steady clock.Clock

	// faults injects failures in tests; nil in production.
	faults *faultHooks
}

// faultHooks are failures a test can inject into a node.
type faultHooks struct {
	// partition are the partition actors' knobs (partition.Knobs: a
	// failing open, a hold between a write's sync and its publish, a
	// freeze actor's step, a report past the pipeline), handed to them in
	// their partition.Deps.
	partition partition.Knobs
	// mover are the move workers' knobs (mover.Knobs: Pass before each
	// copy pass, Flip before the flip, Listed after a pass's listing),
	// handed to them in their mover.Deps.
	mover mover.Knobs
	// produceAdmitted runs in Node.Produce once the record is admitted
	// (the node was not draining) and before it is appended to the ingress
	// WAL; it may block to hold the produce there.
	produceAdmitted func(topic string, body []byte)
	// fanout are the fan-out actors' knobs (fanout.Knobs.OnRecords runs as
	// one takes a read's answer, and may panic as a bug would), handed to
	// them in their fanout.Deps.
	fanout fanout.Knobs
	// noSpace, while it returns true, fails the WAL's appends and the
	// write probe as a full disk does (ENOSPC).
	noSpace func() bool
}

// leaseRequestTimeout is LeaseRequestTimeout, at most RequestTimeout.
func (c Config) leaseRequestTimeout() time.Duration {
	return min(c.LeaseRequestTimeout, c.RequestTimeout)
}

// groupConfig is the bounds of the router's request groups (actors/route).
func (c Config) groupConfig() route.GroupConfig {
	return route.GroupConfig{CommitGroupMaxItems: c.CommitGroupMaxItems, CommitGroupsInFlight: c.CommitGroupsInFlight,
		MoveGroupMaxItems: c.MoveGroupMaxItems, MoveGroupsInFlight: c.MoveGroupsInFlight}
}

// freezeHold is how long a paced prepare waits at the source: FreezeHoldFor,
// at most half the asker's RequestTimeout.
func (c Config) freezeHold() time.Duration { return min(c.FreezeHoldFor, c.RequestTimeout/2) }

// produce is the produce path's room (actors/produce).
func (c Config) produce() produce.Config {
	return produce.Config{NodeID: c.NodeID, MaxBacklogRecords: c.MaxBacklogRecords}
}

// consume is how the consume path waits and whom it asks first
// (actors/consume).
func (c Config) consume() consume.Config {
	return consume.Config{NodeID: c.NodeID, MaxWait: c.MaxConsumeWait, MaxLongPolls: c.MaxConsumeLongPolls, RotateEvery: c.ConsumeRotateEvery,
		RescanInterval: c.ConsumeRescanInterval, FullScanInterval: c.ConsumeFullScanInterval}
}

// topics is the topic verbs' defaults and limits (actors/topics).
func (c Config) topics() topics.Config {
	return topics.Config{DefaultPartitions: c.TopicDefaultPartitions, MaxPartitions: c.TopicMaxPartitions,
		DefaultRetention: c.TopicDefaultRetention, AnchorWait: c.FanoutAnchorWait}
}

// AdminPasswordFileName is the file in the data directory that holds the
// admin password the metadata leader generated, when NARAD_ADMIN_PASSWORD
// was not set.
const AdminPasswordFileName = "admin.password"

// accounts is the users' settings (actors/auth).
func (c Config) accounts() auth.Config {
	return auth.Config{AdminPassword: c.AdminPassword, AdminPasswordFile: filepath.Join(c.DataDir, AdminPasswordFileName),
		PasswordHashCost: c.PasswordHashCost, RequestTimeout: c.RequestTimeout}
}

// maxHTTPConnections bounds MaxHTTPConnections: more than a process may
// have file descriptors is a typo, not a setting.
const maxHTTPConnections = 1 << 20

// maxRequestBytes caps a record's body at what one API request may carry
// (413): a batch request holds at least one. The HTTP handler refuses a
// larger body before Produce sees it; produce checks it again for any
// other caller. A node whose Log.MaxBodyBytes is lower refuses such a
// record at the WAL (400).
const maxRequestBytes = api.MaxBodyBytes

// recordOverheadBytes is what a dispatcher counts per record on top of its
// key and body: more than a log frame's header, so its byte cap is safe.
const recordOverheadBytes = dispatch.RecordOverheadBytes

// DefaultConfig is a node's configuration unless told otherwise.
func DefaultConfig() Config {
	wal := storage.DefaultWALConfig()
	// The API takes any key; the partition log's limit (64 KiB) is the one
	// that matters, so the WAL must not be stricter.
	wal.MaxKeyBytes = storage.DefaultLogConfig().MaxKeyBytes
	return Config{
		NodeID:                    "n1",
		DataDir:                   "data",
		HTTPAddr:                  "127.0.0.1:7942",
		Cluster:                   "narad",
		Log:                       storage.DefaultLogConfig(),
		WAL:                       wal,
		Consumer:                  storage.DefaultConsumerConfig(),
		SyncLane:                  storage.DefaultSyncLaneConfig(),
		TopicDefaultPartitions:    3,
		TopicMaxPartitions:        108,
		TopicDefaultRetention:     7 * 24 * time.Hour,
		MaxConsumeWait:            10 * time.Second,
		ConsumeRotateEvery:        8,
		CommitNoticeInterval:      time.Millisecond,
		Fanout:                    fanout.DefaultConfig(),
		Partition:                 partition.DefaultConfig(),
		ConsumeRescanInterval:     200 * time.Millisecond,
		ConsumeFullScanInterval:   time.Second,
		HTTPWriteTimeout:          30 * time.Second,
		HTTPReadHeaderTimeout:     5 * time.Second,
		RequestTimeout:            10 * time.Second,
		LeaseRequestTimeout:       2 * time.Second,
		Dispatch:                  dispatch.DefaultConfig(),
		MaxCommitBatchBytes:       4 << 20,
		MaxRemoteCommitBytes:      2 << 20,
		MaxBacklogRecords:         1 << 20,
		MaxBatchRecords:           1000,
		MaxBatchBytes:             8 << 20,
		RetentionInterval:         time.Minute,
		ShutdownDrainTimeout:      30 * time.Second,
		PartitionMaxRestarts:      5,
		PartitionRestartWindow:    time.Minute,
		PartitionRestartBackoff:   200 * time.Millisecond,
		Membership:                membership.Config{}.WithDefaults(),
		ControllerTimeout:         10 * time.Second,
		FanoutAnchorWait:          5 * time.Second,
		Move:                      move.DefaultConfig(),
		MoveChunkBytes:            768 << 10,
		MoveGroupMaxItems:         128,
		MoveGroupsInFlight:        4,
		CommitGroupMaxItems:       256,
		CommitGroupsInFlight:      2,
		MoveGroupWaitFor:          time.Second,
		MoveTick:                  time.Second,
		Mover:                     mover.DefaultConfig(),
		Sweep:                     sweeper.DefaultConfig(),
		Controller:                controller.DefaultConfig(),
		MaxInFlightMoves:          512,
		FreezePaceTick:            time.Millisecond,
		MaxNewFreezesPerTick:      4,
		MaxFrozenPartitions:       128,
		FreezeHoldFor:             2 * time.Second,
		FreezeTurnKeepFor:         3 * time.Second,
		ShutdownHandoffTimeout:    15 * time.Second,
		MaxParallelPartitionOpens: 8,

		// Security (API contract §2.1).
		SecurityEnabled:           true,
		PasswordHashCost:          10,
		MaxCachedCredentials:      10000,
		MaxPasswordChecksInFlight: 4,
		MaxAuthFailureUsers:       10000,
		MaxAuthFailureSources:     10000,

		// Caps on waiting clients: far above any load a test or bench/
		// runs (tens of clients).
		MaxHTTPConnections:  4096,
		MaxConsumeLongPolls: 1024,
		MaxAdminTimeout:     transport.DefaultMaxAdminTimeout,
	}
}

// Validate reports the first field out of range.
func (c Config) Validate() error {
	bad := func(field string, v any, why string) error {
		return fmt.Errorf("node config: %s %v %s: %w", field, v, why, ErrInvalid)
	}
	switch {
	case c.NodeID == "":
		return bad("NodeID", `""`, "must be set")
	case c.DataDir == "":
		return bad("DataDir", `""`, "must be set")
	case c.NATSAuth.Validate() != nil:
		return fmt.Errorf("node config: NATSAuth: %w: %w", c.NATSAuth.Validate(), ErrInvalid)
	case (c.HTTPTLSCertFile == "") != (c.HTTPTLSKeyFile == ""):
		return bad("HTTPTLSCertFile/HTTPTLSKeyFile", fmt.Sprintf("%q/%q", c.HTTPTLSCertFile, c.HTTPTLSKeyFile), "must be both set or both empty")
	case c.MaxConsumeWait <= 0 || c.MaxConsumeWait >= c.HTTPWriteTimeout:
		return bad("MaxConsumeWait", c.MaxConsumeWait, "must be positive and below HTTPWriteTimeout")
	case c.CommitNoticeInterval < 100*time.Microsecond || c.CommitNoticeInterval > time.Second:
		return bad("CommitNoticeInterval", c.CommitNoticeInterval, "must be within 100µs..1s")
	case c.HTTPReadHeaderTimeout <= 0 || c.HTTPReadHeaderTimeout > httpReadTimeout:
		return bad("HTTPReadHeaderTimeout", c.HTTPReadHeaderTimeout, "must be positive and at most the read timeout ("+httpReadTimeout.String()+")")
	case c.MaxHTTPConnections < 2 || c.MaxHTTPConnections > maxHTTPConnections:
		return bad("MaxHTTPConnections", c.MaxHTTPConnections, fmt.Sprintf("must be within 2..%d", maxHTTPConnections))
	case c.MaxConsumeLongPolls < 1 || c.MaxConsumeLongPolls >= c.MaxHTTPConnections:
		return bad("MaxConsumeLongPolls", c.MaxConsumeLongPolls, "must be at least 1 and below MaxHTTPConnections")
	case c.MaxAdminTimeout < transport.AdminTimeoutMin || c.MaxAdminTimeout > transport.AdminTimeoutMax:
		return bad("MaxAdminTimeout", c.MaxAdminTimeout, "must be within "+transport.AdminTimeoutMin.String()+".."+transport.AdminTimeoutMax.String())
	case c.RequestTimeout <= 0:
		return bad("RequestTimeout", c.RequestTimeout, "must be positive")
	case c.LeaseRequestTimeout <= 0:
		return bad("LeaseRequestTimeout", c.LeaseRequestTimeout, "must be positive")
	case c.MaxCachedCredentials < 1 || c.MaxCachedCredentials > 1000000:
		return bad("MaxCachedCredentials", c.MaxCachedCredentials, "must be within 1..1000000")
	case c.MaxPasswordChecksInFlight < 1 || c.MaxPasswordChecksInFlight > 1024:
		return bad("MaxPasswordChecksInFlight", c.MaxPasswordChecksInFlight, "must be within 1..1024")
	case c.MaxAuthFailureUsers < 1 || c.MaxAuthFailureUsers > 1000000:
		return bad("MaxAuthFailureUsers", c.MaxAuthFailureUsers, "must be within 1..1000000")
	case c.MaxAuthFailureSources < 1 || c.MaxAuthFailureSources > 1000000:
		return bad("MaxAuthFailureSources", c.MaxAuthFailureSources, "must be within 1..1000000")
	case c.Dispatch.MaxCommitBatchRecords > c.Log.MaxBatchRecords:
		return bad("Dispatch.MaxCommitBatchRecords", c.Dispatch.MaxCommitBatchRecords, "must be within 1..Log.MaxBatchRecords")
	case c.MaxCommitBatchBytes < c.Log.MaxBodyBytes+c.Log.MaxKeyBytes+recordOverheadBytes:
		return bad("MaxCommitBatchBytes", c.MaxCommitBatchBytes, "must hold one largest record")
	case c.MaxRemoteCommitBytes < c.Log.MaxBodyBytes+c.Log.MaxKeyBytes+recordOverheadBytes || c.MaxRemoteCommitBytes > 64<<20:
		// 64 MiB is the largest max_payload a NATS server takes.
		return bad("MaxRemoteCommitBytes", c.MaxRemoteCommitBytes, "must hold one largest record and be at most 64 MiB")
	case c.Dispatch.MaxCommitsInFlight*c.Dispatch.MaxCommitBatchRecords > c.Log.MaxBatchRecords:
		// A partition writes every commit that queued during a sync as one batch.
		return bad("MaxCommitsInFlight*MaxCommitBatchRecords", c.Dispatch.MaxCommitsInFlight*c.Dispatch.MaxCommitBatchRecords, "must fit Log.MaxBatchRecords")
	case c.Dispatch.MaxCommitsInFlight*c.MaxCommitBatchBytes+recordOverheadBytes > c.Log.MaxBatchBytes:
		return bad("MaxCommitsInFlight*MaxCommitBatchBytes", c.Dispatch.MaxCommitsInFlight*c.MaxCommitBatchBytes, "must fit Log.MaxBatchBytes")
	case c.MaxBatchRecords < 1 || c.MaxBatchRecords > 100000:
		return bad("MaxBatchRecords", c.MaxBatchRecords, "must be within 1..100000")
	case c.MaxBatchBytes < maxRequestBytes || c.MaxBatchBytes > 256<<20:
		// A batch holds at least one largest record.
		return bad("MaxBatchBytes", c.MaxBatchBytes, "must be within 1 MiB..256 MiB")
	case c.RetentionInterval <= 0:
		return bad("RetentionInterval", c.RetentionInterval, "must be positive")
	case c.ShutdownDrainTimeout < 0:
		return bad("ShutdownDrainTimeout", c.ShutdownDrainTimeout, "must not be negative")
	case c.PartitionMaxRestarts < 0 || c.PartitionRestartWindow <= 0 || c.PartitionRestartBackoff <= 0:
		return bad("PartitionMaxRestarts/Window/Backoff", fmt.Sprint(c.PartitionMaxRestarts, c.PartitionRestartWindow, c.PartitionRestartBackoff), "must be positive")
	case c.ControllerTimeout <= 0:
		return bad("ControllerTimeout", c.ControllerTimeout, "must be positive")
	case c.FanoutAnchorWait < 0 || c.FanoutAnchorWait >= c.HTTPWriteTimeout:
		return bad("FanoutAnchorWait", c.FanoutAnchorWait, "must be within 0..HTTPWriteTimeout")
	case c.MaxParallelPartitionOpens < 1 || c.MaxParallelPartitionOpens > 1024:
		return bad("MaxParallelPartitionOpens", c.MaxParallelPartitionOpens, "must be within 1..1024")
	case c.MoveChunkBytes < 4<<10 || c.MoveChunkBytes > 900<<10:
		return bad("MoveChunkBytes", c.MoveChunkBytes, "must be within 4 KiB..900 KiB (a chunk travels in one 1 MiB NATS message)")
	case c.MoveGroupMaxItems < 1 || c.MoveGroupMaxItems > route.MaxMoveGroupItems:
		return bad("MoveGroupMaxItems", c.MoveGroupMaxItems, "must be within 1..1024")
	case c.MoveGroupsInFlight < 1 || c.MoveGroupsInFlight > 64:
		return bad("MoveGroupsInFlight", c.MoveGroupsInFlight, "must be within 1..64")
	case c.CommitGroupMaxItems < 1 || c.CommitGroupMaxItems > route.MaxCommitGroupItems:
		return bad("CommitGroupMaxItems", c.CommitGroupMaxItems, "must be within 1..1024")
	case c.CommitGroupsInFlight < 1 || c.CommitGroupsInFlight > 64:
		return bad("CommitGroupsInFlight", c.CommitGroupsInFlight, "must be within 1..64")
	case c.MoveGroupWaitFor < 10*time.Millisecond:
		return bad("MoveGroupWaitFor", c.MoveGroupWaitFor, "must be at least 10ms")
	case c.MoveTick <= 0 || c.Mover.FullScanEvery < c.MoveTick:
		return bad("MoveTick/Mover.FullScanEvery", fmt.Sprint(c.MoveTick, c.Mover.FullScanEvery), "must be positive, the full scan at least a tick")
	case c.MaxInFlightMoves < 1 || c.MaxInFlightMoves > 100000:
		return bad("MaxInFlightMoves", c.MaxInFlightMoves, "must be within 1..100000")
	case c.FreezePaceTick <= 0 || c.FreezePaceTick > time.Second:
		return bad("FreezePaceTick", c.FreezePaceTick, "must be within (0, 1s]")
	case c.MaxNewFreezesPerTick < 1 || c.MaxNewFreezesPerTick > c.MaxFrozenPartitions:
		return bad("MaxNewFreezesPerTick", c.MaxNewFreezesPerTick, "must be within 1..MaxFrozenPartitions")
	case c.MaxFrozenPartitions < 1 || c.MaxFrozenPartitions > 100000:
		return bad("MaxFrozenPartitions", c.MaxFrozenPartitions, "must be within 1..100000")
	case c.FreezeHoldFor < 0:
		return bad("FreezeHoldFor", c.FreezeHoldFor, "must not be negative")
	case c.FreezeTurnKeepFor < c.Move.RetryAfter || c.FreezeTurnKeepFor <= c.FreezeHoldFor:
		return bad("FreezeTurnKeepFor", c.FreezeTurnKeepFor, "must be at least Move.RetryAfter (a held move asks again after it) and above FreezeHoldFor")
	case c.ShutdownHandoffTimeout < 0:
		return bad("ShutdownHandoffTimeout", c.ShutdownHandoffTimeout, "must not be negative (0 skips the hand-off)")
	}
	if err := c.produce().Validate(); err != nil {
		return fmt.Errorf("node config: %w", err)
	}
	if err := c.consume().Validate(); err != nil {
		return fmt.Errorf("node config: %w", err)
	}
	if err := c.topics().Validate(); err != nil {
		return fmt.Errorf("node config: %w", err)
	}
	if err := c.accounts().Validate(); err != nil {
		return fmt.Errorf("node config: %w", err)
	}
	if err := paceConfig(c).Validate(); err != nil {
		return fmt.Errorf("node config: %w: %w", err, ErrInvalid)
	}
	if err := c.Move.Validate(); err != nil {
		return fmt.Errorf("node config: %w: %w", err, ErrInvalid)
	}
	if err := c.Mover.Validate(); err != nil {
		return fmt.Errorf("node config: Mover: %w: %w", err, ErrInvalid)
	}
	if err := c.Sweep.Validate(); err != nil {
		return fmt.Errorf("node config: Sweep: %w: %w", err, ErrInvalid)
	}
	if err := c.Partition.Validate(); err != nil {
		return fmt.Errorf("node config: Partition: %w: %w", err, ErrInvalid)
	}
	if err := c.Fanout.Validate(); err != nil {
		return fmt.Errorf("node config: Fanout: %w: %w", err, ErrInvalid)
	}
	if err := c.Dispatch.Validate(); err != nil {
		return fmt.Errorf("node config: Dispatch: %w: %w", err, ErrInvalid)
	}
	if err := c.Controller.Validate(); err != nil {
		return fmt.Errorf("node config: Controller: %w: %w", err, ErrInvalid)
	}
	if err := c.Membership.Validate(); err != nil {
		return err
	}
	if err := c.Log.Validate(); err != nil {
		return err
	}
	if err := c.WAL.Validate(); err != nil {
		return err
	}
	if err := c.SyncLane.Validate(); err != nil {
		return err
	}
	return c.Consumer.Validate()
}

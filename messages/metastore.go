package messages

import "encoding/json"

// CommandVersion is the newest encoding version of a metastore command. A
// replica refuses (panics on) a command from a newer version rather than
// apply it wrongly: state machines must stay deterministic. Version 2 adds
// the fan-out commands (AttachChild, DetachChild, CreateTopic with a
// Parent); the store stamps those 2 and every other command 1, so a
// replica of an older binary keeps applying the commands it knows and
// stops at the first it does not, never skipping one. Version 3 adds
// SetTargets (many target compare-and-swaps in one entry). Version 4 adds
// SetClusterVersion. Version 5 adds ForgetMember and Recreates (a member
// whose disk is lost, its partitions re-created empty).
const CommandVersion = 5

// LostDiskCommandVersion is the version ForgetMember and Recreates need.
const LostDiskCommandVersion = 5

// ClusterVersionCommandVersion is the version SetClusterVersion needs.
const ClusterVersionCommandVersion = 4

// Cluster versions gate the formats a node writes that an older node
// would not read: a node writes a format only once the cluster version
// names it, and the cluster version moves only when every member reads it
// (Member.Reads; `narad cluster version --finalize`), the way CockroachDB's
// cluster version or Kafka's metadata.version hold new formats back during
// a rolling upgrade. Reading is never gated: every node reads every format
// it knows.
//
// A new cluster version that a later binary adds must come with a new
// CommandVersion for SetClusterVersion, so that a replica which does not
// know it stops rather than apply it differently.
const (
	// ClusterVersionBase is what every node reads: record frames without
	// their origin (kinds 1 and 2), partition messages of wire version 1.
	// A cluster whose version is unset (0: it began before cluster
	// versions) writes this.
	ClusterVersionBase = 1
	// ClusterVersionOrigins adds record frames that carry their origin
	// (kind 3), which dedupe a record sent again after a crash. A node
	// older than commit 5ffa51a reads one as damage.
	ClusterVersionOrigins = 2
	// ClusterVersionBoundedSchemas has the metadata state keep only a
	// topic's newest schemas (metastore.MaxSchemaVersions). A replica of
	// an older binary keeps them all, so no replica trims until every
	// member does: the replicas' states stay the same.
	ClusterVersionBoundedSchemas = 3
	// ClusterVersionLostDisk adds forgetting a member whose disk is lost:
	// its partitions are re-created on live nodes with a log that starts
	// at Assignment.Floor. A node older than that would open such a
	// partition at offset 0 and hand out offsets consumers already saw,
	// and its replica would stop at the commands (LostDiskCommandVersion).
	ClusterVersionLostDisk = 4
	// ClusterVersionNewest is the newest this binary reads and writes: what
	// it reports as Member.Reads.
	ClusterVersionNewest = ClusterVersionLostDisk
)

// FanoutCommandVersion is the version the fan-out commands need.
const FanoutCommandVersion = 2

// TargetsCommandVersion is the version a SetTargets command needs.
const TargetsCommandVersion = 3

// MaxChildren bounds a parent's fan-out links: each is a fan-out actor per
// parent partition on its owner and a cursor file per partition, and the
// contract's child limit is 108.
const MaxChildren = 108

// Topic is a topic record in the metadata shard.
type Topic struct {
	Name string `json:"name"`
	// Incarnation is unique per create (the Raft index of the create), so a
	// deleted and recreated name never mixes data with its predecessor.
	Incarnation uint64 `json:"incarnation"`
	Partitions  int    `json:"partitions"`
	// RetentionMs is the resolved age retention; 0 keeps records forever.
	RetentionMs               int64 `json:"retention_ms"`
	VisibilityTimeoutMs       int64 `json:"visibility_timeout_ms"`
	MaxInFlightPerPartition   int64 `json:"max_in_flight_per_partition"`
	MaxAckedAheadPerPartition int64 `json:"max_acked_ahead_per_partition"`
	// CreatedAt is Unix seconds, stamped by the proposer.
	CreatedAt int64 `json:"created_at"`
	// Schemas are the registered JSON Schema versions, latest last: the
	// newest ones only, as many as the metastore keeps (its
	// MaxSchemaVersions); SchemasDropped counts the older ones it let go.
	Schemas []json.RawMessage `json:"schemas,omitempty"`
	// SchemasDropped is how many of the oldest schema versions the
	// metastore dropped from Schemas, so a version number (SchemaVersion)
	// still grows with every registration.
	SchemasDropped int `json:"schemas_dropped,omitempty"`
	// Owner is the username of the creator; empty while security is off.
	Owner string `json:"owner,omitempty"`
	// Parent names the topic this one is a fan-out child of; empty for a
	// parent or a standalone topic. A topic is a child or a parent, never
	// both (no chains).
	Parent string `json:"parent,omitempty"`
	// AttachEpoch is the Raft index of the attach that made this topic a
	// child; a re-attach gives a new one, so a cursor left over from an
	// earlier attach is never taken for this one's.
	AttachEpoch uint64 `json:"attach_epoch,omitempty"`
	// FanoutDelayMs is a child's delay: a parent record reaches it once
	// this long has passed since the parent committed it. 0 for no delay.
	FanoutDelayMs int64 `json:"fanout_delay_ms,omitempty"`
	// Children are a parent's fan-out links, in attach order.
	Children []ChildLink `json:"children,omitempty"`
}

// ChildLink is one fan-out link as the parent's record holds it; the
// child's record holds the same Parent, AttachEpoch and delay.
type ChildLink struct {
	Name string `json:"name"`
	// Incarnation is the child topic's incarnation, so a child deleted and
	// recreated under the same name is never fed by the old link.
	Incarnation uint64 `json:"incarnation"`
	AttachEpoch uint64 `json:"attach_epoch"`
	DelayMs     int64  `json:"delay_ms,omitempty"`
}

// Role is a topic's fan-out role as the API names it.
func (t Topic) Role() string {
	switch {
	case t.Parent != "":
		return "child"
	case len(t.Children) > 0:
		return "parent"
	}
	return "standalone"
}

// SchemaVersion numbers the topic's latest schema, 1 for the first ever
// registered, 0 without one. It grows with every registration even once
// the oldest are dropped, so a cache keyed by it never serves a schema
// that was replaced.
func (t Topic) SchemaVersion() int { return t.SchemasDropped + len(t.Schemas) }

// User is a user's record in the metadata shard. The proposer hashes the
// password and stamps the times: the state machine reads no clock and
// draws no randomness.
type User struct {
	Username string `json:"username"`
	// PasswordHash is the slow hash of the password (bcrypt); it never
	// leaves the node.
	PasswordHash string  `json:"password_hash"`
	Grants       []Grant `json:"grants,omitempty"`
	// Root allows everything, and only root may give admin.
	Root        bool  `json:"root,omitempty"`
	CreatedAtMs int64 `json:"created_at_ms"`
	UpdatedAtMs int64 `json:"updated_at_ms"`
}

// Assignment says which node serves a partition now (Owner) and where it
// should go (Target, empty when settled). It lives in one of the assignment
// shards, chosen by a hash of (Incarnation, Partition).
type Assignment struct {
	Topic       string `json:"topic"`
	Incarnation uint64 `json:"incarnation"`
	Partition   int    `json:"partition"`
	Owner       string `json:"owner"`
	Target      string `json:"target,omitempty"`
	// FlippedFrom and FlippedAtHWM record the last flip that named the
	// copy's HWM: the node the partition moved away from and the HWM the
	// new owner's copy ends at. The old owner compares its own HWM with it
	// as it closes the partition: records past it were never copied and
	// are set aside, never dropped. Empty when no such flip happened.
	FlippedFrom  string `json:"flipped_from,omitempty"`
	FlippedAtHWM int64  `json:"flipped_at_hwm,omitempty"`
	// TargetSince is the log index of the entry that set Target (0 with no
	// target): it names the move. A flip proposed for one move can reach
	// the log late, after an abort and a re-plan to the same target; it
	// names the move it was proposed for and is refused for the next one,
	// whose source may have taken commits since the first let go.
	TargetSince uint64 `json:"target_since,omitempty"`
	// Floor is the first offset of the partition's log when it was
	// re-created empty because its owner's disk was lost (Recreate); 0
	// otherwise. It stays through later moves: an owner that opens the
	// partition with no log of its own starts one here, above every
	// offset the lost copy could have handed out, so no consumer ever
	// reads another record at an offset it saw.
	Floor int64 `json:"floor,omitempty"`
}

// FloorGeneration is the span of offsets one owner's life of a partition
// may use before a re-creation (2^48, about 89 years at 100,000 records a
// second): a re-created partition's Floor is the next multiple of it above
// the highest offset the metastore knows the lost copy reached.
const FloorGeneration int64 = 1 << 48

// RecreateFloor is where a partition re-created after its owner's disk
// was lost starts: the next generation above both its last floor and the
// HWM of its last flip. The lost owner may have written past that HWM,
// but not a whole generation past it.
func RecreateFloor(a Assignment) int64 {
	top := max(a.Floor, a.FlippedAtHWM, 0)
	return (top/FloorGeneration + 1) * FloorGeneration
}

// Result codes of a metastore command. A refused compare-and-swap is a
// result, not an error: Update must be deterministic and never fail.
type ResultCode int

const (
	ResultOK ResultCode = iota
	// ResultExists: a create of something that already exists.
	ResultExists
	// ResultNotFound: the topic, partition or member named does not exist.
	ResultNotFound
	// ResultRefused: a compare-and-swap whose expected values did not match.
	ResultRefused
	// ResultInvalid: a command that cannot apply (e.g. shrinking partitions).
	ResultInvalid
	// ResultConflict: a fan-out command refused by the topics' roles, the
	// child limit or their schemas.
	ResultConflict
)

// Member statuses. Only the metadata leader changes a status once a member
// is registered (SetMemberStatus), from heartbeats it stamps on its own
// clock; a registration sets it alive.
const (
	MemberAlive = "alive"
	MemberDead  = "dead"
)

// Member Raft roles: a voter, or a non-voter that joined and was not
// promoted yet (it has no vote and cannot lead).
const (
	RoleVoter    = "voter"
	RoleNonVoter = "nonvoter"
)

// Member is a node's record in the metadata shard.
type Member struct {
	// ID is the Narad node id ("n1"), the key of the record.
	ID string `json:"id"`
	// ReplicaID is the node's Raft replica id in every shard; no two
	// members share one.
	ReplicaID uint64 `json:"replica_id"`
	HTTPAddr  string `json:"http_addr,omitempty"`
	RaftAddr  string `json:"raft_addr,omitempty"`
	// Status is MemberAlive or MemberDead.
	Status string `json:"status"`
	// Draining: an operator decommissions the node; it survives a
	// re-registration (rule D1).
	Draining bool `json:"draining,omitempty"`
	// Leaving: the node is stopping and hands its partitions off; a
	// registration (the node started again) clears it.
	Leaving bool `json:"leaving,omitempty"`
	// Role is RoleVoter or RoleNonVoter.
	Role string `json:"role"`
	// Heartbeats counts the member's heartbeats and registrations. Only its
	// changes matter: the leader stamps them on its own clock.
	Heartbeats uint64 `json:"heartbeats"`
	// Registered is the Raft index of the latest registration, so a
	// restart of the node reads as a new value.
	Registered uint64 `json:"registered"`
	// Reads is the newest cluster version the member's binary reads, as it
	// said when it last registered or heartbeated; 0 from a binary older
	// than cluster versions (which a replica of such a binary also keeps
	// as 0: it does not know the field).
	Reads int `json:"reads,omitempty"`
	// Lost: an operator said the member's disk is gone for good
	// (ForgetMember). The controller re-creates its partitions empty on
	// live nodes and removes it without its ingress WAL's hand-off while
	// it stays dead. It is draining too, and it survives a
	// re-registration.
	Lost bool `json:"lost,omitempty"`
}

// MetaCommand is one entry of the metadata shard's log. Exactly one field is set.
type MetaCommand struct {
	Version         int              `json:"v"`
	CreateTopic     *CreateTopic     `json:"create_topic,omitempty"`
	DeleteTopic     *DeleteTopic     `json:"delete_topic,omitempty"`
	AlterTopic      *AlterTopic      `json:"alter_topic,omitempty"`
	PutMember       *PutMember       `json:"put_member,omitempty"`
	Heartbeat       *Heartbeat       `json:"heartbeat,omitempty"`
	SetMemberStatus *SetMemberStatus `json:"set_member_status,omitempty"`
	SetDraining     *SetDraining     `json:"set_draining,omitempty"`
	SetLeaving      *SetLeaving      `json:"set_leaving,omitempty"`
	SetMemberRole   *SetMemberRole   `json:"set_member_role,omitempty"`
	RemoveMember    *RemoveMember    `json:"remove_member,omitempty"`
	AllocateReplica *AllocateReplica `json:"allocate_replica,omitempty"`
	CreateUser      *CreateUser      `json:"create_user,omitempty"`
	DeleteUser      *DeleteUser      `json:"delete_user,omitempty"`
	SetUserGrants   *SetUserGrants   `json:"set_user_grants,omitempty"`
	SetUserPassword *SetUserPassword `json:"set_user_password,omitempty"`
	AttachChild     *AttachChild     `json:"attach_child,omitempty"`
	DetachChild     *DetachChild     `json:"detach_child,omitempty"`
	// SetClusterVersion needs ClusterVersionCommandVersion.
	SetClusterVersion *SetClusterVersion `json:"set_cluster_version,omitempty"`
	// ForgetMember needs LostDiskCommandVersion.
	ForgetMember *ForgetMember `json:"forget_member,omitempty"`
}

// ForgetMember marks a dead member lost (Member.Lost) and draining:
// ResultNotFound for an unknown member, ResultRefused (with a Reason)
// while it is alive. Marking one already lost again answers OK.
type ForgetMember struct {
	ID string `json:"id"`
}

// SetClusterVersion moves the cluster version up to Version, only if every
// member reads it (Member.Reads) and it is above the current one;
// ResultRefused with a Reason otherwise, ResultInvalid below
// ClusterVersionBase. It never moves down: a format once written stays on
// disk.
type SetClusterVersion struct {
	Version int `json:"version"`
}

// AttachChild links Child to Parent as a fan-out child with the given
// delay, on both records in one entry; the link's AttachEpoch is the
// entry's Raft index. The refusals carry a Reason: ResultNotFound (parent
// or child missing), ResultInvalid (self attach, bad delay, a delay the
// parent's retention cannot buffer), ResultConflict (role conflict, child
// limit, schema mismatch). The result's Topic is the parent after.
type AttachChild struct {
	Parent  string `json:"parent"`
	Child   string `json:"child"`
	DelayMs int64  `json:"delay_ms,omitempty"`
}

// DetachChild removes the link from Parent to Child on both records
// (ResultNotFound when the parent is missing or Child is not attached to
// it). The result's Topic is the parent after.
type DetachChild struct {
	Parent string `json:"parent"`
	Child  string `json:"child"`
}

// CreateUser creates the user if the name is free (ResultExists with the
// existing record otherwise, so a retry can tell its own create by the
// hash). ResultInvalid without a username or a password hash.
type CreateUser struct {
	User User `json:"user"`
}

// DeleteUser removes a user; the result carries the removed record.
type DeleteUser struct {
	Username string `json:"username"`
}

// SetUserGrants replaces a user's grants and stamps UpdatedAtMs.
type SetUserGrants struct {
	Username    string  `json:"username"`
	Grants      []Grant `json:"grants,omitempty"`
	UpdatedAtMs int64   `json:"updated_at_ms"`
}

// SetUserPassword replaces a user's password hash and stamps UpdatedAtMs.
type SetUserPassword struct {
	Username     string `json:"username"`
	PasswordHash string `json:"password_hash"`
	UpdatedAtMs  int64  `json:"updated_at_ms"`
}

// CreateTopic creates a topic if the name is free. The state machine sets
// the incarnation to the entry's Raft index. With Topic.Parent set it also
// attaches the new topic to that parent with Topic.FanoutDelayMs, in the
// same entry and with AttachChild's refusals; Children and AttachEpoch of
// the command are ignored.
type CreateTopic struct {
	Topic Topic `json:"topic"`
}

// DeleteTopic removes the topic if it still has the given incarnation
// (0: whatever incarnation it has). Deleting a child removes its link from
// the parent; deleting a parent detaches every child first, in the same
// entry.
type DeleteTopic struct {
	Name        string `json:"name"`
	Incarnation uint64 `json:"incarnation,omitempty"`
}

// AlterTopic changes settings of an existing topic. Nil pointers and a zero
// Partitions leave a setting unchanged; Partitions may only grow.
type AlterTopic struct {
	Name                      string          `json:"name"`
	Partitions                int             `json:"partitions,omitempty"`
	RetentionMs               *int64          `json:"retention_ms,omitempty"`
	MaxInFlightPerPartition   *int64          `json:"max_in_flight_per_partition,omitempty"`
	MaxAckedAheadPerPartition *int64          `json:"max_acked_ahead_per_partition,omitempty"`
	AddSchema                 json.RawMessage `json:"add_schema,omitempty"`
}

// PutMember registers a node, or registers it again when it restarts. A
// new record is alive, not draining, not leaving, with the given role
// (RoleVoter when empty). A re-registration updates the replica id and the
// addresses, sets the role when one is given, sets the status alive, bumps
// Heartbeats, clears Leaving and keeps Draining (rule D1). The state
// machine ignores the command's Status, Draining, Leaving, Heartbeats and
// Registered. ResultInvalid without an ID or a replica id, or with an
// unknown role; ResultExists (with that member) when another member has
// the replica id.
type PutMember struct {
	Member Member `json:"member"`
}

// Heartbeat bumps the member's Heartbeats counter (ResultNotFound for an
// unknown member). It changes nothing else: the leader decides liveness.
type Heartbeat struct {
	ID string `json:"id"`
	// Reads, when set, is the member's Member.Reads: a heartbeat keeps it
	// true on a replica that restored a snapshot without it.
	Reads int `json:"reads,omitempty"`
}

// SetMemberStatus is the leader's compare-and-set of a member's status:
// Status := Status only if the status is still IfStatus ("" for any) and,
// when IfHeartbeats is set, the counter is still *IfHeartbeats (so a
// heartbeat that landed after the leader's observation refuses a mark
// dead). ResultRefused carries the current record.
type SetMemberStatus struct {
	ID           string  `json:"id"`
	Status       string  `json:"status"`
	IfStatus     string  `json:"if_status,omitempty"`
	IfHeartbeats *uint64 `json:"if_heartbeats,omitempty"`
}

// SetDraining sets or clears the decommission flag of a member.
type SetDraining struct {
	ID       string `json:"id"`
	Draining bool   `json:"draining"`
}

// SetLeaving sets or clears the leaving flag of a member.
type SetLeaving struct {
	ID      string `json:"id"`
	Leaving bool   `json:"leaving"`
}

// SetMemberRole records a member's Raft role (a non-voter promoted to voter).
type SetMemberRole struct {
	ID   string `json:"id"`
	Role string `json:"role"`
}

// RemoveMember deletes a member's record; the result carries the removed
// record.
type RemoveMember struct {
	ID string `json:"id"`
}

// MetaResult is what a metadata command returns. Member is the member's
// record after a member command (the current one when refused, the removed
// one after RemoveMember, the holder of the replica id on ResultExists).
type MetaResult struct {
	Code   ResultCode `json:"code"`
	Topic  *Topic     `json:"topic,omitempty"`
	Member *Member    `json:"member,omitempty"`
	// ReplicaID answers AllocateReplica.
	ReplicaID uint64 `json:"replica_id,omitempty"`
	// User is the user's record after a user command (the removed one
	// after DeleteUser, the existing one on ResultExists).
	User *User `json:"user,omitempty"`
	// Reason says why a fan-out command (or an alter it constrains) was
	// refused, in words a client reads.
	Reason string `json:"reason,omitempty"`
}

// AllocateReplica hands out a Raft replica id that was never handed out
// nor registered before, for a joining node. Floor is the smallest id the
// proposer may accept: one above every id it saw in the shards' Raft
// configurations (voters, non-voters and removed), which the initial
// members took without ever allocating.
type AllocateReplica struct {
	Floor uint64 `json:"floor"`
}

// AssignCommand is one entry of an assignment shard's log. Exactly one field is set.
type AssignCommand struct {
	Version           int                `json:"v"`
	PutAssignments    *PutAssignments    `json:"put,omitempty"`
	DeleteAssignments *DeleteAssignments `json:"delete,omitempty"`
	SetTarget         *SetTarget         `json:"set_target,omitempty"`
	Flip              *Flip              `json:"flip,omitempty"`
	Flips             *Flips             `json:"flips,omitempty"`
	SetTargets        *SetTargets        `json:"set_targets,omitempty"`
	// Recreates needs LostDiskCommandVersion.
	Recreates *Recreates `json:"recreates,omitempty"`
}

// Recreate gives a partition of a lost member (From) to To, empty: Owner
// := To, no target, and Floor := RecreateFloor of the assignment, only if
// Owner is still From (ResultRefused otherwise). To's log for it starts at
// the new floor; the records only From held are gone, a documented gap.
type Recreate struct {
	Incarnation uint64 `json:"incarnation"`
	Partition   int    `json:"partition"`
	From        string `json:"from"`
	To          string `json:"to"`
}

// Recreates is many Recreate compare-and-swaps of one shard in one entry,
// each judged on its own, as Flips are. Its result has one AssignResult
// per item, in order (AssignResult.Recreates).
type Recreates struct {
	Recreates []Recreate `json:"recreates"`
}

// PutAssignments creates the assignments of new partitions. One that
// already exists is left as it is (a retried create never moves a partition).
type PutAssignments struct {
	Assignments []Assignment `json:"assignments"`
}

// DeleteAssignments removes every assignment of a topic incarnation.
type DeleteAssignments struct {
	Incarnation uint64 `json:"incarnation"`
}

// SetTarget sets Target := To only if Owner is still Owner and Target is
// still From (a compare-and-swap; To "" clears the target).
type SetTarget struct {
	Incarnation uint64 `json:"incarnation"`
	Partition   int    `json:"partition"`
	Owner       string `json:"owner"`
	From        string `json:"from"`
	To          string `json:"to"`
}

// Flip sets Owner := To and clears Target only if Owner is still From and
// Target is still To. A flip already applied (Owner is To) answers OK.
// HWM, when set, is the HWM the new owner's copy ends at; the assignment
// keeps it (FlippedAtHWM) so the old owner can check its own against it.
// TargetSince, when set, must also be the assignment's: the flip is for
// that move and no later one (Assignment.TargetSince).
type Flip struct {
	Incarnation uint64 `json:"incarnation"`
	Partition   int    `json:"partition"`
	From        string `json:"from"`
	To          string `json:"to"`
	HWM         *int64 `json:"hwm,omitempty"`
	TargetSince uint64 `json:"target_since,omitempty"`
}

// Flips is many Flip compare-and-swaps of one shard in one entry, each
// judged on its own: a bulk move flips thousands of partitions, and one
// Raft round trip per shard instead of per partition is what makes that
// take milliseconds. Its result has one AssignResult per flip, in order.
type Flips struct {
	Flips []Flip `json:"flips"`
}

// SetTargets is many SetTarget compare-and-swaps of one shard in one
// entry, each judged on its own: a planning round picks up to
// MaxInFlightMoves moves at once, and one Raft entry per shard instead of
// one per pick is what lets a hand-off of thousands of partitions start
// them in a round trip. Its result has one AssignResult per target, in
// order.
type SetTargets struct {
	Targets []SetTarget `json:"targets"`
}

// AssignResult is what an assignment command returns; Assignment is the
// partition's assignment after the command (when it exists). Flips holds
// the results of a Flips command, Targets those of a SetTargets command
// and Recreates those of a Recreates command, one per item, in order.
type AssignResult struct {
	Code       ResultCode     `json:"code"`
	Assignment *Assignment    `json:"assignment,omitempty"`
	Flips      []AssignResult `json:"flips,omitempty"`
	Targets    []AssignResult `json:"targets,omitempty"`
	Recreates  []AssignResult `json:"recreates,omitempty"`
}

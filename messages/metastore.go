package messages

import "encoding/json"

// CommandVersion is the encoding version of every metastore command. A
// replica refuses (panics on) a command from a newer version rather than
// apply it wrongly: state machines must stay deterministic.
const CommandVersion = 1

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
	// Schemas are the registered JSON Schema versions, latest last.
	Schemas []json.RawMessage `json:"schemas,omitempty"`
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
)

// MetaCommand is one entry of the metadata shard's log. Exactly one field is set.
type MetaCommand struct {
	Version     int          `json:"v"`
	CreateTopic *CreateTopic `json:"create_topic,omitempty"`
	DeleteTopic *DeleteTopic `json:"delete_topic,omitempty"`
	AlterTopic  *AlterTopic  `json:"alter_topic,omitempty"`
}

// CreateTopic creates a topic if the name is free. The state machine sets
// the incarnation to the entry's Raft index.
type CreateTopic struct {
	Topic Topic `json:"topic"`
}

// DeleteTopic removes the topic if it still has the given incarnation
// (0: whatever incarnation it has).
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

// MetaResult is what a metadata command returns.
type MetaResult struct {
	Code  ResultCode `json:"code"`
	Topic *Topic     `json:"topic,omitempty"`
}

// AssignCommand is one entry of an assignment shard's log. Exactly one field is set.
type AssignCommand struct {
	Version           int                `json:"v"`
	PutAssignments    *PutAssignments    `json:"put,omitempty"`
	DeleteAssignments *DeleteAssignments `json:"delete,omitempty"`
	SetTarget         *SetTarget         `json:"set_target,omitempty"`
	Flip              *Flip              `json:"flip,omitempty"`
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
type Flip struct {
	Incarnation uint64 `json:"incarnation"`
	Partition   int    `json:"partition"`
	From        string `json:"from"`
	To          string `json:"to"`
}

// AssignResult is what an assignment command returns; Assignment is the
// partition's assignment after the command (when it exists).
type AssignResult struct {
	Code       ResultCode  `json:"code"`
	Assignment *Assignment `json:"assignment,omitempty"`
}

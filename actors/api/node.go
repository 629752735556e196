package api

import (
	"context"
	"time"

	"github.com/naradmq/narad/messages"
)

// Node is everything the handlers ask of a node, in the node's own terms:
// records, leases, topics, members and moves, never statuses. Its errors
// are this package's sentinels (errors.go). *actors.Node implements it.
type Node interface {
	Health
	Data
	Topics
	Cluster
	ClusterView
	Users
}

// Health is where a node is in its life.
type Health interface {
	// Ready is true once the metastore replica caught up and the actors
	// run; until then the client API answers 503.
	Ready() bool
	// Stopping is true once shutdown began.
	Stopping() bool
	// Leaving is true while the node hands its partitions off before it
	// stops (rule B8): /readyz answers 503, the client API still serves.
	Leaving() bool
	// WriteFailure is "" while the node's disk takes writes, else why it
	// does not (no space left): produce answers 503 naming it, /readyz
	// reports it, until a write succeeds again.
	WriteFailure() string
	// LeftReason is "" while the node is a member of its cluster, else why
	// it no longer is (decommissioned, removed): every /v1 call and
	// /readyz answer 503 with it.
	LeftReason() string
}

// Data is the produce and consume path.
type Data interface {
	// Admit says whether the node takes new records at all (ErrDraining
	// when it does not). The contract checks it before anything about the
	// request, so a produce asks it first; Produce checks it again.
	Admit() error
	// Produce returns once the record is durable in the node's ingress
	// WAL; its owner commits it later.
	Produce(ctx context.Context, rec Record) error
	// Consume leases the next deliverable record of the topic (of one
	// partition when partition >= 0), waiting up to wait for one; ok is
	// false when none came.
	Consume(ctx context.Context, topic string, partition int, wait time.Duration) (d messages.Delivery, ok bool, err error)
	// Replay reads one record by offset without leasing it; ok is false at
	// or past the high watermark.
	Replay(ctx context.Context, topic string, partition int, offset int64) (d messages.Delivery, ok bool, err error)
	// Settle acks, extends or nacks the lease h names.
	Settle(ctx context.Context, topic string, h Handle, action messages.LeaseAction) error
	// ProduceBatch is Produce for many records of one topic: errs[i] is
	// recs[i]'s outcome, each refused or accepted alone, the accepted ones
	// durable in the ingress WAL together.
	ProduceBatch(ctx context.Context, topic string, recs []Record) (errs []error)
	// ConsumeBatch leases up to max records, waiting up to wait for the
	// first only; none leased is an empty answer.
	ConsumeBatch(ctx context.Context, topic string, partition int, wait time.Duration, max int) ([]messages.Delivery, error)
	// SettleBatch settles each handle with action: errs[i] is hs[i]'s.
	SettleBatch(ctx context.Context, topic string, hs []Handle, action messages.LeaseAction) (errs []error)
}

// Topics is topic administration and description.
type Topics interface {
	// CreateTopic applies the contract's defaults and limits, creates the
	// topic and places its partitions. The answer is the topic as stored.
	CreateTopic(ctx context.Context, req messages.CreateTopicRequest) (messages.TopicInfo, error)
	// AlterTopic changes retention, caps, partitions and schema in that
	// order, without a transaction: a later field that is refused leaves
	// the earlier ones applied, and the refusal is the error.
	AlterTopic(ctx context.Context, name string, req messages.AlterTopicRequest) (messages.TopicInfo, error)
	// DeleteTopic removes the topic; its data on this node is gone when it
	// returns, so a create of the same name starts from offset 0.
	DeleteTopic(ctx context.Context, name string) error
	// Topic is the topic's record as this node's replica has it.
	Topic(name string) (messages.TopicInfo, error)
	// TopicsAfter lists up to limit topics whose names sort after after;
	// more says whether any follow.
	TopicsAfter(after string, limit int) (page []messages.TopicInfo, more bool)
	// PartitionStats asks each owner for its partitions' stats (one
	// partition when partition >= 0), by index. A partition whose owner
	// has not started it yet is left out.
	PartitionStats(ctx context.Context, topic string, partition int) ([]messages.PartitionInfo, error)
	// AttachChild makes child a fan-out child of parent delayed delayMs,
	// and answers the parent's record once every parent partition's owner
	// anchored the link (or the node's wait for that ran out).
	AttachChild(ctx context.Context, parent, child string, delayMs int64) (messages.TopicInfo, error)
	// Children lists parent's children with their lag.
	Children(ctx context.Context, parent string) (messages.ChildList, error)
	// DetachChild removes the link from parent to child.
	DetachChild(ctx context.Context, parent, child string) error
}

// Cluster is membership and moves.
type Cluster interface {
	// ClusterVersion lists the cluster version and what each member reads;
	// FinalizeClusterVersion moves it up (ErrConflict with the reason while
	// a member does not read it yet).
	ClusterVersion(ctx context.Context) (messages.ClusterVersionInfo, error)
	FinalizeClusterVersion(ctx context.Context, version int) (messages.ClusterVersionInfo, error)
	// Members is every member with the partitions it owns, by id; ctx
	// bounds what it asks the other members.
	Members(ctx context.Context) []messages.MemberInfo
	// Moves is every partition with a target, by topic then partition,
	// with each destination's progress when detail is set.
	Moves(ctx context.Context, detail bool) messages.MoveList
	// AbortMove gives up on the move of one partition; a non-empty target
	// aborts only a move to that node.
	AbortMove(ctx context.Context, topic string, partition int, target string) AbortOutcome
	// Decommission judges whether member id can be decommissioned and,
	// unless dryRun or refused, starts draining it.
	Decommission(ctx context.Context, id string, dryRun bool) (DecommissionVerdict, error)
	// CancelDecommission stops draining member id.
	CancelDecommission(ctx context.Context, id string) error
	// Forget judges whether dead member id, whose disk is lost, may be
	// forgotten and, unless dryRun or refused, forgets it: its partitions
	// are re-created empty elsewhere. ErrInvalid without acceptDataLoss.
	Forget(ctx context.Context, id string, dryRun, acceptDataLoss bool) (ForgetVerdict, error)
}

// ClusterView is what the console (actors/api/console) asks beyond the
// cluster verbs every client has, over routes beyond the contract.
type ClusterView interface {
	// MovesWithSummary is Moves with the summary line of `narad cluster
	// moves --watch` (a request per member).
	MovesWithSummary(ctx context.Context, detail bool) messages.MoveList
	// Leaders is who leads each Raft shard, as this node's replica knows.
	Leaders() messages.LeaderList
	// SetAside lists the copies each member (or member node, when not
	// "") set aside instead of deleting them; ReleaseSetAside removes one,
	// or says what it would remove (a dry run). Their errors: ErrInvalid,
	// ErrNotFound, ErrUnavailable (also for an outcome unknown), each a
	// Refusal with the member's reason.
	SetAside(ctx context.Context, node string) (messages.QuarantineList, error)
	ReleaseSetAside(ctx context.Context, req messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error)
}

// Record is one produce as the client sent it.
type Record struct {
	Topic string
	// Partition is the one the client named, or -1 for the key's.
	Partition int
	// Key is "" when the client sent none; the node makes one up.
	Key  string
	Body []byte
	// Received is when the request arrived: the produce latency the node
	// reports runs from it, body read included.
	Received time.Time
}

// ReceivedOr is Received, or now when it was not set.
func (r Record) ReceivedOr(now time.Time) time.Time {
	if r.Received.IsZero() {
		return now
	}
	return r.Received
}

// Handle names one lease: what a receipt handle encodes.
type Handle struct {
	Partition int
	Offset    int64
	Nonce     uint64
}

// AbortResult and AbortOutcome are what became of an abort
// (messages.AbortOutcome); cluster.go answers each result with its status.
type (
	AbortResult  = messages.AbortResult
	AbortOutcome = messages.AbortOutcome
)

// The results of an abort, by the names the API's code reads.
const (
	Aborted       = messages.Aborted
	AbortNoMove   = messages.AbortNoMove
	AbortRefused  = messages.AbortRefused
	AbortNotFound = messages.AbortNotFound
	AbortUnknown  = messages.AbortUnknown
)

// ForgetVerdict is what a forget found (see decommission.ForgetVerdict).
type ForgetVerdict struct {
	Partitions int
	Refusal    string
	Removal    string
}

// Reply is the verdict on member id as the HTTP API and the admin verb
// report it: "refused", "forgotten" once it is, "ok" for a dry run.
func (v ForgetVerdict) Reply(id string, dryRun bool) messages.ForgetReply {
	out := messages.ForgetReply{Member: id, Verdict: "ok", Reason: v.Refusal, Partitions: v.Partitions, Removal: v.Removal}
	switch {
	case v.Refusal != "":
		out.Verdict = "refused"
	case !dryRun:
		out.Verdict = "forgotten"
	}
	return out
}

// DecommissionVerdict is what a decommission found.
type DecommissionVerdict struct {
	OwnedPartitions int
	// Refusal says why the decommission could never complete (rule D8);
	// "" when it can (and, unless a dry run, has started).
	Refusal string
}

// Reply is the verdict on member id as the HTTP API and the admin verb
// report it: "refused" for one that could never complete, "draining" once
// a decommission started, "ok" for a dry run that found nothing against it.
func (v DecommissionVerdict) Reply(id string, dryRun bool) messages.DecommissionReply {
	out := messages.DecommissionReply{Member: id, Verdict: "ok", Reason: v.Refusal, OwnedPartitions: v.OwnedPartitions}
	switch {
	case v.Refusal != "":
		out.Verdict = "refused"
	case !dryRun:
		out.Verdict = "draining"
	}
	return out
}

package route

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// The transport services through which a node reaches the partitions
// another node owns: PartitionService in the binary wire form
// (messages/partitionwire.go), chunkService for a copy's chunks as raw
// bytes (chunks are nearly all of a move's bytes; JSON would carry them
// base64, a third larger and slower to encode).
const (
	PartitionService = "partition"
	chunkService     = "chunk"
)

// ErrNoOwner is a partition the local replica knows no owner for.
var ErrNoOwner = errors.New("partition has no owner")

// Reader is what routing reads of the local replica: point lookups,
// which may lag the leader by milliseconds (a stale answer reaches a node
// that refuses, and the caller retries).
type Reader interface {
	Topic(name string) (messages.Topic, bool)
	Member(id string) (messages.Member, bool)
	Assignment(incarnation uint64, partition int) (messages.Assignment, bool)
}

// Router takes a partition request to the partition's owner, whichever
// node that is, and answers peers' requests for the partitions owned here.
// It is the one place that knows where a partition lives: the API's
// methods, the dispatcher and the move workers all ask through it, and get
// the same message type back whether the owner is local or a peer.
//
// It holds no state of its own beyond its wiring, so any goroutine may use
// it: owner lookups read the replica, and requests go through actor
// mailboxes or NATS. Its node sets every field before first use (node.go's
// startActors) and only reads them afterwards.
type Router struct {
	Self    string // this node's id
	System  *actor.ActorSystem
	Replica Reader
	NATS    *transport.Transport // nil: no peers, every partition is served here
	// Timeout bounds one request, to a local actor or a peer, when the
	// caller's context allows longer (the node's Config.RequestTimeout).
	Timeout time.Duration
	// LeaseTimeout bounds a lease operation (an ack, nack or extend) sent
	// to a peer (the node's Config.LeaseRequestTimeout).
	LeaseTimeout time.Duration
	// GroupWait bounds each item of a peer's move group
	// (the node's Config.MoveGroupWaitFor); 0: the group's own deadline only.
	GroupWait time.Duration
	// Clock sets a peer's commit its NotAfter, which the partition actor
	// checks on its own (partition.Deps.Steady), and times the binary
	// form's recheck: the node's steady clock (actors/clock). Nil is the
	// wall clock.
	Clock clock.Clock
	// Running is the doors of this node's partitions (partition.Running):
	// a request to one at rest wakes it first; nil sends to the actor's
	// address as is.
	Running *partition.Running
}

// now is the router's clock's time.
func (r *Router) now() time.Time { return clock.Or(r.Clock).Now() }

// Topic is the local replica's record of a topic: with LivePartition and
// Ask, the Router is the fan-out actors' fanout.Route.
func (r *Router) Topic(name string) (messages.Topic, bool) { return r.Replica.Topic(name) }

// OwnerOf is a partition's owner as the local replica has it; "" when it
// has none.
func (r *Router) OwnerOf(k messages.PartitionKey) string {
	a, _ := r.Replica.Assignment(k.Incarnation, k.Partition)
	return a.Owner
}

// IsLocal reports whether this node serves a partition itself: it owns it,
// or it runs without NATS and so can reach no other node.
func (r *Router) IsLocal(k messages.PartitionKey) bool {
	return r.NATS == nil || r.OwnerOf(k) == r.Self
}

// LivePartition keeps a keyed produce on its key's partition p unless that
// partition's owner reads dead: then the next partition whose owner is
// alive takes it, giving up the key's order for availability, as the
// contract allows ("Narad may reroute around dead owners"). With every
// owner dead the key's partition is kept: the WAL holds the record until
// its owner returns.
func (r *Router) LivePartition(t messages.Topic, p int) int {
	for i := 0; i < t.Partitions; i++ {
		q := (p + i) % t.Partitions
		owner := r.OwnerOf(messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: q})
		if m, ok := r.Replica.Member(owner); ok && m.Status != messages.MemberDead {
			return q
		}
		if owner == r.Self {
			return q
		}
	}
	return p
}

// Sibling is a partition of k's topic other than k whose owner is alive;
// false when there is none.
func (r *Router) Sibling(k messages.PartitionKey) (messages.PartitionKey, bool) {
	t, ok := r.Replica.Topic(k.Topic)
	if !ok || t.Incarnation != k.Incarnation || t.Partitions < 2 {
		return k, false
	}
	to := r.LivePartition(t, (k.Partition+1)%t.Partitions)
	if to == k.Partition {
		return k, false
	}
	return messages.PartitionKey{Topic: k.Topic, Incarnation: k.Incarnation, Partition: to}, true
}

// Request sends msg to a local actor and waits for its answer, within the
// caller's deadline and at most timeout (partition.Request).
func Request(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	return partition.Request(ctx, root, pid, msg, timeout)
}

// Local sends msg to the actor of a partition on this node, through its
// door: a partition at rest is woken first (partition.Ask).
func (r *Router) Local(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	return partition.Ask(ctx, r.System.Root, r.Running, partition.SupervisorPID(r.System), k, msg, r.Timeout)
}

// Owner is the node that serves k: "" (with an error) when the replica
// knows no owner, r.Self when this node serves it.
func (r *Router) Owner(k messages.PartitionKey) (string, error) {
	owner := r.OwnerOf(k)
	switch {
	case owner == "":
		return "", fmt.Errorf("%s/%d: %w: %w", k.Topic, k.Partition, ErrNoOwner, errs.ErrUnavailable)
	case r.NATS == nil:
		return r.Self, nil
	}
	return owner, nil
}

// Ask sends a partition request to the partition's owner: its local actor,
// or the owning node over NATS. The answer is the same message type either
// way. An error wraps errs.ErrUnavailable; transport.NotProcessed tells whether
// the owner surely did not act on it.
func (r *Router) Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	owner, err := r.Owner(k)
	if err != nil {
		return nil, err
	}
	if owner == r.Self {
		return r.Local(ctx, k, msg)
	}
	rep, err := r.remote(ctx, owner, requestOf(k, msg), r.Within(msg))
	if err != nil {
		return nil, fmt.Errorf("%T to %s at %s: %w: %w", msg, k.Topic, owner, err, errs.ErrUnavailable)
	}
	return replyOf(rep, msg, k, owner)
}

// Within is how long a peer's answer to msg is waited for: a lease
// operation's, LeaseRequestTimeout (an owner killed with it in flight
// must not hold its retry past the lease the next life restores); any
// other's, RequestTimeout.
func (r *Router) Within(msg any) time.Duration {
	if _, ok := msg.(*messages.Lease); ok && r.LeaseTimeout > 0 {
		return r.LeaseTimeout
	}
	return r.Timeout
}

// requestOf is msg to k in its wire form.
func requestOf(k messages.PartitionKey, msg any) messages.PartitionRequest {
	req := messages.PartitionRequest{Key: k}
	switch m := msg.(type) {
	case *messages.Commit:
		req.Commit = m
	case *messages.Reserve:
		req.Reserve = m
	case *messages.ReadAt:
		req.ReadAt = m
	case *messages.Lease:
		req.Lease = m
	case *messages.GetStats:
		req.Stats = m
	case *messages.ListPartition:
		req.List = m
	case *messages.Handoff:
		req.Handoff = m
	default:
		panic(fmt.Sprintf("ask: no wire form for %T", msg))
	}
	return req
}

// replyOf is the answer a peer's reply carries to msg, the same message
// type a local actor answers with.
func replyOf(rep messages.PartitionReply, msg any, k messages.PartitionKey, owner string) (any, error) {
	switch {
	case rep.Commit != nil:
		return rep.Commit, nil
	case rep.Reply != nil:
		return rep.Reply, nil
	case rep.Lease != nil:
		return rep.Lease, nil
	case rep.Stats != nil:
		return rep.Stats, nil
	case rep.Listing != nil:
		return rep.Listing, nil
	case rep.Handoff != nil:
		return rep.Handoff, nil
	}
	return nil, fmt.Errorf("%T to %s at %s: empty reply: %w", msg, k.Topic, owner, errs.ErrUnavailable)
}

// remote sends one partition request to the peer owner and decodes its
// answer, waiting at most within.
func (r *Router) remote(ctx context.Context, owner string, req messages.PartitionRequest, within time.Duration) (messages.PartitionReply, error) {
	body, err := messages.EncodePartitionRequest(req)
	if err != nil {
		return messages.PartitionReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	out, err := r.NATS.Request(ctx, owner, PartitionService, body)
	if err != nil {
		return messages.PartitionReply{}, err
	}
	return messages.DecodePartitionReply(out)
}

// ReserveAny asks the peer owner for a record of any of ra's partitions
// of the topic incarnation k names: one request. A peer that does not
// know ReserveAny (an older version, StatusBadRequest) is asked partition
// by partition instead.
func (r *Router) ReserveAny(ctx context.Context, owner string, k messages.PartitionKey, ra *messages.ReserveAny) (*messages.Reserved, error) {
	rep, err := r.remote(ctx, owner, messages.PartitionRequest{Key: k, ReserveAny: ra}, r.Timeout)
	if re, ok := errors.AsType[*transport.RemoteError](err); ok && re.Status == transport.StatusBadRequest {
		return ReserveFirst(ctx, k, ra, r.Ask), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reserve any of %s %v at %s: %w: %w", k.Topic, ra.Partitions, owner, err, errs.ErrUnavailable)
	}
	if rep.Reply == nil {
		return nil, fmt.Errorf("reserve any of %s at %s: empty reply: %w", k.Topic, owner, errs.ErrUnavailable)
	}
	return rep.Reply, nil
}

// ReserveFirst asks each of ra's partitions in turn through ask until one
// leases a record, collecting those that had none. A partition that cannot
// be asked is skipped, with no belief either way.
func ReserveFirst(ctx context.Context, k messages.PartitionKey, ra *messages.ReserveAny,
	ask func(context.Context, messages.PartitionKey, any) (any, error)) *messages.Reserved {
	var empty map[int]time.Duration
	for _, p := range ra.Partitions {
		k.Partition = p
		res, err := ask(ctx, k, &messages.Reserve{Limits: ra.Limits})
		rr, ok := res.(*messages.Reserved)
		if err != nil || !ok {
			continue
		}
		switch rr.Status {
		case messages.StatusOK:
			rr.Empty = empty
			return rr
		case messages.StatusEmpty:
			if empty == nil {
				empty = map[int]time.Duration{}
			}
			empty[p] = rr.ExpiresIn
		}
	}
	return &messages.Reserved{Status: messages.StatusEmpty, Empty: empty}
}

// chunkRequest asks the owner of Key for committed bytes of a segment.
type chunkRequest struct {
	Key messages.PartitionKey `json:"key"`
	messages.ReadChunk
}

// ReadChunk reads a chunk of partition k from its owner: the local actor,
// or the owner's chunk service. The answer is the bytes, empty at the
// committed end.
func (r *Router) ReadChunk(ctx context.Context, k messages.PartitionKey, rc messages.ReadChunk) ([]byte, error) {
	owner, err := r.Owner(k)
	if err != nil {
		return nil, err
	}
	if owner == r.Self {
		return r.localChunk(ctx, k, rc)
	}
	req, err := json.Marshal(chunkRequest{Key: k, ReadChunk: rc})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.Timeout)
	defer cancel()
	data, err := r.NATS.Request(ctx, owner, chunkService, req)
	if err != nil {
		return nil, fmt.Errorf("chunk of %s/%d at %s: %w: %w", k.Topic, k.Partition, owner, err, errs.ErrUnavailable)
	}
	return data, nil
}

func (r *Router) localChunk(ctx context.Context, k messages.PartitionKey, rc messages.ReadChunk) ([]byte, error) {
	res, err := r.Local(ctx, k, &rc)
	if err != nil {
		return nil, fmt.Errorf("chunk of %s/%d: %w", k.Topic, k.Partition, err)
	}
	ch, ok := res.(*messages.Chunk)
	if !ok || ch.Status != messages.StatusOK {
		return nil, fmt.Errorf("chunk of %s/%d: %s: %w", k.Topic, k.Partition, messages.Describe(res), errs.ErrUnavailable)
	}
	return ch.Data, nil
}

// Serve answers peers' partition requests and chunk reads from the local
// partition actors. The node's connectNATS refused a server too small for
// them (actors/payload.go, checkPayload). A request for a partition with no actor here (stale
// routing, or not yet spawned) answers 503: it was surely not processed,
// so the caller may retry; an actor that did not answer in time answers
// 504 (unknown).
func (r *Router) Serve() error {
	if err := r.NATS.Handle(PartitionService, r.servePartitions); err != nil {
		return err
	}
	if err := r.NATS.Handle(moveGroupService, r.serveMoveGroup); err != nil {
		return err
	}
	if err := r.NATS.Handle(commitGroupService, r.serveCommitGroup); err != nil {
		return err
	}
	return r.NATS.Handle(chunkService, r.serveChunk)
}

func (r *Router) servePartitions(ctx context.Context, _ string, body []byte) ([]byte, error) {
	in, err := messages.DecodePartitionRequest(body)
	if err != nil {
		return nil, transport.Errorf(transport.StatusBadRequest, "partition request: %v", err)
	}
	rep, err := r.ServePartition(ctx, in)
	if err != nil {
		return nil, err
	}
	out, err := messages.EncodePartitionReply(rep)
	if err != nil {
		return nil, fmt.Errorf("partition %s/%d on %s: %w", in.Key.Topic, in.Key.Partition, r.Self, err)
	}
	return out, nil
}

// ServePartition hands one peer's request to the local partition actor.
func (r *Router) ServePartition(ctx context.Context, in messages.PartitionRequest) (messages.PartitionReply, error) {
	var msg any
	switch {
	case in.Commit != nil:
		// The peer retries what is not answered by its deadline: the
		// partition must not begin writing it after that.
		// The context's deadline is on the wall clock (clock.Left): what
		// is left of it counts from the router's own now.
		if left, ok := clock.Left(ctx); ok {
			now := r.now()
			in.Commit.NotAfter = messages.CommitDeadline(now, now.Add(left))
		}
		msg = in.Commit
	case in.Reserve != nil:
		msg = in.Reserve
	case in.ReadAt != nil:
		msg = in.ReadAt
	case in.Lease != nil:
		msg = in.Lease
	case in.Stats != nil:
		msg = in.Stats
	case in.List != nil:
		msg = in.List
	case in.Handoff != nil:
		msg = in.Handoff
	case in.ReserveAny != nil:
		return r.serveReserveAny(ctx, in.Key, in.ReserveAny)
	default:
		return messages.PartitionReply{}, transport.Errorf(transport.StatusBadRequest, "partition request with no request")
	}
	res, err := r.Local(ctx, in.Key, msg)
	if err != nil {
		return messages.PartitionReply{}, r.servedError(in.Key, err)
	}
	switch m := res.(type) {
	case *messages.CommitResult:
		return messages.PartitionReply{Commit: m}, nil
	case *messages.Reserved:
		return messages.PartitionReply{Reply: m}, nil
	case *messages.LeaseResult:
		return messages.PartitionReply{Lease: m}, nil
	case *messages.PartitionStats:
		return messages.PartitionReply{Stats: m}, nil
	case *messages.PartitionListing:
		return messages.PartitionReply{Listing: m}, nil
	case *messages.HandoffResult:
		return messages.PartitionReply{Handoff: m}, nil
	}
	return messages.PartitionReply{}, transport.Errorf(transport.StatusInternal, "partition answered %T", res)
}

// serveReserveAny asks the local actors of ra's partitions in turn, so a
// peer's queue-mode consume costs it one request to this node. Partitions
// that are not served here are skipped. At most maxReserveAnyPartitions
// are asked, bounding the work one request buys.
func (r *Router) serveReserveAny(ctx context.Context, k messages.PartitionKey, ra *messages.ReserveAny) (messages.PartitionReply, error) {
	if len(ra.Partitions) > maxReserveAnyPartitions {
		return messages.PartitionReply{}, transport.Errorf(transport.StatusBadRequest, "reserve any of %d partitions, at most %d", len(ra.Partitions), maxReserveAnyPartitions)
	}
	return messages.PartitionReply{Reply: ReserveFirst(ctx, k, ra, r.Local)}, nil
}

// maxReserveAnyPartitions is the most partitions one ReserveAny may name,
// far above a topic's partitions (the node's Config.TopicMaxPartitions, 108 by
// default), so that only a malformed request meets it.
const maxReserveAnyPartitions = 4096

func (r *Router) serveChunk(ctx context.Context, _ string, req []byte) ([]byte, error) {
	var in chunkRequest
	if err := json.Unmarshal(req, &in); err != nil {
		return nil, transport.Errorf(transport.StatusBadRequest, "chunk request: %v", err)
	}
	data, err := r.localChunk(ctx, in.Key, in.ReadChunk)
	if err != nil {
		return nil, r.servedError(in.Key, err)
	}
	return data, nil
}

// servedError is a local actor's failure as a peer reads it: no actor
// here is 503 (surely not processed), anything else 504 (unknown).
func (r *Router) servedError(k messages.PartitionKey, err error) error {
	if errors.Is(err, actor.ErrDeadLetter) {
		return transport.Errorf(transport.StatusUnavailable, "no partition %s/%d on %s", k.Topic, k.Partition, r.Self)
	}
	return transport.Errorf(transport.StatusTimeout, "partition %s/%d on %s: %v", k.Topic, k.Partition, r.Self, err)
}

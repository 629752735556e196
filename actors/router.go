package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// The transport services through which a node reaches the partitions
// another node owns: partitionService in the binary wire form
// (messages/partitionwire.go), chunkService for a copy's chunks as raw
// bytes (chunks are nearly all of a move's bytes; JSON would carry them
// base64, a third larger and slower to encode).
const (
	partitionService = "partition"
	chunkService     = "chunk"
)

// ErrNoOwner is a partition the local replica knows no owner for.
var ErrNoOwner = errors.New("partition has no owner")

// routeReader is what routing reads of the local replica: point lookups,
// which may lag the leader by milliseconds (a stale answer reaches a node
// that refuses, and the caller retries).
type routeReader interface {
	Topic(name string) (messages.Topic, bool)
	Member(id string) (messages.Member, bool)
	Assignment(incarnation uint64, partition int) (messages.Assignment, bool)
}

// router takes a partition request to the partition's owner, whichever
// node that is, and answers peers' requests for the partitions owned here.
// It is the one place that knows where a partition lives: the API's
// methods, the dispatcher and the move workers all ask through it, and get
// the same message type back whether the owner is local or a peer.
//
// It holds no state of its own beyond its wiring, so any goroutine may use
// it: owner lookups read the replica, and requests go through actor
// mailboxes or NATS.
type router struct {
	self    string // this node's id
	system  *actor.ActorSystem
	replica routeReader
	nats    *transport.Transport // nil: no peers, every partition is served here
	// timeout bounds one request, to a local actor or a peer, when the
	// caller's context allows longer (Config.RequestTimeout).
	timeout time.Duration
	// leaseTimeout bounds a lease operation (an ack, nack or extend) sent
	// to a peer (Config.LeaseRequestTimeout).
	leaseTimeout time.Duration
	// groupWait bounds each item of a peer's move group
	// (Config.MoveGroupWaitFor); 0: the group's own deadline only.
	groupWait time.Duration
}

// ownerOf is a partition's owner as the local replica has it; "" when it
// has none.
func (r *router) ownerOf(k messages.PartitionKey) string {
	a, _ := r.replica.Assignment(k.Incarnation, k.Partition)
	return a.Owner
}

// isLocal reports whether this node serves a partition itself: it owns it,
// or it runs without NATS and so can reach no other node.
func (r *router) isLocal(k messages.PartitionKey) bool {
	return r.nats == nil || r.ownerOf(k) == r.self
}

// livePartition keeps a keyed produce on its key's partition p unless that
// partition's owner reads dead: then the next partition whose owner is
// alive takes it, giving up the key's order for availability, as the
// contract allows ("Narad may reroute around dead owners"). With every
// owner dead the key's partition is kept: the WAL holds the record until
// its owner returns.
func (r *router) livePartition(t messages.Topic, p int) int {
	for i := 0; i < t.Partitions; i++ {
		q := (p + i) % t.Partitions
		owner := r.ownerOf(messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: q})
		if m, ok := r.replica.Member(owner); ok && m.Status != messages.MemberDead {
			return q
		}
		if owner == r.self {
			return q
		}
	}
	return p
}

// sibling is a partition of k's topic other than k whose owner is alive;
// false when there is none.
func (r *router) sibling(k messages.PartitionKey) (messages.PartitionKey, bool) {
	t, ok := r.replica.Topic(k.Topic)
	if !ok || t.Incarnation != k.Incarnation || t.Partitions < 2 {
		return k, false
	}
	to := r.livePartition(t, (k.Partition+1)%t.Partitions)
	if to == k.Partition {
		return k, false
	}
	return messages.PartitionKey{Topic: k.Topic, Incarnation: k.Incarnation, Partition: to}, true
}

// request sends msg to a local actor and waits for its answer, within the
// caller's deadline and at most timeout. A context already done is refused
// with its own error (cancelled or past its deadline); once the wait has
// begun only the deadline ends it, since an actor's answer cannot be
// withdrawn.
func request(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, timeout time.Duration) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%T to %s: %w: %w", msg, pid.Id, err, ErrUnavailable)
	}
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("%T to %s: %w: %w", msg, pid.Id, context.DeadlineExceeded, ErrUnavailable)
	}
	res, err := root.RequestFuture(pid, msg, timeout).Result()
	if err != nil {
		return nil, fmt.Errorf("%T to %s: %w: %w", msg, pid.Id, err, ErrUnavailable)
	}
	return res, nil
}

// local sends msg to the actor of a partition on this node.
func (r *router) local(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	return request(ctx, r.system.Root, partition.PID(r.system, k), msg, r.timeout)
}

// owner is the node that serves k: "" (with an error) when the replica
// knows no owner, r.self when this node serves it.
func (r *router) owner(k messages.PartitionKey) (string, error) {
	owner := r.ownerOf(k)
	switch {
	case owner == "":
		return "", fmt.Errorf("%s/%d: %w: %w", k.Topic, k.Partition, ErrNoOwner, ErrUnavailable)
	case r.nats == nil:
		return r.self, nil
	}
	return owner, nil
}

// ask sends a partition request to the partition's owner: its local actor,
// or the owning node over NATS. The answer is the same message type either
// way. An error wraps ErrUnavailable; transport.NotProcessed tells whether
// the owner surely did not act on it.
func (r *router) ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	owner, err := r.owner(k)
	if err != nil {
		return nil, err
	}
	if owner == r.self {
		return r.local(ctx, k, msg)
	}
	rep, err := r.remote(ctx, owner, requestOf(k, msg), r.within(msg))
	if err != nil {
		return nil, fmt.Errorf("%T to %s at %s: %w: %w", msg, k.Topic, owner, err, ErrUnavailable)
	}
	return replyOf(rep, msg, k, owner)
}

// within is how long a peer's answer to msg is waited for: a lease
// operation's, LeaseRequestTimeout (an owner killed with it in flight
// must not hold its retry past the lease the next life restores); any
// other's, RequestTimeout.
func (r *router) within(msg any) time.Duration {
	if _, ok := msg.(*messages.Lease); ok && r.leaseTimeout > 0 {
		return r.leaseTimeout
	}
	return r.timeout
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
	return nil, fmt.Errorf("%T to %s at %s: empty reply: %w", msg, k.Topic, owner, ErrUnavailable)
}

// remote sends one partition request to the peer owner and decodes its
// answer, waiting at most within.
func (r *router) remote(ctx context.Context, owner string, req messages.PartitionRequest, within time.Duration) (messages.PartitionReply, error) {
	body, err := messages.EncodePartitionRequest(req)
	if err != nil {
		return messages.PartitionReply{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	out, err := r.nats.Request(ctx, owner, partitionService, body)
	if err != nil {
		return messages.PartitionReply{}, err
	}
	return messages.DecodePartitionReply(out)
}

// reserveAny asks the peer owner for a record of any of ra's partitions
// of the topic incarnation k names: one request. A peer that does not
// know ReserveAny (an older version, StatusBadRequest) is asked partition
// by partition instead.
func (r *router) reserveAny(ctx context.Context, owner string, k messages.PartitionKey, ra *messages.ReserveAny) (*messages.Reserved, error) {
	rep, err := r.remote(ctx, owner, messages.PartitionRequest{Key: k, ReserveAny: ra}, r.timeout)
	if re, ok := errors.AsType[*transport.RemoteError](err); ok && re.Status == transport.StatusBadRequest {
		return reserveFirst(ctx, k, ra, r.ask), nil
	}
	if err != nil {
		return nil, fmt.Errorf("reserve any of %s %v at %s: %w: %w", k.Topic, ra.Partitions, owner, err, ErrUnavailable)
	}
	if rep.Reply == nil {
		return nil, fmt.Errorf("reserve any of %s at %s: empty reply: %w", k.Topic, owner, ErrUnavailable)
	}
	return rep.Reply, nil
}

// reserveFirst asks each of ra's partitions in turn through ask until one
// leases a record, collecting those that had none. A partition that cannot
// be asked is skipped, with no belief either way.
func reserveFirst(ctx context.Context, k messages.PartitionKey, ra *messages.ReserveAny,
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

// readChunk reads a chunk of partition k from its owner: the local actor,
// or the owner's chunk service. The answer is the bytes, empty at the
// committed end.
func (r *router) readChunk(ctx context.Context, k messages.PartitionKey, rc messages.ReadChunk) ([]byte, error) {
	owner, err := r.owner(k)
	if err != nil {
		return nil, err
	}
	if owner == r.self {
		return r.localChunk(ctx, k, rc)
	}
	req, err := json.Marshal(chunkRequest{Key: k, ReadChunk: rc})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	data, err := r.nats.Request(ctx, owner, chunkService, req)
	if err != nil {
		return nil, fmt.Errorf("chunk of %s/%d at %s: %w: %w", k.Topic, k.Partition, owner, err, ErrUnavailable)
	}
	return data, nil
}

func (r *router) localChunk(ctx context.Context, k messages.PartitionKey, rc messages.ReadChunk) ([]byte, error) {
	res, err := r.local(ctx, k, &rc)
	if err != nil {
		return nil, fmt.Errorf("chunk of %s/%d: %w", k.Topic, k.Partition, err)
	}
	ch, ok := res.(*messages.Chunk)
	if !ok || ch.Status != messages.StatusOK {
		return nil, fmt.Errorf("chunk of %s/%d: %s: %w", k.Topic, k.Partition, describe(res), ErrUnavailable)
	}
	return ch.Data, nil
}

// serve answers peers' partition requests and chunk reads from the local
// partition actors. connectNATS refused a server too small for them
// (checkPayload). A request for a partition with no actor here (stale
// routing, or not yet spawned) answers 503: it was surely not processed,
// so the caller may retry; an actor that did not answer in time answers
// 504 (unknown).
func (r *router) serve() error {
	if err := r.nats.Handle(partitionService, r.servePartitions); err != nil {
		return err
	}
	if err := r.nats.Handle(moveGroupService, r.serveMoveGroup); err != nil {
		return err
	}
	if err := r.nats.Handle(commitGroupService, r.serveCommitGroup); err != nil {
		return err
	}
	return r.nats.Handle(chunkService, r.serveChunk)
}

func (r *router) servePartitions(ctx context.Context, _ string, body []byte) ([]byte, error) {
	in, err := messages.DecodePartitionRequest(body)
	if err != nil {
		return nil, transport.Errorf(transport.StatusBadRequest, "partition request: %v", err)
	}
	rep, err := r.servePartition(ctx, in)
	if err != nil {
		return nil, err
	}
	out, err := messages.EncodePartitionReply(rep)
	if err != nil {
		return nil, fmt.Errorf("partition %s/%d on %s: %w", in.Key.Topic, in.Key.Partition, r.self, err)
	}
	return out, nil
}

// servePartition hands one peer's request to the local partition actor.
func (r *router) servePartition(ctx context.Context, in messages.PartitionRequest) (messages.PartitionReply, error) {
	var msg any
	switch {
	case in.Commit != nil:
		// The peer retries what is not answered by its deadline: the
		// partition must not begin writing it after that.
		if d, ok := ctx.Deadline(); ok {
			in.Commit.NotAfter = messages.CommitDeadline(time.Now(), d)
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
	res, err := r.local(ctx, in.Key, msg)
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
func (r *router) serveReserveAny(ctx context.Context, k messages.PartitionKey, ra *messages.ReserveAny) (messages.PartitionReply, error) {
	if len(ra.Partitions) > maxReserveAnyPartitions {
		return messages.PartitionReply{}, transport.Errorf(transport.StatusBadRequest, "reserve any of %d partitions, at most %d", len(ra.Partitions), maxReserveAnyPartitions)
	}
	return messages.PartitionReply{Reply: reserveFirst(ctx, k, ra, r.local)}, nil
}

// maxReserveAnyPartitions is the most partitions one ReserveAny may name,
// far above a topic's partitions (Config.TopicMaxPartitions, 108 by
// default), so that only a malformed request meets it.
const maxReserveAnyPartitions = 4096

func (r *router) serveChunk(ctx context.Context, _ string, req []byte) ([]byte, error) {
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
func (r *router) servedError(k messages.PartitionKey, err error) error {
	if errors.Is(err, actor.ErrDeadLetter) {
		return transport.Errorf(transport.StatusUnavailable, "no partition %s/%d on %s", k.Topic, k.Partition, r.self)
	}
	return transport.Errorf(transport.StatusTimeout, "partition %s/%d on %s: %v", k.Topic, k.Partition, r.self, err)
}

// describe names an unexpected answer for an error message.
func describe(res any) string {
	switch r := res.(type) {
	case *messages.PartitionListing:
		return fmt.Sprintf("status %d: %s", r.Status, r.Err)
	case *messages.Chunk:
		return fmt.Sprintf("status %d: %s", r.Status, r.Err)
	case *messages.HandoffResult:
		return fmt.Sprintf("status %d: %s", r.Status, r.Err)
	}
	return fmt.Sprintf("answer %T", res)
}

// partitionKeyString names a partition in logs and metrics.
func partitionKeyString(k messages.PartitionKey) string {
	return fmt.Sprintf("%s/%d", k.Topic, k.Partition)
}

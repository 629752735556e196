package actors

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// partitionService is the transport service through which a node reaches
// the partitions another node owns.
const partitionService = "partition"

// ErrNoOwner is a partition the local replica knows no owner for.
var ErrNoOwner = errors.New("partition has no owner")

// ownerOf reads a partition's owner from the local replica (routing reads
// may lag by milliseconds; a stale answer reaches a node that refuses).
func (n *Node) ownerOf(k messages.PartitionKey) string {
	a, _ := n.store.Assignment(k.Incarnation, k.Partition)
	return a.Owner
}

// isLocal reports whether this node serves a partition itself: it owns it,
// or it runs without NATS and so can reach no other node.
func (n *Node) isLocal(k messages.PartitionKey) bool {
	return n.nats == nil || n.ownerOf(k) == n.cfg.NodeID
}

// ask sends a partition request to the partition's owner: its local actor,
// or the owning node over NATS. The answer is the same message type either
// way. An error wraps ErrUnavailable; transport.NotProcessed tells whether
// the owner surely did not act on it.
func (n *Node) ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	owner := n.ownerOf(k)
	switch {
	case owner == "":
		return nil, fmt.Errorf("%s/%d: %w: %w", k.Topic, k.Partition, ErrNoOwner, ErrUnavailable)
	case owner == n.cfg.NodeID || n.nats == nil:
		return n.request(ctx, partitionPID(n.system, k), msg)
	}
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
	body, err := messages.EncodePartitionRequest(req)
	if err != nil {
		return nil, fmt.Errorf("%T to %s at %s: %w: %w", msg, k.Topic, owner, err, ErrUnavailable)
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	out, err := n.nats.Request(ctx, owner, partitionService, body)
	if err != nil {
		return nil, fmt.Errorf("%T to %s at %s: %w: %w", msg, k.Topic, owner, err, ErrUnavailable)
	}
	rep, err := messages.DecodePartitionReply(out)
	if err != nil {
		return nil, fmt.Errorf("%T to %s at %s: %w: %w", msg, k.Topic, owner, err, ErrUnavailable)
	}
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

// servePartitions answers peers' partition requests from the local actors,
// in the binary wire form (messages/partitionwire.go) so record bytes cross
// raw; connectNATS refused a server too small for it (checkPayload). A
// request for a partition with no actor here (stale routing, or not yet
// spawned) answers 503: it was surely not processed, so the caller may
// retry; an actor that did not answer in time answers 504 (unknown).
func (n *Node) servePartitions() error {
	return n.nats.Handle(partitionService, func(ctx context.Context, _ string, body []byte) ([]byte, error) {
		in, err := messages.DecodePartitionRequest(body)
		if err != nil {
			return nil, transport.Errorf(transport.StatusBadRequest, "partition request: %v", err)
		}
		rep, err := n.servePartition(ctx, in)
		if err != nil {
			return nil, err
		}
		out, err := messages.EncodePartitionReply(rep)
		if err != nil {
			return nil, fmt.Errorf("partition %s/%d on %s: %w", in.Key.Topic, in.Key.Partition, n.cfg.NodeID, err)
		}
		return out, nil
	})
}

// servePartition hands one peer's request to the local partition actor.
func (n *Node) servePartition(ctx context.Context, in messages.PartitionRequest) (messages.PartitionReply, error) {
	var msg any
	switch {
	case in.Commit != nil:
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
	default:
		return messages.PartitionReply{}, transport.Errorf(transport.StatusBadRequest, "partition request with no request")
	}
	res, err := n.request(ctx, partitionPID(n.system, in.Key), msg)
	switch {
	case errors.Is(err, actor.ErrDeadLetter):
		return messages.PartitionReply{}, transport.Errorf(transport.StatusUnavailable, "no partition %s/%d on %s", in.Key.Topic, in.Key.Partition, n.cfg.NodeID)
	case err != nil:
		return messages.PartitionReply{}, transport.Errorf(transport.StatusTimeout, "partition %s/%d on %s: %v", in.Key.Topic, in.Key.Partition, n.cfg.NodeID, err)
	}
	switch r := res.(type) {
	case *messages.CommitResult:
		return messages.PartitionReply{Commit: r}, nil
	case *messages.Reserved:
		return messages.PartitionReply{Reply: r}, nil
	case *messages.LeaseResult:
		return messages.PartitionReply{Lease: r}, nil
	case *messages.PartitionStats:
		return messages.PartitionReply{Stats: r}, nil
	case *messages.PartitionListing:
		return messages.PartitionReply{Listing: r}, nil
	case *messages.HandoffResult:
		return messages.PartitionReply{Handoff: r}, nil
	}
	return messages.PartitionReply{}, transport.Errorf(transport.StatusInternal, "partition answered %T", res)
}

// checkPayload refuses to serve on a NATS server whose max_payload cannot
// carry the largest message of the partition protocol: a produce taken
// here and answered 202 would otherwise wait forever for a commit that can
// never be sent to its owner.
func (n *Node) checkPayload() error {
	need, err := partitionPayloadBytes(n.cfg, n.nats.MaxPayload()-n.nats.MaxRequestBytes())
	if err != nil {
		return err
	}
	if have := n.nats.MaxPayload(); have < need {
		return fmt.Errorf("nats max_payload is %d bytes, but a partition message of this node may take %d "+
			"(a commit to a peer of up to %d bytes of records with its envelope and headers, or a read of the largest record: %d-byte body, %d-byte key): "+
			"raise the server's max_payload to at least %d: %w",
			have, need, remoteCommitBytes(n.cfg), n.cfg.Log.MaxBodyBytes, n.cfg.Log.MaxKeyBytes, need, ErrInvalid)
	}
	return nil
}

// remoteCommitBytes caps the records of a commit sent to a peer, counted
// as the dispatcher counts them (key, body and recordOverheadBytes each).
func remoteCommitBytes(cfg Config) int {
	return min(cfg.MaxCommitBatchBytes, cfg.MaxRemoteCommitBytes)
}

// partitionPayloadBytes is the largest NATS message the partition protocol
// may need on a node of cfg whose requests carry headerBytes of headers: a
// commit of remoteCommitBytes to a peer, or a reply carrying the largest
// record. The envelopes are encoded for real at their largest (longest
// topic name, largest numbers) with no record bytes; records add no more
// than the dispatcher counts for them, since recordOverheadBytes covers
// messages.WireRecordOverheadBytes.
func partitionPayloadBytes(cfg Config, headerBytes int64) (int64, error) {
	k := messages.PartitionKey{Topic: strings.Repeat("t", cfg.WAL.MaxTopicBytes), Incarnation: math.MaxUint64, Partition: cfg.TopicMaxPartitions}
	commit, err := messages.EncodePartitionRequest(messages.PartitionRequest{Key: k,
		Commit: &messages.Commit{Key: k, Records: []messages.CommitRecord{}}})
	if err != nil {
		return 0, fmt.Errorf("size the largest commit: %w", err)
	}
	read, err := messages.EncodePartitionReply(messages.PartitionReply{Reply: &messages.Reserved{Status: messages.StatusOK,
		Delivery: messages.Delivery{Partition: cfg.TopicMaxPartitions, Offset: math.MaxInt64, Time: math.MinInt64, Nonce: math.MaxUint64}}})
	if err != nil {
		return 0, fmt.Errorf("size the largest read: %w", err)
	}
	return max(int64(len(commit))+int64(remoteCommitBytes(cfg))+headerBytes,
		int64(len(read))+int64(cfg.Log.MaxKeyBytes+cfg.Log.MaxBodyBytes)), nil
}

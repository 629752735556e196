package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// chunkService carries a copy's chunks between nodes as raw bytes: a
// chunk in the JSON partition protocol would travel base64, a third larger
// and slower to encode, and chunks are nearly all of a move's bytes.
const chunkService = "chunk"

// chunkRequest asks the owner of Key for committed bytes of a segment.
type chunkRequest struct {
	Key messages.PartitionKey `json:"key"`
	messages.ReadChunk
}

// readChunk reads a chunk of partition k from its owner: the local actor,
// or the owner's chunk service. The answer is the bytes, empty at the
// committed end.
func (n *Node) readChunk(ctx context.Context, k messages.PartitionKey, rc messages.ReadChunk) ([]byte, error) {
	owner := n.ownerOf(k)
	if owner == "" {
		return nil, fmt.Errorf("%s/%d: %w: %w", k.Topic, k.Partition, ErrNoOwner, ErrUnavailable)
	}
	if owner == n.cfg.NodeID || n.nats == nil {
		return n.localChunk(ctx, k, rc)
	}
	req, err := json.Marshal(chunkRequest{Key: k, ReadChunk: rc})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.RequestTimeout)
	defer cancel()
	data, err := n.nats.Request(ctx, owner, chunkService, req)
	if err != nil {
		return nil, fmt.Errorf("chunk of %s/%d at %s: %w: %w", k.Topic, k.Partition, owner, err, ErrUnavailable)
	}
	return data, nil
}

func (n *Node) localChunk(ctx context.Context, k messages.PartitionKey, rc messages.ReadChunk) ([]byte, error) {
	res, err := n.request(ctx, partitionPID(n.system, k), &rc)
	if err != nil {
		return nil, fmt.Errorf("chunk of %s/%d: %w: %w", k.Topic, k.Partition, err, ErrUnavailable)
	}
	ch, ok := res.(*messages.Chunk)
	if !ok || ch.Status != messages.StatusOK {
		return nil, fmt.Errorf("chunk of %s/%d: %s: %w", k.Topic, k.Partition, describe(res), ErrUnavailable)
	}
	return ch.Data, nil
}

// serveChunks answers peers' chunk reads from the local partition actors.
func (n *Node) serveChunks() error {
	return n.nats.Handle(chunkService, func(ctx context.Context, _ string, req []byte) ([]byte, error) {
		var in chunkRequest
		if err := json.Unmarshal(req, &in); err != nil {
			return nil, transport.Errorf(transport.StatusBadRequest, "chunk request: %v", err)
		}
		data, err := n.localChunk(ctx, in.Key, in.ReadChunk)
		if errors.Is(err, actor.ErrDeadLetter) {
			return nil, transport.Errorf(transport.StatusUnavailable, "no partition %s/%d on %s", in.Key.Topic, in.Key.Partition, n.cfg.NodeID)
		}
		if err != nil {
			return nil, transport.Errorf(transport.StatusTimeout, "%v", err)
		}
		return data, nil
	})
}

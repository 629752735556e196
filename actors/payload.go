package actors

import (
	"fmt"
	"math"
	"strings"

	"github.com/naradmq/narad/messages"
)

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
		Commit: &messages.Commit{Key: k, WAL: math.MaxUint64, Records: []messages.CommitRecord{}}})
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

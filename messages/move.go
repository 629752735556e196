package messages

import (
	"fmt"
	"time"
)

// The move protocol: what a move's destination asks of the partition's
// owner (the source). It travels inside PartitionRequest/PartitionReply on
// the owner's "partition" service and reaches the partition's actor, the
// only code that touches its log.

// ListPartition asks for a transfer listing: the consumer position and the
// fan-out cursors first, then the HWM, then the segments' committed bytes
// (rule C7).
type ListPartition struct {
	// InlineBytes: when the partition's committed bytes total at most this
	// many, the listing carries them (SegmentInfo.Data), so a partition of
	// a few records costs its move no chunk read. 0: none.
	InlineBytes int `json:"inline_bytes,omitempty"`
}

// SegmentInfo is one segment of a listing.
type SegmentInfo struct {
	Name string `json:"name"`
	Base int64  `json:"base"`
	// Size counts committed bytes only (rule C4).
	Size int64 `json:"size"`
	// ModTime is the file's modification time on the source's clock.
	ModTime time.Time `json:"mod_time"`
	// Data is the segment's committed bytes, all Size of them, when the
	// listing was asked to carry them (ListPartition.InlineBytes).
	Data []byte `json:"data,omitempty"`
}

// ConsumerPosition is a partition's consumer progress as it travels with a
// move: every offset <= Frontier is acked, and so is each of AckedAhead.
type ConsumerPosition struct {
	Frontier   int64   `json:"frontier"`
	AckedAhead []int64 `json:"acked_ahead,omitempty"`
}

// PartitionListing answers ListPartition (and a Handoff that froze).
type PartitionListing struct {
	Status   Status           `json:"status"`
	Err      string           `json:"err,omitempty"`
	Segments []SegmentInfo    `json:"segments"`
	HWM      int64            `json:"hwm"`
	Clock    time.Time        `json:"clock"`
	Position ConsumerPosition `json:"position"`
	// Cursors are the partition's fan-out cursor files, each the verified
	// record as the source read it, in child order (rule K8): read before
	// the HWM, so none is past what the listing copies. A destination
	// checks each again and installs them after the last segment pass.
	Cursors [][]byte `json:"cursors,omitempty"`
	// Marker is the move marker of the owner's copy, nil when it has none:
	// the old owner's stale-copy sweep asks for it before reclaiming its
	// own copy (rule S1).
	Marker *MoveMarker `json:"marker,omitempty"`
}

// MoveMarker is a copy's move marker as its owner reports it.
type MoveMarker struct {
	PromotedHWM   int64  `json:"promoted_hwm"`
	ForcePromoted bool   `json:"force_promoted,omitempty"`
	SourceNode    string `json:"source_node"`
	// Durable: the marker carries a durability stamp (rule S4).
	Durable bool `json:"durable"`
	// InstallAgeMs is how long ago the install happened, on the owner's
	// clock (its stamp, or the marker file's time without one).
	InstallAgeMs int64 `json:"install_age_ms"`
}

// ReadChunk asks for committed bytes of one segment from Pos, at most Max.
type ReadChunk struct {
	Segment string `json:"segment"`
	Pos     int64  `json:"pos"`
	Max     int    `json:"max"`
}

// Chunk answers ReadChunk: no Data at the committed end.
type Chunk struct {
	Status Status `json:"status"`
	Err    string `json:"err,omitempty"`
	Data   []byte `json:"data"`
}

// HandoffOp says what a Handoff request does.
type HandoffOp int

const (
	// HandoffPrepare freezes the partition (rules F1-F5) and answers with
	// a token and the listing read under the freeze.
	HandoffPrepare HandoffOp = iota
	// HandoffRearm extends the freeze Token names (rule F6).
	HandoffRearm
	// HandoffFence checks that the freeze Token names still holds and that
	// the HWM is still HWM, and renews it (rule F9).
	HandoffFence
	// HandoffRelease lifts the freeze Token names (a move that gave up).
	HandoffRelease
)

// Handoff is a freeze request to the source.
type Handoff struct {
	Op    HandoffOp `json:"op"`
	Token string    `json:"token,omitempty"`
	HWM   int64     `json:"hwm,omitempty"`
	// From is the destination asking (a prepare): the source keeps a
	// reported freeze for the destination that armed it.
	From string `json:"from,omitempty"`
}

// HandoffResult answers Handoff. Status StatusGone is the 409 of the seed:
// that freeze is no longer active, or (fence) the HWM moved.
type HandoffResult struct {
	Status  Status            `json:"status"`
	Err     string            `json:"err,omitempty"`
	Token   string            `json:"token,omitempty"`
	Listing *PartitionListing `json:"listing,omitempty"`
}

// MoveProgress is a move as its destination's worker reports it (the
// live progress of GET /v1/cluster/moves?detail=1).
type MoveProgress struct {
	Topic       string   `json:"topic"`
	Partition   int      `json:"partition"`
	From        string   `json:"from"`
	Phase       string   `json:"phase"`
	Pass        int      `json:"pass"`
	BytesCopied int64    `json:"bytes_copied"`
	BytesListed int64    `json:"bytes_listed"`
	FrozenMs    int64    `json:"frozen_ms,omitempty"`
	ElapsedMs   int64    `json:"elapsed_ms"`
	Blocked     []string `json:"blocked,omitempty"`
}

// MoveGroup carries the move requests of many partitions to the node that
// owns them all, in one request of the "movegroup" service: a destination
// moving hundreds of partitions off one source pays one round trip for
// their listings, re-arms, fences and releases together instead of one
// each (issue 27). Each item is one partition's request, answered alone:
// only List and Handoff items that are not a prepare travel here (a
// prepare may wait at the source for the freeze pacing, and a group must
// not wait for it).
type MoveGroup struct {
	Items []PartitionRequest `json:"items"`
}

// MoveGroupReply answers a MoveGroup, one item per request in its order.
type MoveGroupReply struct {
	Items []MoveGroupItem `json:"items"`
}

// MoveGroupItem is one partition's answer in a group: Reply, or the
// transport status and message its request alone would have failed with
// (503: surely not processed; 504: unknown).
type MoveGroupItem struct {
	Reply  PartitionReply `json:"reply"`
	Status int            `json:"status,omitempty"`
	Err    string         `json:"err,omitempty"`
}

// Groupable reports whether req may travel in a MoveGroup.
func (req PartitionRequest) Groupable() bool {
	only := req.Commit == nil && req.Reserve == nil && req.ReserveAny == nil && req.ReadAt == nil && req.Lease == nil && req.Stats == nil
	switch {
	case !only:
		return false
	case req.List != nil:
		return req.Handoff == nil
	case req.Handoff != nil:
		return req.Handoff.Op != HandoffPrepare
	}
	return false
}

// DropEarlier asks the partitions supervisor to drop whatever in-memory
// consumer state an earlier ownership of the partition left on this node
// (rule K7): a move's destination asks before its install and again after
// it. The supervisor stops the partition's actor if one still runs while
// the node does not own the partition; the answer is DroppedEarlier.
type DropEarlier struct{ Key PartitionKey }

// DroppedEarlier answers DropEarlier; Stopped says an actor was stopped.
type DroppedEarlier struct{ Stopped bool }

// Describe names an unexpected answer to a move's request (a listing, a
// chunk or a handoff that is not OK, or an answer of another type) for an
// error message.
func Describe(res any) string {
	switch r := res.(type) {
	case *PartitionListing:
		return fmt.Sprintf("status %d: %s", r.Status, r.Err)
	case *Chunk:
		return fmt.Sprintf("status %d: %s", r.Status, r.Err)
	case *HandoffResult:
		return fmt.Sprintf("status %d: %s", r.Status, r.Err)
	}
	return fmt.Sprintf("answer %T", res)
}

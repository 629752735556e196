package sweeper

import (
	"errors"
	"log/slog"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/sweep"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// A judgement (sweep.Judge) has two sides: the local copy, as this node
// lists it, and the owner's listing. The sweep builds both for each copy it
// judges; a move's install builds them for the copy it meets at the
// partition's path (VouchedBy).

// localSide fills in the local copy's side of a judgement: Listed stays
// false when the copy cannot be listed (the error says why).
func localSide(dir string, cfg storage.LogConfig, retention time.Duration, in *sweep.Copy) error {
	now := clock.Or(cfg.Clock).Now() // the log's clock: its segment times
	ls, err := storage.ListClosed(dir, cfg, now)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		// No segments: nothing of the partition's records is here.
		in.Listed = true
		in.HoldsUnexpired = storage.HoldsUnexpiredRecords(dir, cfg, now, retention)
		return nil
	case err != nil:
		return err
	}
	in.Listed, in.HWM = true, ls.HWM
	in.HoldsUnexpired = storage.HoldsUnexpiredRecords(dir, cfg, now, retention)
	in.Segments = sweepSegments(ls.Segments, func(i int) (string, int64, int64) {
		return ls.Segments[i].Name, ls.Segments[i].Base, ls.Segments[i].Size
	})
	return nil
}

// ownerSide fills in the owner's side of a judgement from its listing;
// nil leaves the owner unanswered (the verdict defers, S3).
func ownerSide(ls *messages.PartitionListing, in *sweep.Copy) {
	if ls == nil || ls.Status != messages.StatusOK {
		return
	}
	in.OwnerAnswered, in.OwnerHWM = true, ls.HWM
	in.OwnerSegments = sweepSegments(ls.Segments, func(i int) (string, int64, int64) {
		return ls.Segments[i].Name, ls.Segments[i].Base, ls.Segments[i].Size
	})
	if m := ls.Marker; m != nil {
		in.OwnerMarker = &sweep.Marker{PromotedHWM: m.PromotedHWM, ForcePromoted: m.ForcePromoted, SourceNode: m.SourceNode,
			Durable: m.Durable, InstallAge: time.Duration(m.InstallAgeMs) * time.Millisecond}
	}
}

// VouchedBy is an install's question about the copy it meets at the
// partition's path (storage.InstallOptions.Vouched): this node's own copy
// from an earlier ownership, which the sweep has not judged yet because
// the partition was planned back first. The move's source is the owner
// the sweep would ask, and its listing, taken under the freeze (or by the
// last pass of a force-promote), is the answer it would get; the copy is
// removed only on the verdict that would reclaim it, and quarantined on
// every other (a copy left past a force-promote, one the owner lacks
// segments of). Without it, every partition a node takes back after a
// hand-off would be quarantined.
func VouchedBy(owner *messages.PartitionListing, self string, cfg storage.LogConfig, retention time.Duration, log *slog.Logger) func(dir string) bool {
	return func(dir string) bool {
		in := sweep.Copy{Self: self}
		if err := localSide(dir, cfg, retention, &in); err != nil {
			return false
		}
		ownerSide(owner, &in)
		v := sweep.Judge(in)
		log.Info("move: the copy at the partition's path, judged as the sweep would", "dir", dir, "verdict", v.Action, "reason", v.Reason, "vouched", v.Vouched)
		return v.Action == sweep.Reclaim
	}
}

// sweepSegments turns a listing of n segments into the judge's, the last
// one unsealed.
func sweepSegments[T any](segs []T, at func(i int) (name string, base, size int64)) []sweep.Segment {
	out := make([]sweep.Segment, len(segs))
	for i := range segs {
		name, base, size := at(i)
		out[i] = sweep.Segment{Name: name, Base: base, Size: size, Sealed: i < len(segs)-1}
	}
	return out
}

package mover

import (
	"fmt"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// A parent partition's fan-out cursors move with it (rules K6, K8, V7).
// The source ships each cursor file as a sidecar of its listing, the
// verified record as read (the partition actor's cursorSidecars, in the
// root package); the destination checks each when the listing arrives (a
// bad one fails that pass, which is retried) and again as it installs
// them, last, into the staged copy before Staging.Install syncs it,
// clamped to the installed HWM. The marker names the links the metadata
// has at install time, so a cursor found missing later resumes from the
// oldest offset, not the tail (rule K9, the fan-out engine's).

// checkSidecars verifies a listing's cursor records as it arrives at the
// destination (rule K8): a bad one fails the pass.
func checkSidecars(k messages.PartitionKey, source string, ls *messages.PartitionListing) error {
	for i, raw := range ls.Cursors {
		if _, err := storage.VerifyCursor(raw); err != nil {
			return fmt.Errorf("list %s at %s: cursor sidecar %d: %w", keyString(k), source, i, err)
		}
	}
	return nil
}

// installSidecars writes the last listing's cursors into the staged copy,
// clamped to hwm (rule K6), after every segment pass; Staging.Install then
// syncs them with the copy's other files, before the marker (rule V6). A
// copy installed without a listing gets no cursors.
func installSidecars(s *storage.Staging, ls *messages.PartitionListing, hwm int64) error {
	var raws [][]byte
	if ls != nil {
		raws = ls.Cursors
	}
	if err := s.ReplaceCursors(raws, hwm); err != nil {
		return fmt.Errorf("install cursor sidecars: %w", err)
	}
	return nil
}

// markerChildren are the topic's fan-out links as the local replica has
// them at install time, for the move marker (rule V7); none when the
// replica no longer has the incarnation being moved.
func markerChildren(t messages.Topic, k messages.PartitionKey) []storage.ChildLink {
	if t.Incarnation != k.Incarnation || len(t.Children) == 0 {
		return nil
	}
	out := make([]storage.ChildLink, len(t.Children))
	for i, c := range t.Children {
		out[i] = storage.ChildLink{Child: c.Name, AttachEpoch: c.AttachEpoch}
	}
	return out
}

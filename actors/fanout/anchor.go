package fanout

import (
	"fmt"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The partition actor owns a link's cursor (fanout-<child>.offset in its
// directory, storage/cursor.go); what it decides about one is pure and
// lives here, beside the copy loop that reads from it.

// Topics looks a topic up in the local replica.
type Topics interface {
	Topic(name string) (messages.Topic, bool)
}

// LinksOf is the fan-out links a parent partition serves now.
func LinksOf(store Topics, k messages.PartitionKey) []messages.ChildLink {
	t, ok := store.Topic(k.Topic)
	if !ok || t.Incarnation != k.Incarnation {
		return nil
	}
	return t.Children
}

// LinksSignature tells two link sets apart cheaply, for the supervisor's
// "changed since I last said" check.
func LinksSignature(links []messages.ChildLink) string {
	if len(links) == 0 {
		return ""
	}
	s := ""
	for _, l := range links {
		s += fmt.Sprintf("%s/%d/%d/%d;", l.Name, l.Incarnation, l.AttachEpoch, l.DelayMs)
	}
	return s
}

// AnchorWhy says where a link's cursor was anchored.
type AnchorWhy int

const (
	// AnchorFile: the link's own cursor file (this attach's epoch).
	AnchorFile AnchorWhy = iota
	// AnchorTail: a new link, anchored at the HWM: no backfill of records
	// committed before the attach.
	AnchorTail
	// AnchorMarker: no file for a link the move marker names (rule K9):
	// the oldest retained offset, never the tail over data.
	AnchorMarker
	// AnchorCorrupt: a file that never verified: the oldest offset, since
	// where it stood is unknown and a gap is worse than redeliveries.
	AnchorCorrupt
)

// AnchorInput is what AnchorCursor decides from.
type AnchorInput struct {
	File     storage.Cursor
	Found    bool // a file verified
	Corrupt  bool // a file exists and never verified
	Epoch    uint64
	InMarker bool // the move marker names (child, epoch)
	Oldest   int64
	HWM      int64
}

// AnchorCursor is where a link's cursor starts on this owner: pure, so
// every case is a table row (anchor_test.go).
func AnchorCursor(in AnchorInput) (int64, AnchorWhy) {
	switch {
	case in.Found && in.File.Epoch == in.Epoch:
		// Rule K6: a cursor past the HWM is lowered to it.
		return storage.ClampCursor(in.File.Offset, in.HWM), AnchorFile
	case in.Corrupt:
		return in.Oldest, AnchorCorrupt
	case in.InMarker:
		return in.Oldest, AnchorMarker
	}
	// No file, or one of an earlier attach of the same name: a link this
	// owner sees for the first time.
	return in.HWM, AnchorTail
}

// MarkerNames reports whether a move marker's child links (nil without a
// marker) list the link.
func MarkerNames(named []storage.ChildLink, child string, epoch uint64) bool {
	for _, l := range named {
		if l.Child == child && l.AttachEpoch == epoch {
			return true
		}
	}
	return false
}

package actors

import (
	"errors"
	"fmt"

	"github.com/naradmq/narad/storage"
)

// A parent partition's fan-out cursors move with it (rules K6, K8, V7).
// The source ships each cursor file as a sidecar of its listing, the
// verified record as read; the destination's move worker (actors/mover,
// its sidecars.go) checks each as the listing arrives and installs them,
// last, into the staged copy, clamped to the installed HWM.

// cursorSidecars reads the partition's cursor files for a listing (rule
// K8): a record caught mid-write is read again, and one that never
// verifies fails the listing, so no unverified record is ever shipped.
func (p *partitionActor) cursorSidecars() ([][]byte, error) {
	raws, err := storage.ListCursorFiles(p.dir, p.cfg.Consumer.CursorReadAttempts)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", partitionKeyString(p.key), err)
	}
	return raws, nil
}

package mover

import (
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// installedCursors are the cursor files at the rig's partition path.
func (r *workerRig) installedCursors() map[string]storage.Cursor {
	r.t.Helper()
	got, err := storage.ListCursors(storage.PartitionPath(r.d.DataDir, r.key.Topic, r.key.Partition), 1)
	if err != nil {
		r.t.Fatalf("installed cursors: %v", err)
	}
	return got
}

// rules K8 and K6 (destination side): the cursors installed are those of
// the listing the copy ends at (the source's fan-out keeps advancing under
// the freeze, so every listing ships later ones), with one past the HWM
// lowered to it.
func TestRuleK8TheDestinationInstallsTheLastListingsCursorsClamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 6, false) // HWM 6
		r.source.cursors = func(n int) [][]byte {
			return [][]byte{
				storage.EncodeCursor(storage.Cursor{Child: "plain", Epoch: 11, Offset: int64(min(n, 6))}),
				storage.EncodeCursor(storage.Cursor{Child: "late", Epoch: 12, Offset: 6 + int64(n)}), // rule K6
			}
		}
		runInstall(t, r)
		r.source.mu.Lock()
		n, shipped := r.source.listings, r.source.shipped
		r.source.mu.Unlock()
		if n < 2 || len(shipped) != 2 {
			t.Fatalf("listings: got %d shipping %d sidecars, want at least 2 shipping 2", n, len(shipped))
		}
		want := map[string]storage.Cursor{
			"plain": {Child: "plain", Epoch: 11, Offset: int64(min(n, 6))},
			"late":  {Child: "late", Epoch: 12, Offset: 6},
		}
		if got := r.installedCursors(); !maps.Equal(got, want) {
			t.Fatalf("installed cursors after %d listings: got %v, want %v (the last listing's, clamped to HWM 6)", n, got, want)
		}
	})
}

// rule K8 (destination side): a sidecar that fails its check at the
// destination fails that pass, which is retried; it is never installed.
func TestRuleK8ACorruptSidecarFailsThePassAndIsNeverInstalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 4, false)
		// The first listings ship a damaged record: enough that, were a bad
		// pass not failed, the listing the copy ends at would be one.
		const bad = 4
		r.source.cursors = func(n int) [][]byte {
			raw := storage.EncodeCursor(storage.Cursor{Child: "kid", Epoch: 5, Offset: 2})
			if n <= bad {
				raw[len(raw)-1] ^= 0x40
			}
			return [][]byte{raw}
		}
		r.start()
		defer r.stop()
		var ended *moveEnded
		for range 20 {
			synctest.Wait()
			select {
			case e := <-r.ended:
				ended = &e
			default:
			}
			if ended != nil {
				break
			}
			time.Sleep(r.d.Move.RetryAfter) // the bubble's clock: the retry's timer
		}
		if ended == nil || !ended.flipped {
			t.Fatalf("the move: got %+v, want flipped once the sidecars verify", ended)
		}
		r.source.mu.Lock()
		n := r.source.listings
		r.source.mu.Unlock()
		if n <= bad {
			t.Fatalf("listings: got %d, want more than the %d damaged ones", n, bad)
		}
		if got, want := r.installedCursors(), map[string]storage.Cursor{"kid": {Child: "kid", Epoch: 5, Offset: 2}}; !maps.Equal(got, want) {
			t.Fatalf("installed cursors: got %v, want %v", got, want)
		}
	})
}

// rule V7: the install's marker names the topic's child links with their
// attach epochs, as the local replica has them at install time.
func TestRuleV7TheMarkerNamesTheChildLinksWithEpochs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newWorkerRig(t, 3, false)
		f := r.store.fakeReplica
		tp, _ := f.Topic("w")
		tp.Children = []messages.ChildLink{{Name: "c1", Incarnation: 20, AttachEpoch: 300}, {Name: "c2", Incarnation: 21, AttachEpoch: 412, DelayMs: 60_000}}
		f.Put(tp)
		runInstall(t, r)
		m, err := storage.ReadMarker(storage.PartitionPath(r.d.DataDir, r.key.Topic, r.key.Partition))
		if err != nil {
			t.Fatalf("marker: %v", err)
		}
		want := []storage.ChildLink{{Child: "c1", AttachEpoch: 300}, {Child: "c2", AttachEpoch: 412}}
		if !slices.Equal(m.Children, want) {
			t.Fatalf("marker children: got %+v, want %+v", m.Children, want)
		}
	})
}

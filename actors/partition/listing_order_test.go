package partition

import (
	"testing"
	"time"

	"github.com/naradmq/narad/storage"
)

// listingWorld is a partition under load while it is listed: between any
// two reads a record lands, a consumer acks everything delivered and a
// fan-out copy catches up, so the frontier and the cursor only ever reach
// the HWM of their moment.
type listingWorld struct {
	t        *testing.T
	dir      string
	hwm      int64
	frontier int64
	cursor   int64
}

func (w *listingWorld) advance() {
	w.hwm++
	w.frontier = w.hwm
	w.cursor = w.hwm
}

func (w *listingWorld) reads() listingReads {
	return listingReads{
		position: func() (int64, []int64) {
			defer w.advance()
			return w.frontier, nil
		},
		cursors: func() ([][]byte, error) {
			defer w.advance()
			if err := storage.WriteCursor(w.dir, storage.Cursor{Child: "child", Epoch: 1, Offset: w.cursor}, false, nil); err != nil {
				w.t.Fatal(err)
			}
			return storage.ListCursorFiles(w.dir, 3)
		},
		log: func() (storage.Listing, error) {
			defer w.advance()
			return storage.Listing{HWM: w.hwm, Clock: time.Now()}, nil
		},
	}
}

// rule C7: a listing reads the consumer frontier and the fan-out cursors
// before the HWM (and the log's segments with it), so while records land
// and consumers and copies move between the reads, no listing carries a
// position or a cursor past the HWM it lists.
func TestRuleC7AListingNeverCarriesAPositionPastItsHWM(t *testing.T) {
	w := &listingWorld{t: t, dir: t.TempDir(), hwm: 10, frontier: 7, cursor: 9}
	for range 5 {
		ls := w.reads().read()
		if ls.Err != "" {
			t.Fatalf("listing failed: %s", ls.Err)
		}
		if ls.Position.Frontier > ls.HWM {
			t.Fatalf("frontier: got %d past the listed HWM %d", ls.Position.Frontier, ls.HWM)
		}
		if len(ls.Cursors) != 1 {
			t.Fatalf("cursors: got %d, want 1", len(ls.Cursors))
		}
		c, err := storage.VerifyCursor(ls.Cursors[0])
		if err != nil {
			t.Fatal(err)
		}
		if c.Offset > ls.HWM {
			t.Fatalf("cursor: got %d past the listed HWM %d", c.Offset, ls.HWM)
		}
	}
}

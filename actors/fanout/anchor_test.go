package fanout

import (
	"testing"

	"github.com/naradmq/narad/storage"
)

func TestAnchorCursor(t *testing.T) {
	const oldest, hwm = 10, 50
	file := func(epoch uint64, off int64) storage.Cursor {
		return storage.Cursor{Child: "c", Epoch: epoch, Offset: off}
	}
	cases := []struct {
		name    string
		in      AnchorInput
		want    int64
		wantWhy AnchorWhy
	}{
		{"a new link starts at the log end (no backfill)", AnchorInput{Epoch: 7}, hwm, AnchorTail},
		{"the link's own file", AnchorInput{Epoch: 7, Found: true, File: file(7, 30)}, 30, AnchorFile},
		{"rule K6: a file past the HWM is lowered to it", AnchorInput{Epoch: 7, Found: true, File: file(7, 80)}, hwm, AnchorFile},
		{"rule K9: no file for a link the marker names: the oldest offset", AnchorInput{Epoch: 7, InMarker: true}, oldest, AnchorMarker},
		{"rule K9: a file of an earlier attach, the marker names this one", AnchorInput{Epoch: 7, InMarker: true, Found: true, File: file(3, 45)}, oldest, AnchorMarker},
		{"a file of an earlier attach is a new link", AnchorInput{Epoch: 7, Found: true, File: file(3, 20)}, hwm, AnchorTail},
		{"a file that never verified: the oldest, never the tail", AnchorInput{Epoch: 7, Corrupt: true}, oldest, AnchorCorrupt},
		{"a link attached after the install keeps no-backfill", AnchorInput{Epoch: 9, InMarker: false}, hwm, AnchorTail},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			in.Oldest, in.HWM = oldest, hwm
			got, why := AnchorCursor(in)
			if got != c.want || why != c.wantWhy {
				t.Fatalf("got offset %d (%d), want %d (%d)", got, why, c.want, c.wantWhy)
			}
		})
	}
}

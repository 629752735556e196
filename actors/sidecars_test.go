package actors

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// rule K8 (source side): a listing carries each cursor file of the
// partition as the verified record, and a file that does not verify fails
// the listing instead of being shipped.
func TestRuleK8TheSourceShipsVerifiedCursorsOnly(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("f", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"a"`))
	wantHWM(t, tn, "f", 1)
	dir := storage.PartitionPath(tn.cfg.DataDir, "f", 0)
	c := storage.Cursor{Child: "kid", Epoch: 9, Offset: 1}
	if err := storage.WriteCursor(dir, c, false, nil); err != nil {
		t.Fatal(err)
	}
	ls := askPartition(t, tn, "f", &messages.ListPartition{}).(*messages.PartitionListing)
	if ls.Status != messages.StatusOK || len(ls.Cursors) != 1 || !bytes.Equal(ls.Cursors[0], storage.EncodeCursor(c)) {
		t.Fatalf("listing: got status %d cursors %x, want OK with the record of %+v", ls.Status, ls.Cursors, c)
	}
	path := filepath.Join(dir, "fanout-kid.offset")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[9] ^= 1
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	ls = askPartition(t, tn, "f", &messages.ListPartition{}).(*messages.PartitionListing)
	if ls.Status != messages.StatusFailed || ls.Cursors != nil {
		t.Fatalf("listing over a damaged cursor: got status %d cursors %x, want failed with none", ls.Status, ls.Cursors)
	}
}

package mover

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// windowSource serves chunks from a real log, keeps the most reads it had
// in flight at once, and answers the read at shortAt with half its bytes.
type windowSource struct {
	fakeSource
	shortAt int64

	mu               sync.Mutex
	inFlight, most   int
	reads, shortened int
}

func (s *windowSource) ReadChunk(ctx context.Context, k messages.PartitionKey, rc messages.ReadChunk) ([]byte, error) {
	s.mu.Lock()
	s.inFlight++
	s.reads++
	s.most = max(s.most, s.inFlight)
	short := rc.Pos == s.shortAt && s.shortened == 0
	if short {
		s.shortened++
		rc.Max /= 2
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	return s.fakeSource.ReadChunk(ctx, k, rc)
}

// The windowed copy writes the chunks in order, asks again from where a
// short chunk ended, and stages exactly the source's committed bytes. (The
// window's bound is checked too, but reads this fast rarely overlap: a copy
// that kept more out would mostly pass.)
func TestMoveCopyReasksAfterAShortChunkAndCopiesExactly(t *testing.T) {
	d := testDeps(t.TempDir())
	d.NodeID = "n2"
	d.LogConfig.SegmentMaxBytes = 256 << 10
	d.ChunkBytes, d.Config.ChunkWindow = 16<<10, 3
	l, err := storage.OpenLog(t.TempDir(), d.LogConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	body := bytes.Repeat([]byte("x"), 1000)
	batch := make([]storage.Entry, 100)
	for i := range batch {
		batch[i] = storage.Entry{Body: body}
	}
	for range 6 {
		if _, err := l.Append(time.Now(), batch); err != nil {
			t.Fatal(err)
		}
	}
	src := &windowSource{fakeSource: fakeSource{log: l}, shortAt: 5 * 16 << 10}
	key := messages.PartitionKey{Topic: "t", Partition: 0, Incarnation: 1}
	w := &worker{d: d, peer: src, key: key}
	s, _, err := storage.OpenStaging(storage.StagingPath(d.DataDir, "t", 0), d.LogConfig, "m")
	if err != nil {
		t.Fatal(err)
	}
	ls := src.listing(messages.ConsumerPosition{Frontier: -1})
	copied, err := w.copyListed(context.Background(), s, ls)
	if err != nil {
		t.Fatal(err)
	}
	if want := toStorageListing(ls).Bytes(); copied != want {
		t.Errorf("copied %d bytes, want %d", copied, want)
	}
	if src.most > d.Config.ChunkWindow {
		t.Errorf("%d chunk reads in flight at once, want at most %d", src.most, d.Config.ChunkWindow)
	}
	if src.shortened != 1 {
		t.Errorf("short chunks served: got %d, want 1", src.shortened)
	}
	if err := s.Verify(ls.HWM); err != nil {
		t.Fatalf("verify the copy at %d: %v", ls.HWM, err)
	}
	for _, sg := range ls.Segments {
		got, err := os.ReadFile(filepath.Join(s.Dir(), sg.Name))
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, sg.Size)
		n, err := l.ReadChunk(sg.Name, 0, buf)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, buf[:n]) {
			t.Errorf("segment %s: staged %d bytes differ from the source's %d", sg.Name, len(got), n)
		}
	}
}

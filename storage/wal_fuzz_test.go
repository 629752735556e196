package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// walFuzzSealedBase names the last segment when the fuzzed bytes play a
// sealed segment, so their frames may hold seqs 1..walFuzzSealedBase-1.
const walFuzzSealedBase = 1 << 20

// FuzzWALReplay writes arbitrary bytes as a segment (the last one, or a
// sealed one followed by an empty last one) and as the position file, then
// opens the WAL and replays it. Nothing may panic, OpenWAL must cope with
// any content, and Replay may return only records whose frames verify: in
// the last segment exactly the valid prefix, in a sealed one only frames
// present verbatim, in increasing seq order.
func FuzzWALReplay(f *testing.F) {
	f.Add(walEncodeFrame(nil, WALRecord{Seq: 1, Topic: "t", Partition: -1, Body: []byte("b")}), []byte{}, false)
	// A frame with its topic's incarnation, after one without (as an older
	// node wrote it).
	f.Add(walEncodeFrame(walEncodeFrame(nil, WALRecord{Seq: 1, Topic: "t", Partition: 0, Body: []byte("b")}),
		WALRecord{Seq: 2, Topic: "t", Incarnation: 9, Partition: 1, Key: []byte("k"), Body: []byte("b")}), []byte{}, false)
	f.Add([]byte("garbage"), []byte("garbage"), true)
	f.Fuzz(func(t *testing.T, seg, pos []byte, sealed bool) {
		// The decoder on its own: what it accepts re-encodes to the same
		// bytes.
		if rec, n, err := walDecodeFrame(seg); err == nil {
			if again := walEncodeFrame(nil, rec); !bytes.Equal(again, seg[:n]) {
				t.Fatalf("re-encoded frame: got %x, want %x", again, seg[:n])
			}
		}

		dir := t.TempDir()
		write := func(name string, b []byte) {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		write(walSegmentName(1), seg)
		if sealed {
			write(walSegmentName(walFuzzSealedBase), nil)
		}
		if len(pos) > 0 {
			write(walPositionName, pos)
		}
		cfg := walSmallConfig()
		cfg.ReadBufferBytes = walMinReadBufBytes // many window refills
		w, err := OpenWAL(dir, cfg)
		if err != nil {
			t.Fatalf("OpenWAL: got %v, want nil for any content", err)
		}
		defer w.Close()
		through := w.CommittedThrough()

		// The valid prefix: frames from offset 0 with seqs 1, 2, 3...
		var prefix [][]byte
		for b, seq := seg, uint64(1); ; seq++ {
			v, n, err := walParseFrame(b)
			if err != nil || v.seq != seq {
				break
			}
			prefix = append(prefix, b[:n])
			b = b[n:]
		}

		var got [][]byte
		last := through
		_, err = w.Replay(func(r WALRecord) error {
			if r.Seq <= last {
				t.Fatalf("replayed seq %d after %d (watermark %d), want increasing above the watermark", r.Seq, last, through)
			}
			last = r.Seq
			frame := walEncodeFrame(nil, r)
			if !bytes.Contains(seg, frame) {
				t.Fatalf("replayed seq %d: its frame %x is not in the segment", r.Seq, frame)
			}
			got = append(got, frame)
			return nil
		})
		if err != nil {
			t.Fatalf("Replay: got %v, want nil", err)
		}
		if sealed {
			return
		}
		var want [][]byte
		for i, fr := range prefix {
			if uint64(i)+1 > through {
				want = append(want, fr)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("replayed %d records, want the %d of the valid prefix above watermark %d", len(got), len(want), through)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("record %d: got frame %x, want %x", i, got[i], want[i])
			}
		}
	})
}

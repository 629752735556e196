package storage

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// consumerFuzzFixCRC returns b with its last four bytes replaced by the
// CRC-32C of the rest. Random bytes almost never carry a valid CRC, so
// without this the fuzzer would rarely get past the checksum to the field
// checks behind it.
func consumerFuzzFixCRC(b []byte) []byte {
	body := bytes.Clone(b[:len(b)-4])
	return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, consumerCRC))
}

// FuzzConsumerStateDecode feeds arbitrary bytes to the slot decoder, as they
// are and with a fixed-up CRC: it must never panic, and whatever it accepts
// must be a valid state whose encoding is exactly the input (one encoding
// per state, so nothing in the input was silently ignored).
func FuzzConsumerStateDecode(f *testing.F) {
	f.Add(encodeConsumerState(1, EmptyConsumerState()))
	f.Add(encodeConsumerState(9, consumerTestState(41, 43, 50, 1<<40)))
	recent := consumerTestState(41, 43)
	recent.Recent = []AckedHandle{{Offset: 43, Nonce: 5}, {Offset: 2, Nonce: 1 << 60}}
	f.Add(encodeConsumerState(3, recent))
	leased := recent.Clone()
	leased.Leases = []Lease{{Offset: 42, Nonce: 9, Visibility: 3e9}, {Offset: 44, Nonce: 1 << 62, Visibility: 1}}
	f.Add(encodeConsumerState(4, leased))
	leased.Recent = nil
	f.Add(encodeConsumerState(5, leased))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(b []byte) {
			seq, s, err := decodeConsumerState(b)
			if err != nil {
				return
			}
			if verr := s.Validate(); verr != nil {
				t.Fatalf("decode accepted an invalid state %+v: %v", s, verr)
			}
			if again := encodeConsumerState(seq, s); !bytes.Equal(again, b) {
				t.Fatalf("re-encode of seq %d %+v: got %x, want the input %x", seq, s, again, b)
			}
			// A decoded state must stay valid under Ack like any other.
			s.Ack(s.Frontier + 1)
			if verr := s.Validate(); verr != nil {
				t.Fatalf("after Ack(frontier+1): %+v: %v", s, verr)
			}
		}
		check(b)
		if len(b) >= 4 {
			check(consumerFuzzFixCRC(b))
		}
	})
}

// FuzzCursorDecode does the same for fan-out cursor records.
func FuzzCursorDecode(f *testing.F) {
	f.Add(encodeCursor(Cursor{"orders", 3, 7}))
	f.Add(encodeCursorV1("orders", 7))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(b []byte) {
			c, err := decodeCursor(b)
			if err != nil {
				return
			}
			if cerr := cursorCheckChild(c.Child); cerr != nil || c.Offset < 0 {
				t.Fatalf("decode accepted %+v: %v", c, cerr)
			}
			again := encodeCursor(c)
			if c.Epoch == 0 && !bytes.Equal(again, b) {
				// Only a version 1 record may decode to epoch 0 without
				// being this encoding.
				again = encodeCursorV1(c.Child, c.Offset)
			}
			if !bytes.Equal(again, b) {
				t.Fatalf("re-encode of %+v: got %x, want the input %x", c, again, b)
			}
		}
		check(b)
		if len(b) >= 4 {
			check(consumerFuzzFixCRC(b))
		}
	})
}

// FuzzConsumerStateAck applies an arbitrary ack sequence (one offset per
// input byte, so offsets collide and arrive out of order) and checks the
// state against the plain set of acked offsets after every ack.
func FuzzConsumerStateAck(f *testing.F) {
	f.Add([]byte{3, 1, 2, 0, 5, 5, 4})
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{255, 128, 7})
	f.Fuzz(func(t *testing.T, acks []byte) {
		s := EmptyConsumerState()
		var acked [256]bool
		for i, a := range acks {
			o := int64(a)
			changed := s.Ack(o)
			if changed == acked[a] {
				t.Fatalf("ack #%d of %d: got changed=%v, want %v", i, o, changed, !acked[a])
			}
			acked[a] = true
			if err := s.Validate(); err != nil {
				t.Fatalf("after ack #%d of %d: %+v: %v", i, o, s, err)
			}
			for x := range acked {
				if got := s.IsAcked(int64(x)); got != acked[x] {
					t.Fatalf("after ack #%d of %d: IsAcked(%d) = %v, want %v (state %+v)", i, o, x, got, acked[x], s)
				}
			}
			if s.Frontier+1 < int64(len(acked)) && acked[s.Frontier+1] {
				t.Fatalf("after ack #%d of %d: frontier %d stops before acked %d", i, o, s.Frontier, s.Frontier+1)
			}
		}
		seq, got, err := decodeConsumerState(encodeConsumerState(1, s))
		if err != nil || seq != 1 || !got.Equal(s) {
			t.Fatalf("round trip of %+v: got seq %d %+v, %v", s, seq, got, err)
		}
	})
}

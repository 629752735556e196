package partition

import (
	"testing"
	"time"
)

// TestAckMemory scripts the memory of acked handles: what a retried ack
// finds, and when it no longer does.
func TestAckMemory(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type step struct {
		remember bool // remember (off, nonce) at ms, else ask whether it is acked
		ms       int
		off      int64
		nonce    uint64
		want     bool // for an ask
	}
	for _, tc := range []struct {
		name         string
		window       time.Duration
		max          int
		steps        []step
		wantRetained int
	}{
		{"the same handle is found", time.Second, 8, []step{
			{remember: true, ms: 0, off: 3, nonce: 30},
			{ms: 10, off: 3, nonce: 30, want: true},
			{ms: 20, off: 3, nonce: 30, want: true},
		}, 1},
		{"another nonce of the offset is not", time.Second, 8, []step{
			{remember: true, ms: 0, off: 3, nonce: 30},
			{ms: 10, off: 3, nonce: 31, want: false},
		}, 1},
		{"another offset is not", time.Second, 8, []step{
			{remember: true, ms: 0, off: 3, nonce: 30},
			{ms: 10, off: 4, nonce: 30, want: false},
		}, 1},
		{"the window ends at its edge", time.Second, 8, []step{
			{remember: true, ms: 0, off: 3, nonce: 30},
			{ms: 999, off: 3, nonce: 30, want: true},
			{ms: 1000, off: 3, nonce: 30, want: false},
		}, 0},
		{"past max the oldest goes first", time.Minute, 2, []step{
			{remember: true, ms: 0, off: 1, nonce: 10},
			{remember: true, ms: 1, off: 2, nonce: 20},
			{remember: true, ms: 2, off: 3, nonce: 30},
			{ms: 3, off: 1, nonce: 10, want: false},
			{ms: 3, off: 2, nonce: 20, want: true},
			{ms: 3, off: 3, nonce: 30, want: true},
		}, 2},
		{"expired entries make room before the oldest live one goes", time.Second, 2, []step{
			{remember: true, ms: 0, off: 1, nonce: 10},
			{remember: true, ms: 500, off: 2, nonce: 20},
			{remember: true, ms: 1200, off: 3, nonce: 30},
			{ms: 1200, off: 2, nonce: 20, want: true},
			{ms: 1200, off: 3, nonce: 30, want: true},
		}, 2},
		{"a newer ack of an offset outlives the older one's expiry", time.Second, 8, []step{
			{remember: true, ms: 0, off: 5, nonce: 50},
			{remember: true, ms: 600, off: 5, nonce: 51},
			{ms: 1100, off: 5, nonce: 51, want: true},
			{ms: 1100, off: 5, nonce: 50, want: false},
		}, 1},
		{"a zero window remembers nothing", 0, 8, []step{
			{remember: true, ms: 0, off: 3, nonce: 30},
			{ms: 0, off: 3, nonce: 30, want: false},
		}, 0},
		{"a zero max remembers nothing", time.Second, 0, []step{
			{remember: true, ms: 0, off: 3, nonce: 30},
			{ms: 0, off: 3, nonce: 30, want: false},
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newAckMemory(tc.window, tc.max)
			last := 0
			for i, s := range tc.steps {
				last = s.ms
				if s.remember {
					m.remember(at(s.ms), s.off, s.nonce)
					continue
				}
				if got := m.acked(at(s.ms), s.off, s.nonce); got != s.want {
					t.Fatalf("step %d: acked(%d ms, offset %d, nonce %d): got %v, want %v", i, s.ms, s.off, s.nonce, got, s.want)
				}
			}
			m.expire(at(last))
			if got := m.len(); got != tc.wantRetained {
				t.Fatalf("entries kept at the end: got %d, want %d", got, tc.wantRetained)
			}
			if got := len(m.byOffset); got != tc.wantRetained {
				t.Fatalf("offsets indexed at the end: got %d, want %d", got, tc.wantRetained)
			}
		})
	}
}

// TestAckMemoryStaysBoundedAndReleasesWhenIdle: a long run of acks keeps
// the slice within twice max, and once every entry expired the memory
// holds no storage at all.
func TestAckMemoryStaysBoundedAndReleasesWhenIdle(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	m := newAckMemory(time.Second, 64)
	for i := range 10_000 {
		m.remember(t0.Add(time.Duration(i)*time.Microsecond), int64(i), uint64(i)+1)
		if m.len() > 64 || len(m.fifo) > 2*64 || len(m.byOffset) > 64 {
			t.Fatalf("after %d acks: got %d live, %d slots, %d offsets; want at most 64, 128, 64", i+1, m.len(), len(m.fifo), len(m.byOffset))
		}
	}
	if !m.acked(t0.Add(10*time.Millisecond), 9_999, 10_000) {
		t.Fatal("the newest ack: got forgotten, want remembered")
	}
	m.expire(t0.Add(time.Hour))
	if m.fifo != nil || m.byOffset != nil {
		t.Fatalf("idle memory: got %d slots and a map of %d, want both released", cap(m.fifo), len(m.byOffset))
	}
}

// BenchmarkAckMemory is one remember and one retried ask per op on a full
// memory: the cost an ack pays for being retriable.
func BenchmarkAckMemory(b *testing.B) {
	t0 := time.Unix(1_700_000_000, 0)
	m := newAckMemory(time.Minute, 4096)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now := t0.Add(time.Duration(i) * time.Microsecond)
		m.remember(now, int64(i), uint64(i)+1)
		if !m.acked(now, int64(i), uint64(i)+1) {
			b.Fatal("a handle just acked: got forgotten")
		}
	}
}

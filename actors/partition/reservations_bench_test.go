package partition

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/naradmq/narad/storage"
)

// BenchmarkReserveAck measures one consume plus its ack on one partition's
// table, with a fake clock that moves 1 µs per op. One op = one reserve and
// one ack.
//
//   - steady: nothing else out; each record is reserved and acked at once.
//   - 1000-out-fifo: 1,000 leases held; each op reserves a new record and
//     acks the oldest lease, so the frontier moves and acked-ahead stays empty.
//   - 1000-out-shuffled: 1,000 leases held; each op acks a random one of
//     them, so acks come out of order and the acked-ahead set is in use.
//   - 1000-out-redeliver: 1,000 leases held with a 1 ms visibility, so
//     every reserve also reaps expired leases and serves redeliveries.
func BenchmarkReserveAck(b *testing.B) {
	const out = 1000
	lim := reserveLimits{
		HWM:           1 << 62, // an endless log: the bench never runs dry
		MaxInFlight:   out + 1,
		MaxAckedAhead: 1 << 20,
		Visibility:    30 * time.Second,
	}

	b.Run("steady", func(b *testing.B) {
		tab := newReservationTable(-1, nil)
		now := resvEpoch
		b.ReportAllocs()
		var nonce uint64
		for b.Loop() {
			now = now.Add(time.Microsecond)
			nonce++
			off, ok := tab.reserve(now, lim, nonce)
			if !ok {
				b.Fatalf("reserve: got nothing, want an offset")
			}
			if got := tab.ack(now, off, nonce, lim.MaxAckedAhead); got != ackDone {
				b.Fatalf("ack(%d): got %v, want done", off, got)
			}
		}
	})

	b.Run("1000-out-fifo", func(b *testing.B) {
		tab := newReservationTable(-1, nil)
		now := resvEpoch
		var ring [out]resvHandle
		var nonce uint64
		for i := range ring {
			nonce++
			off, _ := tab.reserve(now, lim, nonce)
			ring[i] = resvHandle{off, nonce}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			now = now.Add(time.Microsecond)
			nonce++
			off, ok := tab.reserve(now, lim, nonce)
			if !ok {
				b.Fatalf("reserve: got nothing, want an offset")
			}
			old := ring[i]
			ring[i] = resvHandle{off, nonce}
			i = (i + 1) % out
			if got := tab.ack(now, old.offset, old.nonce, lim.MaxAckedAhead); got != ackDone {
				b.Fatalf("ack(%d): got %v, want done", old.offset, got)
			}
		}
		if tab.inFlight() != out {
			b.Fatalf("inFlight: got %d, want %d", tab.inFlight(), out)
		}
	})

	b.Run("1000-out-shuffled", func(b *testing.B) {
		tab := newReservationTable(-1, nil)
		now := resvEpoch
		r := rand.New(rand.NewPCG(1, 1))
		var held [out]resvHandle
		var nonce uint64
		for i := range held {
			nonce++
			off, _ := tab.reserve(now, lim, nonce)
			held[i] = resvHandle{off, nonce}
		}
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Microsecond)
			nonce++
			off, ok := tab.reserve(now, lim, nonce)
			if !ok {
				b.Fatalf("reserve: got nothing, want an offset")
			}
			j := r.IntN(out)
			old := held[j]
			held[j] = resvHandle{off, nonce}
			if got := tab.ack(now, old.offset, old.nonce, lim.MaxAckedAhead); got != ackDone {
				b.Fatalf("ack(%d): got %v, want done", old.offset, got)
			}
		}
	})

	b.Run("1000-out-redeliver", func(b *testing.B) {
		// Leases last 2 ms (2,000 ops); each handle is looked at 1,000
		// ops after its reserve and acked with probability 3/4, otherwise
		// forgotten: it expires and its record is redelivered. So
		// reserves reap expired leases and serve redeliveries, and the
		// acked-ahead set holds the acks past the records waiting to be
		// redelivered.
		short := lim
		short.Visibility = 2 * time.Millisecond
		short.MaxInFlight = 1 << 20
		tab := newReservationTable(-1, nil)
		now := resvEpoch
		r := rand.New(rand.NewPCG(2, 2))
		var ring [out]resvHandle
		var nonce uint64
		for i := range ring {
			now = now.Add(time.Microsecond)
			nonce++
			off, _ := tab.reserve(now, short, nonce)
			ring[i] = resvHandle{off, nonce}
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			now = now.Add(time.Microsecond)
			nonce++
			off, ok := tab.reserve(now, short, nonce)
			if !ok {
				b.Fatalf("reserve: got nothing, want an offset")
			}
			old := ring[i]
			ring[i] = resvHandle{off, nonce}
			i = (i + 1) % out
			if r.IntN(4) != 0 {
				if got := tab.ack(now, old.offset, old.nonce, short.MaxAckedAhead); got != ackDone {
					b.Fatalf("ack(%d): got %v, want done", old.offset, got)
				}
			}
		}
	})
}

// BenchmarkLeasesOutAndRestore measures what keeping leases across a
// restart costs the table: leasesOut, which every consumer-state write
// with leases out runs (1,000 here, about the LeasePersistedMax default),
// and restoreLeases into a fresh table, which an open runs once.
func BenchmarkLeasesOutAndRestore(b *testing.B) {
	const out = 1000
	lim := reserveLimits{HWM: 1 << 62, MaxInFlight: out, MaxAckedAhead: 1 << 20, Visibility: 30 * time.Second}
	tab := newReservationTable(-1, nil)
	for n := range uint64(out) {
		tab.reserve(resvEpoch, lim, n+1)
	}
	b.Run("leasesOut", func(b *testing.B) {
		var buf []storage.Lease
		b.ReportAllocs()
		for b.Loop() {
			buf = tab.leasesOut(buf[:0], resvEpoch, out)
		}
		if len(buf) != out {
			b.Fatalf("leasesOut: got %d, want %d", len(buf), out)
		}
	})
	b.Run("restoreLeases", func(b *testing.B) {
		held := tab.leasesOut(nil, resvEpoch, out)
		b.ReportAllocs()
		for b.Loop() {
			if got := newReservationTable(-1, nil).restoreLeases(resvEpoch, held, 1<<16); got != out {
				b.Fatalf("restoreLeases: got %d, want %d", got, out)
			}
		}
	})
}

package partition

import (
	"testing"
	"time"
)

// BenchmarkLeaseNonce prices issue 14 item 4's random lease nonces on the
// consume path's pure core: one op is a reserve and its ack on one
// partition's table, as BenchmarkReserveAck/steady, with the nonce from
// the old per-actor counter or from leaseNonce (crypto/rand). Compare the
// two sub-benchmarks of one run; the bare draw is there for scale.
func BenchmarkLeaseNonce(b *testing.B) {
	lim := reserveLimits{HWM: 1 << 62, MaxInFlight: 2, MaxAckedAhead: 1 << 20, Visibility: 30 * time.Second}
	for _, src := range []struct {
		name string
		next func() uint64
	}{
		{"counter", func() func() uint64 { var n uint64; return func() uint64 { n++; return n } }()},
		{"crypto-rand", leaseNonce},
	} {
		b.Run("reserve-ack/"+src.name, func(b *testing.B) {
			tab := newReservationTable(-1, nil)
			now := resvEpoch
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Microsecond)
				nonce := src.next()
				off, ok := tab.reserve(now, lim, nonce)
				if !ok {
					b.Fatalf("reserve: got nothing, want an offset")
				}
				if got := tab.ack(now, off, nonce, lim.MaxAckedAhead); got != ackDone {
					b.Fatalf("ack(%d): got %v, want done", off, got)
				}
			}
		})
		b.Run("draw/"+src.name, func(b *testing.B) {
			var sink uint64
			for b.Loop() {
				sink ^= src.next()
			}
			if sink == 0 {
				b.Log("all draws cancelled out")
			}
		})
	}
}

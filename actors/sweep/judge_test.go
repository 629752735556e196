package sweep

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// vouchedCopy is n1's copy of a partition it moved to n2, which has taken
// produce since: the owner lists every local segment at least as long,
// and its marker names n1 at the local HWM. Each row below changes one
// thing.
func vouchedCopy() Copy {
	return Copy{
		Self:           "n1",
		Listed:         true,
		HoldsUnexpired: true,
		HWM:            250,
		Segments: []Segment{
			{Name: "s0", Base: 0, Size: 1000, Sealed: true},
			{Name: "s100", Base: 100, Size: 1000, Sealed: true},
			{Name: "s200", Base: 200, Size: 500},
		},
		OwnerAnswered: true,
		OwnerHWM:      320,
		OwnerSegments: []Segment{
			{Name: "s0", Base: 0, Size: 1000, Sealed: true},
			{Name: "s100", Base: 100, Size: 1000, Sealed: true},
			{Name: "s200", Base: 200, Size: 1000, Sealed: true},
			{Name: "s300", Base: 300, Size: 200},
		},
		OwnerMarker: &Marker{PromotedHWM: 250, SourceNode: "n1", Durable: true, InstallAge: time.Minute},
	}
}

// without returns segs less the one named name.
func without(segs []Segment, name string) []Segment {
	return slices.DeleteFunc(slices.Clone(segs), func(s Segment) bool { return s.Name == name })
}

// resized returns segs with the one named name of size bytes.
func resized(segs []Segment, name string, size int64) []Segment {
	out := slices.Clone(segs)
	for i := range out {
		if out[i].Name == name {
			out[i].Size = size
		}
	}
	return out
}

// aheadCopy is n1 back from a network partition: n2 force-promoted at 250
// while n1 kept committing into its segment s200, sealed it at 300 and
// went on in s300. n2 wrote its own records after 250 into its s200.
func aheadCopy() Copy {
	c := vouchedCopy()
	c.HWM = 320
	c.Segments = []Segment{
		{Name: "s0", Base: 0, Size: 1000, Sealed: true},
		{Name: "s100", Base: 100, Size: 1000, Sealed: true},
		{Name: "s200", Base: 200, Size: 1000, Sealed: true},
		{Name: "s300", Base: 300, Size: 200},
	}
	c.OwnerSegments = resized(c.OwnerSegments, "s200", 600)
	c.OwnerMarker.ForcePromoted = true
	return c
}

func TestJudge(t *testing.T) {
	rows := []struct {
		name string
		copy func(c *Copy)
		want Verdict
	}{
		// rule S3: the local copy cannot be listed: defer, whatever else holds.
		{"local copy unlisted", func(c *Copy) { c.Listed = false; c.OwnerAnswered = false; c.OwnerMarker = nil },
			Verdict{Defer, 0, ReasonLocalUnlisted}},
		// rule S3: the owner cannot be asked: defer, even a copy without unexpired records.
		{"owner unreachable", func(c *Copy) { c.OwnerAnswered = false; c.HoldsUnexpired = false },
			Verdict{Defer, 0, ReasonOwnerUnreachable}},
		// rule S3: every check passes: reclaim at the vouched position.
		{"owner vouches", func(c *Copy) {},
			Verdict{Reclaim, 250, ReasonVouched}},
		// rule S1: the vouched position is the owner's HWM, never more than the promoted one.
		{"vouched is the promoted hwm below the owner's", func(c *Copy) { c.HWM = 200; c.Segments = c.Segments[:2] },
			Verdict{Reclaim, 250, ReasonVouched}},
		// rule S1: an owner that lost its tail vouches for its own HWM only.
		{"vouched is the owner's hwm below the promoted one", func(c *Copy) {
			c.OwnerHWM = 240
			c.OwnerSegments = resized(c.OwnerSegments[:3], "s200", 400)
			c.HWM = 200
			c.Segments = c.Segments[:2]
		}, Verdict{Reclaim, 240, ReasonVouched}},
		// rule S3: a copy without unexpired records is reclaimed although
		// the owner lists nothing and has no marker.
		{"no unexpired records", func(c *Copy) {
			c.HoldsUnexpired = false
			c.OwnerSegments = nil
			c.OwnerHWM = 0
			c.OwnerMarker = nil
		}, Verdict{Reclaim, 0, ReasonNoUnexpiredRecords}},
		// rule S3: an empty local copy is reclaimed.
		{"empty local copy", func(c *Copy) { c.HoldsUnexpired = false; c.HWM = 0; c.Segments = nil },
			Verdict{Reclaim, 250, ReasonNoUnexpiredRecords}},
		// rule S2: the owner lists no segment at all.
		{"owner lists nothing", func(c *Copy) { c.OwnerSegments = nil; c.OwnerHWM = 0 },
			Verdict{Quarantine, 0, ReasonOwnerListsNoRecords}},
		// rule S2: the owner lists only an empty active segment (its
		// retention trimmed the rest).
		{"owner lists an empty segment", func(c *Copy) { c.OwnerSegments = []Segment{{Name: "s320", Base: 320}} },
			Verdict{Quarantine, 250, ReasonOwnerListsNoRecords}},
		// rule S2: an owner whose segments are all empty (they never
		// reached its disk) lists no records.
		{"owner lists only empty segments", func(c *Copy) {
			for i := range c.OwnerSegments {
				c.OwnerSegments[i].Size = 0
			}
		}, Verdict{Quarantine, 250, ReasonOwnerListsNoRecords}},
		// rule S2: bytes at or above the owner's HWM are no records.
		{"owner lists bytes only at its hwm", func(c *Copy) { c.OwnerSegments = []Segment{{Name: "s320", Base: 320, Size: 40}} },
			Verdict{Quarantine, 250, ReasonOwnerListsNoRecords}},
		// rule S2: the owner holds records but no marker.
		{"owner has no marker", func(c *Copy) { c.OwnerMarker = nil },
			Verdict{Quarantine, 320, ReasonOwnerHasNoMarker}},
		// rule S2: the owner's marker records a move from another node.
		{"marker from another node", func(c *Copy) { c.OwnerMarker.SourceNode = "n3" },
			Verdict{Quarantine, 250, ReasonMarkerFromAnother}},
		// rule S2: a segment below the vouched position is missing on the owner.
		{"owner segment missing", func(c *Copy) { c.OwnerSegments = without(c.OwnerSegments, "s100") },
			Verdict{Quarantine, 250, ReasonSegmentMissing}},
		// rule S2: the local active segment is held to its presence too.
		{"owner lacks the local last segment", func(c *Copy) { c.OwnerSegments = without(c.OwnerSegments, "s200") },
			Verdict{Quarantine, 250, ReasonSegmentMissing}},
		// rule S2: an owner listing that ends before a local segment below
		// the vouched position lacks it.
		{"owner listing ends early", func(c *Copy) { c.OwnerSegments = c.OwnerSegments[:2] },
			Verdict{Quarantine, 250, ReasonSegmentMissing}},
		// rule S2: a segment of another name at the same base is not the local one.
		{"owner segment renamed", func(c *Copy) { c.OwnerSegments[1].Name = "other" },
			Verdict{Quarantine, 250, ReasonSegmentMissing}},
		// rule S2: a sealed segment below the vouched position is shorter on the owner.
		{"owner segment shorter", func(c *Copy) { c.OwnerSegments = resized(c.OwnerSegments, "s100", 999) },
			Verdict{Quarantine, 250, ReasonSegmentShorter}},
		// rule S2: an owner segment as long as the local one is not shorter.
		{"owner segment as long", func(c *Copy) { c.OwnerSegments = resized(c.OwnerSegments, "s100", 1000) },
			Verdict{Reclaim, 250, ReasonVouched}},
		// rule S2: only a sealed segment is held to its length; the local
		// last one may have grown past what the copy listed (a commit frame).
		{"owner shorter in the local last segment", func(c *Copy) { c.OwnerSegments = resized(c.OwnerSegments, "s200", 499) },
			Verdict{Reclaim, 250, ReasonVouched}},
		// rule S2: an empty local segment below the vouched position holds
		// nothing the owner could lack.
		{"empty local segment absent on the owner", func(c *Copy) {
			c.HWM = 200
			c.Segments = []Segment{c.Segments[0], c.Segments[1], {Name: "s200", Base: 200}}
			c.OwnerSegments = without(c.OwnerSegments, "s200")
		}, Verdict{Reclaim, 250, ReasonVouched}},
		// rule S2: segments the owner's retention trimmed (wholly below its
		// first base) are not missing: retention removes the oldest
		// segments, by age (this node's ages, G1) or by size, so the
		// partition's policy expired those records.
		{"owner trimmed by retention", func(c *Copy) { c.OwnerSegments = c.OwnerSegments[2:] },
			Verdict{Reclaim, 250, ReasonVouched}},
		// rule S2: a local segment that reaches past the owner's first base
		// is not trimmed; the owner must list it.
		{"owner's first base inside a local segment", func(c *Copy) {
			c.OwnerSegments = append([]Segment{{Name: "s150", Base: 150, Size: 500, Sealed: true}}, c.OwnerSegments[2:]...)
		}, Verdict{Quarantine, 250, ReasonSegmentMissing}},
		// rule S2: a sealed segment that ends at the vouched position is
		// wholly below it, so it is held to its length.
		{"sealed segment ending at the vouched position shorter", func(c *Copy) {
			c.HWM = 200
			c.Segments = []Segment{c.Segments[0], c.Segments[1], {Name: "s200", Base: 200}}
			c.OwnerMarker.PromotedHWM = 200
			c.OwnerSegments = resized(c.OwnerSegments, "s100", 999)
		}, Verdict{Quarantine, 200, ReasonSegmentShorter}},
		// rule S2: an owner at the local HWM vouches for it all.
		{"owner's hwm at the local one", func(c *Copy) {
			c.OwnerHWM = 250
			c.OwnerSegments = resized(c.OwnerSegments[:3], "s200", 500)
		}, Verdict{Reclaim, 250, ReasonVouched}},
		// rule P6: a segment starting at the vouched position holds nothing
		// the owner vouches for, so its absence there is no hole; the copy
		// is ahead.
		{"ahead with a segment at the vouched position the owner lacks", func(c *Copy) {
			c.OwnerMarker.PromotedHWM = 200
			c.OwnerSegments = without(c.OwnerSegments, "s200")
		}, Verdict{Quarantine, 200, ReasonAheadOfPromoted}},
		// rule P6: a returning source ahead of the promoted HWM is
		// quarantined; the segment straddling it is checked for presence
		// only (its part past 250 is not the owner's to vouch for).
		{"ahead of the promoted hwm", func(c *Copy) { *c = aheadCopy() },
			Verdict{Quarantine, 250, ReasonAheadOfPromoted}},
		// rule P6: segments at or above the vouched position need not be on
		// the owner; the copy is quarantined for being ahead.
		{"ahead with a segment the owner never had", func(c *Copy) {
			*c = aheadCopy()
			c.OwnerSegments = without(c.OwnerSegments, "s300")
		}, Verdict{Quarantine, 250, ReasonAheadOfPromoted}},
		// rule P6: the straddling segment must still be on the owner.
		{"ahead and the straddling segment missing", func(c *Copy) {
			*c = aheadCopy()
			c.OwnerSegments = without(c.OwnerSegments, "s200")
		}, Verdict{Quarantine, 250, ReasonSegmentMissing}},
		// rule P6: a copy behind the promoted HWM is reclaimed.
		{"behind the promoted hwm", func(c *Copy) { c.HWM = 240 },
			Verdict{Reclaim, 250, ReasonVouched}},
		// rule S2: a copy past an owner's HWM that fell below its marker's
		// promoted one is quarantined (the owner lost its tail).
		{"ahead of the owner's hwm", func(c *Copy) {
			c.OwnerHWM = 240
			c.OwnerSegments = resized(c.OwnerSegments[:3], "s200", 400)
		}, Verdict{Quarantine, 240, ReasonAheadOfOwner}},
		// rule S4: an unstamped marker younger than the seed's 5 minutes leaves the copy alone.
		{"unstamped marker young", func(c *Copy) { c.OwnerMarker.Durable = false; c.OwnerMarker.InstallAge = 5*time.Minute - time.Second },
			Verdict{LeaveAlone, 250, ReasonUnstampedYoung}},
		// rule S4: at 5 minutes the copy is reclaimed.
		{"unstamped marker old enough", func(c *Copy) { c.OwnerMarker.Durable = false; c.OwnerMarker.InstallAge = 5 * time.Minute },
			Verdict{Reclaim, 250, ReasonVouched}},
		// rule S4: a young stamped marker does not hold the copy.
		{"stamped marker young", func(c *Copy) { c.OwnerMarker.InstallAge = 0 },
			Verdict{Reclaim, 250, ReasonVouched}},
		// rule S4: the hold guards reclaims only; a quarantine (which loses
		// nothing) does not wait for it.
		{"unstamped young and a segment missing", func(c *Copy) {
			c.OwnerMarker.Durable = false
			c.OwnerMarker.InstallAge = 0
			c.OwnerSegments = without(c.OwnerSegments, "s100")
		}, Verdict{Quarantine, 250, ReasonSegmentMissing}},
		// rule S4: it holds a copy without unexpired records too.
		{"unstamped young and no unexpired records", func(c *Copy) {
			c.HoldsUnexpired = false
			c.OwnerMarker.Durable = false
			c.OwnerMarker.InstallAge = 0
		}, Verdict{LeaveAlone, 250, ReasonUnstampedYoung}},
		// rule S5: an install on the destination whose flip never
		// committed, the owner being the source that never moved: no marker.
		{"uncommitted install, owner never moved", func(c *Copy) { c.OwnerMarker = nil; c.HWM = 320 },
			Verdict{Quarantine, 320, ReasonOwnerHasNoMarker}},
		// rule S5: the owner got the partition from a third node.
		{"uncommitted install, owner moved from another node", func(c *Copy) {
			c.OwnerMarker.SourceNode = "n3"
			c.OwnerMarker.PromotedHWM = 100
		}, Verdict{Quarantine, 100, ReasonMarkerFromAnother}},
		// rule S5: the owner got the partition from this node once, before
		// the install: it vouches only up to its own marker's position.
		{"uncommitted install past the owner's marker", func(c *Copy) {
			c.OwnerMarker.PromotedHWM = 200
			c.Segments = append(c.Segments[:2], Segment{Name: "s200", Base: 200, Size: 300})
		}, Verdict{Quarantine, 200, ReasonAheadOfPromoted}},
		// rule S5: ... and an install within it is reclaimed.
		{"uncommitted install within the owner's marker", func(c *Copy) {
			c.OwnerMarker.PromotedHWM = 200
			c.HWM = 200
			c.Segments = c.Segments[:2]
		}, Verdict{Reclaim, 200, ReasonVouched}},
		// rule S2: listings in any order are judged alike.
		{"listings out of order", func(c *Copy) {
			slices.Reverse(c.Segments)
			slices.Reverse(c.OwnerSegments)
		}, Verdict{Reclaim, 250, ReasonVouched}},
		// rule S2: ... a short segment is found in them too.
		{"listings out of order, owner segment shorter", func(c *Copy) {
			c.OwnerSegments = resized(c.OwnerSegments, "s0", 10)
			slices.Reverse(c.Segments)
			slices.Reverse(c.OwnerSegments)
		}, Verdict{Quarantine, 250, ReasonSegmentShorter}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			c := vouchedCopy()
			r.copy(&c)
			if got := Judge(c); got != r.want {
				t.Fatalf("got %+v, want %+v", got, r.want)
			}
		})
	}
}

// rule S2: Judge orders its own copy of a listing; the caller's stays as
// it was.
func TestJudgeLeavesListingsAsGiven(t *testing.T) {
	c := vouchedCopy()
	slices.Reverse(c.Segments)
	slices.Reverse(c.OwnerSegments)
	local, owner := slices.Clone(c.Segments), slices.Clone(c.OwnerSegments)
	Judge(c)
	if !slices.Equal(c.Segments, local) || !slices.Equal(c.OwnerSegments, owner) {
		t.Fatalf("listings after Judge: got %v and %v, want %v and %v", c.Segments, c.OwnerSegments, local, owner)
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[Action]string{Defer: "defer", Reclaim: "reclaim", Quarantine: "quarantine",
		LeaveAlone: "leave_alone", Action(9): "unknown"} {
		if got := a.String(); got != want {
			t.Errorf("Action(%d).String(): got %q, want %q", int(a), got, want)
		}
	}
}

// BenchmarkJudge judges a copy of n segments the owner vouches for (every
// check runs to the end), against raw: one pass over both listings, the
// least any judge must read.
//
//	go test ./actors/sweep -run '^$' -bench Judge | go run ./bench/ratio
func BenchmarkJudge(b *testing.B) {
	for _, n := range []int{10, 1000} {
		c := Copy{Self: "n1", Listed: true, HoldsUnexpired: true, OwnerAnswered: true,
			OwnerMarker: &Marker{SourceNode: "n1", Durable: true}}
		for i := range n {
			s := Segment{Name: fmt.Sprintf("s%d", i*100), Base: int64(i * 100), Size: 4096, Sealed: i < n-1}
			c.Segments = append(c.Segments, s)
			s.Sealed = true
			c.OwnerSegments = append(c.OwnerSegments, s)
		}
		c.HWM = int64(n * 100)
		c.OwnerHWM, c.OwnerMarker.PromotedHWM = c.HWM, c.HWM
		b.Run(fmt.Sprintf("segments=%d/judge", n), func(b *testing.B) {
			for b.Loop() {
				if v := Judge(c); v.Action != Reclaim {
					b.Fatalf("got %v, want reclaim", v)
				}
			}
		})
		b.Run(fmt.Sprintf("segments=%d/raw", n), func(b *testing.B) {
			var sum int64
			for b.Loop() {
				for i := range c.Segments {
					sum += c.Segments[i].Size + c.OwnerSegments[i].Size
				}
			}
			if sum == 0 {
				b.Fatal("raw pass read nothing")
			}
		})
	}
}

package sweep

import (
	"cmp"
	"slices"
	"time"
)

// UnstampedHold is how long a copy whose owner's marker has no durability
// stamp is left alone (S4): 5 minutes. Such a marker comes from an older
// destination whose copy may still sit in its page cache shortly after the
// install.
const UnstampedHold = 5 * time.Minute

// Segment is one segment of a listing: its file name, base offset,
// committed size, and whether it is sealed (not the last).
type Segment struct {
	Name       string
	Base, Size int64
	Sealed     bool
}

// Marker is the move marker of a copy, as the owner reports it.
type Marker struct {
	PromotedHWM   int64
	ForcePromoted bool // for the log: Judge treats a copy past PromotedHWM alike either way (P6)
	SourceNode    string
	Durable       bool          // the marker has a durability stamp (DurableAt set)
	InstallAge    time.Duration // how long ago the install happened, on the owner's clock (for S4); the caller computes it
}

// Copy is everything the sweep knows about one local copy of a partition
// this node does not own. Listings may come in any order; Judge orders
// them by base.
type Copy struct {
	Self string // this node's id
	// the local copy
	Listed         bool      // the local copy could be listed (false: defer, S3)
	HoldsUnexpired bool      // it holds records retention has not expired
	HWM            int64     // its recovered next offset
	Segments       []Segment // its listing
	// the owner's answer
	OwnerAnswered bool // the owner could be asked and answered (false: defer, S3)
	OwnerHWM      int64
	OwnerSegments []Segment
	OwnerMarker   *Marker // nil: the owner's copy has no move marker
}

// Action is what the sweep does with a copy. The zero value, Defer, does
// nothing.
type Action int

const (
	// Defer judges the copy again on a later sweep.
	Defer Action = iota
	// Reclaim removes the copy, under the guard that it is still at or
	// below Verdict.Vouched.
	Reclaim
	// Quarantine sets the copy aside, never deleting it, and logs it at
	// error level.
	Quarantine
	// LeaveAlone keeps the copy where it is until a later sweep (S4).
	LeaveAlone
)

// String names the action for the log and a metric label.
func (a Action) String() string {
	switch a {
	case Defer:
		return "defer"
	case Reclaim:
		return "reclaim"
	case Quarantine:
		return "quarantine"
	case LeaveAlone:
		return "leave_alone"
	}
	return "unknown"
}

// The reasons a verdict gives, one per row of the decision table.
const (
	ReasonLocalUnlisted       = "local_unlisted"
	ReasonOwnerUnreachable    = "owner_unreachable"
	ReasonOwnerListsNoRecords = "owner_lists_no_records"
	ReasonOwnerHasNoMarker    = "owner_has_no_marker"
	ReasonMarkerFromAnother   = "marker_from_another_node"
	ReasonSegmentMissing      = "owner_segment_missing"
	ReasonSegmentShorter      = "owner_segment_shorter"
	ReasonAheadOfPromoted     = "ahead_of_promoted_hwm"
	ReasonAheadOfOwner        = "ahead_of_owner_hwm"
	ReasonUnstampedYoung      = "unstamped_marker_young"
	ReasonVouched             = "vouched"
	ReasonNoUnexpiredRecords  = "no_unexpired_records"
)

// Verdict is what Judge decided for one copy.
type Verdict struct {
	Action Action
	// Vouched is the position the owner vouches for (S1): its HWM, never
	// more than its marker's promoted one. Set for Reclaim: the actor
	// re-checks under the guard that the local copy is still at or below
	// it. It is set for every verdict reached with the owner's answer (for
	// the log) and zero for a defer. For a reclaim with reason
	// no_unexpired_records nothing in the copy needs the owner's vouch, so
	// the copy may be past it; a guard that re-checks the position then
	// keeps it, which loses nothing.
	Vouched int64
	// Reason names the case in a few words for the log and a metric label
	// (the Reason* constants).
	Reason string
}

// Judge decides what becomes of one local copy (rules S1-S5, P6).
//
// The checks run in the order of the decision table: defer without the
// local listing or the owner's answer (S3); then, for a copy holding
// unexpired records, every quarantine case (S2, S5, P6); only then the
// durability stamp (S4), because waiting guards a reclaim, which can lose
// records, and a quarantine never does; then reclaim at the vouched
// position (S3).
func Judge(c Copy) Verdict {
	if !c.Listed {
		return Verdict{Action: Defer, Reason: ReasonLocalUnlisted}
	}
	if !c.OwnerAnswered {
		return Verdict{Action: Defer, Reason: ReasonOwnerUnreachable}
	}
	vouched := c.OwnerHWM
	if m := c.OwnerMarker; m != nil {
		vouched = min(vouched, m.PromotedHWM)
	}
	if c.HoldsUnexpired {
		if reason := unvouched(c, vouched); reason != "" {
			return Verdict{Action: Quarantine, Vouched: vouched, Reason: reason}
		}
	}
	if m := c.OwnerMarker; m != nil && !m.Durable && m.InstallAge < UnstampedHold {
		return Verdict{Action: LeaveAlone, Vouched: vouched, Reason: ReasonUnstampedYoung}
	}
	if !c.HoldsUnexpired {
		return Verdict{Action: Reclaim, Vouched: vouched, Reason: ReasonNoUnexpiredRecords}
	}
	return Verdict{Action: Reclaim, Vouched: vouched, Reason: ReasonVouched}
}

// unvouched names the first reason the owner does not vouch for every
// record of c (S2, S5, P6), or "" when it vouches for them all. The local
// copy's own marker is no input: it survives every later move of the
// partition, so it cannot tell an install whose flip never committed from a
// copy this node served (S5).
func unvouched(c Copy, vouched int64) string {
	owner := byBase(c.OwnerSegments)
	if !holdsRecords(owner, c.OwnerHWM) {
		return ReasonOwnerListsNoRecords
	}
	m := c.OwnerMarker
	if m == nil {
		return ReasonOwnerHasNoMarker
	}
	if m.SourceNode != c.Self {
		return ReasonMarkerFromAnother
	}
	if reason := segmentsLacking(byBase(c.Segments), c.HWM, owner, vouched); reason != "" {
		return reason
	}
	if c.HWM > m.PromotedHWM {
		return ReasonAheadOfPromoted
	}
	if c.HWM > c.OwnerHWM {
		return ReasonAheadOfOwner
	}
	return ""
}

// holdsRecords reports whether a listing whose next offset is hwm holds a
// record: a segment with bytes that starts below hwm.
func holdsRecords(segs []Segment, hwm int64) bool {
	for _, s := range segs {
		if s.Size > 0 && s.Base < hwm {
			return true
		}
	}
	return false
}

// segmentsLacking compares the local listing (next offset hwm) with the
// owner's below the vouched position: each local segment holding records
// below it must be on the owner, and a sealed one wholly below it must be
// as long there. Of a segment that straddles the vouched position only the
// part below it is vouched for, and bytes cannot tell where that part ends,
// so only its presence is checked; its records past the position make the
// copy ahead, which unvouched catches next.
//
// A local segment that ends at or below the owner's first base is one the
// owner's retention trimmed, not a missing one: retention removes whole
// segments oldest first, by age (the owner's segments carry the ages the
// move copied from this node, G1) or by the partition's size, so the
// partition's policy has expired those records wherever they are. Only a
// prefix is ever trimmed, so a hole above the owner's first base is
// missing. The cost: an owner that lost exactly its oldest segments looks
// trimmed; with a durability stamp its segments were synced before the
// flip (V6), and without one S4 waits until the page cache is written.
func segmentsLacking(local []Segment, hwm int64, owner []Segment, vouched int64) string {
	first := owner[0].Base
	j := 0 // both listings are in base order: one walk matches them
	for i, s := range local {
		end := hwm
		if i+1 < len(local) {
			end = local[i+1].Base
		}
		if s.Size == 0 || s.Base >= vouched || end <= first {
			continue
		}
		for j < len(owner) && owner[j].Base < s.Base {
			j++
		}
		if j == len(owner) || owner[j].Base != s.Base || owner[j].Name != s.Name {
			return ReasonSegmentMissing
		}
		if s.Sealed && end <= vouched && owner[j].Size < s.Size {
			return ReasonSegmentShorter
		}
	}
	return ""
}

// byBase returns segs in base order, copying only when they are not.
func byBase(segs []Segment) []Segment {
	less := func(a, b Segment) int { return cmp.Compare(a.Base, b.Base) }
	if slices.IsSortedFunc(segs, less) {
		return segs
	}
	return slices.SortedFunc(slices.Values(segs), less)
}

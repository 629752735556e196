// Package sweep is the decision core of the stale-copy sweep (seed 000,
// rules S1-S5 and P6): what becomes of one local copy of a partition this
// node no longer owns. Start with Judge.
//
// Judge(copy) returns a Verdict: defer, reclaim at the position the owner
// vouches for, quarantine, or leave alone. It reads no clock (the caller
// computes the install's age), does no I/O and draws no random numbers. The
// sweep actor around it lists the local copy, asks the owner for its
// listing and move marker, and carries out the verdict under the topic's
// open guard (rule S6), re-checking there that the copy is still at or
// below the vouched position. Every case is tested alone in
// judge_test.go, each test naming its rule.
//
// The inputs: the local listing, HWM and whether the copy holds unexpired
// records; the owner's HWM, listing and move marker, with the install's age
// on the owner's clock. Vouched is min(owner HWM, the marker's PromotedHWM)
// (rule S1), the owner's HWM without a marker. The local copy's own marker
// is no input (S5). The first row that matches decides:
//
//	 #  case                                                 verdict (Reason)                    rule
//	 1  the local copy cannot be listed                      defer (local_unlisted)              S3
//	 2  the owner cannot be asked or did not answer          defer (owner_unreachable)           S3
//	    rows 3-9 only for a copy holding unexpired records:
//	 3  the owner lists no records                           quarantine (owner_lists_no_records) S2
//	 4  the owner has records but no marker                  quarantine (owner_has_no_marker)    S2, S5
//	 5  the owner's marker names another source node         quarantine (marker_from_another_node) S2, S5
//	 6  a local segment with bytes, based below Vouched,     quarantine (owner_segment_missing)  S2
//	    is not on the owner (same base and name)
//	 7  a sealed local segment wholly below Vouched is       quarantine (owner_segment_shorter)  S2
//	    shorter on the owner
//	 8  the local HWM is past the marker's PromotedHWM       quarantine (ahead_of_promoted_hwm)  P6, S5
//	 9  the local HWM is past the owner's HWM                quarantine (ahead_of_owner_hwm)     S1, S2
//	10  the owner's marker has no durability stamp and its   leave alone (unstamped_marker_young) S4
//	    install is under 5 minutes old
//	11  the copy holds no unexpired records                  reclaim (no_unexpired_records)      S3
//	12  otherwise                                            reclaim at Vouched (vouched)        S3
//
// Decisions the seed leaves open: S4 comes after the quarantine rows, since
// waiting guards a reclaim (which can lose records) and a quarantine loses
// none; it holds a copy without unexpired records too (row 10 before 11).
// Of a segment that straddles Vouched only the presence is checked. Only a
// sealed segment is held to its length. A local segment that ends at or
// below the owner's first base counts as trimmed by the owner's retention,
// not missing; a hole above that base is missing.
package sweep

package planner

import "time"

// Destination is what the controller knows of a move's destination when it
// decides whether to clear the move's target (rule T1).
type Destination struct {
	// Member: the destination still has a member record.
	Member bool
	// Dead: its record reads dead; Draining: it is being decommissioned.
	Dead, Draining bool
	// DeadFor is how long the leader's own liveness tracker has seen it
	// dead (membership.Tracker.DeadFor), 0 when this leader has not: a
	// new leader never clears a move on a stamp it inherited.
	DeadFor time.Duration
	// InRaft: it is in the metadata shard's Raft configuration, as a voter
	// or a non-voter still waiting for promotion.
	InRaft bool
}

// TargetGone decides whether the controller clears the target of a move
// in flight (rule T1): the destination is no longer a member, or has read
// dead for at least abortAfter (DeadTargetAbortAfter) on the leader's own
// clock, or is out of the Raft configuration while dead or draining (it was
// removed and will not come back to finish the copy). A destination that
// is only restarting keeps its move and resumes from its staging copy.
func TargetGone(d Destination, abortAfter time.Duration) bool {
	switch {
	case !d.Member:
		return true
	case d.Dead && d.DeadFor >= abortAfter:
		return true
	}
	return !d.InRaft && (d.Dead || d.Draining)
}

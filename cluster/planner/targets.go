package planner

import "time"

// TargetGone decides whether the controller clears the target of a move
// in flight (rule T1): the destination is no longer a member, or its
// record has read dead for at least abortAfter (DeadTargetAbortAfter) on
// the leader's own clock. deadFor is that time as the leader's liveness
// tracker measures it (membership.Tracker.DeadFor), 0 when the leader has
// not seen the record dead itself: a destination that is only restarting
// keeps its move and resumes from its staging copy.
func TargetGone(member, dead bool, deadFor, abortAfter time.Duration) bool {
	if !member {
		return true
	}
	return dead && deadFor >= abortAfter
}

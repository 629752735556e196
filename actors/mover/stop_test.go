package mover

import (
	"testing"

	"github.com/naradmq/narad/messages"
)

// rule X1: a worker stopped with its copy installed may have flipped (the
// runner saw the flip in the replica before the flip's answer reached the
// worker), so it lifts the source's freeze only once the local replica
// shows the move gone; lifted after a flip, the source would take commits
// past the HWM the flip named until its own replica has the flip.
func TestRuleX1AStoppedWorkerLiftsTheFreezeOnlyWhenNoFlipCanCommit(t *testing.T) {
	asg := func(owner, target string) messages.Assignment {
		return messages.Assignment{Owner: owner, Target: target}
	}
	for _, tc := range []struct {
		name      string
		installed bool
		a         messages.Assignment
		found     bool
		want      bool
	}{
		{"not installed: no flip was proposed", false, asg("n1", "n2"), true, true},
		{"installed, flip committed (seen before its answer)", true, asg("n2", ""), true, false},
		{"installed, still targeted here (stopping node)", true, asg("n1", "n2"), true, false},
		{"installed, owner here with a new move planned", true, asg("n2", "n3"), true, false},
		{"installed, aborted", true, asg("n1", ""), true, true},
		{"installed, re-planned elsewhere", true, asg("n1", "n3"), true, true},
		{"installed, topic gone", true, messages.Assignment{}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := releaseOnStop(tc.installed, tc.a, tc.found, "n2"); got != tc.want {
				t.Fatalf("release on stop: got %v, want %v", got, tc.want)
			}
		})
	}
}

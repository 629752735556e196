package planner

import (
	"testing"
	"time"
)

// rule T1
func TestTargetGoneRuleT1(t *testing.T) {
	const after = 2 * time.Minute
	for _, tc := range []struct {
		name         string
		member, dead bool
		deadFor      time.Duration
		want         bool
	}{
		{"no longer a member", false, false, 0, true},
		{"no longer a member, record says dead", false, true, 0, true},
		{"alive", true, false, 0, false},
		{"alive, a stale dead-for is ignored", true, false, time.Hour, false},
		{"dead, not yet seen dead by this leader", true, true, 0, false},
		{"dead a moment less than the bound", true, true, after - time.Nanosecond, false},
		{"dead exactly the bound", true, true, after, true},
		{"dead longer", true, true, after + time.Second, true},
	} {
		if got := TargetGone(tc.member, tc.dead, tc.deadFor, after); got != tc.want {
			t.Errorf("%s: TargetGone(member=%v, dead=%v, deadFor=%s) = %v, want %v", tc.name, tc.member, tc.dead, tc.deadFor, got, tc.want)
		}
	}
}

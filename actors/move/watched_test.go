package move

import (
	"testing"
	"time"
)

// rule P2: the stamp's age the gate sees is DeadTimeout when the worker
// first reads the source dead, and grows on the worker's own clock after.
func TestWatchedRuleP2(t *testing.T) {
	const dt = 30 * time.Second
	seen := New()
	seen.SourceDead, seen.SourceDeadSince = true, 10*time.Second
	for _, tc := range []struct {
		name string
		s    State
		now  time.Duration
		dead bool
		want SourceSeen
	}{
		{"alive", seen, time.Minute, false, SourceSeen{}},
		{"first seen dead", New(), time.Minute, true, SourceSeen{Dead: true, StampAge: dt}},
		{"dead since 10s, now 70s", seen, 70 * time.Second, true, SourceSeen{Dead: true, StampAge: dt + time.Minute}},
		{"dead since 10s, now 10s", seen, 10 * time.Second, true, SourceSeen{Dead: true, StampAge: dt}},
	} {
		if got := Watched(tc.s, tc.now, tc.dead, dt); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

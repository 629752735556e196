package actors

import (
	"testing"
	"time"
)

// rules R2, R3: a runner tick skips the metastore scan while the
// assignment shards' version stood still, and scans anyway when asked to
// (a worker ended, a pass failed) and at least every MoveFullScanEvery.
func TestRuleR2R3TheRunnerScansOnlyWhenSomethingMayHaveChanged(t *testing.T) {
	const every = 30 * time.Second
	for _, tc := range []struct {
		name      string
		rescan    bool
		version   uint64
		sinceScan time.Duration
		want      bool
	}{
		{"nothing changed (rule R2)", false, 7, time.Second, false},
		{"nothing changed, just short of the full scan", false, 7, every - time.Nanosecond, false},
		{"an assignment changed (rule R2)", false, 8, time.Second, true},
		{"a worker ended (rule R3)", true, 7, time.Second, true},
		{"the full scan is due (rule R3)", false, 7, every, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := scanDue(tc.rescan, tc.version, 7, tc.sinceScan, every); got != tc.want {
				t.Fatalf("scan: got %v, want %v", got, tc.want)
			}
		})
	}
}

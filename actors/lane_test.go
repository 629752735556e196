package actors

import (
	"fmt"
	"net/http"
	"testing"
)

// Every partition's fsync goes through the node's SyncLane, and a node with
// the lane disabled commits with each partition's own fsync.
func TestPartitionCommitsSyncThroughTheNodesSyncLane(t *testing.T) {
	for _, disabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("disabled=%v", disabled), func(t *testing.T) {
			tn := newTestNode(t, func(c *Config) { c.SyncLane.Disabled = disabled })
			tn.createTopic("lane", 3)
			const n = 6
			for i := range n {
				tn.must(http.StatusAccepted, "POST", "/v1/topics/lane/produce", []byte(fmt.Sprintf("m%d", i)))
			}
			for i := range n {
				if m := tn.consume("lane", "wait=2s"); m == nil {
					t.Fatalf("consumed %d records, want %d", i, n)
				}
			}
			if disabled {
				if tn.n.lane != nil {
					t.Fatal("a node with SyncLane.Disabled opened a lane")
				}
				return
			}
			// A visible record took two syncs of its partition's log: its
			// frames, then its commit frame.
			if got := tn.n.lane.Stats().Requests; got < 2 {
				t.Fatalf("lane requests after %d committed records: got %d, want at least 2", n, got)
			}
		})
	}
}

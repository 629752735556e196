package metastore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// The Raft connections keep buffers of raftBufferBytes (streams.go); an
// entry several times larger still replicates to every replica.
func TestAnEntryLargerThanTheConnectionBuffersReplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("three replicas")
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	// A long proposal timeout: under -race an entry this size takes
	// seconds to apply on a loaded machine.
	stores := openClusterWith(t, ctx, func(c *Config) { c.ProposalTimeout = 10 * time.Second })
	const partitions = 2_000 // one entry per shard of about 500 assignments
	owner := strings.Repeat("n", 1500)
	as := make([]messages.Assignment, partitions)
	for p := range as {
		as[p] = messages.Assignment{Topic: "big", Incarnation: 7, Partition: p, Owner: owner}
	}
	if size := partitions * (len(owner) + 60) / stores[0].cfg.AssignmentShards; size < 2*raftBufferBytes {
		t.Fatalf("entry of about %d bytes per shard, want more than %d", size, 2*raftBufferBytes)
	}
	retry(t, ctx, "PutAssignments", func() error { return stores[0].PutAssignments(ctx, as) })
	for _, s := range stores {
		waitUntil(t, ctx, s, fmt.Sprintf("replica %d holds every assignment", s.ReplicaID()), func() bool {
			return len(s.Assignments(7, partitions)) == partitions
		})
	}
}

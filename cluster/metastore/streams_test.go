//go:build !noraft

package metastore

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// The Raft connections keep buffers of raftBufferBytes (streams.go); an
// entry several times larger still replicates to every replica.
func TestAnEntryLargerThanTheConnectionBuffersReplicates(t *testing.T) {
	ctx := longTest(t, "three replicas")
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

// One Raft connection per ordered pair of replicas (raftStreams): with
// Dragonboat's 4, a restarted node waits out a peer's circuit breaker once
// per stale connection. Every follower has heard its leader on every shard
// once WaitReady returned, so each pair that exchanges messages is connected.
func TestOneRaftConnectionPerPeer(t *testing.T) {
	ctx := longTest(t, "three replicas")
	if _, err := os.Stat("/proc/net/tcp"); err != nil {
		t.Skip("no /proc/net/tcp to count connections in")
	}
	stores := openCluster(t, ctx)
	ports := map[int]bool{}
	for _, s := range stores {
		_, port, err := net.SplitHostPort(s.cfg.RaftAddr)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := strconv.Atoi(port)
		ports[p] = true
	}
	// Three replicas: at most one connection each way between two.
	if got, want := establishedTo(t, ports), len(stores)*(len(stores)-1); got > want {
		t.Errorf("established Raft connections: got %d, want at most %d (one per ordered pair)", got, want)
	}
}

// establishedTo counts the established IPv4 TCP connections whose remote
// port is one of ports (/proc/net/tcp: "local rem st", ports in hex).
func establishedTo(t *testing.T, ports map[int]bool) int {
	t.Helper()
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "01" {
			continue
		}
		_, hexPort, ok := strings.Cut(fields[2], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseInt(hexPort, 16, 32); err == nil && ports[int(p)] {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

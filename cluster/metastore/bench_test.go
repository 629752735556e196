package metastore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// BenchmarkFlip measures successful ownership flips (one Raft proposal
// each, spread over the assignment shards) on a single replica, with 1 and
// 64 concurrent proposers, on the in-memory filesystem and on disk (fsync).
// It reports flips/s and s/10k-flips (see runFlips).
func BenchmarkFlip(b *testing.B) {
	for _, fs := range []string{"mem", "disk"} {
		for _, proposers := range []int{1, 64} {
			b.Run(fmt.Sprintf("fs=%s/proposers=%d", fs, proposers), func(b *testing.B) {
				benchmarkFlip(b, fs == "mem", proposers)
			})
		}
	}
}

func benchmarkFlip(b *testing.B, inMemory bool, proposers int) {
	ctx := context.Background()
	cfg := Config{
		NodeID:          "n1",
		ReplicaID:       1,
		RaftAddr:        freeAddr(b),
		InMemory:        inMemory,
		RTTMillisecond:  1,
		ElectionRTT:     10,
		HeartbeatRTT:    1,
		ProposalTimeout: 10 * time.Second,
	}
	if !inMemory {
		cfg.Dir = b.TempDir()
	}
	s, err := Open(cfg, testLog)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	runFlips(b, []*Store{s}, proposers)
}

// BenchmarkFlipThreeVoters measures the flip compare-and-swap of a move on
// a cluster of three voters in this process (three NodeHosts talking over
// loopback TCP, so every flip is committed by a quorum of two), with 1, 64
// and 512 concurrent proposers, on the in-memory filesystem and on disk
// (each replica's NodeHost directory under b.TempDir(), so every Raft
// append is fsynced). The ticks are the production defaults (10 ms ticks,
// 500 ms elections): they pace heartbeats, elections and retry back-off,
// not commits.
//
// A move flips once per partition and 10,000 partitions must flip in well
// under 2 s, so besides flips/s it reports s/10k-flips, the time 10,000
// flips take at the measured rate. The three replicas share this
// machine's cores and disk and talk over loopback (no network latency),
// so the figure is not that of three machines.
func BenchmarkFlipThreeVoters(b *testing.B) {
	for _, fs := range []string{"mem", "disk"} {
		for _, proposers := range []int{1, 64, 512} {
			b.Run(fmt.Sprintf("fs=%s/proposers=%d", fs, proposers), func(b *testing.B) {
				ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
				defer cancel()
				stores := openClusterWith(b, ctx, func(c *Config) {
					c.RTTMillisecond, c.ElectionRTT, c.HeartbeatRTT = 0, 0, 0 // defaults
					c.ProposalTimeout = 10 * time.Second
					if fs == "disk" {
						c.InMemory, c.Dir = false, b.TempDir()
					}
				})
				runFlips(b, stores, proposers)
			})
		}
	}
}

// runFlips puts b.N assignments (partitions 0 .. b.N-1 of one incarnation,
// owner n1, target n2; consecutive partitions hash to different assignment
// shards) and then times their flips from n1 to n2 by proposers
// goroutines, failing on any error or any result but ResultOK. It reports
// flips/s and s/10k-flips.
//
// Flip p is proposed through stores[p % len(stores)]. Any replica may
// propose: Dragonboat forwards a follower's proposal to the shard's leader
// (TestThreeReplicas). So with three replicas about a third of the flips
// are proposed on the leader of their shard and the rest pay the extra
// forwarding hop, as when the nodes running the moves are not the leaders.
func runFlips(b *testing.B, stores []*Store, proposers int) {
	ctx := context.Background()
	const incarnation = 1
	as := make([]messages.Assignment, b.N)
	for p := range as {
		as[p] = messages.Assignment{Topic: "bench", Incarnation: incarnation, Partition: p, Owner: "n1", Target: "n2"}
	}
	if err := stores[0].PutAssignments(ctx, as); err != nil {
		b.Fatal(err)
	}

	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, proposers)
	b.ResetTimer()
	for range proposers {
		wg.Go(func() {
			for {
				p := int(next.Add(1) - 1)
				if p >= b.N {
					return
				}
				s := stores[p%len(stores)]
				r, err := s.Flip(ctx, messages.Flip{Incarnation: incarnation, Partition: p, From: "n1", To: "n2"})
				if err == nil && r.Code != messages.ResultOK {
					err = fmt.Errorf("flip %d via replica %d: got code %d, want OK", p, s.ReplicaID(), r.Code)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	perSecond := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(perSecond, "flips/s")
	b.ReportMetric(10_000/perSecond, "s/10k-flips")
}

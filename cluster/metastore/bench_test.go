//go:build !noraft

package metastore

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/planner"
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
//
// The batch=all case flips the b.N partitions with one FlipMany call (one
// entry per shard per maxFlipsPerEntry flips, proposed in parallel): what a
// bulk move does instead of one proposal per partition.
func BenchmarkFlipThreeVoters(b *testing.B) {
	for _, fs := range []string{"mem", "disk"} {
		open := func(b *testing.B) []*Store {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			return openClusterWith(b, ctx, func(c *Config) {
				c.RTTMillisecond, c.ElectionRTT, c.HeartbeatRTT = 0, 0, 0 // defaults
				c.ProposalTimeout = 10 * time.Second
				if fs == "disk" {
					c.InMemory, c.Dir = false, b.TempDir()
				}
			})
		}
		for _, proposers := range []int{1, 64, 512} {
			b.Run(fmt.Sprintf("fs=%s/proposers=%d", fs, proposers), func(b *testing.B) {
				runFlips(b, open(b), proposers)
			})
		}
		b.Run(fmt.Sprintf("fs=%s/batch=all", fs), func(b *testing.B) {
			runFlipMany(b, open(b))
		})
	}
}

// runFlipMany is runFlips with every flip in one FlipMany call, from the
// last replica: the mover is not always the shards' leader.
func runFlipMany(b *testing.B, stores []*Store) {
	ctx := context.Background()
	flips := putFlippable(b, stores[0])
	s := stores[len(stores)-1]
	b.ResetTimer()
	out := s.FlipMany(ctx, flips)
	b.StopTimer()
	for p, o := range out {
		if o.Err != nil || o.Result.Code != messages.ResultOK {
			b.Fatalf("flip %d: got code %d (err %v), want OK", p, o.Result.Code, o.Err)
		}
	}
	reportFlips(b)
}

// putFlippable puts b.N assignments (partitions 0 .. b.N-1 of one
// incarnation, owner n1, target n2) and returns their flips.
func putFlippable(b *testing.B, s *Store) []messages.Flip {
	const incarnation = 1
	as := make([]messages.Assignment, b.N)
	flips := make([]messages.Flip, b.N)
	for p := range as {
		as[p] = messages.Assignment{Topic: "bench", Incarnation: incarnation, Partition: p, Owner: "n1", Target: "n2"}
		flips[p] = messages.Flip{Incarnation: incarnation, Partition: p, From: "n1", To: "n2"}
	}
	if err := s.PutAssignments(context.Background(), as); err != nil {
		b.Fatal(err)
	}
	return flips
}

// reportFlips reports flips/s and s/10k-flips for b.N flips.
func reportFlips(b *testing.B) {
	perSecond := float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(perSecond, "flips/s")
	b.ReportMetric(10_000/perSecond, "s/10k-flips")
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
	flips := putFlippable(b, stores[0])

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
				r, err := s.Flip(ctx, flips[p])
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
	reportFlips(b)
}

// BenchmarkOwnerLookup compares routing's point lookup of one partition's
// assignment (Assignment) with reading it out of the whole topic
// (Assignments, which collects and sorts every partition), for topics of
// 10, 1,000 and 30,000 partitions (seed 003's scale) on a single in-memory
// replica. The point lookup's cost must not grow with the topic:
//
//	go test ./cluster/metastore -run '^$' -bench OwnerLookup | go run ./bench/ratio
func BenchmarkOwnerLookup(b *testing.B) {
	ctx := context.Background()
	s := openReady(b, ctx, fastConfig(b, "n1"))
	for _, n := range []int{10, 1000, 30000} {
		t, err := s.CreateTopic(ctx, messages.Topic{Name: fmt.Sprintf("t%d", n), Partitions: n})
		if err != nil {
			b.Fatal(err)
		}
		as := make([]messages.Assignment, n)
		for p := range as {
			as[p] = messages.Assignment{Topic: t.Name, Incarnation: t.Incarnation, Partition: p, Owner: "n1"}
		}
		if err := s.PutAssignments(ctx, as); err != nil {
			b.Fatal(err)
		}
		last := n - 1
		b.Run(fmt.Sprintf("partitions=%d/point", n), func(b *testing.B) {
			for b.Loop() {
				if a, ok := s.Assignment(t.Incarnation, last); !ok || a.Owner != "n1" {
					b.Fatalf("got %+v, %v", a, ok)
				}
			}
		})
		b.Run(fmt.Sprintf("partitions=%d/raw", n), func(b *testing.B) {
			for b.Loop() {
				found := false
				for _, a := range s.Assignments(t.Incarnation, last+1) {
					found = found || (a.Partition == last && a.Owner == "n1")
				}
				if !found {
					b.Fatal("not found")
				}
			}
		})
	}
}

// BenchmarkPlanningRound is what the controller reads and plans in one
// rebalance pass, at 30,000 and 300,000 partitions (topics of 100 on n1-n3,
// n4 joining empty, 512 picks): "placements" is the input rebuilt from
// every partition's placement (Topics, Assignments per topic,
// planner.NewInput, the controller before issue 27), "indexes" the input
// read from the owner and target indexes (Moving, OwnedCount, FirstSettled
// of the budget, CurrentParent of each), as the controller reads it now:
//
//	go test ./cluster/metastore -run '^$' -bench PlanningRound | go run ./bench/ratio
func BenchmarkPlanningRound(b *testing.B) {
	ctx := context.Background()
	ids := []string{"n1", "n2", "n3", "n4"}
	const budget = 512
	for _, n := range []int{30_000, 300_000} {
		s := openReady(b, ctx, fastConfig(b, "n1"))
		for i := range n / 100 {
			t, err := s.CreateTopic(ctx, messages.Topic{Name: fmt.Sprintf("t%05d", i), Partitions: 100})
			if err != nil {
				b.Fatal(err)
			}
			as := make([]messages.Assignment, 100)
			for p := range as {
				as[p] = messages.Assignment{Topic: t.Name, Incarnation: t.Incarnation, Partition: p, Owner: ids[(i*100+p)%3]}
			}
			if err := s.PutAssignments(ctx, as); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(fmt.Sprintf("partitions=%d/placements", n), func(b *testing.B) {
			members := make([]planner.Member, len(ids))
			for i, id := range ids {
				members[i] = planner.Member{ID: id, Alive: true}
			}
			for b.Loop() {
				var ps []planner.Placement
				for _, t := range s.Topics() {
					for _, a := range s.Assignments(t.Incarnation, t.Partitions) {
						ps = append(ps, planner.Placement{Ref: planner.Ref{Topic: a.Topic, Incarnation: a.Incarnation, Partition: a.Partition},
							Owner: a.Owner, Target: a.Target})
					}
				}
				if ms := planner.Plan(planner.NewInput(members, ps, budget)); len(ms) != budget {
					b.Fatalf("got %d moves, want %d", len(ms), budget)
				}
			}
		})
		b.Run(fmt.Sprintf("partitions=%d/indexes", n), func(b *testing.B) {
			for b.Loop() {
				in := planner.Input{MaxInFlight: budget, InFlight: len(s.Moving())}
				for _, id := range ids {
					node := planner.Node{ID: id, Alive: true, Settled: s.OwnedCount(id)}
					for _, key := range s.FirstSettled(id, budget-in.InFlight) {
						if _, current := s.CurrentParent(key.Incarnation); current {
							node.Owned = append(node.Owned, planner.Ref{Topic: key.Topic, Incarnation: key.Incarnation, Partition: key.Partition})
						}
					}
					in.Nodes = append(in.Nodes, node)
				}
				if ms := planner.Plan(in); len(ms) != budget {
					b.Fatalf("got %d moves, want %d", len(ms), budget)
				}
			}
		})
	}
}

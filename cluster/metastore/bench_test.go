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
// It reports flips/s.
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
	// One partition per flip, each owned by n1 and targeted at n2.
	const incarnation = 1
	as := make([]messages.Assignment, b.N)
	for p := range as {
		as[p] = messages.Assignment{Topic: "bench", Incarnation: incarnation, Partition: p, Owner: "n1", Target: "n2"}
	}
	if err := s.PutAssignments(ctx, as); err != nil {
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
				r, err := s.Flip(ctx, messages.Flip{Incarnation: incarnation, Partition: p, From: "n1", To: "n2"})
				if err == nil && r.Code != messages.ResultOK {
					err = fmt.Errorf("flip %d: got code %d, want OK", p, r.Code)
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
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "flips/s")
}

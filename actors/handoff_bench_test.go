package actors

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"
)

// BenchmarkHandOffOfAThirdOfThePartitions: three nodes own 3,000 small
// partitions (30 topics of 100, one record each); a node that does not lead
// the metadata hands its 1,000 off, as at its first stop signal, at the default pacing (at most
// MaxFrozenPartitions frozen at once). It reports handoff-moves/s, the
// partitions handed off over the hand-off's time. It is the in-process
// companion of bench/bulk's stop scenario, small enough to alternate two
// revisions in one run. One op is one whole hand-off; setup is not timed.
//
//	go test ./actors -run '^$' -bench HandOffOfAThird -benchtime 1x
func BenchmarkHandOffOfAThirdOfThePartitions(b *testing.B) {
	const topics, perTopic = 30, 100
	for range b.N {
		b.StopTimer()
		c := newTestCluster(b, 3)
		for t := range topics {
			c.node(0).must(http.StatusCreated, "POST", "/v1/topics", fmt.Appendf(nil, `{"name":"h%d","partitions":%d}`, t, perTopic))
		}
		var wg sync.WaitGroup
		sem := make(chan struct{}, 16)
		for t := range topics {
			for p := range perTopic {
				sem <- struct{}{}
				wg.Go(func() {
					defer func() { <-sem }()
					c.node((t+p)%3).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/h%d/produce?partition=%d", t, p), []byte(`"x"`))
				})
			}
		}
		wg.Wait()
		b.StartTimer()
		start := time.Now()
		done, _ := c.handOff((c.leader()+1)%3, 5*time.Minute)
		r := c.waitHandOff(done)
		took := time.Since(start)
		b.StopTimer()
		if r.err != nil || r.after != 0 {
			b.Fatalf("hand-off: got before %d after %d err %v, want after 0, nil", r.before, r.after, r.err)
		}
		b.ReportMetric(float64(r.before)/took.Seconds(), "handoff-moves/s")
		c.stopAll()
		b.StartTimer()
	}
}

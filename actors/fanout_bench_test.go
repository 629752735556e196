package actors

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fanoutBenchClients is how many HTTP producers the benchmark runs at
// once: enough to keep a node's ingress busy, few enough for two cores.
const fanoutBenchClients = 8

// BenchmarkFanoutThroughput: one node, a parent of 6 partitions with one
// plain child, and a standalone topic of 6 partitions; fanoutBenchClients
// clients produce b.N records (256-byte bodies, 97 keys) over HTTP to the
// standalone topic, then to the parent while the node copies them to the
// child. One op is one record to each. From the same run it reports
// produce-rec/s, b.N over the time until the last 202 of the parent (the
// baseline); fanout-rec/s, b.N over the time until the child holds all b.N
// (its high watermarks add up to at least b.N, so a duplicate copy
// counts); fanout/produce, their ratio (1 when the copies keep up with the
// producers, lower when the child lags); drain-ms, how long the child took
// to catch up after the last 202; and produce-vs-standalone, the parent's
// produce rate over the standalone topic's, what fan-out costs a producer.
//
//	go test ./actors -run '^$' -bench FanoutThroughput -benchtime 20000x -count 3
func BenchmarkFanoutThroughput(b *testing.B) {
	tn := newTestNode(b)
	tn.must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"bs","partitions":6}`))
	tn.must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"bp","partitions":6}`))
	tn.must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"bc","parent":"bp"}`))
	waitLong(b, "the topics served", func() bool {
		_, standalone := tn.committed("bs")
		_, parent := tn.committed("bp")
		_, child := tn.committed("bc")
		return standalone && parent && child
	})
	b.ResetTimer()
	standalone := produceAll(b, tn, "bs", b.N)
	start := time.Now()
	produced := produceAll(b, tn, "bp", b.N)
	waitLong(b, fmt.Sprintf("the child holding %d records", b.N), func() bool {
		n, ok := tn.committed("bc")
		return ok && n >= int64(b.N)
	})
	copied := time.Since(start)
	b.StopTimer()
	produceRate, fanoutRate := float64(b.N)/produced.Seconds(), float64(b.N)/copied.Seconds()
	b.ReportMetric(produceRate, "produce-rec/s")
	b.ReportMetric(fanoutRate, "fanout-rec/s")
	b.ReportMetric(fanoutRate/produceRate, "fanout/produce")
	b.ReportMetric(float64((copied - produced).Milliseconds()), "drain-ms")
	b.ReportMetric(standalone.Seconds()/produced.Seconds(), "produce-vs-standalone")
}

// produceAll has fanoutBenchClients clients produce n records to topic
// and returns how long until the last 202.
func produceAll(b *testing.B, tn *testNode, topic string, n int) time.Duration {
	body := []byte(fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 244)))
	var next, refused atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range fanoutBenchClients {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				path := fmt.Sprintf("/v1/topics/%s/produce?key=k%d", topic, i%97)
				// A 503 is a node catching its breath: retry it, bounded.
				for attempt := 0; ; attempt++ {
					code, _, err := tn.attempt("POST", path, body)
					if err == nil && code == http.StatusAccepted {
						break
					}
					refused.Add(1)
					if attempt == 100 {
						b.Errorf("produce %d to %s: got %d (%v) after %d attempts, want 202", i, topic, code, err, attempt+1)
						return
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if r := refused.Load(); r > 0 {
		b.Logf("%s: %d produce attempts refused and retried", topic, r)
	}
	return time.Since(start)
}

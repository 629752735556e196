package actors

import (
	"bytes"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

func TestATopicsBacklogAndLeasesAreItsPartitionsSummed(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.NodeID = "figures" })
	tn.createTopic("orders", 3)
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/orders/produce?key="+key, []byte("x"))
	}
	// Read from /metrics: a GetOrCreateGauge before the first partition
	// opened (they are created at rest, and open at their first commit)
	// would register a gauge without the sum behind it.
	gauge := func(name string) float64 {
		var buf bytes.Buffer
		tn.n.metrics.set.WritePrometheus(&buf)
		for _, l := range strings.Split(buf.String(), "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", l, err)
				}
				return f
			}
		}
		return -1 // not registered yet
	}
	backlog := func() float64 { return gauge(`narad_topic_backlog_records{node="figures",topic="orders"}`) }
	leases := func() float64 { return gauge(`narad_topic_leases{node="figures",topic="orders"}`) }
	waitFor(t, func() bool { return backlog() == 5 })
	if got := tn.n.metrics.set.GetOrCreateGauge(`narad_partitions_disk_bytes{node="figures"}`, nil).Get(); got < 5 {
		t.Fatalf("partition bytes on disk after 5 records: got %v, want at least 5", got)
	}
	first := tn.consume("orders", "wait=2s")
	tn.consume("orders", "wait=2s")
	if got := leases(); got != 2 {
		t.Fatalf("leases out after two consumes: got %v, want 2", got)
	}
	tn.must(http.StatusNoContent, "POST", "/v1/topics/orders/ack?receipt_handle="+url.QueryEscape(first.ReceiptHandle), nil)
	if got, want := [2]float64{backlog(), leases()}, [2]float64{4, 1}; got != want {
		t.Fatalf("backlog and leases after one ack: got %v, want %v", got, want)
	}
	// A deleted topic leaves no series behind.
	tn.must(http.StatusNoContent, "DELETE", "/v1/topics/orders", nil)
	waitFor(t, func() bool {
		var buf bytes.Buffer
		tn.n.metrics.set.WritePrometheus(&buf)
		return !strings.Contains(buf.String(), `narad_topic_backlog_records{node="figures",topic="orders"}`)
	})
}

package actors

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
)

// Issue 50: a node's idle partitions rest, and both ways in wake them: the
// dispatcher's pipelined commits (which go to the partition's address
// themselves, so they pass its door on their own) and the API's reads
// through the router. Every record produced across many rests is stored
// once, in the order produced.
func TestANodesPartitionsRestAndTheProducePathWakesThemInOrder(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.Partition.RestAfter = 100 * time.Millisecond })
	tn.createTopic("resting", 3)
	inc := tn.incarnationOf("resting")
	var want []string
	for i := range 60 {
		if i%6 == 0 {
			time.Sleep(250 * time.Millisecond) // past RestAfter: both partitions rest
		}
		body := fmt.Sprintf(`{"i":%d}`, i)
		tn.must(http.StatusAccepted, "POST", "/v1/topics/resting/produce?partition=0", []byte(body))
		want = append(want, body)
	}
	testnet.Eventually(t, rigWaitBound, "every record committed", func() bool { return len(tn.bodiesAt("resting", inc, 0)) == len(want) })
	if got := tn.bodiesAt("resting", inc, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("partition 0 after its rests: got %v, want %v", got, want)
	}
	// Created at rest, partitions 1 and 2 never open; partition 0 opens at
	// its first produce and rests at each of the nine pauses after it.
	if got := tn.rests(); got < 9 {
		t.Fatalf("narad_partition_rests_total: got %d, want at least 9 (nine pauses after the first produce)", got)
	}
}

var restsLine = regexp.MustCompile(`(?m)^narad_partition_rests_total\{[^}]*\} (\d+)$`)

// rests is the node's narad_partition_rests_total.
func (tn *testNode) rests() int {
	tn.t.Helper()
	m := restsLine.FindSubmatch(tn.must(http.StatusOK, "GET", "/metrics", nil))
	if m == nil {
		tn.t.Fatal("narad_partition_rests_total not in /metrics")
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

package actors

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/messages"
)

// flakyOpen fails the open of one partition a given number of times.
type flakyOpen struct {
	mu        sync.Mutex
	partition int
	failures  int
	attempts  int
}

func (f *flakyOpen) open(k messages.PartitionKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if k.Partition != f.partition {
		return nil
	}
	f.attempts++
	if f.attempts <= f.failures {
		return errors.New("injected: disk unreadable")
	}
	return nil
}

func (f *flakyOpen) tries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

func TestAFailingPartitionIsRestartedWithBackoffAndServesAgain(t *testing.T) {
	flaky := &flakyOpen{partition: 1, failures: 2}
	tn := newTestNode(t, func(c *Config) {
		c.faults = &faultHooks{partition: partition.Knobs{OpenPartition: flaky.open}}
		c.PartitionMaxRestarts = 5
	})
	restarts := tn.n.metrics.actorRestarts.Get()
	tn.createTopic("flaky", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/flaky/produce?partition=1", []byte("after the failures"))
	waitFor(t, func() bool {
		code, _ := tn.do("GET", "/v1/topics/flaky/consume?partition=1&offset=0", nil)
		return code == http.StatusOK
	})
	if got := flaky.tries(); got != 3 {
		t.Fatalf("open attempts: got %d, want 3 (two failures, then a good open)", got)
	}
	if got := tn.n.metrics.actorRestarts.Get() - restarts; got != 2 {
		t.Fatalf("restarts counted: got %d, want 2", got)
	}
}

func TestAPartitionThatKeepsFailingIsStoppedAndTheRestKeepServing(t *testing.T) {
	flaky := &flakyOpen{partition: 0, failures: 1 << 30}
	tn := newTestNode(t, func(c *Config) {
		c.faults = &faultHooks{partition: partition.Knobs{OpenPartition: flaky.open}}
		c.PartitionMaxRestarts = 2
		// Opened at its create, as a partition with data opens at a
		// start; a woken one that cannot open rests again instead
		// (partition.TestAWokenPartitionThatCannotOpenRestsAgain).
		c.Partition.CreatedAtRest = false
	})
	failed := tn.n.metrics.partitionFailed.Get()
	tn.createTopic("broken", 3)
	waitFor(t, func() bool { return tn.n.metrics.partitionFailed.Get() > failed })
	if got := flaky.tries(); got != 3 {
		t.Fatalf("open attempts: got %d, want 3 (the first and two restarts)", got)
	}
	// Partitions 1 and 2 serve; partition 0 refuses with a retryable error.
	tn.must(http.StatusAccepted, "POST", "/v1/topics/broken/produce?partition=2", []byte("fine"))
	waitFor(t, func() bool {
		code, _ := tn.do("GET", "/v1/topics/broken/consume?partition=2&offset=0", nil)
		return code == http.StatusOK
	})
	if code, _ := tn.do("GET", "/v1/topics/broken/consume?partition=0&offset=0", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("replay on the stopped partition: got %d, want 503", code)
	}
	// The supervisor forgot the child it gave up on (its Terminated found
	// it): the partitions served here are the other two.
	owned := func() string {
		_, body := tn.do("GET", "/metrics", nil)
		return ownedLine(body)
	}
	for deadline := time.Now().Add(10 * time.Second); owned() != `narad_partitions_owned{node="n1"} 2`; {
		if time.Now().After(deadline) {
			t.Fatalf("partitions owned after one was given up: got %q, want narad_partitions_owned 2", owned())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ownedLine is the narad_partitions_owned line of a /metrics body.
func ownedLine(body []byte) string {
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, "narad_partitions_owned") {
			return l
		}
	}
	return ""
}

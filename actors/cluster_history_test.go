package actors

import (
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/bench/history"
)

// TestClusterHistoryWithANodeKilledAndRestartedMidRun runs producers and
// consumers against every node of a three-node cluster, kills one node
// mid-run and restarts it, and checks the history: every produce answered
// 202 is consumed at least once; duplicates are counted, never a gap.
func TestClusterHistoryWithANodeKilledAndRestartedMidRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	clusterHistoryRun(t, newTestCluster(t, 3))
}

// The same run with security on (issue 14: the cluster tests pass with it):
// every request carries the admin's credentials, and the nodes check them.
func TestClusterHistoryWithSecurityOn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := newTestCluster(t, 3, secureCluster("history-secret"))
	c.loginAs("admin", "history-secret")
	if code, _, err := c.node(1).attempt("GET", "/v1/topics", nil); err != nil || code != http.StatusOK {
		t.Fatalf("an authenticated list: got %d (%v), want 200", code, err)
	}
	anon := *c.node(1)
	anon.user = ""
	if code, _, err := anon.attempt("GET", "/v1/topics", nil); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("an anonymous list on a secured node: got %d (%v), want 401", code, err)
	}
	clusterHistoryRun(t, c)
}

// clusterHistoryRun is the killed-and-restarted run on c.
func clusterHistoryRun(t *testing.T, c *testCluster) {
	c.waitFor("three members alive", func() bool { return len(c.memberStatuses(0)) == 3 })
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"h","partitions":6,"visibility_timeout_ms":2000}`))
	c.waitFor("the topic on every node", func() bool {
		for i := 0; i < 3; i++ {
			if code, _ := c.node(i).do("GET", "/v1/topics/h", nil); code != http.StatusOK {
				return false
			}
		}
		return true
	})

	h := history.New()
	var produced atomic.Int64
	var alive [3]atomic.Bool
	for i := range alive {
		alive[i].Store(true)
	}
	// Clients go to the nodes that are up, as a load balancer would.
	pick := func(k int) *testNode {
		for j := 0; j < 3; j++ {
			if i := (k + j) % 3; alive[i].Load() {
				return c.node(i)
			}
		}
		return c.node(0)
	}
	const producers, perProducer = 3, 150
	var prodWG, consWG sync.WaitGroup
	stop := make(chan struct{})
	for p := 0; p < producers; p++ {
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			for i := 0; i < perProducer; i++ {
				id := fmt.Sprintf("p%d-%04d", p, i)
				for attempt := 0; attempt < 400; attempt++ {
					code, _, err := pick(p+i).attempt("POST", "/v1/topics/h/produce", history.MakeBody(id, 32))
					if err == nil && code == http.StatusAccepted {
						h.Produced(id)
						produced.Add(1)
						break
					}
					h.ProduceFailed(id)
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	for k := 0; k < 3; k++ {
		consWG.Add(1)
		go func() {
			defer consWG.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				tn := pick(k + n)
				code, b, err := tn.attempt("GET", "/v1/topics/h/consume?wait=500ms", nil)
				if err != nil || code != http.StatusOK {
					continue
				}
				d, err := h.Delivered("h", b)
				if err != nil {
					t.Error(err)
					return
				}
				if code, _, err := tn.attempt("POST", "/v1/topics/h/ack?receipt_handle="+url.QueryEscape(d.ReceiptHandle), nil); err == nil && code == http.StatusNoContent {
					h.Acked(d.ID)
				}
			}
		}()
	}

	c.waitFor("a third of the load in", func() bool { return produced.Load() >= producers*perProducer/3 })
	alive[2].Store(false)
	c.kill(2)
	c.waitFor("more load while n3 is down", func() bool { return produced.Load() >= producers*perProducer*2/3 })
	c.restart(2)
	alive[2].Store(true)
	prodWG.Wait()
	c.waitFor("every accepted record consumed", func() bool { return h.Outstanding() == 0 })
	close(stop)
	consWG.Wait()
	rep := h.Check()
	t.Logf("three nodes, n3 killed and restarted mid-run: %s", rep)
	if !rep.OK() {
		t.Fatalf("history check failed: %s", rep)
	}
	if rep.Produced != producers*perProducer {
		t.Fatalf("produced %d distinct ids with 202, want %d", rep.Produced, producers*perProducer)
	}
}

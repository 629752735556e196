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
	"github.com/naradmq/narad/messages"
)

// testLoad is producers and consumers running against a cluster's nodes
// for the whole of a test, recording a history: start it, change the
// cluster, then finish it and check that nothing was lost.
type testLoad struct {
	t        *testing.T
	c        *testCluster
	nodes    []*testNode // the nodes at the start; a node joined later takes no load
	topic    string
	h        *history.History
	produced atomic.Int64
	up       []atomic.Bool
	stop     chan struct{}
	prodWG   sync.WaitGroup
	consWG   sync.WaitGroup
}

// startLoad runs producers that each produce perProducer records, and
// consumers that ack what they get, spread over the nodes that are up.
func startLoad(c *testCluster, topic string, producers, perProducer int) *testLoad {
	l := &testLoad{t: c.t, c: c, nodes: append([]*testNode(nil), c.nodes...), topic: topic, h: history.New(),
		up: make([]atomic.Bool, len(c.nodes)), stop: make(chan struct{})}
	for i := range l.nodes {
		l.up[i].Store(true)
	}
	for p := range producers {
		l.prodWG.Go(func() {
			for i := range perProducer {
				id := fmt.Sprintf("p%d-%05d", p, i)
				for attempt := 0; attempt < 1000; attempt++ {
					code, _, err := l.pick(p+i).attempt("POST", "/v1/topics/"+topic+"/produce", history.MakeBody(id, 64))
					if err == nil && code == http.StatusAccepted {
						l.h.Produced(id)
						l.produced.Add(1)
						break
					}
					l.h.ProduceFailed(id)
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	for k := range 3 {
		l.consWG.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-l.stop:
					return
				default:
				}
				tn := l.pick(k + n)
				code, b, err := tn.attempt("GET", "/v1/topics/"+topic+"/consume?wait=300ms", nil)
				if err != nil || code != http.StatusOK {
					continue
				}
				d, err := l.h.Delivered(topic, b)
				if err != nil {
					l.t.Error(err)
					return
				}
				if code, _, err := tn.attempt("POST", "/v1/topics/"+topic+"/ack?receipt_handle="+url.QueryEscape(d.ReceiptHandle), nil); err == nil && code == http.StatusNoContent {
					l.h.Acked(d.ID)
				}
			}
		})
	}
	return l
}

// pick is a node that is up, as a load balancer would choose.
func (l *testLoad) pick(k int) *testNode {
	n := len(l.nodes)
	for j := range n {
		if i := (k + j) % n; l.up[i].Load() {
			return l.nodes[i]
		}
	}
	return l.nodes[0]
}

// down takes node i out of the load balancer before it is killed or cut
// off; back puts it back once it runs again.
func (l *testLoad) down(i int) { l.up[i].Store(false) }
func (l *testLoad) back(i int) { l.up[i].Store(true) }

func (l *testLoad) waitProduced(n int64) {
	l.c.waitFor(fmt.Sprintf("%d records produced", n), func() bool { return l.produced.Load() >= n })
}

// finish waits for the producers, then for every accepted record to be
// consumed, and fails the test unless the history is clean.
func (l *testLoad) finish() history.Report {
	l.t.Helper()
	l.prodWG.Wait()
	l.c.waitFor("every accepted record consumed", func() bool { return l.h.Outstanding() == 0 })
	close(l.stop)
	l.consWG.Wait()
	rep := l.h.Check()
	if !rep.OK() {
		l.t.Fatalf("history check failed: %s", rep)
	}
	return rep
}

// owned counts the partitions of topic each node owns, as node i's replica
// has them, and how many have a target.
func (c *testCluster) owned(i int, topic string) (perNode map[string]int, moving int) {
	s := c.node(i).n.Store()
	t, ok := s.Topic(topic)
	if !ok {
		c.t.Fatalf("topic %s unknown on n%d", topic, i+1)
	}
	perNode = map[string]int{}
	for _, a := range s.Assignments(t.Incarnation, t.Partitions) {
		perNode[a.Owner]++
		if a.Target != "" {
			moving++
		}
	}
	return perNode, moving
}

// rule L1, L7: a fourth node joins while produce and consume run; the
// controller plans the surplus onto it, the moves copy, freeze, fence,
// install and flip, and the history shows no loss.
func TestClusterAJoiningNodeTakesItsShareWithNoLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes")
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) {
		cfg.MoveTick = 100 * time.Millisecond
		cfg.MaxInFlightMoves = 2
	})
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":12,"visibility_timeout_ms":2000}`))
	load := startLoad(c, "m", 3, 300)
	load.waitProduced(200)

	j := c.join()
	c.waitFor("n4 owning 3 of 12 partitions and no move in flight", func() bool {
		per, moving := c.owned(0, "m")
		return per["n4"] == 3 && moving == 0
	})
	rep := load.finish()
	per, _ := c.owned(j, "m")
	t.Logf("after the rebalance: %v; %s", per, rep)
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		if per[id] != 3 {
			t.Errorf("partitions of %s: got %d, want 3 (12 over 4)", id, per[id])
		}
	}
	c.waitFor("n4 counting 3 moves done", func() bool { return c.node(j).n.metrics.movesDone.Get() >= 3 })
	// Every record is readable on its new owner: consume by offset.
	if code, _ := c.node(j).do("GET", "/v1/topics/m", nil); code != http.StatusOK {
		t.Fatalf("stats after the moves: got %d", code)
	}
	_ = messages.StatusOK
}

package actors

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// ownedAcross counts the partitions of topics each node owns, as node i's
// replica has them, and how many have a target.
func (c *testCluster) ownedAcross(i int, topics []string) (perNode map[string]int, moving int) {
	perNode = map[string]int{}
	for _, topic := range topics {
		per, m := c.owned(i, topic)
		for id, n := range per {
			perNode[id] += n
		}
		moving += m
	}
	return perNode, moving
}

// rules F3, K1, K2, L7, D1, D3: the run that lost acknowledged records
// before rule F3 held. Keyed producers write to many small partitions of
// several topics while a fourth node joins and takes its share, and then
// is decommissioned and gives it all back: every move freezes a partition
// that is taking commits. Every record answered 202 must be delivered;
// duplicates are reported.
//
// go test ./actors -run TestClusterARebalanceOntoAJoinerAndBackUnderKeyedLoad -count 20
func TestClusterARebalanceOntoAJoinerAndBackUnderKeyedLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes")
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) {
		cfg.MoveTick, cfg.Controller.RebalanceInterval = 100*time.Millisecond, 100*time.Millisecond
		cfg.MaxInFlightMoves = 8
	})
	var topics []string
	for i := range 5 {
		name := fmt.Sprintf("accept-mv-%d", i)
		topics = append(topics, name)
		c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(fmt.Sprintf(`{"name":%q,"partitions":12,"visibility_timeout_ms":2000}`, name)))
	}
	load := startLoadOf(c, loadSpec{topics: topics, producers: 3, perProducer: 300, keys: 8})
	load.waitProduced(1000)

	j := c.join()
	c.waitForMoves("n4 owning 15 of 60 partitions and no move in flight", func() bool {
		per, moving := c.ownedAcross(0, topics)
		return per["n4"] == 15 && moving == 0
	})
	load.waitProduced(2500)
	c.node(0).must(http.StatusNoContent, "POST", "/v1/cluster/members/n4/decommission", nil)
	c.waitDecommissioned("n4", topics)
	rep := load.finish()
	t.Logf("rebalance onto n4 and back: %s", rep)
	if got := c.node(j).n.metrics.movesDone.Get(); got < 15 {
		t.Errorf("moves onto n4: got %d, want at least 15", got)
	}
}

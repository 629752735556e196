package actors

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/produce"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// ownersOf reads a topic's partition owners from a node's stats, polling
// as clients do until every partition has its entry.
func ownersOf(t *testing.T, tn *testNode, topic string) (owners map[int]string, hwm int64) {
	t.Helper()
	var d messages.TopicDetails
	testnet.Eventually(t, clusterWaitBound, "every partition of "+topic+" answering its stats", func() bool {
		if err := json.Unmarshal(tn.must(http.StatusOK, "GET", "/v1/topics/"+topic, nil), &d); err != nil {
			t.Fatal(err)
		}
		return len(d.PartitionStats) == d.Partitions
	})
	owners = map[int]string{}
	for _, ps := range d.PartitionStats {
		owners[ps.Index] = ps.OwnerNode
		hwm += ps.HighWatermark
	}
	return owners, hwm
}

// A topic created on one node is placed over every member, produce on any
// node commits at the owners, and consume and ack on any node reach them.
func TestClusterProduceOnAnyNodeIsConsumedOnAnyNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := newTestCluster(t, 3)
	c.waitFor("three members alive", func() bool { return len(c.memberStatuses(0)) == 3 })
	c.node(0).createTopic("spread", 6)
	owners, _ := ownersOf(t, c.node(2), "spread")
	placed := map[string]int{}
	for _, o := range owners {
		placed[o]++
	}
	if len(owners) != 6 || placed["n1"] != 2 || placed["n2"] != 2 || placed["n3"] != 2 {
		t.Fatalf("placement: got %v, want two partitions on each of n1, n2, n3", owners)
	}
	const n = 30
	for i := 0; i < n; i++ {
		c.node(1).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/spread/produce?key=k%d", i), []byte(fmt.Sprintf(`{"i":%d}`, i)))
	}
	c.waitFor("every record committed at its owner", func() bool {
		_, hwm := ownersOf(t, c.node(0), "spread")
		return hwm == n
	})
	seen := map[string]bool{}
	for len(seen) < n {
		m := c.node(2).consume("spread", "wait=2s")
		if m == nil {
			t.Fatalf("consume on n3: got nothing after %d of %d records", len(seen), n)
		}
		seen[string(m.Payload)] = true
		c.node(2).must(http.StatusNoContent, "POST", "/v1/topics/spread/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
	}
	if m := c.node(0).consume("spread", ""); m != nil {
		t.Fatalf("after acking everything on n3, n1 still delivers %+v", m)
	}
}

// A killed node's partitions refuse consume while the others keep serving,
// and its records are all there after it restarts.
func TestClusterAKilledOwnersPartitionsRefuseWhileOthersServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := newTestCluster(t, 3)
	c.waitFor("three members alive", func() bool { return len(c.memberStatuses(0)) == 3 })
	c.node(0).createTopic("k", 3)
	owners, _ := ownersOf(t, c.node(0), "k")
	byOwner := map[string]int{}
	for p, o := range owners {
		byOwner[o] = p
		c.node(0).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/k/produce?partition=%d", p), []byte("r"))
	}
	c.waitFor("three records committed", func() bool { _, hwm := ownersOf(t, c.node(0), "k"); return hwm == 3 })

	c.kill(2) // n3
	dead := byOwner["n3"]
	if code, _ := c.node(0).do("GET", fmt.Sprintf("/v1/topics/k/consume?partition=%d&offset=0", dead), nil); code != http.StatusServiceUnavailable {
		t.Fatalf("replay on the killed owner's partition: got %d, want 503", code)
	}
	live := byOwner["n2"]
	if m := c.node(0).consume("k", fmt.Sprintf("partition=%d&offset=0", live)); m == nil {
		t.Fatalf("replay on a live owner's partition %d: got nothing", live)
	}
	c.restart(2)
	c.waitFor("the restarted owner serves its record", func() bool {
		code, _ := c.node(0).do("GET", fmt.Sprintf("/v1/topics/k/consume?partition=%d&offset=0", dead), nil)
		return code == http.StatusOK
	})
}

// A keyed produce whose partition's owner reads dead goes to a partition
// with a live owner, so it is consumable while that owner is down.
func TestClusterAKeyedProduceSkipsAPartitionWhoseOwnerIsDead(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := newTestCluster(t, 3)
	c.waitFor("three members alive", func() bool { return len(c.memberStatuses(0)) == 3 })
	c.node(0).createTopic("skip", 3)
	owners, _ := ownersOf(t, c.node(0), "skip")
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("key%d", i); owners[produce.PartitionForKey(k, 3)] == "n3" {
			key = k
		}
	}
	c.kill(2)
	c.waitFor("n3 marked dead", func() bool { return c.memberStatuses(0)["n3"] == "dead" })
	c.node(0).must(http.StatusAccepted, "POST", "/v1/topics/skip/produce?key="+key, []byte(`"while n3 is down"`))
	m := c.node(1).consume("skip", "wait=5s")
	if m == nil {
		t.Fatal("consume while n3 is down: got nothing, want the keyed record on a live partition")
	}
	if owners[m.Partition] == "n3" || m.Key != key {
		t.Fatalf("delivered %+v from partition %d (owner %s), want key %s on a live owner's partition", m, m.Partition, owners[m.Partition], key)
	}
}

// Records held for a partition whose owner is down go to a live sibling
// partition once the owner reads dead and its commits have failed for
// RerouteGrace (rule K3).
func TestClusterHeldRecordsAreReroutedToALiveSiblingAfterTheGrace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) { cfg.Dispatch.RerouteGrace = 300 * time.Millisecond })
	c.waitFor("three members alive", func() bool { return len(c.memberStatuses(0)) == 3 })
	c.node(0).createTopic("held", 3)
	owners, _ := ownersOf(t, c.node(0), "held")
	dead := -1
	for p, o := range owners {
		if o == "n3" {
			dead = p
		}
	}
	c.kill(2)
	// An explicit partition is kept at produce time: the dispatcher holds it.
	c.node(0).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/held/produce?partition=%d", dead), []byte(`"held for n3"`))
	// The record moves once the leader has marked n3 dead, which takes
	// longer than one long poll.
	var m *messages.MessageInfo
	if !c.eventually(func() bool { m = c.node(1).consume("held", "wait=1s"); return m != nil }) {
		t.Fatal("consume while n3 is down: got nothing, want the held record rerouted")
	}
	if m.Partition == dead || string(m.Payload) != `"held for n3"` {
		t.Fatalf("delivered %+v, want the held record on a partition other than %d", m, dead)
	}
}

// A node started with Join asks the cluster to admit it over NATS, catches
// up as a non-voting replica, registers, and takes partitions of topics
// created after it joined.
func TestClusterANewNodeJoinsAndTakesNewPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes")
	}
	c := newTestCluster(t, 3)
	c.node(0).createTopic("before", 3)
	j := c.join()
	c.waitFor("n4 alive in every member list", func() bool {
		for i := 0; i <= j; i++ {
			if c.memberStatuses(i)["n4"] != "alive" {
				return false
			}
		}
		return true
	})
	if code, _ := c.node(j).do("GET", "/v1/topics/before", nil); code != http.StatusOK {
		t.Fatalf("a topic created before the join, read on n4: got %d, want 200", code)
	}
	c.node(j).createTopic("after", 4)
	owners, _ := ownersOf(t, c.node(0), "after")
	onN4 := 0
	for _, o := range owners {
		if o == "n4" {
			onN4++
		}
	}
	if onN4 == 0 {
		t.Fatalf("placement after the join: got %v, want n4 to take some", owners)
	}
	c.node(0).must(http.StatusAccepted, "POST", "/v1/topics/after/produce", []byte(`"x"`))
	if m := c.node(j).consume("after", "wait=5s"); m == nil {
		t.Fatal("consume on n4: got nothing")
	}
}

// A topic grown and deleted through a node that does not lead the
// metadata shard: the controller on the leader stores the change and
// places or removes the partitions, the follower serves the result at
// once, and a create of the same name after the delete starts empty.
func TestClusterAlterAndDeleteOnAFollowerGoThroughTheController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := newTestCluster(t, 3)
	follower := c.node((c.leader() + 1) % 3)
	follower.createTopic("grow", 3)
	follower.must(http.StatusAccepted, "POST", "/v1/topics/grow/produce?partition=0", []byte(`"before"`))
	follower.must(http.StatusOK, "PATCH", "/v1/topics/grow", []byte(`{"partitions":5}`))
	owners, _ := ownersOf(t, follower, "grow")
	if len(owners) != 5 {
		t.Fatalf("owners after growing on a follower: got %v, want 5 partitions placed", owners)
	}
	for p, o := range owners {
		if o == "" {
			t.Fatalf("partition %d after the grow: got no owner, want one", p)
		}
	}
	follower.must(http.StatusAccepted, "POST", "/v1/topics/grow/produce?partition=4", []byte(`"grown"`))
	var m *messages.MessageInfo
	if !c.eventually(func() bool { m = follower.consume("grow", "partition=4&offset=0"); return m != nil }) || string(m.Payload) != `"grown"` {
		t.Fatalf("replay of the grown partition: got %+v, want \"grown\"", m)
	}

	follower.must(http.StatusNoContent, "DELETE", "/v1/topics/grow", nil)
	follower.must(http.StatusNotFound, "GET", "/v1/topics/grow", nil)
	follower.must(http.StatusNotFound, "DELETE", "/v1/topics/grow", nil)
	follower.createTopic("grow", 3)
	if _, hwm := ownersOf(t, follower, "grow"); hwm != 0 {
		t.Fatalf("the recreated topic: got HWM %d, want it empty", hwm)
	}
}

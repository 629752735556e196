package actors

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/hints"
	"github.com/naradmq/narad/messages"
)

// partitionRequestsServed is how many partition-service requests tn has
// answered over NATS, from the transport's own counter in its node's set.
func partitionRequestsServed(tn *testNode) uint64 {
	return tn.n.metrics.set.GetOrCreateCounter(fmt.Sprintf(`narad_nats_handled_total{node=%q,service="partition"}`, tn.cfg.NodeID)).Get()
}

// routedCluster is a three-node cluster whose long polls never rescan on
// their own within a consume (MaxConsumeWait is 2 s): only a commit notice
// can tell a node that a partition elsewhere has a record. Node ids carry
// prefix, so the process-wide transport counters are the test's own.
func routedCluster(t *testing.T, prefix string) *testCluster {
	return newTestCluster(t, 3, func(i int, c *Config) {
		c.NodeID = fmt.Sprintf("%s%d", prefix, i+1)
		c.ConsumeRescanInterval, c.ConsumeFullScanInterval = time.Minute, time.Minute
	})
}

// believeAllEmpty consumes from an empty topic through node i until its
// ready book believes every partition empty: right after a create, a
// partition not open yet at its owner is not asked and so stays believed
// ready.
func (c *testCluster) believeAllEmpty(i int, topic string) {
	c.t.Helper()
	t, _ := c.node(i).n.Store().Topic(topic)
	ti := hints.TopicIncarnation{Topic: topic, Incarnation: t.Incarnation}
	c.waitFor("every partition of "+topic+" believed empty on "+c.node(i).cfg.NodeID, func() bool {
		if m := c.node(i).consume(topic, "wait=0"); m != nil {
			c.t.Fatalf("consume of the empty topic %s: got offset %d, want 204", topic, m.Offset)
		}
		parts, _, _ := c.node(i).n.notifier.Ready.Snapshot(ti, t.Partitions)
		for _, p := range parts {
			if p.Ready {
				return false
			}
		}
		return true
	})
}

// ownedElsewhere is a partition of topic that node i does not own, and the
// index of the node that does.
func (c *testCluster) ownedElsewhere(i int, topic string, partitions int) (partition, owner int) {
	c.t.Helper()
	for p := range partitions {
		a := c.assignmentOf(i, topic, p)
		for j, tn := range c.nodes {
			if j != i && tn.cfg.NodeID == a.Owner {
				return p, j
			}
		}
	}
	c.t.Fatalf("every partition of %s is owned by %s", topic, c.node(i).cfg.NodeID)
	return -1, -1
}

// A long poll on a node that owns none of the records wakes on a commit at
// another node: the owner's commit notice reaches it, although the poll
// would not look again by itself before it ends (issue 15: long polls wake
// on commit across nodes).
func TestALongPollWakesOnACommitAtAnotherNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := routedCluster(t, "wake")
	const partitions = 3
	c.node(0).createTopic("wake", partitions)
	p, owner := c.ownedElsewhere(0, "wake", partitions)
	c.believeAllEmpty(0, "wake")
	got := make(chan *messages.MessageInfo, 1)
	go func() {
		code, b := c.node(0).do("GET", "/v1/topics/wake/consume?wait=2s", nil)
		if code != http.StatusOK {
			got <- nil
			return
		}
		var m messages.MessageInfo
		if json.Unmarshal(b, &m) != nil {
			got <- nil
			return
		}
		got <- &m
	}()
	c.node(owner).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/wake/produce?partition=%d", p), []byte("hello"))
	m := <-got
	if m == nil {
		t.Fatalf("long poll on %s: got 204, want the record committed at %s", c.node(0).cfg.NodeID, c.node(owner).cfg.NodeID)
	}
	if m.Partition != p {
		t.Fatalf("long poll on %s: got partition %d, want %d", c.node(0).cfg.NodeID, m.Partition, p)
	}
}

// A queue-mode consume that lands on a node owning none of the partition
// with a record costs exactly one request, to that partition's owner, once
// the node heard of the commit; and a full scan (wait=0) costs at most one
// request per other owner, not one per partition (issue 15: consume at the
// owner in one hop).
func TestAConsumeThroughANonOwnerAsksOneOwnerOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := routedCluster(t, "hop")
	const partitions = 9
	c.node(0).createTopic("hop", partitions)
	p, owner := c.ownedElsewhere(0, "hop", partitions)
	other := 3 - owner // the third node: 1 or 2
	c.believeAllEmpty(0, "hop")

	c.node(owner).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/hop/produce?partition=%d", p), []byte("one"))
	topic, _ := c.node(0).n.Store().Topic("hop")
	ti := hints.TopicIncarnation{Topic: "hop", Incarnation: topic.Incarnation}
	c.waitFor("the commit notice to reach the consuming node", func() bool {
		parts, _, _ := c.node(0).n.notifier.Ready.Snapshot(ti, partitions)
		return parts[p].Ready
	})
	ownerN, otherN := c.node(owner), c.node(other)
	ownerID, otherID := ownerN.cfg.NodeID, otherN.cfg.NodeID
	beforeOwner, beforeOther := partitionRequestsServed(ownerN), partitionRequestsServed(otherN)
	m := c.node(0).consume("hop", "wait=1s")
	if m == nil || m.Partition != p {
		t.Fatalf("consume through %s: got %+v, want the record of partition %d", c.node(0).cfg.NodeID, m, p)
	}
	if got := partitionRequestsServed(ownerN) - beforeOwner; got != 1 {
		t.Fatalf("consume through %s: %s answered %d partition requests, want 1", c.node(0).cfg.NodeID, ownerID, got)
	}
	if got := partitionRequestsServed(otherN) - beforeOther; got != 0 {
		t.Fatalf("consume through %s: %s, which holds no record, answered %d partition requests, want 0", c.node(0).cfg.NodeID, otherID, got)
	}

	// A full scan asks every partition, one request per owner.
	c.node(owner).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/hop/produce?partition=%d", p), []byte("two"))
	c.waitFor("the second record to commit", func() bool {
		code, _ := c.node(owner).do("GET", fmt.Sprintf("/v1/topics/hop/consume?partition=%d&offset=1", p), nil)
		return code == http.StatusOK
	})
	beforeOwner, beforeOther = partitionRequestsServed(ownerN), partitionRequestsServed(otherN)
	if m := c.node(0).consume("hop", "wait=0"); m == nil || m.Partition != p {
		t.Fatalf("full scan through %s: got %+v, want the second record of partition %d", c.node(0).cfg.NodeID, m, p)
	}
	if got := partitionRequestsServed(ownerN) - beforeOwner; got != 1 {
		t.Fatalf("full scan through %s: %s answered %d partition requests, want 1", c.node(0).cfg.NodeID, ownerID, got)
	}
	if got := partitionRequestsServed(otherN) - beforeOther; got > 1 {
		t.Fatalf("full scan through %s: %s answered %d partition requests, want at most 1", c.node(0).cfg.NodeID, otherID, got)
	}
}

// A record whose lease a restart of its owner dropped is deliverable again
// with no commit: the partition announces itself as it opens, so a node
// that believed it empty asks it at once (not only at its next full scan,
// which this cluster never makes within a consume). The nodes keep no
// leases across a restart (LeasePersistedMax 0), so the record's lease dies
// with the kill; a node that keeps them opens with it leased.
func TestAPartitionThatOpensWithRecordsToDeliverIsAnnounced(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := newTestCluster(t, 3, func(i int, c *Config) {
		c.NodeID = fmt.Sprintf("open%d", i+1)
		c.ConsumeRescanInterval, c.ConsumeFullScanInterval = time.Minute, time.Minute
		c.Partition.LeasePersistedMax = 0
	})
	const partitions = 3
	c.node(0).createTopic("reopen", partitions)
	p, owner := c.ownedElsewhere(0, "reopen", partitions)
	c.believeAllEmpty(0, "reopen")
	c.node(owner).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/reopen/produce?partition=%d", p), []byte("once"))
	if m := c.node(0).consume("reopen", "wait=2s"); m == nil || m.Partition != p {
		t.Fatalf("consume through %s: got %+v, want the record of partition %d", c.node(0).cfg.NodeID, m, p)
	}
	// Leased, never acked: after the kill it is deliverable again.
	c.kill(owner)
	c.restart(owner)
	if m := c.node(0).consume("reopen", "wait=2s"); m == nil || m.Partition != p {
		t.Fatalf("consume through %s after %s restarted: got %+v, want the unacked record of partition %d again", c.node(0).cfg.NodeID, c.node(owner).cfg.NodeID, m, p)
	}
}

package actors

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
)

// The fault of issue 30: an ack reaches its owner through another node,
// the owner applies it, and the node that forwarded it dies before the
// client has its answer. The client retries the same handle through a node
// that lives: the owner remembers that handle's ack and answers 204, so the
// client does not give up a record that is acked for good. Another handle
// of the record still answers 410, and the record is not delivered again.
func TestClusterAnAckRetriedAfterItsRoutingNodeDiedAnswers204(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := newTestCluster(t, 3)
	c.waitFor("three members alive", func() bool { return len(c.memberStatuses(0)) == 3 })
	c.node(0).createTopic("retried", 3)
	owners, _ := ownersOf(t, c.node(0), "retried")
	p := -1
	for i, o := range owners {
		if o == "n1" {
			p = i
		}
	}
	if p < 0 {
		t.Fatalf("owners: got %v, want a partition on n1", owners)
	}
	c.node(0).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/retried/produce?partition=%d", p), []byte(`{"i":1}`))
	pinned := fmt.Sprintf("partition=%d&wait=2s", p)
	m := c.node(2).consume("retried", pinned) // n3 routes to n1
	if m == nil {
		t.Fatalf("consume of n1's partition %d through n3: got nothing, want the record", p)
	}
	ack := "/v1/topics/retried/ack?receipt_handle=" + url.QueryEscape(m.ReceiptHandle)
	c.node(2).must(http.StatusNoContent, "POST", ack, nil)

	c.kill(2) // n3, which forwarded the ack, dies; its answer counts as lost
	c.node(1).must(http.StatusNoContent, "POST", ack, nil)
	c.node(0).must(http.StatusNoContent, "POST", ack, nil)
	c.node(1).must(http.StatusGone, "POST", "/v1/topics/retried/ack?receipt_handle="+url.QueryEscape(otherHandle(t, m.ReceiptHandle)), nil)
	if again := c.node(1).consume("retried", fmt.Sprintf("partition=%d", p)); again != nil {
		t.Fatalf("consume after the retried acks: got %+v, want nothing (the record stays acked)", again)
	}
}

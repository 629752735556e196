package actors

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Issue 48 item 6: a topic whose name has the API's longest length (255
// bytes) is created, written and moved to another node, which serves every
// record. The move's staging copy used to be .moves/<topic>-<N>, past the
// file system's 255-byte name limit: the destination could not make it,
// and the move never ended.
func TestIssue48ATopicWithTheLongestNameMovesToAnotherNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	name := strings.Repeat("n", 250) + ".-_9Z"
	if len(name) != 255 {
		t.Fatalf("topic name of %d bytes, want 255", len(name))
	}
	c := moveTestCluster(t, newGate("no-such-topic", 0, false)) // no move is held
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"`+name+`","partitions":3}`))
	const records = 20
	for i := range records {
		c.node(i%3).must(http.StatusAccepted, "POST", "/v1/topics/"+name+"/produce?partition=0", fmt.Appendf(nil, `"r%d"`, i))
	}
	dest := c.destinationFor(name, 0)
	c.planMove(name, 0, dest)
	c.waitForOwner(dest, name, 0)
	c.waitFor(fmt.Sprintf("all %d records at the new owner", records), func() bool {
		hwm, ok := partitionHWM(c.node(dest), name, 0)
		return ok && hwm == records
	})
	if stagingExists(c.node(dest), name, 0) {
		t.Fatalf("n%d after the move: a staging copy is left, want it installed", dest+1)
	}
}

package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"testing"

	"github.com/naradmq/narad/messages"
)

// Issue 48: a member whose disk is lost for good is forgotten. Its
// partitions come back empty on the live members, from a floor above every
// offset it handed out, so a consumer reads only new records there and no
// record at an offset it saw; the other partitions keep theirs; and a node
// that joins takes the lost voter's place. In process, so the race
// detector watches the controller, the metastore and the partition actors
// do it together.
func TestClusterAForgottenMembersPartitionsComeBackEmptyAboveTheirFloor(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes")
	}
	c := newTestCluster(t, 3)
	lead := c.leader()
	gone := (lead + 1) % 3
	goneID := fmt.Sprintf("n%d", gone+1)
	c.node(lead).createTopic("ledger", 6)
	for p := range 6 {
		c.node(lead).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/ledger/produce?partition=%d", p), []byte(`"before"`))
	}
	store := c.node(lead).n.Store()
	topic, _ := store.Topic("ledger")
	c.waitFor("a record committed in each partition", func() bool {
		var d messages.TopicDetails
		code, b := c.node(lead).do("GET", "/v1/topics/ledger", nil)
		if code != http.StatusOK || json.Unmarshal(b, &d) != nil || len(d.PartitionStats) != 6 {
			return false
		}
		for _, s := range d.PartitionStats {
			if s.HighWatermark != 1 {
				return false
			}
		}
		return true
	})
	lost := map[int]bool{}
	for _, a := range store.Assignments(topic.Incarnation, topic.Partitions) {
		lost[a.Partition] = a.Owner == goneID
	}

	c.kill(gone)
	if err := os.RemoveAll(c.node(gone).cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	c.waitFor(goneID+" dead", func() bool { return c.memberStatuses(lead)[goneID] == messages.MemberDead })
	v, err := c.node(lead).n.Forget(context.Background(), goneID, false, true)
	if err != nil || v.Refusal != "" {
		t.Fatalf("forget %s: got %+v, %v; want it forgotten", goneID, v, err)
	}
	c.join()
	c.waitFor(goneID+" out of the members", func() bool { _, ok := store.Member(goneID); return !ok })

	for p := range 6 {
		c.node(lead).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/topics/ledger/produce?partition=%d", p), []byte(`"after"`))
		var got []*messages.MessageInfo
		c.waitFor(fmt.Sprintf("partition %d's new record", p), func() bool {
			m := c.node(lead).consume("ledger", fmt.Sprintf("partition=%d&wait=1s", p))
			if m == nil {
				return false
			}
			c.node(lead).must(http.StatusNoContent, "POST", "/v1/topics/ledger/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
			got = append(got, m)
			return string(m.Payload) == `"after"`
		})
		want := []string{`0 "before"`, `1 "after"`}
		if lost[p] {
			want = []string{fmt.Sprintf(`%d "after"`, messages.FloorGeneration)}
		}
		if len(got) != len(want) {
			t.Fatalf("partition %d (lost %v): got %d records, want %v", p, lost[p], len(got), want)
		}
		for i, m := range got {
			if s := fmt.Sprintf("%d %s", m.Offset, m.Payload); s != want[i] {
				t.Errorf("partition %d (lost %v) record %d: got %s, want %s", p, lost[p], i, s, want[i])
			}
		}
	}
	if !lost[0] && !lost[1] && !lost[2] && !lost[3] && !lost[4] && !lost[5] {
		t.Fatalf("%s owned none of ledger's partitions: the test proves nothing", goneID)
	}
}

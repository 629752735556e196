package actors

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/messages"
)

// The admin "moves" verb, asked for its summary, sums every live node's
// counters, whichever node answers; the /v1 listing has no summary.
func TestMovesSummaryOverTheAdminVerbSumsEveryLiveNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := newTestCluster(t, 3)
	// Each node sums the members its replica has: under load a replica
	// may not have the last registration yet.
	for _, tn := range c.nodes {
		waitFor(t, func() bool {
			alive := 0
			for _, m := range tn.n.store.Members() {
				if m.Status == messages.MemberAlive {
					alive++
				}
			}
			return alive == 3
		})
	}
	// The counters are the process's, by node label: earlier tests' nodes
	// of the same names count into them, so the want is read back.
	c.nodes[1].n.metrics.movesDone.Add(5)
	c.nodes[2].n.metrics.moveBytes.Add(1000)
	var done, copied int64
	for _, tn := range c.nodes {
		done += int64(tn.n.metrics.movesDone.Get())
		copied += int64(tn.n.metrics.moveBytes.Get())
	}
	nc, err := nats.Connect(c.nodes[0].cfg.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ask := func() messages.MoveList {
		t.Helper()
		msg, err := nc.Request("narad.test.admin.moves", []byte(`{"summary":true}`), 10*time.Second)
		if err != nil {
			t.Fatalf("admin moves: %v", err)
		}
		var out messages.MoveList
		if err := json.Unmarshal(msg.Data, &out); err != nil {
			t.Fatalf("admin moves body %s: %v", msg.Data, err)
		}
		return out
	}
	// Queue-group answers spread over the nodes: ask a few times, so that
	// more than one node gathers.
	for range 6 {
		got := ask().Summary
		want := messages.MoveSummary{Done: done, BytesCopied: copied, Nodes: 3}
		if got == nil || !reflect.DeepEqual(*got, want) {
			t.Fatalf("summary: got %+v, want %+v", got, want)
		}
	}
	if got := c.nodes[0].n.Moves(t.Context(), false); got.Summary != nil {
		t.Errorf("the /v1 listing: got summary %+v, want none", got.Summary)
	}

	// A node that stopped answers nothing: its share is left out, and
	// named until the leader marks it dead.
	c.kill(2)
	got := ask().Summary
	var done12 int64
	for _, tn := range c.nodes[:2] {
		done12 += int64(tn.n.metrics.movesDone.Get())
	}
	if got == nil || got.Nodes != 2 || got.Done != done12 || !(len(got.Missing) == 0 || slices.Equal(got.Missing, []string{"n3"})) {
		t.Fatalf("summary with n3 stopped: got %+v, want done %d from 2 nodes, n3 missing or marked dead", got, done12)
	}
}

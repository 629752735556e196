package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/produce"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

func TestProducedRecordIsConsumedAckedAndNotRedelivered(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("orders", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/orders/produce?key=k1", []byte(`{"id":1}`))
	m := tn.consume("orders", "wait=2s")
	if m == nil {
		t.Fatal("consume: got 204, want the produced record")
	}
	if string(m.Payload) != `{"id":1}` || m.Key != "k1" || m.Offset != 0 || m.ReceiptHandle == "" {
		t.Fatalf("message: got %+v, want payload {\"id\":1} key k1 offset 0 with a handle", m)
	}
	if want := produce.PartitionForKey("k1", 3); m.Partition != want {
		t.Fatalf("partition: got %d, want FNV-1a of the key mod 3 = %d", m.Partition, want)
	}
	tn.must(http.StatusNoContent, "POST", "/v1/topics/orders/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
	if again := tn.consume("orders", ""); again != nil {
		t.Fatalf("after ack: got %+v, want nothing", again)
	}
	// The same handle's ack again is a retry (204, issue 30); another
	// handle of the acked record is not.
	tn.must(http.StatusNoContent, "POST", "/v1/topics/orders/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
	tn.must(http.StatusGone, "POST", "/v1/topics/orders/ack?receipt_handle="+url.QueryEscape(otherHandle(t, m.ReceiptHandle)), nil)
}

// The lease tests run the node's leases on a clock they move: a lease
// lapses when the test says, however slow the machine.

func TestExpiredLeaseIsRedeliveredWithANewHandle(t *testing.T) {
	clk := newFakeClock()
	tn := newTestNode(t, func(c *Config) { c.clock = clk })
	tn.must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"jobs","visibility_timeout_ms":200}`))
	tn.must(http.StatusAccepted, "POST", "/v1/topics/jobs/produce", []byte("work"))
	first := tn.consume("jobs", "wait=2s")
	if first == nil {
		t.Fatal("first consume: got nothing")
	}
	clk.Advance(199 * time.Millisecond)
	if m := tn.consume("jobs", ""); m != nil {
		t.Fatalf("1 ms before the lease ends: got %+v, want nothing", m)
	}
	clk.Advance(time.Millisecond)
	second := tn.consume("jobs", "")
	if second == nil || second.Offset != first.Offset || second.ReceiptHandle == first.ReceiptHandle {
		t.Fatalf("after the lease expired: got %+v, want offset %d with a new handle", second, first.Offset)
	}
	tn.must(http.StatusGone, "POST", "/v1/topics/jobs/ack?receipt_handle="+url.QueryEscape(first.ReceiptHandle), nil)
	tn.must(http.StatusNoContent, "POST", "/v1/topics/jobs/ack?receipt_handle="+url.QueryEscape(second.ReceiptHandle), nil)
}

func TestNackMakesTheRecordRedeliverableAtOnce(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("q", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/q/produce", []byte("x"))
	m := tn.consume("q", "wait=2s")
	tn.must(http.StatusNoContent, "POST", "/v1/topics/q/ack?extend=0&receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
	again := tn.consume("q", "")
	if again == nil || again.Offset != m.Offset {
		t.Fatalf("after nack: got %+v, want offset %d again", again, m.Offset)
	}
	tn.must(http.StatusGone, "POST", "/v1/topics/q/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
}

func TestExtendKeepsTheLeaseAlive(t *testing.T) {
	clk := newFakeClock()
	tn := newTestNode(t, func(c *Config) { c.clock = clk })
	tn.must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"slow","visibility_timeout_ms":300}`))
	tn.must(http.StatusAccepted, "POST", "/v1/topics/slow/produce", []byte("x"))
	m := tn.consume("slow", "wait=2s")
	if m == nil {
		t.Fatal("first consume: got nothing")
	}
	for i := range 4 {
		clk.Advance(150 * time.Millisecond) // past the original lease after two rounds
		tn.must(http.StatusNoContent, "POST", "/v1/topics/slow/ack?extend=true&receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
		if other := tn.consume("slow", ""); other != nil {
			t.Fatalf("after extend %d: got %+v delivered again, want nothing", i+1, other)
		}
	}
	// An extend renews for the visibility timeout from its own time.
	clk.Advance(300 * time.Millisecond)
	again := tn.consume("slow", "")
	if again == nil || again.Offset != m.Offset {
		t.Fatalf("300 ms after the last extend: got %+v, want offset %d again", again, m.Offset)
	}
	tn.must(http.StatusGone, "POST", "/v1/topics/slow/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
}

func TestReplayReadsByOffsetWithoutAHandle(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("log", 3)
	for i := 0; i < 3; i++ {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/log/produce?partition=1", []byte(fmt.Sprintf("r%d", i)))
	}
	waitFor(t, func() bool { return tn.consume("log", "partition=1&offset=2") != nil })
	m := tn.consume("log", "partition=1&offset=1")
	if m == nil || string(m.Payload) != `"r1"` || m.ReceiptHandle != "" {
		t.Fatalf("replay: got %+v, want payload \"r1\" and no handle", m)
	}
	if m := tn.consume("log", "partition=1&offset=3"); m != nil {
		t.Fatalf("replay at the HWM: got %+v, want 204", m)
	}
}

func TestSchemaTopicRefusesAProduceThatDoesNotValidate(t *testing.T) {
	tn := newTestNode(t)
	tn.must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"typed","schema":{"type":"object","required":["id"],"properties":{"id":{"type":"integer"}}}}`))
	tn.must(http.StatusAccepted, "POST", "/v1/topics/typed/produce", []byte(`{"id":7}`))
	code, body := tn.do("POST", "/v1/topics/typed/produce", []byte(`{"id":"seven"}`))
	if code != http.StatusBadRequest || !strings.Contains(string(body), "invalid argument") {
		t.Fatalf("invalid body: got %d %s, want 400 invalid argument", code, body)
	}
	tn.must(http.StatusBadRequest, "POST", "/v1/topics/typed/produce", []byte(`not json`))
}

func TestTopicLifecycleAndStats(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("a", 4)
	tn.must(http.StatusConflict, "POST", "/v1/topics", []byte(`{"name":"a"}`))
	tn.must(http.StatusAccepted, "POST", "/v1/topics/a/produce?partition=2", []byte("x"))
	waitFor(t, func() bool { return tn.consume("a", "partition=2&offset=0") != nil })
	var details messages.TopicDetails
	json.Unmarshal(tn.must(http.StatusOK, "GET", "/v1/topics/a", nil), &details)
	if details.Partitions != 4 || len(details.PartitionStats) != 4 || details.Role != "standalone" {
		t.Fatalf("details: got %+v, want 4 partitions with 4 stats", details)
	}
	if ps := details.PartitionStats[2]; ps.HighWatermark != 1 || ps.NextOffset != 1 || ps.Segments != 1 || ps.OwnerNode != "n1" {
		t.Fatalf("partition 2 stats: got %+v, want hwm 1, one segment, owner n1", ps)
	}
	tn.must(http.StatusOK, "PATCH", "/v1/topics/a", []byte(`{"partitions":6}`))
	json.Unmarshal(tn.must(http.StatusOK, "GET", "/v1/topics/a", nil), &details)
	if details.Partitions != 6 {
		t.Fatalf("after growing: %d partitions, want 6", details.Partitions)
	}
	tn.must(http.StatusNoContent, "DELETE", "/v1/topics/a", nil)
	tn.must(http.StatusNotFound, "GET", "/v1/topics/a", nil)
	tn.createTopic("a", 3)
	if m := tn.consume("a", "partition=2&offset=0"); m != nil {
		t.Fatalf("recreated topic shows the old record: %+v", m)
	}
}

func TestRecordsSurviveAGracefulRestart(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("keep", 3)
	for i := 0; i < 20; i++ {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/keep/produce", []byte(fmt.Sprintf("m%d", i)))
	}
	acked := 0
	for i := 0; i < 5; i++ {
		m := tn.consume("keep", "wait=2s")
		tn.must(http.StatusNoContent, "POST", "/v1/topics/keep/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
		acked++
	}
	tn.restart()
	seen := map[string]bool{}
	for {
		m := tn.consume("keep", "wait=500ms")
		if m == nil {
			break
		}
		seen[string(m.Payload)] = true
		tn.must(http.StatusNoContent, "POST", "/v1/topics/keep/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil)
	}
	if len(seen) != 20-acked {
		t.Fatalf("after restart: got %d distinct records, want %d (the unacked ones)", len(seen), 20-acked)
	}
}

// waitFor polls cond until it holds; the bound is generous because it is a
// liveness check, not a timing assertion.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testnet.Eventually(t, clusterWaitBound, "the condition", cond)
}

// A controller that stopped between a topic's create and its placement
// left partitions without an owner: the controller that next wins the
// metadata leadership (here the same node, restarted) places them.
func TestATopicLeftUnplacedIsPlacedAtTheNextStart(t *testing.T) {
	tn := newTestNode(t)
	created, err := tn.n.store.CreateTopic(context.Background(), messages.Topic{Name: "orphan", Partitions: 3,
		RetentionMs: 3_600_000, VisibilityTimeoutMs: 30_000, MaxInFlightPerPartition: 1024, MaxAckedAheadPerPartition: 1024})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(tn.n.store.Assignments(created.Incarnation, 3)); got != 0 {
		t.Fatalf("test setup: %d partitions placed, want none", got)
	}
	tn.restart()
	waitFor(t, func() bool { return len(tn.n.store.Assignments(created.Incarnation, 3)) == 3 })
	tn.must(http.StatusAccepted, "POST", "/v1/topics/orphan/produce?partition=2", []byte("x"))
	// The partition answers 503 until its actor runs, then 204 until the
	// record is committed, then 200.
	waitFor(t, func() bool {
		code, _ := tn.do("GET", "/v1/topics/orphan/consume?partition=2&offset=0", nil)
		return code == http.StatusOK
	})
}

package actors

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/naradmq/narad/messages"
)

// The batch routes on a node, end to end: a produce batch whose records
// one schema refuses alone, the rest durable in one WAL group and all
// consumable; a consume batch that leases up to max of them; an ack batch
// that settles them, a handle acked twice answered 204 again and a stale
// one 410, each alone.
func TestBatchesProduceConsumeAndAckManyRecordsEachAnsweredAlone(t *testing.T) {
	tn := newTestNode(t)
	tn.must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"b","partitions":3,"schema":{"type":"object","required":["n"]}}`))
	waitFor(t, func() bool {
		var d messages.TopicDetails
		json.Unmarshal(tn.must(http.StatusOK, "GET", "/v1/topics/b", nil), &d)
		return len(d.PartitionStats) == 3
	})
	var recs []string
	for i := range 100 {
		if i == 37 {
			recs = append(recs, `{"payload":{"m":37}}`) // no "n": the schema refuses it
			continue
		}
		recs = append(recs, fmt.Sprintf(`{"key":"k%d","payload":{"n":%d}}`, i%7, i))
	}
	syncs := tn.n.wal.Stats().Syncs
	var prod messages.ProduceBatchResponse
	json.Unmarshal(tn.must(http.StatusOK, "POST", "/v1/topics/b/produce/batch", []byte(`{"records":[`+strings.Join(recs, ",")+`]}`)), &prod)
	if prod.Accepted != 99 || prod.Results[37].Status != http.StatusBadRequest || !strings.HasPrefix(prod.Results[37].Error, "invalid argument: ") || prod.Results[36].Status != http.StatusAccepted {
		t.Fatalf("produce batch: got %d accepted, record 37 %+v, want 99 and record 37 refused by the schema alone", prod.Accepted, prod.Results[37])
	}
	if got := tn.n.wal.Stats().Syncs - syncs; got > 3 {
		t.Fatalf("WAL fsyncs for a batch of 99 records: got %d, want a few (one group commit)", got)
	}

	seen := map[string]bool{}
	var handles []string
	for len(seen) < 99 {
		code, body := tn.do("GET", "/v1/topics/b/consume/batch?max=40&wait=2s", nil)
		if code != http.StatusOK {
			t.Fatalf("consume batch with %d of 99 seen: got %d %s, want 200", len(seen), code, body)
		}
		var got messages.ConsumeBatchResponse
		json.Unmarshal(body, &got)
		if len(got.Messages) == 0 || len(got.Messages) > 40 {
			t.Fatalf("consume batch: got %d messages, want 1 to 40", len(got.Messages))
		}
		for _, m := range got.Messages {
			if seen[string(m.Payload)] {
				t.Fatalf("consume batch: %s leased twice under leases that have not expired", m.Payload)
			}
			seen[string(m.Payload)] = true
			handles = append(handles, m.ReceiptHandle)
		}
	}
	if code, body := tn.do("GET", "/v1/topics/b/consume/batch?max=10", nil); code != http.StatusNoContent {
		t.Fatalf("consume batch with every record leased: got %d %s, want 204", code, body)
	}

	ackBatch := func(hs []string) messages.AckBatchResponse {
		b, _ := json.Marshal(messages.AckBatchRequest{ReceiptHandles: hs})
		var out messages.AckBatchResponse
		json.Unmarshal(tn.must(http.StatusOK, "POST", "/v1/topics/b/ack/batch", b), &out)
		return out
	}
	stale := "0:9999:1"
	got := ackBatch(append(append([]string(nil), handles...), handles[0], stale))
	for i, r := range got.Results[:len(handles)+1] {
		if r.Status != http.StatusNoContent {
			t.Fatalf("ack of handle %d: got %+v, want 204 (the last, the first handle again: 204 too)", i, r)
		}
	}
	if r := got.Results[len(handles)+1]; r.Status != http.StatusGone {
		t.Fatalf("ack of a handle that matches no lease: got %+v, want 410", r)
	}
	if code, body := tn.do("GET", "/v1/topics/b/consume?wait=0", nil); code != http.StatusNoContent {
		t.Fatalf("consume after the ack batch: got %d %s, want 204: every record acked", code, body)
	}
}

package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/naradmq/narad/messages"
)

// A produce batch answers each record alone: the ones that do not decode
// are refused with their one-record texts, the others go to the node
// together, each encoding giving the bytes it names.
func TestAProduceBatchAnswersEachRecordAlone(t *testing.T) {
	f := readyNode()
	body := `{"records":[
		{"payload":{"a":1}},
		{"key":"k","partition":2,"payload":"plain text","payload_encoding":"text"},
		{"payload":"AAEC/w==","payload_encoding":"base64"},
		{"payload":"not base64!","payload_encoding":"base64"},
		{"payload":"x","payload_encoding":"gzip"},
		{"payload":{"b":2},"partition":-1},
		{"key":"no payload"},
		{"payload":1,"payload_encoding":"text"},
		{"payload":"","payload_encoding":"text"}
	]}`
	code, out := serve(t, f, "POST", "/v1/topics/t/produce/batch", body)
	var got messages.ProduceBatchResponse
	if code != http.StatusOK || json.Unmarshal([]byte(out), &got) != nil {
		t.Fatalf("batch: got %d %s, want 200 and results", code, out)
	}
	want := []messages.BatchResult{
		{Status: 202}, {Status: 202}, {Status: 202},
		{Status: 400, Error: "invalid argument: payload is not standard base64: illegal base64 data at input byte 3"},
		{Status: 400, Error: `invalid argument: payload_encoding "gzip": want text, base64 or none`},
		{Status: 400, Error: textBadPartition},
		{Status: 400, Error: "message required"},
		{Status: 400, Error: `invalid argument: a payload encoded "text" must be a JSON string`},
		{Status: 400, Error: "message required"},
	}
	if got.Accepted != 3 || fmt.Sprint(got.Results) != fmt.Sprint(want) {
		t.Fatalf("results: got %d accepted %+v, want 3 accepted %+v", got.Accepted, got.Results, want)
	}
	recs := f.got.([]Record)
	if len(recs) != 3 || string(recs[0].Body) != `{"a":1}` || string(recs[1].Body) != "plain text" ||
		recs[1].Key != "k" || recs[1].Partition != 2 || string(recs[2].Body) != "\x00\x01\x02\xff" || recs[0].Partition != -1 {
		t.Fatalf("records to the node: got %+v, want the three that decode, with their bytes", recs)
	}
}

// Each record's refusal by the node has the one-record produce's status
// and text.
func TestAProduceBatchMapsTheNodesRefusalsPerRecord(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		text   string
	}{
		{fmt.Errorf("x: %w", ErrNotFound), 404, textTopicNotFound},
		{fmt.Errorf("x: %w", ErrTooLarge), 413, textTooLarge},
		{Invalid("does not match the schema"), 400, "invalid argument: does not match the schema"},
		{fmt.Errorf("x: %w", ErrIngressFull), 503, "ingress queue full; retry later"},
	} {
		f := readyNode()
		f.err = tc.err
		code, out := serve(t, f, "POST", "/v1/topics/t/produce/batch", `{"records":[{"payload":1},{"payload":2}]}`)
		var got messages.ProduceBatchResponse
		json.Unmarshal([]byte(out), &got)
		if code != 200 || got.Accepted != 0 || len(got.Results) != 2 || got.Results[1] != (messages.BatchResult{Status: tc.status, Error: tc.text}) {
			t.Fatalf("node refuses with %v: got %d %s, want 200 and each record %d %q", tc.err, code, out, tc.status, tc.text)
		}
	}
}

// A batch that cannot be read is refused whole, and says why.
func TestABatchPastItsLimitsIsRefusedWhole(t *testing.T) {
	f := readyNode()
	h := Handler(f, Options{MaxBatchRecords: 2, MaxBatchBytes: 1 << 20})
	do := func(method, target, body string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, target, strings.NewReader(body)))
		return rec.Code, rec.Body.String()
	}
	code, body := do("POST", "/v1/topics/t/produce/batch", `{"records":[{"payload":1},{"payload":2},{"payload":3}]}`)
	wantError(t, "three records past a limit of two", code, body, 413, "batch of 3 records: at most 2")
	code, body = do("POST", "/v1/topics/t/ack/batch", `{"receipt_handles":["0:1:1","0:2:1","0:3:1"]}`)
	wantError(t, "three handles past a limit of two", code, body, 413, "batch of 3 handles: at most 2")
	code, body = do("GET", "/v1/topics/t/consume/batch?max=3", "")
	wantError(t, "a max past the limit", code, body, 413, "batch of 3 records: at most 2")
	code, body = do("POST", "/v1/topics/t/produce/batch", `{"records":[{"payload":"`+strings.Repeat("x", 1<<20)+`"}]}`)
	wantError(t, "a body past 1 MiB", code, body, 413, "batch request body past 1048576 bytes")
	code, body = do("POST", "/v1/topics/t/produce/batch", `{"records":[{"payload":1}],"extra":true}`)
	wantError(t, "an unknown field", code, body, 400, `invalid json: json: unknown field "extra"`)
	f.admit = fmt.Errorf("x: %w", ErrDraining)
	code, body = do("POST", "/v1/topics/t/produce/batch", `{"records":[{"payload":1}]}`)
	wantError(t, "a draining node", code, body, 503, "node is being decommissioned; produce to another node")
}

func TestAConsumeBatchTakesAMaxAndNoOffset(t *testing.T) {
	f := readyNode()
	f.delivery = messages.Delivery{Partition: 1, Offset: 4, Body: []byte(`{"a":1}`), Nonce: 9}
	code, body := serve(t, f, "GET", "/v1/topics/t/consume/batch?max=5", "")
	var got messages.ConsumeBatchResponse
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || len(got.Messages) != 1 ||
		got.Messages[0].ReceiptHandle != "1:4:9" || string(got.Messages[0].Payload) != `{"a":1}` {
		t.Fatalf("consume batch: got %d %s, want 200 and the leased record with its handle", code, body)
	}
	f.found = false
	if code, body := serve(t, f, "GET", "/v1/topics/t/consume/batch?max=5", ""); code != http.StatusNoContent {
		t.Fatalf("consume batch of nothing: got %d %s, want 204", code, body)
	}
	for _, q := range []string{"", "max=0", "max=x"} {
		code, body := serve(t, f, "GET", "/v1/topics/t/consume/batch?"+q, "")
		wantError(t, "max "+q, code, body, 400, fmt.Sprintf("invalid argument: max must be an integer from 1 to %d", DefaultMaxBatchRecords))
	}
	code, body = serve(t, f, "GET", "/v1/topics/t/consume/batch?max=2&partition=0&offset=3", "")
	wantError(t, "an offset", code, body, 400, "invalid argument: a batch consume takes no offset: replay reads one record at a time")
}

func TestAnAckBatchAnswersEachHandleAlone(t *testing.T) {
	f := readyNode()
	f.err = fmt.Errorf("x: %w", ErrGone)
	code, body := serve(t, f, "POST", "/v1/topics/t/ack/batch", `{"receipt_handles":["0:1:1","bad",""],"action":"nack"}`)
	var got messages.AckBatchResponse
	want := []messages.BatchResult{{Status: 410, Error: textStaleHandle}, {Status: 400, Error: "receipt handle is malformed"}, {Status: 400, Error: "receipt_handle required"}}
	if code != 200 || json.Unmarshal([]byte(body), &got) != nil || fmt.Sprint(got.Results) != fmt.Sprint(want) {
		t.Fatalf("ack batch: got %d %s, want 200 and %+v", code, body, want)
	}
	if hs := f.got.([]Handle); len(hs) != 1 || hs[0] != (Handle{Partition: 0, Offset: 1, Nonce: 1}) {
		t.Fatalf("handles to the node: got %+v, want the one that parses", hs)
	}
	code, body = serve(t, f, "POST", "/v1/topics/t/ack/batch", `{"receipt_handles":["0:1:1"],"action":"drop"}`)
	wantError(t, "an unknown action", code, body, 400, `invalid argument: action "drop": want ack, extend or nack`)
}

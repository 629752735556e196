package actors

// The node held to its OpenAPI description (actors/api/openapi.json). The
// test nodes' clients (newTestNode, newTestCluster) carry a transport that
// checks every answer of a described route against it (status, headers,
// body), so the contract tests and every other test of the API hold the
// description to what the node sends. And the client generated from it
// (cmd/narad/apiclient) runs the README's walk-through against a node.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cmd/narad/apiclient"
)

// openapiRouter is the description's router, loaded once per test binary.
var openapiRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPIDocument())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	// Any host: the tests' nodes listen on ports of their own.
	doc.Servers = nil
	return gorillamux.NewRouter(doc)
})

// openapiBodies compiles the description's answer bodies as JSON Schemas
// (OpenAPI 3.1's schemas are JSON Schema 2020-12), each once per test
// binary: kin-openapi compiles a schema at every answer it checks, a
// millisecond of CPU each, which the tests' loads of thousands of
// records would pay on a busy machine.
type openapiBodies struct {
	compiler *jsonschema.Compiler
	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema // by JSON pointer
}

// openapiDocURL names the description as a JSON Schema resource.
const openapiDocURL = "file:///openapi.json"

var openapiBodySchemas = sync.OnceValues(func() (*openapiBodies, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.OpenAPIDocument()))
	if err != nil {
		return nil, err
	}
	// The description leaves its answers open, as a client must read them
	// (the contract welcomes new fields); here they are closed, so that a
	// field the node sends and the description lacks fails the test.
	components, _ := doc.(map[string]any)["components"].(map[string]any)
	schemas, _ := components["schemas"].(map[string]any)
	for _, s := range schemas {
		obj, _ := s.(map[string]any)
		if _, open := obj["additionalProperties"]; obj["properties"] != nil && !open {
			obj["additionalProperties"] = false
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(openapiDocURL, doc); err != nil {
		return nil, err
	}
	return &openapiBodies{compiler: c, compiled: map[string]*jsonschema.Schema{}}, nil
})

// schema is the compiled schema at pointer (a JSON pointer into the
// description).
func (b *openapiBodies) schema(pointer string) (*jsonschema.Schema, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.compiled[pointer]; ok {
		return s, nil
	}
	s, err := b.compiler.Compile(openapiDocURL + "#" + pointer)
	if err != nil {
		return nil, err
	}
	b.compiled[pointer] = s
	return s, nil
}

// pointerEscape escapes a JSON pointer's token (RFC 6901).
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

// openapiChecked is next with every answer to a described route and
// method checked against the description; a mismatch fails t. An answer
// to anything else (the mux's 404 and 405) passes unchecked.
type openapiChecked struct {
	t      testing.TB
	next   http.RoundTripper
	router routers.Router
	bodies *openapiBodies
}

func checkOpenAPI(t testing.TB, next http.RoundTripper) *openapiChecked {
	t.Helper()
	router, err := openapiRouter()
	if err != nil {
		t.Fatalf("load the OpenAPI description: %v", err)
	}
	bodies, err := openapiBodySchemas()
	if err != nil {
		t.Fatalf("load the OpenAPI description's schemas: %v", err)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &openapiChecked{t: t, next: next, router: router, bodies: bodies}
}

func (c *openapiChecked) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp, nil // the caller reads the same error from the body
	}
	if err := c.check(req, route, params, resp, body); err != nil {
		c.t.Errorf("%s %s: got %d %q, not an answer openapi.json describes: %v", req.Method, req.URL.RequestURI(), resp.StatusCode, body, err)
	}
	return resp, nil
}

// check holds one answer to its operation's description: kin-openapi
// checks the status and the headers, and the body is checked here.
func (c *openapiChecked) check(req *http.Request, route *routers.Route, params map[string]string, resp *http.Response, body []byte) error {
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: true},
	}
	if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
		return err
	}
	status := strconv.Itoa(resp.StatusCode)
	ref := route.Operation.Responses.Status(resp.StatusCode)
	pointer := "/paths/" + pointerEscape.Replace(route.Path) + "/" + strings.ToLower(route.Method) + "/responses/" + status
	if ref.Ref != "" {
		pointer = strings.TrimPrefix(ref.Ref, "#")
	}
	content := ref.Value.Content
	if len(content) == 0 {
		if len(body) > 0 {
			return fmt.Errorf("status %s is described without a body, got %d bytes", status, len(body))
		}
		return nil
	}
	ct := resp.Header.Get("Content-Type")
	mediaType := ""
	for mt := range content {
		if content.Get(ct) == content[mt] {
			mediaType = mt
		}
	}
	if mediaType == "" {
		return fmt.Errorf("content type %q is not described for status %s", ct, status)
	}
	if !strings.HasPrefix(mediaType, "application/json") {
		return nil
	}
	schema, err := c.bodies.schema(pointer + "/content/" + pointerEscape.Replace(mediaType) + "/schema")
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("body is not JSON: %w", err)
	}
	return schema.Validate(v)
}

// CloseIdleConnections passes on to next, as the client's own would.
func (c *openapiChecked) CloseIdleConnections() {
	if ci, ok := c.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func TestTheOpenAPICheckFailsAnAnswerTheDescriptionLacks(t *testing.T) {
	for _, tc := range []struct {
		what, method, path string
		status             int
		contentType, body  string
		fails              bool
	}{
		{"the contract's answer", "GET", "/v1/cluster/members", 200, "application/json", `{"members":[]}` + "\n", false},
		{"a field the description lacks", "GET", "/v1/cluster/members", 200, "application/json", `{"members":[],"extra":1}` + "\n", true},
		{"a field of the wrong type", "GET", "/v1/cluster/members", 200, "application/json", `{"members":{}}` + "\n", true},
		{"a status the route does not answer", "GET", "/v1/cluster/members", http.StatusTeapot, "application/json", `{"error":"x"}` + "\n", true},
		{"an error body", "GET", "/v1/topics/t", 404, "application/json", `{"error":"topic not found"}` + "\n", false},
		{"an error without its key", "GET", "/v1/topics/t", 404, "application/json", `{}` + "\n", true},
		{"text where JSON is described", "GET", "/v1/topics/t", 404, "text/plain", "topic not found\n", true},
		{"no body where none is described", "POST", "/v1/topics/t/ack?receipt_handle=0:0:1", 204, "", "", false},
		{"a body where none is described", "POST", "/v1/topics/t/ack?receipt_handle=0:0:1", 204, "application/json", "{}\n", true},
		{"the mux's 404, not a described route", "GET", "/v1/nope", 404, "text/plain", "404 page not found\n", false},
	} {
		srv := &fakeAnswer{status: tc.status, contentType: tc.contentType, body: tc.body}
		rec := &recordingTB{TB: t}
		client := &http.Client{Transport: checkOpenAPI(rec, srv)}
		req, err := http.NewRequest(tc.method, "http://node.test"+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if rec.failed != tc.fails {
			t.Errorf("%s: check failed %v (%s), want %v", tc.what, rec.failed, rec.msg, tc.fails)
		}
	}
}

// fakeAnswer answers every request with status and body, of contentType.
type fakeAnswer struct {
	status            int
	contentType, body string
}

func (f *fakeAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	h := http.Header{}
	if f.contentType != "" {
		h.Set("Content-Type", f.contentType)
	}
	return &http.Response{StatusCode: f.status, Header: h, Body: io.NopCloser(bytes.NewReader([]byte(f.body))), Request: req}, nil
}

// recordingTB records an Errorf instead of failing the test.
type recordingTB struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}

// The README's walk-through ("Try it"), step by step, with the client
// generated from the description (cmd/narad/apiclient) against a real
// node: what it compiles from the description must talk to the node.
func TestTheGeneratedClientRunsTheReadmeWalkThrough(t *testing.T) {
	tn := newTestNode(t)
	t.Cleanup(tn.http.CloseIdleConnections)
	c, err := apiclient.NewClientWithResponses(tn.base, apiclient.WithHTTPClient(tn.http))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	doc, err := c.GetOpenAPIWithResponse(ctx)
	if err != nil || doc.StatusCode() != http.StatusOK || !bytes.Equal(doc.Body, api.OpenAPIDocument()) {
		t.Fatalf("GET /v1/openapi.json: got %v %v, want 200 and the description", doc.StatusCode(), err)
	}

	// create a topic (3 partitions by default), and wait until each has an owner
	created, err := c.CreateTopicWithResponse(ctx, apiclient.CreateTopicRequest{Name: "orders"})
	if err != nil || created.JSON201 == nil || created.JSON201.Partitions != 3 {
		t.Fatalf("create orders: got %v %s, want 201 with 3 partitions", err, created.Body)
	}
	testnet.Eventually(t, clusterWaitBound, "orders has an owner for each partition", func() bool {
		d, err := c.GetTopicWithResponse(ctx, "orders", nil)
		return err == nil && d.JSON200 != nil && len(d.JSON200.PartitionStats) == 3
	})

	// produce: 202 once the record is fsynced in the node's ingress WAL
	produce := func(topic, key, body string) *apiclient.ProduceResponse {
		t.Helper()
		params := &apiclient.ProduceParams{}
		if key != "" {
			params.Key = &key
		}
		r, err := c.ProduceWithBodyWithResponse(ctx, topic, params, "application/octet-stream", strings.NewReader(body))
		if err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
		return r
	}
	if r := produce("orders", "customer-7", `{"id":1}`); r.StatusCode() != http.StatusAccepted {
		t.Fatalf("produce: got %d %s, want 202", r.StatusCode(), r.Body)
	}

	// consume one message under a lease, waiting up to 5 s
	consume := func(topic string, params *apiclient.ConsumeParams) *apiclient.ConsumeResponse {
		t.Helper()
		r, err := c.ConsumeWithResponse(ctx, topic, params)
		if err != nil {
			t.Fatalf("consume from %s: %v", topic, err)
		}
		return r
	}
	m := consume("orders", &apiclient.ConsumeParams{Wait: new("5s")})
	if m.JSON200 == nil || m.JSON200.Key == nil || *m.JSON200.Key != "customer-7" || m.JSON200.ReceiptHandle == nil || payloadID(m.JSON200.Payload) != 1 {
		t.Fatalf("consume: got %d %s, want 200 key customer-7, payload {\"id\":1} and a receipt handle", m.StatusCode(), m.Body)
	}
	msg := *m.JSON200

	// ack it with the receipt handle; an ack retried with the same handle answers 204 again
	for _, try := range []string{"ack", "the same ack again"} {
		r, err := c.AckWithResponse(ctx, "orders", &apiclient.AckParams{ReceiptHandle: *msg.ReceiptHandle})
		if err != nil || r.StatusCode() != http.StatusNoContent {
			t.Fatalf("%s: got %v %d %s, want 204", try, err, r.StatusCode(), r.Body)
		}
	}

	// partition stats, replay by offset (no lease, no handle)
	d, err := c.GetTopicWithResponse(ctx, "orders", &apiclient.GetTopicParams{Partition: &msg.Partition})
	if err != nil || d.JSON200 == nil || len(d.JSON200.PartitionStats) != 1 || d.JSON200.PartitionStats[0].HighWatermark != 1 {
		t.Fatalf("describe orders, partition %d: got %v %s, want one entry with high_watermark 1", msg.Partition, err, d.Body)
	}
	replay := consume("orders", &apiclient.ConsumeParams{Partition: &msg.Partition, Offset: new(int64(0))})
	if replay.JSON200 == nil || replay.JSON200.ReceiptHandle != nil || payloadID(replay.JSON200.Payload) != 1 {
		t.Fatalf("replay %d:0: got %d %s, want 200 payload {\"id\":1} without a handle", msg.Partition, replay.StatusCode(), replay.Body)
	}

	// batches: many records a request, each answered alone
	text := apiclient.BatchRecordPayloadEncodingText
	batch, err := c.ProduceBatchWithResponse(ctx, "orders", apiclient.ProduceBatchRequest{Records: []apiclient.BatchRecord{
		{Key: new("a"), Payload: map[string]int{"id": 2}},
		{Payload: "some text", PayloadEncoding: &text},
	}})
	if err != nil || batch.JSON200 == nil || batch.JSON200.Accepted != 2 {
		t.Fatalf("produce batch: got %v %s, want 200 accepted 2", err, batch.Body)
	}
	var handles []string
	testnet.Eventually(t, clusterWaitBound, "a batch consume leases both records", func() bool {
		r, err := c.ConsumeBatchWithResponse(ctx, "orders", &apiclient.ConsumeBatchParams{Max: 10, Wait: new("1s")})
		if err != nil {
			t.Fatalf("consume batch: %v", err)
		}
		if r.JSON200 != nil {
			for _, m := range r.JSON200.Messages {
				handles = append(handles, *m.ReceiptHandle)
			}
		}
		return len(handles) >= 2
	})
	acked, err := c.AckBatchWithResponse(ctx, "orders", apiclient.AckBatchRequest{ReceiptHandles: handles})
	if err != nil || acked.JSON200 == nil || len(acked.JSON200.Results) != len(handles) {
		t.Fatalf("ack batch of %d: got %v %s, want 200 with a result each", len(handles), err, acked.Body)
	}
	for i, res := range acked.JSON200.Results {
		if res.Status != http.StatusNoContent {
			t.Errorf("ack batch, handle %d: got %d %v, want 204", i, res.Status, res.Error)
		}
	}

	// fan-out: a child that sees everything, and one that sees each record
	// later (an hour here rather than the README's 10 s, so that "nothing
	// yet" holds however slow the machine)
	audit, err := c.CreateTopicWithResponse(ctx, apiclient.CreateTopicRequest{Name: "audit", Parent: new("orders")})
	if err != nil || audit.JSON201 == nil || audit.JSON201.Parent == nil || *audit.JSON201.Parent != "orders" {
		t.Fatalf("create audit as a child of orders: got %v %s, want 201 with parent orders", err, audit.Body)
	}
	later, err := c.CreateTopicWithResponse(ctx, apiclient.CreateTopicRequest{Name: "orders-later", Parent: new("orders"), FanoutDelayMs: new(int64(3_600_000))})
	if err != nil || later.JSON201 == nil || later.JSON201.FanoutDelayMs == nil || *later.JSON201.FanoutDelayMs != 3_600_000 {
		t.Fatalf("create orders-later: got %v %s, want 201 with fanout_delay_ms 3600000", err, later.Body)
	}
	if r := produce("orders", "customer-7", `{"id":3}`); r.StatusCode() != http.StatusAccepted {
		t.Fatalf("produce to orders: got %d %s, want 202", r.StatusCode(), r.Body)
	}
	var copied *apiclient.Message
	testnet.Eventually(t, clusterWaitBound, "audit gets its copy", func() bool {
		if r := consume("audit", &apiclient.ConsumeParams{Wait: new("1s")}); r.JSON200 != nil {
			copied = r.JSON200
		}
		return copied != nil
	})
	if payloadID(copied.Payload) != 3 || copied.Key == nil || *copied.Key != "customer-7" {
		t.Errorf("audit's copy: got key %v payload %v, want customer-7 {\"id\":3}", copied.Key, copied.Payload)
	}
	if r := consume("orders-later", nil); r.StatusCode() != http.StatusNoContent {
		t.Errorf("orders-later before its delay: got %d %s, want 204", r.StatusCode(), r.Body)
	}
	kids, err := c.ListChildrenWithResponse(ctx, "orders")
	if err != nil || kids.JSON200 == nil || len(kids.JSON200.Children) != 2 || kids.JSON200.Children[0].Name != "audit" || kids.JSON200.Children[1].Name != "orders-later" {
		t.Fatalf("children of orders: got %v %s, want audit and orders-later", err, kids.Body)
	}

	// a delay child takes no produce of its own: the error comes typed
	if r := produce("orders-later", "", `{"id":4}`); r.JSON409 == nil || r.JSON409.Error == "" {
		t.Errorf("produce to a delay child: got %d %s, want 409 with an error", r.StatusCode(), r.Body)
	}
	detach, err := c.DetachChildWithResponse(ctx, "orders", "audit")
	if err != nil || detach.StatusCode() != http.StatusNoContent {
		t.Fatalf("detach audit: got %v %d %s, want 204", err, detach.StatusCode(), detach.Body)
	}
}

// payloadID is the id of a {"id":N} payload as the generated client
// decodes it, or -1.
func payloadID(p any) int {
	m, ok := p.(map[string]any)
	if !ok {
		return -1
	}
	id, ok := m["id"].(float64)
	if !ok {
		return -1
	}
	return int(id)
}

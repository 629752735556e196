package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/messages"
)

// fakeBroker implements just enough of the contract to check what the CLI
// sends and prints. It is not a broker: consume hands out canned messages.
type fakeBroker struct {
	t *testing.T

	mu       sync.Mutex
	requests []fakeRequest
	topics   []string                // names GET /v1/topics pages over
	queue    []*messages.MessageInfo // what consume hands out, in order
	// ackStatus maps a receipt handle to the statuses its acks get, one per
	// attempt; 204 once the list is used up.
	ackStatus map[string][]int
	// onConsume, when set, runs at each consume before anything else and
	// may answer by itself (returning true).
	onConsume func(w http.ResponseWriter, n int) bool
	consumes  int
	// replayRecords, when set, makes replay reads (offset given) answer
	// from a partition 0 holding offsets 0 to replayRecords-1.
	replayRecords int64
}

type fakeRequest struct {
	Method   string
	Path     string // as sent, escaped
	RawQuery string
	Query    map[string][]string
	Body     string
	// User is the HTTP Basic user the request carried, and Password its
	// password.
	User, Password string
}

func newFakeBroker(t *testing.T) (*fakeBroker, *httptest.Server) {
	t.Helper()
	fb := &fakeBroker{t: t, ackStatus: map[string][]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/topics", fb.createTopic)
	mux.HandleFunc("GET /v1/topics", fb.listTopics)
	mux.HandleFunc("GET /v1/topics/{topic}", fb.getTopic)
	mux.HandleFunc("DELETE /v1/topics/{topic}", fb.deleteTopic)
	mux.HandleFunc("PATCH /v1/topics/{topic}", fb.alterTopic)
	mux.HandleFunc("POST /v1/topics/{topic}/produce", fb.produce)
	mux.HandleFunc("GET /v1/topics/{topic}/consume", fb.consume)
	mux.HandleFunc("POST /v1/topics/{topic}/ack", fb.ack)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("fake broker: read body: %v", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		fb.mu.Lock()
		user, password, _ := r.BasicAuth()
		fb.requests = append(fb.requests, fakeRequest{
			Method: r.Method, Path: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery,
			Query: r.URL.Query(), Body: string(body), User: user, Password: password,
		})
		fb.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return fb, srv
}

func (fb *fakeBroker) recorded() []fakeRequest {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return append([]fakeRequest(nil), fb.requests...)
}

// queries is the raw query of each request the fake has seen, in order,
// joined by spaces: what a test of paging or replay compares.
func (fb *fakeBroker) queries() string {
	var qs []string
	for _, r := range fb.recorded() {
		qs = append(qs, r.RawQuery)
	}
	return strings.Join(qs, " ")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	// The broker embeds payloads verbatim, so the fake must not rewrite
	// <, > and & either.
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, messages.ErrorBody{Error: msg})
}

func (fb *fakeBroker) createTopic(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields() // the contract's strict decoding
	var req messages.CreateTopicRequest
	if err := dec.Decode(&req); err != nil {
		writeError(w, 400, "invalid json: "+err.Error())
		return
	}
	if req.Name == "taken" {
		writeError(w, 409, "topic already exists")
		return
	}
	rec := messages.TopicInfo{Name: req.Name, Partitions: 3, RetentionMs: 604800000, VisibilityTimeoutMs: 30000,
		MaxInFlightPerPartition: 1024, MaxAckedAheadPerPartition: 1024, CreatedAt: 1700000000}
	if req.Partitions != 0 {
		rec.Partitions = req.Partitions
	}
	writeJSON(w, 201, rec)
}

func (fb *fakeBroker) listTopics(w http.ResponseWriter, r *http.Request) {
	limit, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || limit < 1 {
		writeError(w, 400, "limit must be a positive integer")
		return
	}
	token := r.URL.Query().Get("page_token")
	fb.mu.Lock()
	names := append([]string(nil), fb.topics...)
	fb.mu.Unlock()
	sort.Strings(names)
	page := messages.TopicPage{Topics: []messages.TopicInfo{}}
	for _, n := range names {
		if n <= token {
			continue
		}
		if len(page.Topics) == limit {
			page.NextPageToken = page.Topics[limit-1].Name
			break
		}
		page.Topics = append(page.Topics, messages.TopicInfo{Name: n, Partitions: 3, RetentionMs: 3600000,
			VisibilityTimeoutMs: 30000, Role: "standalone"})
	}
	writeJSON(w, 200, page)
}

func (fb *fakeBroker) getTopic(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("topic") == "missing" {
		writeError(w, 404, "topic not found")
		return
	}
	d := messages.TopicDetails{
		TopicInfo: messages.TopicInfo{Name: r.PathValue("topic"), Partitions: 1, RetentionMs: 0, VisibilityTimeoutMs: 30000, Role: "standalone"},
		PartitionStats: []messages.PartitionInfo{
			{Index: 0, Segments: 1, NextOffset: 7, HighWatermark: 7, SizeBytes: 512, OwnerNode: "n1"},
		},
	}
	writeJSON(w, 200, d)
}

func (fb *fakeBroker) deleteTopic(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("topic") == "missing" {
		writeError(w, 404, "topic not found")
		return
	}
	w.WriteHeader(204)
}

func (fb *fakeBroker) produce(w http.ResponseWriter, r *http.Request) {
	if r.PathValue("topic") == "down" {
		// Cluster forwarding errors are text/plain, not JSON.
		http.Error(w, "partition owner is down; retry later", 503)
		return
	}
	w.WriteHeader(202)
}

func (fb *fakeBroker) consume(w http.ResponseWriter, r *http.Request) {
	fb.mu.Lock()
	fb.consumes++
	n := fb.consumes
	hook := fb.onConsume
	fb.mu.Unlock()
	if hook != nil && hook(w, n) {
		return
	}
	if q := r.URL.Query(); fb.replayRecords > 0 && q.Has("offset") {
		off, err := strconv.ParseInt(q.Get("offset"), 10, 64)
		if err != nil || q.Get("partition") != "0" {
			writeError(w, 400, "invalid partition or offset")
			return
		}
		if off >= fb.replayRecords {
			w.WriteHeader(204)
			return
		}
		writeJSON(w, 200, messages.MessageInfo{Topic: r.PathValue("topic"), Offset: off, Payload: json.RawMessage(`{"n":` + q.Get("offset") + `}`)})
		return
	}
	fb.mu.Lock()
	var m *messages.MessageInfo
	if len(fb.queue) > 0 {
		m, fb.queue = fb.queue[0], fb.queue[1:]
	}
	fb.mu.Unlock()
	if m == nil {
		w.WriteHeader(204)
		return
	}
	writeJSON(w, 200, m)
}

func (fb *fakeBroker) ack(w http.ResponseWriter, r *http.Request) {
	h := r.URL.Query().Get("receipt_handle")
	fb.mu.Lock()
	statuses := fb.ackStatus[h]
	status := 204
	if len(statuses) > 0 {
		status, fb.ackStatus[h] = statuses[0], statuses[1:]
	}
	fb.mu.Unlock()
	switch status {
	case 204:
		w.WriteHeader(204)
	case 410:
		writeError(w, 410, "receipt handle no longer matches an active reservation")
	default:
		writeError(w, status, "acked-ahead set is full; head of queue may be stuck")
	}
}

// runCLI calls one of the run functions with captured output.
func runCLI(t *testing.T, f func(ctx context.Context, args []string, stdout, stderr io.Writer) error, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err = f(t.Context(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

func produceWith(stdin string) func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return runProduce(ctx, args, strings.NewReader(stdin), stdout, stderr)
	}
}

func TestTopicsCreateSendsTheGivenFields(t *testing.T) {
	fb, srv := newFakeBroker(t)
	schema := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(schema, []byte(`{"type": "object", "required": ["id"]}`), 0o644); err != nil {
		t.Fatal(err)
	}

	out, _, err := runCLI(t, runTopics, "create", "--server", srv.URL, "--partitions", "6", "--retention", "2h",
		"--visibility", "45s", "--max-in-flight", "10", "--max-acked-ahead", "0", "--schema", schema, "orders")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}

	reqs := fb.recorded()
	if len(reqs) != 1 || reqs[0].Method != "POST" || reqs[0].Path != "/v1/topics" {
		t.Fatalf("got requests %+v, want one POST /v1/topics", reqs)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(reqs[0].Body), &got); err != nil {
		t.Fatalf("request body %q: %v", reqs[0].Body, err)
	}
	want := map[string]any{
		"name": "orders", "partitions": 6.0, "retention_ms": 7200000.0, "visibility_timeout_ms": 45000.0,
		"max_in_flight_per_partition": 10.0, "max_acked_ahead_per_partition": 0.0,
		"schema": map[string]any{"type": "object", "required": []any{"id"}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got body %v, want %v", got, want)
	}
	if !strings.Contains(out, `"name": "orders"`) || !strings.Contains(out, `"partitions": 6`) {
		t.Errorf("got output %q, want the created record", out)
	}
}

func TestTopicsCreateWithoutFlagsSendsOnlyTheName(t *testing.T) {
	fb, srv := newFakeBroker(t)

	_, _, err := runCLI(t, runTopics, "create", "plain", "--server", srv.URL)
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if got, want := fb.recorded()[0].Body, `{"name":"plain"}`; got != want {
		t.Errorf("got body %s, want %s", got, want)
	}
}

func TestTopicsCreateReportsTheBrokersError(t *testing.T) {
	_, srv := newFakeBroker(t)

	_, _, err := runCLI(t, runTopics, "create", "--server", srv.URL, "taken")
	if !client.IsStatus(err, 409) {
		t.Fatalf("got error %v, want a 409 status error", err)
	}
	if got, want := err.Error(), `create topic "taken": POST /v1/topics: 409 topic already exists`; got != want {
		t.Errorf("got error %q, want %q", got, want)
	}
}

func TestTopicsCreateRefusesBadFlagsBeforeSending(t *testing.T) {
	fb, srv := newFakeBroker(t)
	notJSON := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(notJSON, []byte(`type: object`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := [][]string{
		{"--partitions", "0", "x"},
		{"--retention", "-1h", "x"},
		{"--visibility", "1500us", "x"},
		{"--max-in-flight", "-1", "x"},
		{"--schema", notJSON, "x"},
		{"x", "y"},
		{},
	}
	for _, args := range tests {
		_, _, err := runCLI(t, runTopics, append([]string{"create", "--server", srv.URL}, args...)...)
		if err == nil {
			t.Errorf("args %q: got nil error, want one", args)
		}
	}
	if got := len(fb.recorded()); got != 0 {
		t.Errorf("got %d requests, want 0", got)
	}
}

// alterTopic decodes strictly, as the broker does (a visibility field is
// unknown there), and refuses shrinking below 3 partitions.
func (fb *fakeBroker) alterTopic(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	var req messages.AlterTopicRequest
	if err := dec.Decode(&req); err != nil {
		writeError(w, 400, "invalid json: "+err.Error())
		return
	}
	rec := messages.TopicInfo{Name: r.PathValue("topic"), Partitions: 3}
	if req.Partitions != nil {
		if *req.Partitions <= 3 {
			writeError(w, 400, "partitions can only grow")
			return
		}
		rec.Partitions = *req.Partitions
	}
	writeJSON(w, 200, rec)
}

func TestTopicsAlterSendsOnlyTheGivenFields(t *testing.T) {
	fb, srv := newFakeBroker(t)
	out, _, err := runCLI(t, runTopics, "alter", "--server", srv.URL, "--partitions", "12", "--retention", "48h", "--max-in-flight", "0", "orders")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	reqs := fb.recorded()
	if len(reqs) != 1 || reqs[0].Method != "PATCH" || reqs[0].Path != "/v1/topics/orders" {
		t.Fatalf("got requests %+v, want one PATCH /v1/topics/orders", reqs)
	}
	if got, want := reqs[0].Body, `{"partitions":12,"retention_ms":172800000,"max_in_flight_per_partition":0}`; got != want {
		t.Errorf("got body %s, want %s", got, want)
	}
	if !strings.Contains(out, `"partitions": 12`) {
		t.Errorf("got output %q, want the altered record", out)
	}
}

func TestTopicsAlterRefusesNothingAndBadFlagsBeforeSending(t *testing.T) {
	fb, srv := newFakeBroker(t)
	for _, args := range [][]string{
		{"orders"},
		{"--partitions", "0", "orders"},
		{"--retention", "-1h", "orders"},
		{"--max-acked-ahead", "-2", "orders"},
		{"--visibility", "30s", "orders"},
		{"--partitions", "6"},
	} {
		_, _, err := runCLI(t, runTopics, append([]string{"alter", "--server", srv.URL}, args...)...)
		if err == nil {
			t.Errorf("args %q: got nil error, want one", args)
		}
	}
	if got := len(fb.recorded()); got != 0 {
		t.Errorf("got %d requests, want 0", got)
	}
	_, _, err := runCLI(t, runTopics, "alter", "--server", srv.URL, "--partitions", "2", "orders")
	if !client.IsStatus(err, 400) || !strings.Contains(err.Error(), "partitions can only grow") {
		t.Errorf("a refused alter: got %v, want the broker's 400 and its reason", err)
	}
}

func TestTopicsListFollowsEveryPage(t *testing.T) {
	fb, srv := newFakeBroker(t)
	fb.topics = []string{"e", "a", "c", "b", "d"}

	out, _, err := runCLI(t, runTopics, "list", "--server", srv.URL, "--limit", "2")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}

	if got, want := fb.queries(), "limit=2 limit=2&page_token=b limit=2&page_token=d"; got != want {
		t.Errorf("got queries %q, want %q", got, want)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 {
		t.Fatalf("got %d lines, want a header and 5 topics:\n%s", len(lines), out)
	}
	if got, want := strings.Fields(lines[0]), []string{"NAME", "PARTITIONS", "RETENTION", "VISIBILITY", "ROLE"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got header %q, want %q", got, want)
	}
	if got, want := strings.Fields(lines[1]), []string{"a", "3", "1h0m0s", "30s", "standalone"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got first row %q, want %q", got, want)
	}
}

func TestTopicsListJSONLines(t *testing.T) {
	fb, srv := newFakeBroker(t)
	fb.topics = []string{"a", "b"}

	out, _, err := runCLI(t, runTopics, "list", "--server", srv.URL, "--json")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	want := `{"name":"a","partitions":3,"retention_ms":3600000,"visibility_timeout_ms":30000,"max_in_flight_per_partition":0,"max_acked_ahead_per_partition":0,"created_at":0,"role":"standalone"}` + "\n" +
		`{"name":"b","partitions":3,"retention_ms":3600000,"visibility_timeout_ms":30000,"max_in_flight_per_partition":0,"max_acked_ahead_per_partition":0,"created_at":0,"role":"standalone"}` + "\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if got, want := fb.recorded()[0].RawQuery, "limit=100"; got != want {
		t.Errorf("got query %q, want %q", got, want)
	}
}

func TestTopicsGetPrintsStats(t *testing.T) {
	fb, srv := newFakeBroker(t)

	out, _, err := runCLI(t, runTopics, "get", "--server", srv.URL, "orders")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if got, want := fb.recorded()[0].Path, "/v1/topics/orders"; got != want {
		t.Errorf("got path %q, want %q", got, want)
	}
	var d messages.TopicDetails
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	if d.Name != "orders" || len(d.PartitionStats) != 1 || d.PartitionStats[0].HighWatermark != 7 || d.PartitionStats[0].OwnerNode != "n1" {
		t.Errorf("got %+v, want orders with one partition at high watermark 7 owned by n1", d)
	}
	if !strings.Contains(out, `"partition_stats": [`) {
		t.Errorf("got %q, want the contract's partition_stats key", out)
	}
}

func TestTopicsDelete(t *testing.T) {
	fb, srv := newFakeBroker(t)

	out, _, err := runCLI(t, runTopics, "delete", "--server", srv.URL, "orders")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if got, want := out, "deleted topic orders\n"; got != want {
		t.Errorf("got output %q, want %q", got, want)
	}
	if r := fb.recorded()[0]; r.Method != "DELETE" || r.Path != "/v1/topics/orders" {
		t.Errorf("got %s %s, want DELETE /v1/topics/orders", r.Method, r.Path)
	}

	_, _, err = runCLI(t, runTopics, "delete", "--server", srv.URL, "missing")
	if !client.IsStatus(err, 404) || !strings.Contains(err.Error(), "topic not found") {
		t.Errorf("got error %v, want 404 topic not found", err)
	}
}

func TestTopicsUnknownCommand(t *testing.T) {
	_, errOut, err := runCLI(t, runTopics, "rename")
	if err == nil || !strings.Contains(err.Error(), `unknown command "rename"`) {
		t.Errorf("got error %v, want unknown command", err)
	}
	if !strings.Contains(errOut, "usage: narad topics") {
		t.Errorf("got stderr %q, want the usage", errOut)
	}
}

func TestProduceBodySources(t *testing.T) {
	file := filepath.Join(t.TempDir(), "body.bin")
	if err := os.WriteFile(file, []byte{0xff, 0x00, 0x01}, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"argument", []string{"orders", `{"id":1}`}, "ignored", `{"id":1}`},
		{"file", []string{"--file", file, "orders"}, "ignored", "\xff\x00\x01"},
		{"file dash is stdin", []string{"--file", "-", "orders"}, "from stdin", "from stdin"},
		{"stdin", []string{"orders"}, "line\n", "line\n"},
		{"after --", []string{"orders", "--", "-5"}, "", "-5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fb, srv := newFakeBroker(t)
			_, _, err := runCLI(t, produceWith(tt.stdin), append([]string{"--server", srv.URL}, tt.args...)...)
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			r := fb.recorded()[0]
			if r.Method != "POST" || r.Path != "/v1/topics/orders/produce" {
				t.Errorf("got %s %s, want POST /v1/topics/orders/produce", r.Method, r.Path)
			}
			if r.Body != tt.want {
				t.Errorf("got body %q, want %q", r.Body, tt.want)
			}
			if r.RawQuery != "" {
				t.Errorf("got query %q, want none", r.RawQuery)
			}
		})
	}
}

func TestProduceEscapesTheKeyAndSendsThePartition(t *testing.T) {
	fb, srv := newFakeBroker(t)
	key := "a b&c=d/é+%"

	// Flags after the topic work too.
	out, errOut, err := runCLI(t, produceWith(""), "orders", "--server", srv.URL, "--key", key, "--partition", "2", "hello")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if out != "" || errOut != "" {
		t.Errorf("got stdout %q stderr %q, want both empty", out, errOut)
	}
	r := fb.recorded()[0]
	if got, want := r.RawQuery, "key=a+b%26c%3Dd%2F%C3%A9%2B%25&partition=2"; got != want {
		t.Errorf("got query %q, want %q", got, want)
	}
	if got := r.Query["key"]; len(got) != 1 || got[0] != key {
		t.Errorf("got key %q as decoded by the server, want [%q]", got, key)
	}
	if r.Body != "hello" {
		t.Errorf("got body %q, want hello", r.Body)
	}
}

func TestProduceRefusesBadInputBeforeSending(t *testing.T) {
	fb, srv := newFakeBroker(t)
	big := strings.Repeat("x", maxMessageBytes+1)
	file := filepath.Join(t.TempDir(), "b")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
	}{
		{"empty stdin", []string{"orders"}, ""},
		{"empty argument", []string{"orders", ""}, ""},
		{"too big", []string{"orders"}, big},
		{"body and file", []string{"--file", file, "orders", "x"}, ""},
		{"negative partition", []string{"--partition", "-1", "orders", "x"}, ""},
		{"no topic", nil, "x"},
		{"two bodies", []string{"orders", "a", "b"}, ""},
	}
	for _, tt := range tests {
		_, _, err := runCLI(t, produceWith(tt.stdin), append([]string{"--server", srv.URL}, tt.args...)...)
		if err == nil {
			t.Errorf("%s: got nil error, want one", tt.name)
		}
	}
	if got := len(fb.recorded()); got != 0 {
		t.Errorf("got %d requests, want 0", got)
	}
}

func TestProduceShowsPlainTextErrors(t *testing.T) {
	_, srv := newFakeBroker(t)

	_, _, err := runCLI(t, produceWith(""), "--server", srv.URL, "down", "x")
	if !client.IsStatus(err, 503) {
		t.Fatalf("got error %v, want a 503 status error", err)
	}
	if got, want := err.Error(), `produce to "down": POST /v1/topics/down/produce: 503 partition owner is down; retry later`; got != want {
		t.Errorf("got error %q, want %q", got, want)
	}
}

func TestServerComesFromTheEnvironment(t *testing.T) {
	fb, srv := newFakeBroker(t)
	t.Setenv("NARAD_SERVER", srv.URL)

	if _, _, err := runCLI(t, produceWith(""), "orders", "x"); err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if got := len(fb.recorded()); got != 1 {
		t.Errorf("got %d requests at $NARAD_SERVER, want 1", got)
	}
}

func TestConsumePrintsOneMessageAsAJSONLine(t *testing.T) {
	fb, srv := newFakeBroker(t)
	fb.queue = []*messages.MessageInfo{
		{Topic: "orders", Partition: 1, Offset: 41, Key: "k<1>", Payload: json.RawMessage(`{"a": [1, 2], "html": "<b>&"}`), Timestamp: 1700000000, ReceiptHandle: "1:41:9"},
		{Topic: "orders", Partition: 1, Offset: 42, Payload: json.RawMessage(`"left alone"`), Timestamp: 1700000001, ReceiptHandle: "1:42:9"},
	}

	out, errOut, err := runCLI(t, runConsume, "--server", srv.URL, "orders")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	want := `{"topic":"orders","partition":1,"offset":41,"key":"k<1>","payload":{"a":[1,2],"html":"<b>&"},"timestamp":1700000000,"receipt_handle":"1:41:9"}` + "\n"
	if out != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	if errOut != "" {
		t.Errorf("got stderr %q, want none", errOut)
	}
	reqs := fb.recorded()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want one consume and no ack", len(reqs))
	}
	if r := reqs[0]; r.Method != "GET" || r.Path != "/v1/topics/orders/consume" || r.RawQuery != "wait=5s" {
		t.Errorf("got %s %s?%s, want GET /v1/topics/orders/consume?wait=5s", r.Method, r.Path, r.RawQuery)
	}
}

func TestConsumeBase64Payload(t *testing.T) {
	fb, srv := newFakeBroker(t)
	fb.queue = []*messages.MessageInfo{{Topic: "t", Partition: 0, Offset: 0, Payload: json.RawMessage(`"/wAB"`), PayloadEncoding: "base64", Timestamp: 1, ReceiptHandle: "h"}}

	out, _, err := runCLI(t, runConsume, "--server", srv.URL, "t")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if want := `{"topic":"t","partition":0,"offset":0,"payload":"/wAB","payload_encoding":"base64","timestamp":1,"receipt_handle":"h"}` + "\n"; out != want {
		t.Errorf("got %s, want %s", out, want)
	}
}

func TestConsumeNoMessage(t *testing.T) {
	_, srv := newFakeBroker(t)

	out, errOut, err := runCLI(t, runConsume, "--server", srv.URL, "--wait", "0s", "orders")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if out != "" {
		t.Errorf("got stdout %q, want none", out)
	}
	if errOut != "no message\n" {
		t.Errorf("got stderr %q, want %q", errOut, "no message\n")
	}
}

func TestConsumeAckSendsTheHandleEscaped(t *testing.T) {
	fb, srv := newFakeBroker(t)
	handle := "0:5:77 +/&=?"
	fb.queue = []*messages.MessageInfo{{Topic: "orders", Payload: json.RawMessage(`1`), ReceiptHandle: handle}}

	_, _, err := runCLI(t, runConsume, "--server", srv.URL, "--ack", "--wait", "250ms", "orders")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	reqs := fb.recorded()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests, want consume then ack", len(reqs))
	}
	if got, want := reqs[0].RawQuery, "wait=250ms"; got != want {
		t.Errorf("got consume query %q, want %q", got, want)
	}
	ack := reqs[1]
	if ack.Method != "POST" || ack.Path != "/v1/topics/orders/ack" || ack.Body != "" {
		t.Errorf("got %s %s body %q, want POST /v1/topics/orders/ack with no body", ack.Method, ack.Path, ack.Body)
	}
	if got, want := ack.RawQuery, "receipt_handle=0%3A5%3A77+%2B%2F%26%3D%3F"; got != want {
		t.Errorf("got ack query %q, want %q", got, want)
	}
	if got := ack.Query["receipt_handle"]; len(got) != 1 || got[0] != handle {
		t.Errorf("got handle %q as decoded by the server, want [%q]", got, handle)
	}
}

func TestConsumeAckRetriesA503AndSkipsA410(t *testing.T) {
	fb, srv := newFakeBroker(t)
	fb.queue = []*messages.MessageInfo{
		{Topic: "t", Offset: 0, Payload: json.RawMessage(`1`), ReceiptHandle: "busy"},
		{Topic: "t", Offset: 1, Payload: json.RawMessage(`2`), ReceiptHandle: "stale"},
		{Topic: "t", Offset: 2, Payload: json.RawMessage(`3`), ReceiptHandle: "fine"},
	}
	fb.ackStatus["busy"] = []int{503}
	fb.ackStatus["stale"] = []int{410}

	out, errOut, err := runCLI(t, runConsume, "--server", srv.URL, "--ack", "--count", "3", "t")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if got := strings.Count(out, "\n"); got != 3 {
		t.Errorf("got %d messages printed, want 3", got)
	}
	var acks []string
	for _, r := range fb.recorded() {
		if strings.HasSuffix(r.Path, "/ack") {
			acks = append(acks, r.Query["receipt_handle"][0])
		}
	}
	if got, want := strings.Join(acks, ","), "busy,busy,stale,fine"; got != want {
		t.Errorf("got acks %s, want %s", got, want)
	}
	if !strings.Contains(errOut, "retry 1 of 5") || !strings.Contains(errOut, "will be delivered again") {
		t.Errorf("got stderr %q, want a retry note and a lost-lease note", errOut)
	}
}

func TestConsumeCountStopsEarlyOnEmpty(t *testing.T) {
	fb, srv := newFakeBroker(t)
	fb.queue = []*messages.MessageInfo{{Topic: "t", Payload: json.RawMessage(`1`), ReceiptHandle: "h"}}

	out, errOut, err := runCLI(t, runConsume, "--server", srv.URL, "--count", "5", "t")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if got := strings.Count(out, "\n"); got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
	if errOut != "" {
		t.Errorf("got stderr %q, want none: something was printed", errOut)
	}
}

func TestConsumeFollowRunsUntilCancelled(t *testing.T) {
	fb, srv := newFakeBroker(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// Hand out three messages and an empty answer, then cancel on the
	// fifth request as a user pressing ^C would.
	fb.onConsume = func(w http.ResponseWriter, n int) bool {
		switch {
		case n <= 3:
			writeJSON(w, 200, messages.MessageInfo{Topic: "t", Offset: int64(n), Payload: json.RawMessage(`{}`), ReceiptHandle: fmt.Sprint(n)})
		case n == 4:
			w.WriteHeader(204)
		default:
			cancel()
			w.WriteHeader(204)
		}
		return true
	}
	var out, errOut bytes.Buffer

	err := runConsume(ctx, []string{"--server", srv.URL, "--follow", "--ack", "t"}, &out, &errOut)
	if err != nil {
		t.Fatalf("got error %v, want nil after cancel", err)
	}
	if got := strings.Count(out.String(), "\n"); got != 3 {
		t.Errorf("got %d messages, want 3", got)
	}
	acks := 0
	for _, r := range fb.recorded() {
		if strings.HasSuffix(r.Path, "/ack") {
			acks++
		}
	}
	if acks != 3 {
		t.Errorf("got %d acks, want 3", acks)
	}
}

func TestConsumeReplayAdvancesTheOffset(t *testing.T) {
	fb, srv := newFakeBroker(t)
	fb.onConsume = func(w http.ResponseWriter, n int) bool {
		writeJSON(w, 200, messages.MessageInfo{Topic: "t", Partition: 1, Offset: int64(4 + n), Payload: json.RawMessage(`0`)})
		return true
	}

	out, _, err := runCLI(t, runConsume, "--server", srv.URL, "--partition", "1", "--offset", "5", "--count", "2", "t")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if got, want := fb.queries(), "offset=5&partition=1&wait=5s offset=6&partition=1&wait=5s"; got != want {
		t.Errorf("got queries %q, want %q", got, want)
	}
	if got := strings.Count(out, "\n"); got != 2 {
		t.Errorf("got %d messages, want 2", got)
	}
}

func TestConsumeRetriesTransientErrors(t *testing.T) {
	fb, srv := newFakeBroker(t)
	fb.onConsume = func(w http.ResponseWriter, n int) bool {
		if n == 1 {
			http.Error(w, "partition owner is down; retry later", 503)
			return true
		}
		writeJSON(w, 200, messages.MessageInfo{Topic: "t", Payload: json.RawMessage(`0`), ReceiptHandle: "h"})
		return true
	}

	out, errOut, err := runCLI(t, runConsume, "--server", srv.URL, "t")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if got := strings.Count(out, "\n"); got != 1 {
		t.Errorf("got %d messages, want 1", got)
	}
	if !strings.Contains(errOut, "503 partition owner is down; retry later (retry 1 of 5)") {
		t.Errorf("got stderr %q, want the retry note", errOut)
	}
}

func TestConsumeDoesNotRetryClientErrors(t *testing.T) {
	fb, srv := newFakeBroker(t)
	fb.onConsume = func(w http.ResponseWriter, n int) bool {
		writeError(w, 404, "topic not found")
		return true
	}

	_, _, err := runCLI(t, runConsume, "--server", srv.URL, "--follow", "t")
	if !client.IsStatus(err, 404) {
		t.Fatalf("got error %v, want 404", err)
	}
	if got := len(fb.recorded()); got != 1 {
		t.Errorf("got %d requests, want 1", got)
	}
}

func TestConsumeRefusesBadFlagsBeforeSending(t *testing.T) {
	fb, srv := newFakeBroker(t)
	tests := [][]string{
		{"--offset", "3", "t"},
		{"--partition", "0", "--offset", "-1", "t"},
		{"--partition", "0", "--offset", "3", "--ack", "t"},
		{"--partition", "-1", "t"},
		{"--count", "-1", "t"},
		{"--wait", "-1s", "t"},
		{"--wait", "5", "t"},
		{},
		{"a", "b"},
	}
	for _, args := range tests {
		_, _, err := runCLI(t, runConsume, append([]string{"--server", srv.URL}, args...)...)
		if err == nil {
			t.Errorf("args %q: got nil error, want one", args)
		}
	}
	if got := len(fb.recorded()); got != 0 {
		t.Errorf("got %d requests, want 0", got)
	}
}

func TestBadServerURL(t *testing.T) {
	for _, server := range []string{"127.0.0.1:7942", "ftp://127.0.0.1", "http://"} {
		_, _, err := runCLI(t, produceWith(""), "--server", server, "t", "x")
		if err == nil {
			t.Errorf("server %q: got nil error, want one", server)
		}
	}
}

func TestHelpReturnsErrHelp(t *testing.T) {
	cases := []struct {
		name string
		f    func(ctx context.Context, args []string, stdout, stderr io.Writer) error
		args []string
		want string
	}{
		{"topics", runTopics, []string{"--help"}, "usage: narad topics <command>"},
		{"topics create", runTopics, []string{"create", "-h"}, "usage: narad topics create"},
		{"produce", produceWith(""), []string{"-h"}, "usage: narad produce"},
		{"consume", runConsume, []string{"--help"}, "usage: narad consume"},
	}
	for _, c := range cases {
		out, errOut, err := runCLI(t, c.f, c.args...)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: got error %v, want flag.ErrHelp", c.name, err)
		}
		if !strings.Contains(out+errOut, c.want) {
			t.Errorf("%s: got output %q, want %q", c.name, out+errOut, c.want)
		}
	}
}

// Every flag a command defines must be in its usage text, so that the
// usage cannot fall behind the code.
func TestUsageDocumentsEveryFlag(t *testing.T) {
	var sink bytes.Buffer
	createFS, _ := newTopicsCreateFlags(&sink)
	listFS, _ := newTopicsListFlags(&sink)
	getFS, _ := newTopicsGetFlags(&sink)
	deleteFS, _ := newTopicsDeleteFlags(&sink)
	produceFS, _ := newProduceFlags(&sink)
	consumeFS, _ := newConsumeFlags(&sink)
	benchCfg := defaultBenchConfig()
	benchFS, _ := newBenchFlags(&benchCfg, &sink)
	cases := []struct {
		fs    *flag.FlagSet
		usage string
	}{
		{createFS, topicsCreateUsage},
		{listFS, topicsListUsage},
		{getFS, topicsGetUsage},
		{deleteFS, topicsDeleteUsage},
		{produceFS, produceUsage},
		{consumeFS, consumeUsage},
		{benchFS, benchUsage},
	}
	for _, c := range cases {
		c.fs.VisitAll(func(f *flag.Flag) {
			if !strings.Contains(c.usage, "  --"+f.Name+" ") {
				t.Errorf("%s: flag --%s is not in the usage text", c.fs.Name(), f.Name)
			}
		})
	}
}

// offsetsPrinted is the offsets of the JSON lines out holds.
func offsetsPrinted(t *testing.T, out string) []int64 {
	t.Helper()
	var got []int64
	for line := range strings.Lines(out) {
		var m messages.MessageInfo
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got = append(got, m.Offset)
	}
	return got
}

// replayOffsets is the offsets the recorded consumes asked for; a consume
// without one (a lease) fails the test.
func replayOffsets(t *testing.T, fb *fakeBroker) []string {
	t.Helper()
	var got []string
	for _, r := range fb.recorded() {
		if !strings.HasSuffix(r.Path, "/consume") {
			continue
		}
		if len(r.Query["offset"]) != 1 {
			t.Errorf("consume %s: want a replay read (offset given), which leases nothing", r.RawQuery)
			continue
		}
		got = append(got, r.Query["offset"][0])
	}
	return got
}

func TestConsumeReplaysARange(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []int64
	}{
		{[]string{"--offset", "2", "--to", "4"}, []int64{2, 3, 4}},
		{[]string{"--offset", "5", "--to", "100"}, []int64{5, 6}},               // the partition ends first
		{[]string{"--offset", "1", "--to", "5", "--count", "2"}, []int64{1, 2}}, // --count ends first
		{[]string{"--offset", "3"}, []int64{3}},
	} {
		fb, srv := newFakeBroker(t)
		fb.replayRecords = 7
		out, _, err := runCLI(t, runConsume, append([]string{"--server", srv.URL, "--partition", "0", "orders"}, tc.args...)...)
		if err != nil {
			t.Fatalf("consume %q: %v", tc.args, err)
		}
		if got := offsetsPrinted(t, out); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("consume %q: got offsets %v, want %v", tc.args, got, tc.want)
		}
		replayOffsets(t, fb)
	}
}

// --peek reads each partition's oldest records by replay: no lease, no ack.
func TestConsumePeekLeasesNothing(t *testing.T) {
	fb, srv := newFakeBroker(t)
	fb.replayRecords = 7
	out, _, err := runCLI(t, runConsume, "--server", srv.URL, "--peek", "--count", "3", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(offsetsPrinted(t, out)), "[0 1 2]"; got != want {
		t.Errorf("consume --peek --count 3: got offsets %s, want %s", got, want)
	}
	if got, want := fmt.Sprint(replayOffsets(t, fb)), "[0 1 2]"; got != want {
		t.Errorf("consume --peek --count 3: read offsets %s, want %s", got, want)
	}
	for _, r := range fb.recorded() {
		if r.Method == "POST" {
			t.Errorf("consume --peek sent %s %s: want reads only", r.Method, r.Path)
		}
	}
}

func TestConsumeRangeAndPeekRefuseBadFlagsBeforeSending(t *testing.T) {
	fb, srv := newFakeBroker(t)
	for _, args := range [][]string{
		{"--to", "4", "orders"},
		{"--partition", "0", "--offset", "5", "--to", "4", "orders"},
		{"--partition", "0", "--offset", "1", "--to", "4", "--follow", "orders"},
		{"--peek", "--ack", "orders"},
		{"--peek", "--partition", "0", "--offset", "1", "orders"},
		{"--peek", "--follow", "orders"},
	} {
		if _, _, err := runCLI(t, runConsume, append([]string{"--server", srv.URL}, args...)...); err == nil {
			t.Errorf("consume %q: got nil error, want one", args)
		}
	}
	if got := len(fb.recorded()); got != 0 {
		t.Errorf("got %d requests, want 0", got)
	}
}

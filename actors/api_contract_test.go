package actors

// End-to-end tests of the client HTTP API against /work/shared/api/CONTRACT.md
// (sections 1, 3, 4, 5, 6, 8, 9, 10, 12 and 13), over real HTTP. Each
// top-level test starts one node and runs its rules as subtests on it; every
// subtest uses its own topics, so they do not see each other's records.
//
// The helpers here all take the subtest's t: the harness's tn.must and
// tn.consume fail the top-level test, which a subtest must not do.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// Texts the contract gives for errors.
const (
	errTopicNotFound = "topic not found"
	errTopicExists   = "topic already exists"
	errTooLarge      = "request body too large"
	errMessageReq    = "message required"
	errHandleReq     = "receipt_handle required"
	errMalformed     = "receipt handle is malformed"
	errStale         = "receipt handle no longer matches an active reservation"
	errAckedAhead    = "acked-ahead set is full; head of queue may be stuck"
	errBadLimit      = "limit must be a positive integer"
	errBadPartition  = "invalid partition"
)

// The topic record's keys in the contract's order (§5.1), as a plain
// topic has them.
var (
	createKeys  = []string{"name", "partitions", "retention_ms", "visibility_timeout_ms", "max_in_flight_per_partition", "max_acked_ahead_per_partition", "created_at"}
	recordKeys  = append(slices.Clone(createKeys), "role")
	detailsKeys = append(slices.Clone(recordKeys), "partition_stats")
	statsKeys   = []string{"index", "segments", "oldest_offset", "next_offset", "high_watermark", "size_bytes", "oldest_segment_at", "owner_node", "in_flight_leases"}
)

type ctResp struct {
	code int
	hdr  http.Header
	body []byte
}

func (r ctResp) String() string { return fmt.Sprintf("%d %q", r.code, r.body) }

// ctNode starts a node for one test group. Its client's idle connections
// are closed before the node stops: a connection the client dialed but did
// not use (concurrent requests) would hold the server's Shutdown for 5 s.
func ctNode(t *testing.T, tweak ...func(*Config)) *testNode {
	t.Helper()
	tn := newTestNode(t, tweak...)
	t.Cleanup(tn.http.CloseIdleConnections)
	return tn
}

// ctDo sends one request; header holds name, value pairs.
func ctDo(t *testing.T, tn *testNode, method, path string, body []byte, header ...string) ctResp {
	t.Helper()
	req, err := http.NewRequest(method, tn.base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := tn.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return ctResp{code: resp.StatusCode, hdr: resp.Header, body: b}
}

// ctTextMatches matches the contract's notation: "x..." is a prefix,
// "...x" a suffix, "" any text, anything else exact.
func ctTextMatches(got, want string) bool {
	switch {
	case want == "":
		return got != ""
	case strings.HasPrefix(want, "...") && strings.HasSuffix(want, "...") && len(want) > 6:
		return strings.Contains(got, want[3:len(want)-3])
	case strings.HasSuffix(want, "..."):
		return strings.HasPrefix(got, strings.TrimSuffix(want, "..."))
	case strings.HasPrefix(want, "..."):
		return strings.HasSuffix(got, strings.TrimPrefix(want, "..."))
	}
	return got == want
}

// ctWantJSONBody checks what every JSON response has: Content-Type,
// Content-Length, one JSON value and a trailing newline.
func ctWantJSONBody(t *testing.T, what string, r ctResp) {
	t.Helper()
	if ct := r.hdr.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type: got %q, want application/json", what, ct)
	}
	if cl := r.hdr.Get("Content-Length"); cl != fmt.Sprint(len(r.body)) {
		t.Fatalf("%s: Content-Length: got %q, want %d", what, cl, len(r.body))
	}
	if !bytes.HasSuffix(r.body, []byte("\n")) || bytes.HasSuffix(r.body, []byte("\n\n")) {
		t.Fatalf("%s: body %q: want one JSON value and a trailing newline", what, r.body)
	}
	dec := json.NewDecoder(bytes.NewReader(r.body))
	var v json.RawMessage
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: body %q is not JSON: %v", what, r.body, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("%s: body %q: got more than one JSON value, want one", what, r.body)
	}
}

// ctWantError checks a contract error: the status, a JSON body with the
// error key only, and its text (see ctTextMatches).
func ctWantError(t *testing.T, what string, r ctResp, status int, text string) {
	t.Helper()
	if r.code != status {
		t.Fatalf("%s: got %s, want %d %q", what, r, status, text)
	}
	ctWantJSONBody(t, what, r)
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("%s: error body %q: %v", what, r.body, err)
	}
	msg, ok := m["error"].(string)
	if len(m) != 1 || !ok {
		t.Fatalf("%s: error body %q: want exactly a string \"error\" key", what, r.body)
	}
	if !ctTextMatches(msg, text) {
		t.Fatalf("%s: error: got %q, want %q", what, msg, text)
	}
}

// ctWantJSON checks a JSON success response and decodes it into v.
func ctWantJSON(t *testing.T, what string, r ctResp, status int, v any) {
	t.Helper()
	if r.code != status {
		t.Fatalf("%s: got %s, want %d", what, r, status)
	}
	ctWantJSONBody(t, what, r)
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("%s: decode %q: %v", what, r.body, err)
		}
	}
}

// ctWantEmpty checks a response that must come without a body.
func ctWantEmpty(t *testing.T, what string, r ctResp, status int) {
	t.Helper()
	if r.code != status || len(r.body) != 0 {
		t.Fatalf("%s: got %s, want %d without a body", what, r, status)
	}
}

// ctKeys returns the keys of a JSON object in the order they are sent.
func ctKeys(t *testing.T, b []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("keys of %q: not an object", b)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("keys of %q: %v", b, err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("keys of %q: %v", b, err)
		}
	}
	return keys
}

// ctWantKeys checks that an object has exactly the keys want, in order.
func ctWantKeys(t *testing.T, what string, b []byte, want []string) {
	t.Helper()
	if got := ctKeys(t, b); !slices.Equal(got, want) {
		t.Fatalf("%s: keys: got %v, want %v", what, got, want)
	}
}

// ctWantKeysIn checks that an object has the required keys and otherwise
// only keys of order, all in order's order.
func ctWantKeysIn(t *testing.T, what string, b []byte, order, required []string) {
	t.Helper()
	got := ctKeys(t, b)
	i := 0
	for _, k := range got {
		j := slices.Index(order[i:], k)
		if j < 0 {
			t.Fatalf("%s: keys: got %v, want a subsequence of %v", what, got, order)
		}
		i += j + 1
	}
	for _, k := range required {
		if !slices.Contains(got, k) {
			t.Fatalf("%s: keys: got %v, want %q among them", what, got, k)
		}
	}
}

// ctSettings is what an alter may change, for comparing before and after.
func ctSettings(c messages.TopicDetails) string {
	return fmt.Sprintf("partitions=%d retention_ms=%d visibility_timeout_ms=%d max_in_flight=%d max_acked_ahead=%d",
		c.Partitions, c.RetentionMs, c.VisibilityTimeoutMs, c.MaxInFlightPerPartition, c.MaxAckedAheadPerPartition)
}

func ctCreate(t *testing.T, tn *testNode, body string) messages.TopicDetails {
	t.Helper()
	var c messages.TopicDetails
	ctWantJSON(t, "create "+body, ctDo(t, tn, "POST", "/v1/topics", []byte(body)), http.StatusCreated, &c)
	return c
}

func ctDescribe(t *testing.T, tn *testNode, name string) messages.TopicDetails {
	t.Helper()
	var c messages.TopicDetails
	ctWantJSON(t, "describe "+name, ctDo(t, tn, "GET", "/v1/topics/"+name, nil), http.StatusOK, &c)
	return c
}

func ctWantNoTopic(t *testing.T, tn *testNode, name string) {
	t.Helper()
	ctWantError(t, "describe "+name, ctDo(t, tn, "GET", "/v1/topics/"+url.PathEscape(name), nil), http.StatusNotFound, errTopicNotFound)
}

func ctProduce(t *testing.T, tn *testNode, topic, query string, body []byte) {
	t.Helper()
	ctWantEmpty(t, "produce to "+topic+"?"+query, ctDo(t, tn, "POST", "/v1/topics/"+topic+"/produce?"+query, body), http.StatusAccepted)
}

// ctConsume pulls or replays one message; nil on 204.
func ctConsume(t *testing.T, tn *testNode, topic, query string) *messages.MessageInfo {
	t.Helper()
	r := ctDo(t, tn, "GET", "/v1/topics/"+topic+"/consume?"+query, nil)
	if r.code == http.StatusNoContent {
		ctWantEmpty(t, "consume "+topic+"?"+query, r, http.StatusNoContent)
		return nil
	}
	var m messages.MessageInfo
	ctWantJSON(t, "consume "+topic+"?"+query, r, http.StatusOK, &m)
	return &m
}

func ctAck(t *testing.T, tn *testNode, topic, handle, extra string) ctResp {
	t.Helper()
	return ctDo(t, tn, "POST", "/v1/topics/"+topic+"/ack?receipt_handle="+url.QueryEscape(handle)+extra, nil)
}

// otherHandle is handle with its nonce changed: the same record under a
// lease it never had.
func otherHandle(t *testing.T, handle string) string {
	t.Helper()
	i := strings.LastIndexByte(handle, ':')
	if i < 0 {
		t.Fatalf("receipt handle %q: want partition:offset:nonce", handle)
	}
	if strings.HasSuffix(handle, "1") {
		return handle[:len(handle)-1] + "2"
	}
	return handle[:len(handle)-1] + "1"
}

// ctWaitCommitted waits until (partition, offset) is readable by replay.
func ctWaitCommitted(t *testing.T, tn *testNode, topic string, partition int, offset int64) {
	t.Helper()
	q := fmt.Sprintf("partition=%d&offset=%d", partition, offset)
	waitFor(t, func() bool { return ctConsume(t, tn, topic, q) != nil })
}

// ctSettle waits until every accepted produce is committed: the ingress
// WAL holds nothing that waits for its partition.
func ctSettle(t *testing.T, tn *testNode) {
	t.Helper()
	waitFor(t, func() bool { held, _ := tn.n.wal.Backlog(); return held == 0 })
}

// ctRecords is how many records the topic's partitions ever appended.
func ctRecords(t *testing.T, tn *testNode, topic string) int64 {
	t.Helper()
	var n int64
	for _, ps := range ctDescribe(t, tn, topic).PartitionStats {
		n += ps.NextOffset
	}
	return n
}

// ctFNV is the contract's partition of a key: FNV-1a 32 mod partitions,
// computed here independently of the server's code.
func ctFNV(key string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}

func ctRepeat(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

func ctJSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ---- §1, §3, §4, §13: transport, routes, health, errors ----

func TestContractTransport(t *testing.T) {
	tn := ctNode(t)
	tn.createTopic("t", 3)

	t.Run("UnknownRouteIs404TextAndWrongMethodIs405WithAllow", func(t *testing.T) {
		for _, p := range []string{"/nope", "/v1", "/v1/nope", "/v1/topics/t/nope", "/v1/topics/t/produce/x", "/v1/cluster"} {
			r := ctDo(t, tn, "GET", p, nil)
			if r.code != http.StatusNotFound || string(r.body) != "404 page not found\n" || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/plain") {
				t.Fatalf("GET %s: got %s (%s), want 404 text/plain \"404 page not found\"", p, r, r.hdr.Get("Content-Type"))
			}
		}
		for _, c := range []struct {
			method, path string
			allow        []string
		}{
			{"PUT", "/v1/topics/t", []string{"GET", "PATCH", "DELETE"}},
			{"POST", "/v1/topics/t", []string{"GET", "PATCH", "DELETE"}},
			{"DELETE", "/v1/topics", []string{"GET", "POST"}},
			{"GET", "/v1/topics/t/produce", []string{"POST"}},
			{"POST", "/v1/topics/t/consume", []string{"GET"}},
			{"GET", "/v1/topics/t/ack", []string{"POST"}},
			{"POST", "/healthz", []string{"GET"}},
			{"POST", "/readyz", []string{"GET"}},
			{"POST", "/metrics", []string{"GET"}},
			{"POST", "/v1/cluster/members", []string{"GET"}},
			{"DELETE", "/v1/cluster/moves", []string{"GET"}},
			{"GET", "/v1/cluster/members/n1/decommission", []string{"POST", "DELETE"}},
		} {
			r := ctDo(t, tn, c.method, c.path, nil)
			if r.code != http.StatusMethodNotAllowed || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/plain") {
				t.Fatalf("%s %s: got %s (%s), want 405 text/plain", c.method, c.path, r, r.hdr.Get("Content-Type"))
			}
			allow := strings.Split(r.hdr.Get("Allow"), ", ")
			for _, m := range c.allow {
				if !slices.Contains(allow, m) {
					t.Fatalf("%s %s: Allow: got %q, want it to list %s", c.method, c.path, r.hdr.Get("Allow"), m)
				}
			}
			if slices.Contains(allow, c.method) {
				t.Fatalf("%s %s: Allow: got %q, which lists the refused method", c.method, c.path, r.hdr.Get("Allow"))
			}
		}
	})

	t.Run("ErrorBodiesAreJSONWithTrailingNewline", func(t *testing.T) {
		for _, c := range []struct {
			method, path, body string
			status             int
			text               string
		}{
			{"POST", "/v1/topics", `{`, 400, "invalid json: ..."},
			{"POST", "/v1/topics", `{"name":"t"}`, 409, errTopicExists},
			{"GET", "/v1/topics?limit=0", ``, 400, errBadLimit},
			{"GET", "/v1/topics/none", ``, 404, errTopicNotFound},
			{"GET", "/v1/topics/t?partition=9", ``, 400, errBadPartition},
			{"PATCH", "/v1/topics/none", `{"retention_ms":0}`, 404, errTopicNotFound},
			{"PATCH", "/v1/topics/t", `{}`, 400, ""},
			{"DELETE", "/v1/topics/none", ``, 404, errTopicNotFound},
			{"POST", "/v1/topics/none/produce", `x`, 404, errTopicNotFound},
			{"POST", "/v1/topics/t/produce", ``, 400, errMessageReq},
			{"GET", "/v1/topics/none/consume", ``, 404, errTopicNotFound},
			{"GET", "/v1/topics/t/consume?offset=0", ``, 400, ""},
			{"POST", "/v1/topics/none/ack?receipt_handle=0:0:1", ``, 404, errTopicNotFound},
			{"POST", "/v1/topics/t/ack", ``, 400, errHandleReq},
			{"POST", "/v1/topics/t/ack?receipt_handle=x", ``, 400, errMalformed},
			{"POST", "/v1/topics/t/ack?receipt_handle=0:0:1", ``, 410, errStale},
		} {
			ctWantError(t, c.method+" "+c.path, ctDo(t, tn, c.method, c.path, []byte(c.body)), c.status, c.text)
		}
	})

	t.Run("SuccessBodiesAreOneJSONValueWithLengthAndNewline", func(t *testing.T) {
		ctProduce(t, tn, "t", "partition=0", []byte("x"))
		ctWaitCommitted(t, tn, "t", 0, 0)
		for _, c := range []struct {
			method, path, body string
			status             int
		}{
			{"GET", "/healthz", "", 200},
			{"GET", "/readyz", "", 200},
			{"GET", "/v1/topics", "", 200},
			{"GET", "/v1/topics/t", "", 200},
			{"GET", "/v1/topics/t/consume?partition=0&offset=0", "", 200},
			{"GET", "/v1/topics/t/consume?partition=0", "", 200},
			{"PATCH", "/v1/topics/t", `{"retention_ms":0}`, 200},
			{"POST", "/v1/topics", `{"name":"t2"}`, 201},
			{"GET", "/v1/cluster/members", "", 200},
			{"GET", "/v1/cluster/moves", "", 200},
		} {
			ctWantJSON(t, c.method+" "+c.path, ctDo(t, tn, c.method, c.path, []byte(c.body)), c.status, nil)
		}
	})

	t.Run("AcceptedAndNoContentHaveNoBody", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"nobody"}`)
		ctWantEmpty(t, "produce", ctDo(t, tn, "POST", "/v1/topics/nobody/produce?partition=1", []byte(`{"a":1}`)), http.StatusAccepted)
		ctWaitCommitted(t, tn, "nobody", 1, 0)
		ctWantEmpty(t, "replay at the high watermark", ctDo(t, tn, "GET", "/v1/topics/nobody/consume?partition=1&offset=1", nil), http.StatusNoContent)
		m := ctConsume(t, tn, "nobody", "")
		if m == nil {
			t.Fatal("consume: got 204, want the record")
		}
		ctWantEmpty(t, "empty consume", ctDo(t, tn, "GET", "/v1/topics/nobody/consume", nil), http.StatusNoContent)
		ctWantEmpty(t, "extend", ctAck(t, tn, "nobody", m.ReceiptHandle, "&extend=true"), http.StatusNoContent)
		ctWantEmpty(t, "ack", ctAck(t, tn, "nobody", m.ReceiptHandle, ""), http.StatusNoContent)
		ctWantEmpty(t, "delete", ctDo(t, tn, "DELETE", "/v1/topics/nobody", nil), http.StatusNoContent)
	})

	t.Run("RequestContentTypeAndAuthorizationAreIgnored", func(t *testing.T) {
		auth := "Basic " + "bm9ib2R5Ondyb25n" // nobody:wrong
		for i, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/octet-stream", ""} {
			name := fmt.Sprintf("ignored%d", i)
			r := ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"`+name+`"}`), "Content-Type", ct, "Authorization", auth)
			ctWantJSON(t, "create with Content-Type "+ct, r, http.StatusCreated, nil)
		}
		for _, ct := range []string{"application/json", "application/octet-stream", "text/plain", "multipart/form-data"} {
			r := ctDo(t, tn, "POST", "/v1/topics/ignored0/produce?partition=0", []byte(`{"ct":"`+ct+`"}`), "Content-Type", ct, "Authorization", auth)
			ctWantEmpty(t, "produce with Content-Type "+ct, r, http.StatusAccepted)
		}
		ctWaitCommitted(t, tn, "ignored0", 0, 3)
		r := ctDo(t, tn, "GET", "/v1/topics/ignored0/consume?partition=0&offset=3", nil, "Authorization", auth)
		var m messages.MessageInfo
		ctWantJSON(t, "replay with Authorization", r, http.StatusOK, &m)
		if string(m.Payload) != `{"ct":"multipart/form-data"}` {
			t.Fatalf("payload: got %s, want the JSON body as sent", m.Payload)
		}
		ctWantJSON(t, "list with Authorization", ctDo(t, tn, "GET", "/v1/topics", nil, "Authorization", auth), http.StatusOK, nil)
	})

	// A handler panic's answer (500, a fixed body without a newline) is
	// checked in actors/api, which can mount a handler that panics.

	t.Run("ReadyzAndHealthz", func(t *testing.T) {
		for path, want := range map[string]string{"/healthz": `{"status":"ok"}` + "\n", "/readyz": `{"status":"ready"}` + "\n"} {
			r := ctDo(t, tn, "GET", path, nil)
			ctWantJSON(t, path, r, http.StatusOK, nil)
			if string(r.body) != want {
				t.Fatalf("GET %s: got %q, want %q", path, r.body, want)
			}
		}
	})

	t.Run("MetricsExposeNaradNames", func(t *testing.T) {
		r := ctDo(t, tn, "GET", "/metrics", nil)
		if r.code != http.StatusOK || !strings.HasPrefix(r.hdr.Get("Content-Type"), "text/plain") {
			t.Fatalf("GET /metrics: got %d (%s), want 200 text/plain", r.code, r.hdr.Get("Content-Type"))
		}
		names := map[string]bool{}
		for _, line := range strings.Split(string(r.body), "\n") {
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			// The Go runtime and process series keep their standard names,
			// as promhttp's default registry (the contract's exposition)
			// writes them; the broker's own are narad_.
			standard := strings.HasPrefix(line, "go_") || strings.HasPrefix(line, "process_")
			if !strings.HasPrefix(line, "narad_") && !standard {
				t.Fatalf("metric line %q: want every name prefixed narad_, or a standard go_ or process_ series", line)
			}
			names[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
		}
		for _, want := range []string{"narad_partitions_owned", "narad_produce_seconds_bucket", "narad_wal_backlog_records", "go_goroutines", "process_resident_memory_bytes"} {
			if !names[want] {
				t.Fatalf("metrics: got names %v, want %s among them", slices.Sorted(func(yield func(string) bool) {
					for k := range names {
						if !yield(k) {
							return
						}
					}
				}), want)
			}
		}
	})

	// Last: it flips the node's own shutdown and readiness flags (what Stop
	// and Start set) to see the answers of a node in those states.
	t.Run("StoppingNodeAnswers503OnHealthzReadyzAndProduce", func(t *testing.T) {
		defer tn.n.stopping.Store(false)
		defer tn.n.ready.Store(true)
		tn.n.ready.Store(false)
		ctWantError(t, "readyz before ready", ctDo(t, tn, "GET", "/readyz", nil), http.StatusServiceUnavailable, "not ready")
		r := ctDo(t, tn, "GET", "/healthz", nil)
		if r.code != http.StatusOK || string(r.body) != `{"status":"ok"}`+"\n" {
			t.Fatalf("healthz before ready: got %s, want 200 {\"status\":\"ok\"}", r)
		}
		tn.n.ready.Store(true)
		tn.n.stopping.Store(true)
		r = ctDo(t, tn, "GET", "/healthz", nil)
		ctWantJSON(t, "healthz while stopping", r, http.StatusServiceUnavailable, nil)
		if string(r.body) != `{"status":"shutting down"}`+"\n" {
			t.Fatalf("healthz while stopping: got %q, want {\"status\":\"shutting down\"}", r.body)
		}
		ctWantError(t, "readyz while stopping", ctDo(t, tn, "GET", "/readyz", nil), http.StatusServiceUnavailable, "not ready")
		ctWantError(t, "produce while stopping", ctDo(t, tn, "POST", "/v1/topics/t/produce", []byte("x")), http.StatusServiceUnavailable, "")
	})
}

// ---- §5, §6.1: create ----

func TestContractTopicCreate(t *testing.T) {
	tn := ctNode(t)

	t.Run("CreateTopicAppliesTheContractDefaults", func(t *testing.T) {
		before := time.Now().Unix()
		r := ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"defaults"}`))
		after := time.Now().Unix()
		var c messages.TopicDetails
		ctWantJSON(t, "create", r, http.StatusCreated, &c)
		ctWantKeys(t, "201 create response", r.body, createKeys)
		if c.Name != "defaults" || c.Partitions != 3 || c.RetentionMs != 604_800_000 || c.VisibilityTimeoutMs != 30_000 ||
			c.MaxInFlightPerPartition != 1024 || c.MaxAckedAheadPerPartition != 1024 {
			t.Fatalf("create: got %s, want partitions=3 retention_ms=604800000 visibility_timeout_ms=30000 max_in_flight=1024 max_acked_ahead=1024", ctSettings(c))
		}
		if c.CreatedAt < before || c.CreatedAt > after {
			t.Fatalf("created_at: got %d, want Unix seconds within [%d, %d]", c.CreatedAt, before, after)
		}
		got := ctDescribe(t, tn, "defaults")
		if ctSettings(got) != ctSettings(c) || got.CreatedAt != c.CreatedAt || got.Role != "standalone" {
			t.Fatalf("describe: got %s created_at=%d role=%q, want %s created_at=%d role=standalone", ctSettings(got), got.CreatedAt, got.Role, ctSettings(c), c.CreatedAt)
		}
	})

	t.Run("CreateTopicKeepsGivenSettingsAndZeroMeansDefault", func(t *testing.T) {
		c := ctCreate(t, tn, `{"name":"given","partitions":5,"retention_ms":3600000,"visibility_timeout_ms":1500,"max_in_flight_per_partition":7,"max_acked_ahead_per_partition":9}`)
		if want := "partitions=5 retention_ms=3600000 visibility_timeout_ms=1500 max_in_flight=7 max_acked_ahead=9"; ctSettings(c) != want {
			t.Fatalf("create: got %s, want %s", ctSettings(c), want)
		}
		c = ctCreate(t, tn, `{"name":"zeros","partitions":0,"retention_ms":0,"visibility_timeout_ms":0,"max_in_flight_per_partition":0,"max_acked_ahead_per_partition":0,"fanout_delay_ms":0,"parent":""}`)
		if want := "partitions=3 retention_ms=604800000 visibility_timeout_ms=30000 max_in_flight=1024 max_acked_ahead=1024"; ctSettings(c) != want {
			t.Fatalf("create with zeros: got %s, want the defaults %s", ctSettings(c), want)
		}
	})

	t.Run("CreateTopicAcceptsAndDiscardsOwner", func(t *testing.T) {
		r := ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"owned","owner":"mallory"}`))
		ctWantJSON(t, "create", r, http.StatusCreated, nil)
		ctWantKeys(t, "create with owner", r.body, createKeys)
		r = ctDo(t, tn, "GET", "/v1/topics/owned", nil)
		ctWantKeys(t, "describe", r.body, detailsKeys)
	})

	t.Run("CreateTopicRejectsUnknownField", func(t *testing.T) {
		for _, body := range []string{`{"name":"unknown1","colour":"red"}`, `{"name":"unknown1","children":["x"]}`, `{"name":"unknown1","role":"parent"}`} {
			ctWantError(t, "create "+body, ctDo(t, tn, "POST", "/v1/topics", []byte(body)), http.StatusBadRequest, "")
		}
		ctWantNoTopic(t, tn, "unknown1")
	})

	t.Run("CreateTopicSecondJSONValueIs400", func(t *testing.T) {
		for _, body := range []string{`{"name":"second1"}{"name":"second2"}`, `{"name":"second1"} 7`, `{"name":"second1"}]`, `{"name":"second1"} {`} {
			ctWantError(t, "create "+body, ctDo(t, tn, "POST", "/v1/topics", []byte(body)), http.StatusBadRequest, "invalid json: ...")
		}
		ctWantNoTopic(t, tn, "second1")
		ctWantNoTopic(t, tn, "second2")
		ctCreate(t, tn, "{\"name\":\"second3\"}\n\t ")
	})

	t.Run("CreateTopicRejectsMalformedJSON", func(t *testing.T) {
		for _, body := range []string{``, `{`, `[]`, `"name"`, `{"name":5}`, `{"name":"mal","partitions":"3"}`, `{"name":"mal","partitions":3.5}`, `{"name":"mal","retention_ms":true}`} {
			ctWantError(t, "create "+body, ctDo(t, tn, "POST", "/v1/topics", []byte(body)), http.StatusBadRequest, "invalid json: ...")
		}
		ctWantNoTopic(t, tn, "mal")
	})

	t.Run("CreateTopicNameMustMatchTheRegexAndNotBeDots", func(t *testing.T) {
		long := strings.Repeat("x", 255)
		for _, name := range []string{"a", "A.b_c-9", "...", ".hidden", "-", long} {
			c := ctCreate(t, tn, `{"name":`+ctJSONString(name)+`}`)
			if c.Name != name || ctDescribe(t, tn, name).Name != name {
				t.Fatalf("create %q: got name %q, want it kept", name, c.Name)
			}
		}
		for _, name := range []string{"", ".", "..", long + "x", "a b", "a/b", "ü", "a:b", "a*", "a\x00"} {
			ctWantError(t, fmt.Sprintf("create %q", name), ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":`+ctJSONString(name)+`}`)), http.StatusBadRequest, "invalid argument: ...")
		}
		ctWantError(t, "create without a name", ctDo(t, tn, "POST", "/v1/topics", []byte(`{"partitions":3}`)), http.StatusBadRequest, "")
		var list messages.TopicPage
		ctWantJSON(t, "list", ctDo(t, tn, "GET", "/v1/topics?limit=1000", nil), http.StatusOK, &list)
		for _, c := range list.Topics {
			if c.Name == "a b" || c.Name == long+"x" || c.Name == "" || c.Name == "." {
				t.Fatalf("list: got %q, a name that was refused", c.Name)
			}
		}
	})

	t.Run("CreateTopicPartitionsMustBeBetween3And108", func(t *testing.T) {
		for _, p := range []int{1, 2, 109, 1000, -1} {
			ctWantError(t, fmt.Sprintf("create with %d partitions", p), ctDo(t, tn, "POST", "/v1/topics", []byte(fmt.Sprintf(`{"name":"parts","partitions":%d}`, p))), http.StatusBadRequest, "")
		}
		ctWantNoTopic(t, tn, "parts")
		for _, p := range []int{3, 108} {
			name := fmt.Sprintf("parts%d", p)
			if c := ctCreate(t, tn, fmt.Sprintf(`{"name":%q,"partitions":%d}`, name, p)); c.Partitions != p {
				t.Fatalf("create with %d partitions: got %d", p, c.Partitions)
			}
			if got := len(ctDescribe(t, tn, name).PartitionStats); got != p {
				t.Fatalf("describe: got %d partition_stats, want %d", got, p)
			}
		}
	})

	t.Run("CreateTopicRetentionMustBeZeroOrAtLeastOneHour", func(t *testing.T) {
		for _, ms := range []int64{1, 1000, 3_599_999, -1} {
			ctWantError(t, fmt.Sprintf("create with retention_ms %d", ms), ctDo(t, tn, "POST", "/v1/topics", []byte(fmt.Sprintf(`{"name":"ret","retention_ms":%d}`, ms))), http.StatusBadRequest, "")
		}
		ctWantNoTopic(t, tn, "ret")
		if c := ctCreate(t, tn, `{"name":"ret1h","retention_ms":3600000}`); c.RetentionMs != 3_600_000 {
			t.Fatalf("retention_ms 3600000: got %d", c.RetentionMs)
		}
		// §15.3: 0 takes the server default, it does not keep forever.
		if c := ctCreate(t, tn, `{"name":"ret0","retention_ms":0}`); c.RetentionMs != 604_800_000 {
			t.Fatalf("retention_ms 0: got %d, want the server default 604800000", c.RetentionMs)
		}
	})

	t.Run("CreateTopicRejectsNegativeSettings", func(t *testing.T) {
		for _, f := range []string{"visibility_timeout_ms", "max_in_flight_per_partition", "max_acked_ahead_per_partition"} {
			ctWantError(t, "create with negative "+f, ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"neg","`+f+`":-1}`)), http.StatusBadRequest, "")
		}
		ctWantNoTopic(t, tn, "neg")
	})

	t.Run("CreateTopicSchemaMustCompileAndIsNotEchoed", func(t *testing.T) {
		for _, body := range []string{
			`{"name":"schema0","schema":{"type":"nope"}}`,
			`{"name":"schema0","schema":{"properties":{"id":{"type":7}}}}`,
			`{"name":"schema0","schema":"{\"type\":\"object\"}"}`,
			`{"name":"schema0","schema":42}`,
		} {
			ctWantError(t, "create "+body, ctDo(t, tn, "POST", "/v1/topics", []byte(body)), http.StatusBadRequest, "")
		}
		ctWantNoTopic(t, tn, "schema0")
		r := ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"schema1","schema":{"type":"object","properties":{"id":{"type":"integer"}}}}`))
		ctWantJSON(t, "create with a schema", r, http.StatusCreated, nil)
		ctWantKeys(t, "create with a schema", r.body, createKeys)
		ctWantKeys(t, "describe a schema topic", ctDo(t, tn, "GET", "/v1/topics/schema1", nil).body, detailsKeys)
		ctProduce(t, tn, "schema1", "", []byte(`{"id":1}`))
		ctWantError(t, "produce against the schema", ctDo(t, tn, "POST", "/v1/topics/schema1/produce", []byte(`{"id":"one"}`)), http.StatusBadRequest, "invalid argument: ...")
		// A null schema is no schema; true and false are schemas.
		ctCreate(t, tn, `{"name":"schema2","schema":null}`)
		ctProduce(t, tn, "schema2", "", []byte(`not json`))
		ctCreate(t, tn, `{"name":"schema3","schema":true}`)
		ctProduce(t, tn, "schema3", "", []byte(`{"any":"thing"}`))
		ctWantError(t, "produce of non-JSON to a schema topic", ctDo(t, tn, "POST", "/v1/topics/schema3/produce", []byte(`not json`)), http.StatusBadRequest, "invalid argument: ...")
		ctCreate(t, tn, `{"name":"schema4","schema":false}`)
		ctWantError(t, "produce against a false schema", ctDo(t, tn, "POST", "/v1/topics/schema4/produce", []byte(`{}`)), http.StatusBadRequest, "invalid argument: ...")
	})

	t.Run("CreateTopicExistingNameIs409", func(t *testing.T) {
		first := ctCreate(t, tn, `{"name":"dup","partitions":4}`)
		ctWantError(t, "second create", ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"dup","partitions":5,"retention_ms":3600000}`)), http.StatusConflict, errTopicExists)
		if got := ctDescribe(t, tn, "dup"); ctSettings(got) != ctSettings(first) {
			t.Fatalf("after a refused create: got %s, want %s", ctSettings(got), ctSettings(first))
		}
	})

	t.Run("CreateTopicBodyOf1MiBIsAcceptedAndLargerIs413", func(t *testing.T) {
		body := func(name string, size int) []byte {
			head, tail := `{"name":"`+name+`","owner":"`, `"}`
			return []byte(head + strings.Repeat("o", size-len(head)-len(tail)) + tail)
		}
		ctWantJSON(t, "create with a 1 MiB body", ctDo(t, tn, "POST", "/v1/topics", body("big1", 1<<20)), http.StatusCreated, nil)
		ctWantError(t, "create with 1 MiB + 1", ctDo(t, tn, "POST", "/v1/topics", body("big2", 1<<20+1)), http.StatusRequestEntityTooLarge, errTooLarge)
		ctWantError(t, "create with 1 MiB + 1 of garbage", ctDo(t, tn, "POST", "/v1/topics", ctRepeat('{', 1<<20+1)), http.StatusRequestEntityTooLarge, errTooLarge)
		ctWantNoTopic(t, tn, "big2")
	})

	t.Run("CreateTopicFanOutFieldsAreValidated", func(t *testing.T) {
		ctWantError(t, "delay without parent", ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"child1","fanout_delay_ms":5}`)), http.StatusBadRequest, "")
		ctWantError(t, "own parent", ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"child1","parent":"child1"}`)), http.StatusBadRequest, "")
		ctWantError(t, "missing parent", ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"child1","parent":"nosuchparent"}`)), http.StatusNotFound, "")
		ctWantError(t, "negative delay", ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"child1","parent":"nosuchparent","fanout_delay_ms":-1}`)), http.StatusBadRequest, "")
		ctWantError(t, "delay above a year", ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"child1","parent":"nosuchparent","fanout_delay_ms":31536000001}`)), http.StatusBadRequest, "")
		ctWantNoTopic(t, tn, "child1")
	})
}

// ---- §5, §6.2, §6.3: list and describe ----

func TestContractTopicReadAndList(t *testing.T) {
	tn := ctNode(t)
	list := func(t *testing.T, query string) (names []string, next string, raw []byte) {
		t.Helper()
		r := ctDo(t, tn, "GET", "/v1/topics?"+query, nil)
		var p messages.TopicPage
		ctWantJSON(t, "list ?"+query, r, http.StatusOK, &p)
		ctWantKeys(t, "list ?"+query, r.body, []string{"topics", "next_page_token"})
		// A null token decodes as "" too: look at the raw value.
		var keys map[string]json.RawMessage
		json.Unmarshal(r.body, &keys)
		if p.Topics == nil || !bytes.HasPrefix(keys["next_page_token"], []byte(`"`)) {
			t.Fatalf("list ?%s: got %s, want topics an array and next_page_token a string", query, r.body)
		}
		names = []string{}
		for _, c := range p.Topics {
			names = append(names, c.Name)
		}
		return names, p.NextPageToken, r.body
	}

	t.Run("ListTopicsWhenEmptyIsAnArrayNotNull", func(t *testing.T) {
		_, _, raw := list(t, "")
		if string(raw) != `{"topics":[],"next_page_token":""}`+"\n" {
			t.Fatalf("empty list: got %q, want {\"topics\":[],\"next_page_token\":\"\"}", raw)
		}
	})

	for _, name := range []string{"b", "a", "d", "c", "e", "B"} {
		tn.createTopic(name, 3)
	}

	t.Run("ListTopicsPagesByName", func(t *testing.T) {
		for _, c := range []struct {
			query string
			names []string
			next  string
		}{
			{"", []string{"B", "a", "b", "c", "d", "e"}, ""},
			{"limit=6", []string{"B", "a", "b", "c", "d", "e"}, ""},
			{"limit=2", []string{"B", "a"}, "a"},
			{"limit=2&page_token=a", []string{"b", "c"}, "c"},
			{"limit=2&page_token=c", []string{"d", "e"}, ""},
			{"limit=5", []string{"B", "a", "b", "c", "d"}, "d"},
			{"limit=5&page_token=d", []string{"e"}, ""},
			{"page_token=bb", []string{"c", "d", "e"}, ""},
			{"page_token=B", []string{"a", "b", "c", "d", "e"}, ""},
			{"page_token=zzz", []string{}, ""},
			{"page_token=e", []string{}, ""},
			{"limit=1000", []string{"B", "a", "b", "c", "d", "e"}, ""},
			{"limit=1001", []string{"B", "a", "b", "c", "d", "e"}, ""},
			{"limit=99999999", []string{"B", "a", "b", "c", "d", "e"}, ""},
		} {
			names, next, _ := list(t, c.query)
			if !slices.Equal(names, c.names) || next != c.next {
				t.Fatalf("list ?%s: got %v next %q, want %v next %q", c.query, names, next, c.names, c.next)
			}
		}
	})

	t.Run("ListTopicsRecordsCarryRoleStandaloneInContractOrder", func(t *testing.T) {
		_, _, raw := list(t, "limit=1")
		var p struct{ Topics []json.RawMessage }
		json.Unmarshal(raw, &p)
		ctWantKeys(t, "list item", p.Topics[0], recordKeys)
		var c messages.TopicDetails
		json.Unmarshal(p.Topics[0], &c)
		if c.Name != "B" || c.Role != "standalone" || c.Partitions != 3 || c.PartitionStats != nil {
			t.Fatalf("list item: got %s, want topic B, role standalone, 3 partitions, no stats", p.Topics[0])
		}
	})

	t.Run("ListTopicsRejectsALimitBelowOneOrNotAnInteger", func(t *testing.T) {
		for _, l := range []string{"0", "-1", "abc", "1.5", "1e3", "0x10"} {
			ctWantError(t, "limit="+l, ctDo(t, tn, "GET", "/v1/topics?limit="+l, nil), http.StatusBadRequest, errBadLimit)
		}
	})

	t.Run("DescribeTopicHasOneStatsEntryPerPartition", func(t *testing.T) {
		tn.createTopic("desc", 4)
		ctProduce(t, tn, "desc", "partition=1", []byte("one"))
		ctProduce(t, tn, "desc", "partition=1", []byte("two"))
		ctWaitCommitted(t, tn, "desc", 1, 1)
		r := ctDo(t, tn, "GET", "/v1/topics/desc", nil)
		var c messages.TopicDetails
		ctWantJSON(t, "describe", r, http.StatusOK, &c)
		ctWantKeys(t, "describe", r.body, detailsKeys)
		var raw struct {
			PartitionStats []json.RawMessage `json:"partition_stats"`
		}
		json.Unmarshal(r.body, &raw)
		for _, s := range raw.PartitionStats {
			ctWantKeysIn(t, "partition_stats entry", s, statsKeys, statsKeys[:6])
		}
		if c.Partitions != 4 || c.Role != "standalone" || len(c.PartitionStats) != 4 {
			t.Fatalf("describe: got %d partitions, role %q, %d stats, want 4, standalone, 4", c.Partitions, c.Role, len(c.PartitionStats))
		}
		for i, ps := range c.PartitionStats {
			want := int64(0)
			if i == 1 {
				want = 2
			}
			if ps.Index != i || ps.Segments < 1 || ps.OldestOffset != 0 || ps.NextOffset != want || ps.HighWatermark != want {
				t.Fatalf("partition_stats[%d]: got %+v, want index %d, >=1 segment, oldest 0, next_offset and high_watermark %d", i, ps, i, want)
			}
		}
		if c.PartitionStats[1].SizeBytes <= c.PartitionStats[0].SizeBytes {
			t.Fatalf("size_bytes: got %d for 2 records and %d for none, want more for the records", c.PartitionStats[1].SizeBytes, c.PartitionStats[0].SizeBytes)
		}
	})

	t.Run("DescribeTopicPartitionQueryLimitsTheStats", func(t *testing.T) {
		var c messages.TopicDetails
		ctWantJSON(t, "describe ?partition=2", ctDo(t, tn, "GET", "/v1/topics/desc?partition=2", nil), http.StatusOK, &c)
		if c.Partitions != 4 || len(c.PartitionStats) != 1 || c.PartitionStats[0].Index != 2 {
			t.Fatalf("describe ?partition=2: got %d partitions and stats %+v, want 4 partitions and only index 2", c.Partitions, c.PartitionStats)
		}
		for _, p := range []string{"4", "-1", "x", "", "1.0", "99999999999999999999"} {
			ctWantError(t, "describe ?partition="+p, ctDo(t, tn, "GET", "/v1/topics/desc?partition="+p, nil), http.StatusBadRequest, errBadPartition)
		}
	})

	t.Run("DescribeMissingTopicIs404", func(t *testing.T) {
		ctWantNoTopic(t, tn, "nosuch")
	})
}

// ListTopicsLimitAbove1000IsCapped needs 1001 topics. They are created
// through the metastore: through the API each would start three partition
// logs that this test never uses. The listing is read over HTTP.
func TestListTopicsLimitAbove1000IsCapped(t *testing.T) {
	tn := ctNode(t)
	const n = 1001
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, err := tn.n.store.CreateTopic(context.Background(), messages.Topic{Name: fmt.Sprintf("t%04d", i), Partitions: 3,
				RetentionMs: 3_600_000, VisibilityTimeoutMs: 30_000, MaxInFlightPerPartition: 1024, MaxAckedAheadPerPartition: 1024, CreatedAt: time.Now().Unix()})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var p messages.TopicPage
	for _, l := range []string{"1001", "5000", "2147483647"} {
		ctWantJSON(t, "list ?limit="+l, ctDo(t, tn, "GET", "/v1/topics?limit="+l, nil), http.StatusOK, &p)
		if len(p.Topics) != 1000 || p.Topics[999].Name != "t0999" || p.NextPageToken != "t0999" {
			t.Fatalf("list ?limit=%s: got %d topics, next %q, want 1000 topics up to t0999 and next t0999", l, len(p.Topics), p.NextPageToken)
		}
	}
	ctWantJSON(t, "second page", ctDo(t, tn, "GET", "/v1/topics?limit=5000&page_token=t0999", nil), http.StatusOK, &p)
	if len(p.Topics) != 1 || p.Topics[0].Name != "t1000" || p.NextPageToken != "" {
		t.Fatalf("second page: got %d topics, next %q, want only t1000 and no next", len(p.Topics), p.NextPageToken)
	}
	ctWantJSON(t, "default limit", ctDo(t, tn, "GET", "/v1/topics", nil), http.StatusOK, &p)
	if len(p.Topics) != 100 || p.NextPageToken != "t0099" {
		t.Fatalf("default limit: got %d topics, next %q, want 100 and next t0099", len(p.Topics), p.NextPageToken)
	}
}

// ---- §6.4: alter ----

func TestContractTopicAlter(t *testing.T) {
	tn := ctNode(t)
	alter := func(t *testing.T, name, body string) ctResp {
		t.Helper()
		return ctDo(t, tn, "PATCH", "/v1/topics/"+name, []byte(body))
	}
	alterOK := func(t *testing.T, name, body string) messages.TopicDetails {
		t.Helper()
		r := alter(t, name, body)
		var c messages.TopicDetails
		ctWantJSON(t, "alter "+body, r, http.StatusOK, &c)
		ctWantKeysIn(t, "alter response", r.body, recordKeys, createKeys)
		return c
	}
	unchanged := func(t *testing.T, name string, before messages.TopicDetails) {
		t.Helper()
		if got := ctDescribe(t, tn, name); ctSettings(got) != ctSettings(before) {
			t.Fatalf("after a refused alter: got %s, want %s", ctSettings(got), ctSettings(before))
		}
	}

	t.Run("AlterTopicRejectsVisibilityTimeout", func(t *testing.T) {
		before := ctCreate(t, tn, `{"name":"vis","visibility_timeout_ms":1500}`)
		for _, body := range []string{`{"visibility_timeout_ms":5000}`, `{"retention_ms":7200000,"visibility_timeout_ms":5000}`, `{"visibility_timeout_ms":1500}`} {
			ctWantError(t, "alter "+body, alter(t, "vis", body), http.StatusBadRequest, "...visibility_timeout_ms...")
		}
		unchanged(t, "vis", before)
	})

	t.Run("AlterTopicRejectsUnknownFieldsAndASecondJSONValue", func(t *testing.T) {
		before := ctCreate(t, tn, `{"name":"strict","retention_ms":3600000}`)
		for _, body := range []string{`{"colour":"red"}`, `{"name":"other"}`, `{"retention_ms":7200000,"owner":"x"}`} {
			ctWantError(t, "alter "+body, alter(t, "strict", body), http.StatusBadRequest, "")
		}
		for _, body := range []string{`{"retention_ms":7200000}{"retention_ms":3600000}`, `{"retention_ms":7200000} 1`} {
			ctWantError(t, "alter "+body, alter(t, "strict", body), http.StatusBadRequest, "invalid json: ...")
		}
		for _, body := range []string{``, `{`, `[]`, `{"retention_ms":"7200000"}`, `{"partitions":4.5}`} {
			ctWantError(t, "alter "+body, alter(t, "strict", body), http.StatusBadRequest, "invalid json: ...")
		}
		unchanged(t, "strict", before)
	})

	t.Run("AlterTopicNeedsAtLeastOneField", func(t *testing.T) {
		before := ctCreate(t, tn, `{"name":"nofield"}`)
		ctWantError(t, "alter {}", alter(t, "nofield", `{}`), http.StatusBadRequest, "")
		unchanged(t, "nofield", before)
	})

	t.Run("AlterMissingTopicIs404", func(t *testing.T) {
		ctWantError(t, "alter a missing topic", alter(t, "nosuch", `{"retention_ms":7200000}`), http.StatusNotFound, errTopicNotFound)
		ctWantNoTopic(t, tn, "nosuch")
	})

	t.Run("AlterTopicBodyOver1MiBIs413", func(t *testing.T) {
		before := ctCreate(t, tn, `{"name":"altbig"}`)
		big := append([]byte(`{"retention_ms":7200000}`), ctRepeat(' ', 1<<20)...)
		ctWantError(t, "alter with 1 MiB + 24", alter(t, "altbig", string(big)), http.StatusRequestEntityTooLarge, errTooLarge)
		ctWantError(t, "alter a missing topic with 1 MiB + 24", alter(t, "nosuch", string(big)), http.StatusRequestEntityTooLarge, errTooLarge)
		unchanged(t, "altbig", before)
	})

	t.Run("AlterTopicRetentionZeroResetsAndTheFloorHolds", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"ret","retention_ms":3600000}`)
		c := alterOK(t, "ret", `{"retention_ms":7200000}`)
		if c.RetentionMs != 7_200_000 || c.Name != "ret" {
			t.Fatalf("alter retention: got %s, want retention_ms=7200000", ctSettings(c))
		}
		if c := alterOK(t, "ret", `{"retention_ms":0}`); c.RetentionMs != 604_800_000 {
			t.Fatalf("alter retention 0: got %d, want the server default 604800000", c.RetentionMs)
		}
		before := ctDescribe(t, tn, "ret")
		for _, ms := range []string{"1", "3599999", "-1"} {
			ctWantError(t, "alter retention_ms "+ms, alter(t, "ret", `{"retention_ms":`+ms+`}`), http.StatusBadRequest, "")
		}
		unchanged(t, "ret", before)
	})

	t.Run("AlterTopicCapZeroMeansDefaultAndAnUnsetCapIsKept", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"caps","max_in_flight_per_partition":5,"max_acked_ahead_per_partition":7}`)
		if c := alterOK(t, "caps", `{"max_in_flight_per_partition":11}`); c.MaxInFlightPerPartition != 11 || c.MaxAckedAheadPerPartition != 7 {
			t.Fatalf("alter in-flight: got %s, want max_in_flight=11 max_acked_ahead=7", ctSettings(c))
		}
		if c := alterOK(t, "caps", `{"max_acked_ahead_per_partition":0}`); c.MaxInFlightPerPartition != 11 || c.MaxAckedAheadPerPartition != 1024 {
			t.Fatalf("alter acked-ahead 0: got %s, want max_in_flight=11 max_acked_ahead=1024", ctSettings(c))
		}
		if c := alterOK(t, "caps", `{"max_in_flight_per_partition":0,"max_acked_ahead_per_partition":3}`); c.MaxInFlightPerPartition != 1024 || c.MaxAckedAheadPerPartition != 3 {
			t.Fatalf("alter both: got %s, want max_in_flight=1024 max_acked_ahead=3", ctSettings(c))
		}
		before := ctDescribe(t, tn, "caps")
		ctWantError(t, "negative cap", alter(t, "caps", `{"max_in_flight_per_partition":-1}`), http.StatusBadRequest, "")
		ctWantError(t, "negative cap", alter(t, "caps", `{"max_acked_ahead_per_partition":-1}`), http.StatusBadRequest, "")
		unchanged(t, "caps", before)
	})

	t.Run("AlterTopicPartitionsOnlyGrow", func(t *testing.T) {
		before := ctCreate(t, tn, `{"name":"grow"}`)
		for _, p := range []string{"3", "2", "-1", "109"} {
			ctWantError(t, "alter partitions "+p, alter(t, "grow", `{"partitions":`+p+`}`), http.StatusBadRequest, "")
		}
		unchanged(t, "grow", before)
		if c := alterOK(t, "grow", `{"partitions":0}`); c.Partitions != 3 {
			t.Fatalf("alter partitions 0: got %d, want 3 unchanged", c.Partitions)
		}
		if c := alterOK(t, "grow", `{"partitions":5}`); c.Partitions != 5 {
			t.Fatalf("alter partitions 5: got %d", c.Partitions)
		}
		if got := ctDescribe(t, tn, "grow"); got.Partitions != 5 || len(got.PartitionStats) != 5 {
			t.Fatalf("after growing: got %d partitions and %d stats, want 5 and 5", got.Partitions, len(got.PartitionStats))
		}
		ctProduce(t, tn, "grow", "partition=4", []byte("new"))
		ctWaitCommitted(t, tn, "grow", 4, 0)
		if m := ctConsume(t, tn, "grow", "partition=4"); m == nil || string(m.Payload) != `"new"` {
			t.Fatalf("consume from a new partition: got %+v, want \"new\"", m)
		}
	})

	t.Run("AlterTopicSchemaMustStayBackwardCompatible", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"typed","schema":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}}}}`)
		r := alter(t, "typed", `{"schema":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"},"extra":{"type":"string"}}}}`)
		ctWantJSON(t, "compatible schema", r, http.StatusOK, nil)
		ctWantKeysIn(t, "alter response", r.body, recordKeys, createKeys)
		for what, s := range map[string]string{
			"a removed property":             `{"type":"object","properties":{"id":{"type":"integer"},"extra":{"type":"string"}}}`,
			"a changed type":                 `{"type":"object","properties":{"id":{"type":"string"},"name":{"type":"string"},"extra":{"type":"string"}}}`,
			"a new required field":           `{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},"name":{"type":"string"},"extra":{"type":"string"}}}`,
			"a schema that does not compile": `{"type":"nope"}`,
		} {
			ctWantError(t, "alter to "+what, alter(t, "typed", `{"schema":`+s+`}`), http.StatusBadRequest, "invalid argument: ...")
		}
		ctProduce(t, tn, "typed", "", []byte(`{"id":1,"extra":"x"}`))
		ctWantError(t, "produce against the kept schema", ctDo(t, tn, "POST", "/v1/topics/typed/produce", []byte(`{"id":"x"}`)), http.StatusBadRequest, "invalid argument: ...")

		ctCreate(t, tn, `{"name":"untyped"}`)
		ctProduce(t, tn, "untyped", "", []byte(`not json`))
		alterOK(t, "untyped", `{"schema":{"type":"object"}}`)
		ctWantError(t, "produce after adding a schema", ctDo(t, tn, "POST", "/v1/topics/untyped/produce", []byte(`not json`)), http.StatusBadRequest, "invalid argument: ...")
	})

	t.Run("AlterTopicAppliesEarlierStepsBeforeAFailingOne", func(t *testing.T) {
		// retention and caps, then partitions fail
		ctCreate(t, tn, `{"name":"steps1","retention_ms":3600000}`)
		ctWantError(t, "alter with shrinking partitions", alter(t, "steps1", `{"retention_ms":7200000,"max_in_flight_per_partition":9,"partitions":2}`), http.StatusBadRequest, "")
		if got, want := ctSettings(ctDescribe(t, tn, "steps1")), "partitions=3 retention_ms=7200000 visibility_timeout_ms=30000 max_in_flight=9 max_acked_ahead=1024"; got != want {
			t.Fatalf("after a failing partitions step: got %s, want %s", got, want)
		}
		// retention, then caps fail: partitions not reached
		ctCreate(t, tn, `{"name":"steps2","retention_ms":3600000}`)
		ctWantError(t, "alter with a negative cap", alter(t, "steps2", `{"retention_ms":7200000,"max_in_flight_per_partition":-1,"partitions":5}`), http.StatusBadRequest, "")
		if got, want := ctSettings(ctDescribe(t, tn, "steps2")), "partitions=3 retention_ms=7200000 visibility_timeout_ms=30000 max_in_flight=1024 max_acked_ahead=1024"; got != want {
			t.Fatalf("after a failing caps step: got %s, want %s", got, want)
		}
		// retention, caps and partitions, then the schema fails: the new
		// partitions must be usable like any grown ones.
		ctCreate(t, tn, `{"name":"steps3","retention_ms":3600000}`)
		ctWantError(t, "alter with a bad schema", alter(t, "steps3", `{"retention_ms":7200000,"max_in_flight_per_partition":9,"partitions":5,"schema":{"type":"nope"}}`), http.StatusBadRequest, "")
		got := ctDescribe(t, tn, "steps3")
		if want := "partitions=5 retention_ms=7200000 visibility_timeout_ms=30000 max_in_flight=9 max_acked_ahead=1024"; ctSettings(got) != want {
			t.Fatalf("after a failing schema step: got %s, want %s", ctSettings(got), want)
		}
		if len(got.PartitionStats) != 5 {
			t.Fatalf("after a failing schema step: got %d partition_stats, want one per partition (5)", len(got.PartitionStats))
		}
		ctProduce(t, tn, "steps3", "partition=4", []byte(`not json: the schema was not applied`))
		ctWaitCommitted(t, tn, "steps3", 4, 0)
	})

	t.Run("AlterTopicFailingRetentionChangesNothing", func(t *testing.T) {
		before := ctCreate(t, tn, `{"name":"steps4","retention_ms":3600000}`)
		ctWantError(t, "alter with a short retention", alter(t, "steps4", `{"retention_ms":5,"max_in_flight_per_partition":9,"partitions":5,"schema":{"type":"object"}}`), http.StatusBadRequest, "")
		unchanged(t, "steps4", before)
		ctProduce(t, tn, "steps4", "", []byte(`not json`))
	})
}

// ---- §6.5: delete ----

func TestContractTopicDelete(t *testing.T) {
	tn := ctNode(t)

	t.Run("DeleteTopicIs204AndMissingIs404", func(t *testing.T) {
		tn.createTopic("gone", 3)
		ctWantEmpty(t, "delete", ctDo(t, tn, "DELETE", "/v1/topics/gone", nil), http.StatusNoContent)
		ctWantNoTopic(t, tn, "gone")
		ctWantError(t, "delete again", ctDo(t, tn, "DELETE", "/v1/topics/gone", nil), http.StatusNotFound, errTopicNotFound)
		ctWantError(t, "produce to the deleted topic", ctDo(t, tn, "POST", "/v1/topics/gone/produce", []byte("x")), http.StatusNotFound, errTopicNotFound)
		var p messages.TopicPage
		ctWantJSON(t, "list", ctDo(t, tn, "GET", "/v1/topics", nil), http.StatusOK, &p)
		if len(p.Topics) != 0 {
			t.Fatalf("list after delete: got %+v, want no topics", p.Topics)
		}
	})

	t.Run("DeleteTopicDropsDataAndLeasesAndTheNameIsReusable", func(t *testing.T) {
		tn.createTopic("reuse", 3)
		ctProduce(t, tn, "reuse", "partition=0", []byte("old"))
		ctProduce(t, tn, "reuse", "partition=0", []byte("old2"))
		ctWaitCommitted(t, tn, "reuse", 0, 1)
		m := ctConsume(t, tn, "reuse", "partition=0")
		if m == nil {
			t.Fatal("consume: got 204, want the old record")
		}
		ctWantEmpty(t, "delete", ctDo(t, tn, "DELETE", "/v1/topics/reuse", nil), http.StatusNoContent)
		ctCreate(t, tn, `{"name":"reuse"}`)
		ctWantError(t, "ack of a lease from before the delete", ctAck(t, tn, "reuse", m.ReceiptHandle, ""), http.StatusGone, errStale)
		if n := ctRecords(t, tn, "reuse"); n != 0 {
			t.Fatalf("recreated topic: got %d records, want 0", n)
		}
		if m := ctConsume(t, tn, "reuse", "partition=0&offset=0"); m != nil {
			t.Fatalf("replay of the recreated topic: got %+v, want 204", m)
		}
		ctProduce(t, tn, "reuse", "partition=0", []byte("new"))
		m = ctConsume(t, tn, "reuse", "wait=2s")
		if m == nil || m.Offset != 0 || m.Partition != 0 || string(m.Payload) != `"new"` {
			t.Fatalf("consume from the recreated topic: got %+v, want \"new\" at partition 0 offset 0", m)
		}
	})
}

// ---- §8: produce ----

func TestContractProduce(t *testing.T) {
	tn := ctNode(t)
	tn.createTopic("p", 3)
	oversized := ctRepeat('x', 1<<20+1)

	t.Run("ProduceIs202WithAnEmptyBody", func(t *testing.T) {
		ctProduce(t, tn, "p", "", []byte("x"))
		ctProduce(t, tn, "p", "key=k", ctRepeat(0xff, 1))
	})

	t.Run("ProduceEmptyBodyIs400MessageRequired", func(t *testing.T) {
		ctWantError(t, "empty body", ctDo(t, tn, "POST", "/v1/topics/p/produce", nil), http.StatusBadRequest, errMessageReq)
		ctWantError(t, "empty body to a missing topic", ctDo(t, tn, "POST", "/v1/topics/nosuch/produce", nil), http.StatusBadRequest, errMessageReq)
	})

	t.Run("ProduceOversizedBodyIs413", func(t *testing.T) {
		ctWantError(t, "1 MiB + 1", ctDo(t, tn, "POST", "/v1/topics/p/produce", oversized), http.StatusRequestEntityTooLarge, errTooLarge)
	})

	t.Run("ProduceOversizedBodyToMissingTopicIs413", func(t *testing.T) {
		ctWantError(t, "1 MiB + 1 to a missing topic", ctDo(t, tn, "POST", "/v1/topics/nosuch/produce", oversized), http.StatusRequestEntityTooLarge, errTooLarge)
		ctWantError(t, "1 MiB + 1 to a missing topic with a partition", ctDo(t, tn, "POST", "/v1/topics/nosuch/produce?partition=500", oversized), http.StatusRequestEntityTooLarge, errTooLarge)
	})

	t.Run("ProduceQueryIsCheckedBeforeTheBodyAndTheTopic", func(t *testing.T) {
		for _, q := range []string{"key=a&key=b", "partition=x", "partition=-1", "partition=0&partition=1", "key=%zz"} {
			for _, body := range [][]byte{nil, oversized} {
				r := ctDo(t, tn, "POST", "/v1/topics/nosuch/produce?"+q, body)
				ctWantError(t, fmt.Sprintf("produce ?%s with %d bytes to a missing topic", q, len(body)), r, http.StatusBadRequest, "")
				if strings.Contains(string(r.body), errMessageReq) {
					t.Fatalf("produce ?%s: got %s, want the query refused first", q, r.body)
				}
			}
		}
	})

	t.Run("ProduceToMissingTopicIs404", func(t *testing.T) {
		ctWantError(t, "missing topic", ctDo(t, tn, "POST", "/v1/topics/nosuch/produce?key=k", []byte("x")), http.StatusNotFound, errTopicNotFound)
	})

	t.Run("ProduceKeyGivenTwiceIs400", func(t *testing.T) {
		for _, q := range []string{"key=a&key=b", "key=a&key=a", "key=&key=", "key=a&partition=0&key=b"} {
			ctWantError(t, "produce ?"+q, ctDo(t, tn, "POST", "/v1/topics/p/produce?"+q, []byte("x")), http.StatusBadRequest, "")
		}
	})

	t.Run("ProducePartitionMustBeANonNegativeIntegerInRange", func(t *testing.T) {
		for _, q := range []string{"partition=", "partition=x", "partition=-1", "partition=1.0", "partition=0x1", "partition=1&partition=1", "partition=99999999999999999999"} {
			ctWantError(t, "produce ?"+q, ctDo(t, tn, "POST", "/v1/topics/p/produce?"+q, []byte("x")), http.StatusBadRequest, "")
		}
		for _, q := range []string{"partition=3", "partition=108", "key=k&partition=3"} {
			ctWantError(t, "produce ?"+q, ctDo(t, tn, "POST", "/v1/topics/p/produce?"+q, []byte("x")), http.StatusBadRequest, "...partition out of range")
		}
	})

	t.Run("ProduceKeyPicksThePartitionByFNV1a", func(t *testing.T) {
		tn.createTopic("keyed", 7)
		long := strings.Repeat("k", 4096)
		for q, key := range map[string]string{"key=" + long: long, "key=k1": "k1", "key=hello%20world": "hello world", "key=a%2Bb": "a+b", "key=a+b": "a b", "key=%C3%BC": "ü", "key=order-42": "order-42"} {
			ctProduce(t, tn, "keyed", q, []byte(key))
			m := ctConsume(t, tn, "keyed", "wait=2s")
			if m == nil || m.Key != key || m.Partition != ctFNV(key, 7) {
				t.Fatalf("produce ?%s: got %+v, want key %q at partition %d", q, m, key, ctFNV(key, 7))
			}
			ctWantEmpty(t, "ack", ctAck(t, tn, "keyed", m.ReceiptHandle, ""), http.StatusNoContent)
		}
	})

	t.Run("KeylessProduceGetsAGeneratedKey", func(t *testing.T) {
		tn.createTopic("keyless", 5)
		keyRE := regexp.MustCompile(`^key-[0-9a-z]+$`)
		seen := map[string]bool{}
		for _, q := range []string{"", "key=", "other=1", ""} {
			ctProduce(t, tn, "keyless", q, []byte("x"))
			m := ctConsume(t, tn, "keyless", "wait=2s")
			if m == nil || !keyRE.MatchString(m.Key) || m.Partition != ctFNV(m.Key, 5) || seen[m.Key] {
				t.Fatalf("keyless produce ?%s: got %+v, want a new key-<base36> key whose FNV-1a picks the partition", q, m)
			}
			seen[m.Key] = true
			ctWantEmpty(t, "ack", ctAck(t, tn, "keyless", m.ReceiptHandle, ""), http.StatusNoContent)
		}
	})

	t.Run("ProducePartitionOverridesTheKey", func(t *testing.T) {
		tn.createTopic("pinned", 3)
		p := (ctFNV("k1", 3) + 1) % 3
		ctProduce(t, tn, "pinned", fmt.Sprintf("key=k1&partition=%d", p), []byte("x"))
		m := ctConsume(t, tn, "pinned", "wait=2s")
		if m == nil || m.Partition != p || m.Key != "k1" {
			t.Fatalf("produce ?key=k1&partition=%d: got %+v, want partition %d with key k1", p, m, p)
		}
	})

	t.Run("ProduceIgnoresOtherQueryParameters", func(t *testing.T) {
		tn.createTopic("extra", 3)
		ctProduce(t, tn, "extra", "partition=2&offset=7&max_messages=3&wait=bogus&foo=bar&foo=baz", []byte("x"))
		ctWaitCommitted(t, tn, "extra", 2, 0)
	})

	t.Run("ProduceOf1MiBIsAcceptedWhole", func(t *testing.T) {
		tn.createTopic("big", 3)
		body := ctRepeat('a', 1<<20)
		ctProduce(t, tn, "big", "partition=1", body)
		m := ctConsume(t, tn, "big", "wait=2s")
		if m == nil {
			t.Fatal("consume of a 1 MiB record: got 204, want the record")
		}
		var s string
		if json.Unmarshal(m.Payload, &s) != nil || s != string(body) {
			t.Fatalf("consume of a 1 MiB record: got %d payload bytes, want the 1 MiB text", len(m.Payload))
		}
	})

	t.Run("RejectedProducesChangeNothing", func(t *testing.T) {
		tn.createTopic("clean", 3)
		ctCreate(t, tn, `{"name":"cleantyped","schema":{"type":"object","required":["id"]}}`)
		for _, c := range []struct {
			topic, query string
			body         []byte
		}{
			{"clean", "", nil},
			{"clean", "", oversized},
			{"clean", "key=a&key=b", []byte("x")},
			{"clean", "partition=x", []byte("x")},
			{"clean", "partition=3", []byte("x")},
			{"clean", "partition=0&partition=0", []byte("x")},
			{"clean", "key=%zz", []byte("x")},
			{"cleantyped", "", []byte(`not json`)},
			{"cleantyped", "", []byte(`{"name":"no id"}`)},
		} {
			r := ctDo(t, tn, "POST", "/v1/topics/"+c.topic+"/produce?"+c.query, c.body)
			if r.code != http.StatusBadRequest && r.code != http.StatusRequestEntityTooLarge {
				t.Fatalf("produce to %s ?%s: got %s, want it refused", c.topic, c.query, r)
			}
		}
		ctSettle(t, tn)
		for _, topic := range []string{"clean", "cleantyped"} {
			if n := ctRecords(t, tn, topic); n != 0 {
				t.Fatalf("%s after refused produces: got %d records, want 0", topic, n)
			}
			if m := ctConsume(t, tn, topic, ""); m != nil {
				t.Fatalf("%s after refused produces: got %+v, want nothing consumable", topic, m)
			}
		}
	})
}

// ---- §9: consume ----

func TestContractConsume(t *testing.T) {
	tn := ctNode(t)

	t.Run("ConsumeResponseHasTheContractFieldsInOrder", func(t *testing.T) {
		tn.createTopic("fields", 3)
		before := time.Now().Unix()
		ctProduce(t, tn, "fields", "key=k&partition=1", []byte(`{"a":1}`))
		ctProduce(t, tn, "fields", "key=k&partition=1", []byte{0xff, 0x00})
		ctWaitCommitted(t, tn, "fields", 1, 1)
		after := time.Now().Unix()
		for _, c := range []struct {
			query string
			keys  []string
		}{
			{"partition=1&offset=0", []string{"topic", "partition", "offset", "key", "payload", "timestamp"}},
			{"partition=1&offset=1", []string{"topic", "partition", "offset", "key", "payload", "payload_encoding", "timestamp"}},
			{"partition=1", []string{"topic", "partition", "offset", "key", "payload", "timestamp", "receipt_handle"}},
			{"", []string{"topic", "partition", "offset", "key", "payload", "payload_encoding", "timestamp", "receipt_handle"}},
		} {
			r := ctDo(t, tn, "GET", "/v1/topics/fields/consume?"+c.query, nil)
			var m messages.MessageInfo
			ctWantJSON(t, "consume ?"+c.query, r, http.StatusOK, &m)
			ctWantKeys(t, "consume ?"+c.query, r.body, c.keys)
			if m.Topic != "fields" || m.Partition != 1 || m.Key != "k" || m.Timestamp < before || m.Timestamp > after {
				t.Fatalf("consume ?%s: got %+v, want topic fields, partition 1, key k, timestamp in Unix seconds within [%d, %d]", c.query, m, before, after)
			}
		}
	})

	t.Run("PayloadEncodingJSONTextAndBase64", func(t *testing.T) {
		tn.createTopic("enc", 3)
		cases := []struct {
			body, payload, encoding string
		}{
			{`{"a":[1,2,{"b":null}]}`, `{"a":[1,2,{"b":null}]}`, ""},
			{`[1,"x"]`, `[1,"x"]`, ""},
			{`42`, `42`, ""},
			{`-1.5e3`, `-1.5e3`, ""},
			{`123456789012345678901234567890`, `123456789012345678901234567890`, ""},
			{`"quoted"`, `"quoted"`, ""},
			{`true`, `true`, ""},
			{`false`, `false`, ""},
			{`null`, `null`, ""},
			{"{\"a\": 1}\n", `{"a":1}`, ""},
			{`hello world`, `"hello world"`, ""},
			{`{"a":`, `"{\"a\":"`, ""},
			{`héllo ✓`, `"héllo ✓"`, ""},
			{"tab\tand\nnewline", `"tab\tand\nnewline"`, ""},
			{"\x00", `"\u0000"`, ""},
			{"\xff\xfe\x00\x01", `"//4AAQ=="`, "base64"},
			{"abc\xc3", `"YWJjww=="`, "base64"},
		}
		for _, c := range cases {
			ctProduce(t, tn, "enc", "partition=0", []byte(c.body))
		}
		ctWaitCommitted(t, tn, "enc", 0, int64(len(cases)-1))
		check := func(i int, m *messages.MessageInfo) {
			c := cases[i]
			var got, want bytes.Buffer
			json.Compact(&got, m.Payload)
			json.Compact(&want, []byte(c.payload))
			if got.String() != want.String() || m.PayloadEncoding != c.encoding {
				t.Fatalf("body %q: got payload %s encoding %q, want %s encoding %q", c.body, m.Payload, m.PayloadEncoding, c.payload, c.encoding)
			}
		}
		for i := range cases {
			check(i, ctConsume(t, tn, "enc", fmt.Sprintf("partition=0&offset=%d", i)))
		}
		for i := range cases {
			m := ctConsume(t, tn, "enc", "partition=0")
			if m == nil || m.Offset != int64(i) {
				t.Fatalf("queue consume %d: got %+v, want offset %d", i, m, i)
			}
			check(i, m)
		}
	})

	t.Run("ConsumeOffsetWithoutPartitionIs400", func(t *testing.T) {
		tn.createTopic("nopart", 3)
		ctProduce(t, tn, "nopart", "partition=0", []byte("x"))
		ctWaitCommitted(t, tn, "nopart", 0, 0)
		for _, q := range []string{"offset=0", "offset=0&wait=1s", "offset=5"} {
			ctWantError(t, "consume ?"+q, ctDo(t, tn, "GET", "/v1/topics/nopart/consume?"+q, nil), http.StatusBadRequest, "")
		}
		if m := ctConsume(t, tn, "nopart", ""); m == nil {
			t.Fatal("after refused consumes: got 204, want the record still unreserved")
		}
	})

	t.Run("ConsumeRejectsMalformedParameters", func(t *testing.T) {
		tn.createTopic("params", 3)
		ctProduce(t, tn, "params", "partition=0", []byte("x"))
		ctWaitCommitted(t, tn, "params", 0, 0)
		for _, c := range []struct{ query, text string }{
			{"partition=x", errBadPartition},
			{"partition=-1", errBadPartition},
			{"partition=", errBadPartition},
			{"partition=1.0", errBadPartition},
			{"partition=3", ""},
			{"partition=99999999999999999999", ""},
			{"partition=3&offset=0", ""},
			{"partition=x&offset=0", errBadPartition},
			{"partition=0&offset=-1", ""},
			{"partition=0&offset=x", ""},
			{"partition=0&offset=", ""},
			{"partition=0&offset=1.5", ""},
			{"wait=5", ""},
			{"wait=abc", ""},
			{"wait=1x", ""},
			{"wait=%zz", ""},
			{"partition=0&wait=10", ""},
		} {
			ctWantError(t, "consume ?"+c.query, ctDo(t, tn, "GET", "/v1/topics/params/consume?"+c.query, nil), http.StatusBadRequest, c.text)
		}
		if m := ctConsume(t, tn, "params", ""); m == nil {
			t.Fatal("after refused consumes: got 204, want the record still unreserved")
		}
	})

	t.Run("ConsumeWaitTakesZeroNegativeAndCapsLargeValues", func(t *testing.T) {
		tn.createTopic("waits", 3)
		// A wait above the cap (the node's 2 s) ends with 204 well before
		// the client's 30 s timeout.
		for _, w := range []string{"0", "0s", "", "-5s", "-1h", "10ms", "1h"} {
			if m := ctConsume(t, tn, "waits", "wait="+w); m != nil {
				t.Fatalf("consume ?wait=%s: got %+v, want 204", w, m)
			}
		}
	})

	t.Run("ConsumeMissingTopicIs404", func(t *testing.T) {
		for _, q := range []string{"", "wait=1s", "partition=0", "partition=0&offset=0", "partition=7&offset=9"} {
			ctWantError(t, "consume ?"+q, ctDo(t, tn, "GET", "/v1/topics/nosuch/consume?"+q, nil), http.StatusNotFound, errTopicNotFound)
		}
	})

	t.Run("ReplayReadsWithoutReservingAndPastTheEndIs204", func(t *testing.T) {
		tn.createTopic("replay", 3)
		ctProduce(t, tn, "replay", "partition=2", []byte("r0"))
		ctWaitCommitted(t, tn, "replay", 2, 0)
		for range 2 {
			if m := ctConsume(t, tn, "replay", "partition=2&offset=0"); m == nil || m.ReceiptHandle != "" || string(m.Payload) != `"r0"` {
				t.Fatalf("replay: got %+v, want \"r0\" without a handle", m)
			}
		}
		m := ctConsume(t, tn, "replay", "")
		if m == nil || m.ReceiptHandle == "" || m.Partition != 2 || m.Offset != 0 {
			t.Fatalf("queue consume after replays: got %+v, want partition 2 offset 0 with a handle", m)
		}
		if r := ctConsume(t, tn, "replay", "partition=2&offset=0"); r == nil || r.ReceiptHandle != "" {
			t.Fatalf("replay of a leased record: got %+v, want it without a handle", r)
		}
		for _, q := range []string{"partition=2&offset=1", "partition=0&offset=0", "partition=2&offset=9223372036854775807"} {
			if r := ctConsume(t, tn, "replay", q); r != nil {
				t.Fatalf("replay ?%s: got %+v, want 204", q, r)
			}
		}
		ctWantEmpty(t, "ack", ctAck(t, tn, "replay", m.ReceiptHandle, ""), http.StatusNoContent)
		if r := ctConsume(t, tn, "replay", "partition=2&offset=0"); r == nil {
			t.Fatal("replay of an acked record: got 204, want the record")
		}
	})

	t.Run("PinnedConsumeServesOnlyThatPartition", func(t *testing.T) {
		tn.createTopic("pin", 3)
		ctProduce(t, tn, "pin", "partition=0", []byte("a"))
		ctProduce(t, tn, "pin", "partition=1", []byte("b"))
		ctWaitCommitted(t, tn, "pin", 0, 0)
		ctWaitCommitted(t, tn, "pin", 1, 0)
		if m := ctConsume(t, tn, "pin", "partition=1"); m == nil || m.Partition != 1 || string(m.Payload) != `"b"` || m.ReceiptHandle == "" {
			t.Fatalf("pinned consume: got %+v, want \"b\" from partition 1 with a handle", m)
		}
		for _, q := range []string{"partition=1", "partition=2", "partition=2&wait=10ms"} {
			if m := ctConsume(t, tn, "pin", q); m != nil {
				t.Fatalf("pinned consume ?%s: got %+v, want 204", q, m)
			}
		}
		if m := ctConsume(t, tn, "pin", ""); m == nil || m.Partition != 0 {
			t.Fatalf("queue consume: got %+v, want \"a\" from partition 0", m)
		}
	})

	t.Run("QueueConsumeRotatesOverPartitions", func(t *testing.T) {
		tn.createTopic("rotate", 3)
		for range 5 {
			ctProduce(t, tn, "rotate", "partition=0", []byte("busy"))
		}
		ctProduce(t, tn, "rotate", "partition=2", []byte("quiet"))
		ctWaitCommitted(t, tn, "rotate", 0, 4)
		ctWaitCommitted(t, tn, "rotate", 2, 0)
		// Consecutive scans start at consecutive partitions, so one of
		// three starts past partition 0.
		found := false
		for range 3 {
			if m := ctConsume(t, tn, "rotate", ""); m != nil && m.Partition == 2 {
				found = true
			}
		}
		if !found {
			t.Fatal("three queue consumes: got only partition 0, want partition 2's record too")
		}
	})

	t.Run("LongPollReturnsARecordCommittedDuringTheWait", func(t *testing.T) {
		tn.createTopic("poll", 3)
		type result struct {
			code int
			body []byte
			err  error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := tn.http.Get(tn.base + "/v1/topics/poll/consume?wait=2s")
			if err != nil {
				done <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			done <- result{resp.StatusCode, b, err}
		}()
		ctProduce(t, tn, "poll", "", []byte("late"))
		r := <-done
		if r.err != nil || r.code != http.StatusOK || !strings.Contains(string(r.body), `"payload":"late"`) {
			t.Fatalf("long poll: got %d %s %v, want 200 with the record", r.code, r.body, r.err)
		}
	})

	t.Run("ConsumeReturnsExactlyOneMessage", func(t *testing.T) {
		tn.createTopic("one", 3)
		ctProduce(t, tn, "one", "partition=0", []byte("1"))
		ctProduce(t, tn, "one", "partition=0", []byte("2"))
		ctWaitCommitted(t, tn, "one", 0, 1)
		r := ctDo(t, tn, "GET", "/v1/topics/one/consume?max_messages=10&batch=10", nil)
		ctWantJSON(t, "consume", r, http.StatusOK, nil)
		if r.body[0] != '{' {
			t.Fatalf("consume ?max_messages=10: got %s, want one message object", r.body)
		}
		if m := ctConsume(t, tn, "one", ""); m == nil || m.Offset != 1 {
			t.Fatalf("second consume: got %+v, want offset 1 (the first consume reserved one)", m)
		}
	})

	t.Run("LocalOnlyIsServedFromThisNode", func(t *testing.T) {
		tn.createTopic("local", 3)
		if m := ctConsume(t, tn, "local", "local_only=1&wait=1h"); m != nil {
			t.Fatalf("local_only on an empty topic: got %+v, want 204", m)
		}
		ctProduce(t, tn, "local", "partition=1", []byte("x"))
		ctWaitCommitted(t, tn, "local", 1, 0)
		if m := ctConsume(t, tn, "local", "local_only=1"); m == nil || m.ReceiptHandle == "" {
			t.Fatalf("local_only: got %+v, want the record with a handle", m)
		}
	})
}

// ---- §9: in-flight and acked-ahead caps ----

func TestContractConsumeLimits(t *testing.T) {
	tn := ctNode(t)

	t.Run("MaxInFlightPerPartitionSkipsAFullPartition", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"inflight","max_in_flight_per_partition":1}`)
		ctProduce(t, tn, "inflight", "partition=0", []byte("a0"))
		ctProduce(t, tn, "inflight", "partition=0", []byte("a1"))
		ctWaitCommitted(t, tn, "inflight", 0, 1)
		first := ctConsume(t, tn, "inflight", "")
		if first == nil || first.Partition != 0 || first.Offset != 0 {
			t.Fatalf("first consume: got %+v, want partition 0 offset 0", first)
		}
		for _, q := range []string{"", "partition=0"} {
			if m := ctConsume(t, tn, "inflight", q); m != nil {
				t.Fatalf("consume ?%s at the in-flight cap: got %+v, want 204", q, m)
			}
		}
		ctProduce(t, tn, "inflight", "partition=2", []byte("c0"))
		ctWaitCommitted(t, tn, "inflight", 2, 0)
		if m := ctConsume(t, tn, "inflight", ""); m == nil || m.Partition != 2 {
			t.Fatalf("consume with partition 0 full: got %+v, want partition 2's record", m)
		}
		ctWantEmpty(t, "ack", ctAck(t, tn, "inflight", first.ReceiptHandle, ""), http.StatusNoContent)
		if m := ctConsume(t, tn, "inflight", ""); m == nil || m.Partition != 0 || m.Offset != 1 {
			t.Fatalf("consume after the ack: got %+v, want partition 0 offset 1", m)
		}
	})

	t.Run("AlteredCapsApplyAtOnce", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"altered","max_in_flight_per_partition":1}`)
		ctProduce(t, tn, "altered", "partition=0", []byte("0"))
		ctProduce(t, tn, "altered", "partition=0", []byte("1"))
		ctWaitCommitted(t, tn, "altered", 0, 1)
		if m := ctConsume(t, tn, "altered", ""); m == nil || m.Offset != 0 {
			t.Fatalf("first consume: got %+v, want offset 0", m)
		}
		if m := ctConsume(t, tn, "altered", ""); m != nil {
			t.Fatalf("at the cap: got %+v, want 204", m)
		}
		ctWantJSON(t, "raise the cap", ctDo(t, tn, "PATCH", "/v1/topics/altered", []byte(`{"max_in_flight_per_partition":2}`)), http.StatusOK, nil)
		if m := ctConsume(t, tn, "altered", ""); m == nil || m.Offset != 1 {
			t.Fatalf("after raising the cap: got %+v, want offset 1", m)
		}
	})

	t.Run("AckedAheadFullAnswers503AndServesOnlyTheHead", func(t *testing.T) {
		ctCreate(t, tn, `{"name":"ahead","max_acked_ahead_per_partition":1}`)
		for i := range 4 {
			ctProduce(t, tn, "ahead", "partition=0", []byte(fmt.Sprint(i)))
		}
		ctWaitCommitted(t, tn, "ahead", 0, 3)
		var ms [3]*messages.MessageInfo
		for i := range ms {
			if ms[i] = ctConsume(t, tn, "ahead", "partition=0"); ms[i] == nil || ms[i].Offset != int64(i) {
				t.Fatalf("consume %d: got %+v, want offset %d", i, ms[i], i)
			}
		}
		ctWantEmpty(t, "ack of offset 1 (fills the acked-ahead set)", ctAck(t, tn, "ahead", ms[1].ReceiptHandle, ""), http.StatusNoContent)
		ctWantError(t, "ack of offset 2", ctAck(t, tn, "ahead", ms[2].ReceiptHandle, ""), http.StatusServiceUnavailable, errAckedAhead)
		if m := ctConsume(t, tn, "ahead", "partition=0"); m != nil {
			t.Fatalf("consume with the set full and the head leased: got %+v, want 204", m)
		}
		ctWantEmpty(t, "nack of the head", ctAck(t, tn, "ahead", ms[0].ReceiptHandle, "&extend=0"), http.StatusNoContent)
		head := ctConsume(t, tn, "ahead", "")
		if head == nil || head.Partition != 0 || head.Offset != 0 || head.ReceiptHandle == ms[0].ReceiptHandle {
			t.Fatalf("consume with the set full: got %+v, want only the head, offset 0, with a new handle", head)
		}
		ctWantEmpty(t, "ack of the head", ctAck(t, tn, "ahead", head.ReceiptHandle, ""), http.StatusNoContent)
		ctWantEmpty(t, "retried ack of offset 2", ctAck(t, tn, "ahead", ms[2].ReceiptHandle, ""), http.StatusNoContent)
		if m := ctConsume(t, tn, "ahead", ""); m == nil || m.Offset != 3 {
			t.Fatalf("consume after the head moved: got %+v, want offset 3", m)
		}
	})
}

// ---- §10: ack, extend, nack ----

func TestContractAck(t *testing.T) {
	tn := ctNode(t)
	tn.createTopic("ak", 3)
	tn.createTopic("other", 3)
	// lease produces one record on partition 0 of topic and leases it.
	lease := func(t *testing.T, topic string) *messages.MessageInfo {
		t.Helper()
		ctProduce(t, tn, topic, "partition=0", []byte("x"))
		m := ctConsume(t, tn, topic, "partition=0&wait=2s")
		if m == nil {
			t.Fatal("consume: got 204, want the record just produced")
		}
		return m
	}

	t.Run("AckReceiptHandleIsRequired", func(t *testing.T) {
		for _, q := range []string{"", "?receipt_handle=", "?receipt_handle=&receipt_handle=0:0:1", "?extend=true", "?handle=0:0:1"} {
			ctWantError(t, "ack "+q, ctDo(t, tn, "POST", "/v1/topics/ak/ack"+q, nil), http.StatusBadRequest, errHandleReq)
			ctWantError(t, "ack on a missing topic "+q, ctDo(t, tn, "POST", "/v1/topics/nosuch/ack"+q, nil), http.StatusBadRequest, errHandleReq)
		}
	})

	t.Run("AckMalformedHandleIsRejectedBeforeTopicLookup", func(t *testing.T) {
		for _, h := range []string{"x", "1:2", "1:2:3:4", "a:b:c", "0:0:0", "-1:0:1", "1:-2:3", "+1:2:3", " 1:2:3", "1::3", "1:2:", ":1:2",
			"99999999999999999999:0:1", "0:99999999999999999999:1", "0:0:99999999999999999999", "0x1:2:3", "1.0:2:3", "１:2:3"} {
			ctWantError(t, "ack on a missing topic "+h, ctAck(t, tn, "nosuch", h, ""), http.StatusBadRequest, errMalformed)
			ctWantError(t, "ack "+h, ctAck(t, tn, "ak", h, ""), http.StatusBadRequest, errMalformed)
			ctWantError(t, "extend "+h, ctAck(t, tn, "ak", h, "&extend=true"), http.StatusBadRequest, errMalformed)
		}
	})

	t.Run("AckBadEscapingIs400", func(t *testing.T) {
		for _, q := range []string{"receipt_handle=%zz", "receipt_handle=0:0:1%", "receipt_handle=0%3A0%3A1&extend=%zz"} {
			ctWantError(t, "ack ?"+q, ctDo(t, tn, "POST", "/v1/topics/ak/ack?"+q, nil), http.StatusBadRequest, "")
		}
	})

	t.Run("AckValidLookingHandleOnMissingTopicIs404", func(t *testing.T) {
		for _, h := range []string{"0:0:1", "500:7:123456789"} {
			ctWantError(t, "ack "+h, ctAck(t, tn, "nosuch", h, ""), http.StatusNotFound, errTopicNotFound)
		}
	})

	t.Run("AckBadExtendIs400AndLeavesTheLease", func(t *testing.T) {
		m := lease(t, "ak")
		for _, v := range []string{"yes", "2", "TRUE", "True", "no", "-1", "00"} {
			ctWantError(t, "extend="+v, ctAck(t, tn, "ak", m.ReceiptHandle, "&extend="+v), http.StatusBadRequest, "")
		}
		ctWantEmpty(t, "ack", ctAck(t, tn, "ak", m.ReceiptHandle, ""), http.StatusNoContent)
	})

	t.Run("AckExtendValuesAckExtendOrNack", func(t *testing.T) {
		for _, c := range []struct {
			extend string
			action string
		}{
			{"", "ack"}, {"&extend=", "ack"}, {"&extend=false", "ack"},
			{"&extend=true", "extend"}, {"&extend=1", "extend"},
			{"&extend=0", "nack"},
		} {
			m := lease(t, "ak")
			ctWantEmpty(t, "ack"+c.extend, ctAck(t, tn, "ak", m.ReceiptHandle, c.extend), http.StatusNoContent)
			switch c.action {
			case "ack":
				// A retry of the same handle's ack is answered as the first
				// was (its answer may have been lost on the way); any other
				// handle of the acked record stays gone (issue 30).
				ctWantEmpty(t, "ack retried"+c.extend, ctAck(t, tn, "ak", m.ReceiptHandle, ""), http.StatusNoContent)
				ctWantError(t, "ack of another handle of the acked record"+c.extend, ctAck(t, tn, "ak", otherHandle(t, m.ReceiptHandle), ""), http.StatusGone, errStale)
				ctWantError(t, "extend after ack"+c.extend, ctAck(t, tn, "ak", m.ReceiptHandle, "&extend=1"), http.StatusGone, errStale)
				if again := ctConsume(t, tn, "ak", ""); again != nil {
					t.Fatalf("consume after ack%s: got %+v, want nothing", c.extend, again)
				}
			case "extend":
				if again := ctConsume(t, tn, "ak", ""); again != nil {
					t.Fatalf("consume after extend%s: got %+v, want nothing (still leased)", c.extend, again)
				}
				ctWantEmpty(t, "ack after extend"+c.extend, ctAck(t, tn, "ak", m.ReceiptHandle, ""), http.StatusNoContent)
			case "nack":
				ctWantError(t, "ack after nack", ctAck(t, tn, "ak", m.ReceiptHandle, ""), http.StatusGone, errStale)
				again := ctConsume(t, tn, "ak", "")
				if again == nil || again.Offset != m.Offset || again.ReceiptHandle == m.ReceiptHandle {
					t.Fatalf("consume after nack: got %+v, want offset %d at once with a new handle", again, m.Offset)
				}
				ctWantEmpty(t, "ack of the redelivery", ctAck(t, tn, "ak", again.ReceiptHandle, ""), http.StatusNoContent)
			}
		}
	})

	t.Run("AckFirstReceiptHandleWins", func(t *testing.T) {
		m := lease(t, "ak")
		q := "/v1/topics/ak/ack?receipt_handle=" + url.QueryEscape(m.ReceiptHandle) + "&receipt_handle=garbage"
		ctWantEmpty(t, "ack with a second handle", ctDo(t, tn, "POST", q, nil), http.StatusNoContent)
		m = lease(t, "ak")
		q = "/v1/topics/ak/ack?receipt_handle=garbage&receipt_handle=" + url.QueryEscape(m.ReceiptHandle)
		ctWantError(t, "ack with a bad first handle", ctDo(t, tn, "POST", q, nil), http.StatusBadRequest, errMalformed)
		ctWantEmpty(t, "ack", ctAck(t, tn, "ak", m.ReceiptHandle, ""), http.StatusNoContent)
	})

	t.Run("AckIgnoresUnknownParametersAndABody", func(t *testing.T) {
		m := lease(t, "ak")
		q := "/v1/topics/ak/ack?foo=bar&receipt_handle=" + url.QueryEscape(m.ReceiptHandle) + "&topic=other&partition=9"
		ctWantEmpty(t, "ack", ctDo(t, tn, "POST", q, []byte(`{"ignored":true}`)), http.StatusNoContent)
	})

	t.Run("AckHandlesThatMatchNoLeaseAre410", func(t *testing.T) {
		for _, h := range []string{"0:999:1", "7:0:1", "2:0:5", "0:0:18446744073709551615"} {
			ctWantError(t, "ack "+h, ctAck(t, tn, "ak", h, ""), http.StatusGone, errStale)
			ctWantError(t, "extend "+h, ctAck(t, tn, "ak", h, "&extend=1"), http.StatusGone, errStale)
			ctWantError(t, "nack "+h, ctAck(t, tn, "ak", h, "&extend=0"), http.StatusGone, errStale)
		}
	})

	t.Run("AckHandleFromAnotherTopicIs410AndLeavesItsLease", func(t *testing.T) {
		m := lease(t, "other")
		for _, extend := range []string{"", "&extend=true", "&extend=0"} {
			ctWantError(t, "ack on the wrong topic"+extend, ctAck(t, tn, "ak", m.ReceiptHandle, extend), http.StatusGone, errStale)
		}
		if again := ctConsume(t, tn, "other", ""); again != nil {
			t.Fatalf("consume of the other topic: got %+v, want nothing (its lease stays)", again)
		}
		ctWantEmpty(t, "ack on its own topic", ctAck(t, tn, "other", m.ReceiptHandle, ""), http.StatusNoContent)
	})
}

// §10: the committed position moves over a contiguous run of acks, and
// out-of-order acks are kept across a restart.
func TestOutOfOrderAcksAreKeptAcrossARestart(t *testing.T) {
	tn := ctNode(t)
	tn.createTopic("ooo", 3)
	for i := range 4 {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/ooo/produce?partition=0", []byte(fmt.Sprint(i)))
	}
	ctWaitCommitted(t, tn, "ooo", 0, 3)
	var ms [4]*messages.MessageInfo
	for i := range ms {
		ms[i] = ctConsume(t, tn, "ooo", "partition=0")
	}
	for _, i := range []int{3, 0, 2} {
		ctWantEmpty(t, fmt.Sprintf("ack of offset %d", i), ctAck(t, tn, "ooo", ms[i].ReceiptHandle, ""), http.StatusNoContent)
	}
	tn.restart()
	// Offset 1 is still leased to its holder across the restart (issue
	// 30), who gives it back with the handle from before it.
	if m := ctConsume(t, tn, "ooo", ""); m != nil {
		t.Fatalf("after restart, offset 1 still leased: got %+v, want nothing", m)
	}
	ctWantEmpty(t, "nack of offset 1 by its holder", ctAck(t, tn, "ooo", ms[1].ReceiptHandle, "&extend=0"), http.StatusNoContent)
	m := ctConsume(t, tn, "ooo", "wait=2s")
	if m == nil || m.Offset != 1 {
		t.Fatalf("after restart and the nack: got %+v, want only offset 1 (the one unacked)", m)
	}
	ctWantEmpty(t, "ack", ctAck(t, tn, "ooo", m.ReceiptHandle, ""), http.StatusNoContent)
	if m := ctConsume(t, tn, "ooo", ""); m != nil {
		t.Fatalf("after acking the gap: got %+v, want nothing", m)
	}
}

// §9, §13: a replay of an offset that retention removed is 410.
func TestReplayOfAnOffsetRemovedByRetentionIs410(t *testing.T) {
	tn := ctNode(t, func(c *Config) {
		c.Log.SegmentMaxBytes = 4 << 10
		c.RetentionInterval = 20 * time.Millisecond
	})
	ctCreate(t, tn, `{"name":"aged","retention_ms":3600000}`)
	var off int64
	for ; off < 50; off++ {
		ctProduce(t, tn, "aged", "partition=0", ctRepeat('r', 1500))
		ctWaitCommitted(t, tn, "aged", 0, off)
		if ctDescribe(t, tn, "aged").PartitionStats[0].Segments >= 3 {
			break
		}
	}
	// Age every segment past the 1 h retention; the newest one stays.
	dir := storage.PartitionPath(tn.cfg.DataDir, "aged", 0)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	for _, e := range ents {
		if err := os.Chtimes(filepath.Join(dir, e.Name()), old, old); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool {
		return ctDo(t, tn, "GET", "/v1/topics/aged/consume?partition=0&offset=0", nil).code == http.StatusGone
	})
	ctWantError(t, "replay of a removed offset", ctDo(t, tn, "GET", "/v1/topics/aged/consume?partition=0&offset=0", nil), http.StatusGone, errStale)
	oldest := ctDescribe(t, tn, "aged").PartitionStats[0].OldestOffset
	if oldest <= 0 || oldest > off+1 {
		t.Fatalf("oldest_offset after retention: got %d, want within (0, %d]", oldest, off+1)
	}
	// A fresh record, so something is left to consume whichever segments
	// retention takes next; removed records count as acked.
	ctProduce(t, tn, "aged", "partition=0", []byte("fresh"))
	ctWaitCommitted(t, tn, "aged", 0, off+1)
	if m := ctConsume(t, tn, "aged", ""); m == nil || m.Offset < oldest {
		t.Fatalf("queue consume after retention: got %+v, want a record at or past oldest_offset %d", m, oldest)
	}
	ctWantError(t, "replay of a removed offset", ctDo(t, tn, "GET", "/v1/topics/aged/consume?partition=0&offset=0", nil), http.StatusGone, errStale)
}

// ---- §12: cluster administration ----

func TestContractCluster(t *testing.T) {
	tn := ctNode(t)
	members := func(t *testing.T) messages.MemberInfo {
		t.Helper()
		r := ctDo(t, tn, "GET", "/v1/cluster/members", nil)
		var out struct{ Members []json.RawMessage }
		ctWantJSON(t, "members", r, http.StatusOK, &out)
		ctWantKeys(t, "members", r.body, []string{"members"})
		if len(out.Members) != 1 {
			t.Fatalf("members: got %s, want exactly this node", r.body)
		}
		contract := []string{"id", "addr", "status", "draining", "owned_partitions", "outbound_moves"}
		ctWantKeysIn(t, "member", out.Members[0], append(contract, "role", "leaving", "reclaimed_bytes", "quarantined_bytes"), contract)
		var m messages.MemberInfo
		json.Unmarshal(out.Members[0], &m)
		// Beyond the contract, and counted process-wide by node id.
		m.ReclaimedBytes, m.QuarantinedBytes = nil, nil
		return m
	}

	t.Run("ClusterMembersAndMoves", func(t *testing.T) {
		want := messages.MemberInfo{ID: "n1", Addr: tn.cfg.HTTPAddr, Status: "alive", Role: messages.RoleVoter}
		if got := members(t); got != want {
			t.Fatalf("members: got %+v, want %+v", got, want)
		}
		ctCreate(t, tn, `{"name":"three"}`)
		ctCreate(t, tn, `{"name":"four","partitions":4}`)
		if got := members(t).OwnedPartitions; got != 7 {
			t.Fatalf("owned_partitions: got %d, want 7", got)
		}
		ctWantJSON(t, "grow", ctDo(t, tn, "PATCH", "/v1/topics/four", []byte(`{"partitions":6}`)), http.StatusOK, nil)
		ctWantEmpty(t, "delete", ctDo(t, tn, "DELETE", "/v1/topics/three", nil), http.StatusNoContent)
		if got := members(t).OwnedPartitions; got != 6 {
			t.Fatalf("owned_partitions after grow and delete: got %d, want 6", got)
		}
		r := ctDo(t, tn, "GET", "/v1/cluster/moves", nil)
		ctWantJSON(t, "moves", r, http.StatusOK, nil)
		if string(r.body) != `{"moves":[]}`+"\n" {
			t.Fatalf("moves: got %q, want {\"moves\":[]}", r.body)
		}
	})

	t.Run("DecommissionOfAnUnknownMemberIs404", func(t *testing.T) {
		for _, method := range []string{"POST", "DELETE"} {
			ctWantError(t, method+" decommission of n9", ctDo(t, tn, method, "/v1/cluster/members/n9/decommission", nil), http.StatusNotFound, "...not found")
		}
		if members(t).Draining {
			t.Fatal("members: got draining after refused decommissions, want not draining")
		}
	})

	// rule D8: a decommission that could never complete is refused up front.
	t.Run("DecommissionOfTheOnlyMemberIsRefusedWith409", func(t *testing.T) {
		ctWantError(t, "decommission of the only member", ctDo(t, tn, "POST", "/v1/cluster/members/n1/decommission", nil), http.StatusConflict, "decommission cannot complete: no other live member can take its partitions")
		if m := members(t); m.Draining || m.Status != "alive" {
			t.Fatalf("after a refused decommission: got %+v, want alive and not draining", m)
		}
		ctWantEmpty(t, "cancel with nothing to cancel", ctDo(t, tn, "DELETE", "/v1/cluster/members/n1/decommission", nil), http.StatusNoContent)
	})
}

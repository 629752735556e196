package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/cmd/narad/measure"
	"github.com/naradmq/narad/messages"
)

// fakeQueue is a tiny in-memory broker for one topic: produce appends
// round-robin over its partitions, consume leases the first unleased,
// unacked record, ack settles a lease. Leases never expire (tests are
// shorter than any visibility timeout). Knobs inject the faults a real
// broker may show, or a bug that the history must catch.
type fakeQueue struct {
	mu       sync.Mutex
	topic    string
	exists   bool
	parts    [][]*fakeRecord
	rr       int
	nonce    int
	produces int
	acks     int
	// changed is closed and replaced whenever a record becomes available,
	// to wake long-polls.
	changed chan struct{}

	loseEvery      int // every k-th produce is answered 202 and dropped: a bug
	failEvery      int // every k-th produce is answered 503, every other one after storing it
	refuseAckEvery int // every k-th ack is answered 410 and the lease dropped
}

type fakeRecord struct {
	body   []byte
	acked  bool
	handle string // the current lease, "" when free
}

func newFakeQueue(topic string, partitions int) *fakeQueue {
	return &fakeQueue{topic: topic, parts: make([][]*fakeRecord, partitions), changed: make(chan struct{})}
}

// wake must be called with mu held.
func (q *fakeQueue) wake() {
	close(q.changed)
	q.changed = make(chan struct{})
}

func (q *fakeQueue) serve(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(q.handler(t))
	t.Cleanup(srv.Close)
	return srv
}

// handler answers the contract's calls for the queue; several servers may
// share it, as the nodes of a cluster share their topics.
// produce stores body as a produce to topic does, losing or failing it
// as the queue is told, and returns the status answered.
func (q *fakeQueue) produce(topic string, body []byte) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.exists || topic != q.topic {
		return 404
	}
	q.produces++
	store := true
	status := 202
	if q.loseEvery > 0 && q.produces%q.loseEvery == 0 {
		store = false
	}
	if q.failEvery > 0 && q.produces%q.failEvery == 0 {
		status = 503
		store = (q.produces/q.failEvery)%2 == 1
	}
	if store {
		p := q.rr % len(q.parts)
		q.rr++
		q.parts[p] = append(q.parts[p], &fakeRecord{body: body})
		q.wake()
	}
	return status
}

func (q *fakeQueue) handler(t *testing.T) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/topics", func(w http.ResponseWriter, r *http.Request) {
		var req messages.CreateTopicRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name != q.topic || req.Partitions != len(q.parts) {
			t.Errorf("create topic: got %+v (%v), want %s with %d partitions", req, err, q.topic, len(q.parts))
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		if q.exists {
			http.Error(w, `{"error":"topic already exists"}`, 409)
			return
		}
		q.exists = true
		w.WriteHeader(201)
		fmt.Fprintf(w, `{"name":%q,"partitions":%d}`+"\n", q.topic, len(q.parts))
	})
	mux.HandleFunc("GET /v1/topics/{topic}", func(w http.ResponseWriter, r *http.Request) {
		q.mu.Lock()
		defer q.mu.Unlock()
		d := messages.TopicDetails{TopicInfo: messages.TopicInfo{Name: q.topic, Partitions: len(q.parts)}}
		for i, p := range q.parts {
			d.PartitionStats = append(d.PartitionStats, messages.PartitionInfo{Index: i, HighWatermark: int64(len(p))})
		}
		_ = json.NewEncoder(w).Encode(d)
	})
	mux.HandleFunc("POST /v1/topics/{topic}/produce", func(w http.ResponseWriter, r *http.Request) {
		body := new(bytes.Buffer)
		if _, err := body.ReadFrom(r.Body); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		switch status := q.produce(r.PathValue("topic"), body.Bytes()); status {
		case 202:
			w.WriteHeader(202)
		case 404:
			http.Error(w, `{"error":"topic not found"}`, 404)
		default:
			http.Error(w, "partition owner is down; retry later", status)
		}
	})
	mux.HandleFunc("POST /v1/topics/{topic}/produce/batch", func(w http.ResponseWriter, r *http.Request) {
		var req messages.ProduceBatchRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		var out messages.ProduceBatchResponse
		for _, rec := range req.Records {
			body := []byte(rec.Payload)
			if rec.PayloadEncoding != "" {
				var s string
				if err := json.Unmarshal(rec.Payload, &s); err != nil {
					t.Errorf("batch record %s: %v", rec.Payload, err)
				}
				body = []byte(s)
			}
			status := q.produce(r.PathValue("topic"), body)
			if status == 202 {
				out.Accepted++
			}
			out.Results = append(out.Results, messages.BatchResult{Status: status})
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET /v1/topics/{topic}/consume", func(w http.ResponseWriter, r *http.Request) {
		wait, err := time.ParseDuration(r.URL.Query().Get("wait"))
		if err != nil {
			http.Error(w, `{"error":"invalid wait"}`, 400)
			return
		}
		timer := time.NewTimer(wait)
		defer timer.Stop()
		for {
			q.mu.Lock()
			msg, changed := q.lease()
			q.mu.Unlock()
			if msg != nil {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(msg)
				return
			}
			select {
			case <-changed:
			case <-timer.C:
				w.WriteHeader(204)
				return
			case <-r.Context().Done():
				return
			}
		}
	})
	mux.HandleFunc("POST /v1/topics/{topic}/ack", func(w http.ResponseWriter, r *http.Request) {
		h := r.URL.Query().Get("receipt_handle")
		var p, o, n int
		if _, err := fmt.Sscanf(h, "%d:%d:%d", &p, &o, &n); err != nil {
			http.Error(w, `{"error":"receipt handle is malformed"}`, 400)
			return
		}
		q.mu.Lock()
		defer q.mu.Unlock()
		rec := q.parts[p][o]
		if rec.handle != h {
			http.Error(w, `{"error":"receipt handle no longer matches an active reservation"}`, 410)
			return
		}
		q.acks++
		if q.refuseAckEvery > 0 && q.acks%q.refuseAckEvery == 0 {
			// As if the lease ran out just before the ack arrived.
			rec.handle = ""
			q.wake()
			http.Error(w, `{"error":"receipt handle no longer matches an active reservation"}`, 410)
			return
		}
		rec.acked = true
		rec.handle = ""
		w.WriteHeader(204)
	})
	return mux
}

// lease must be called with mu held. It returns a message, or the channel
// that will say when one may be available.
func (q *fakeQueue) lease() (*messages.MessageInfo, <-chan struct{}) {
	for p, recs := range q.parts {
		for o, rec := range recs {
			if rec.acked || rec.handle != "" {
				continue
			}
			q.nonce++
			rec.handle = fmt.Sprintf("%d:%d:%d", p, o, q.nonce)
			return &messages.MessageInfo{Topic: q.topic, Partition: p, Offset: int64(o), Payload: rec.body, ReceiptHandle: rec.handle}, nil
		}
	}
	return nil, q.changed
}

func testConfig(server string) config {
	return config{
		servers: []string{server}, topic: "load", producers: 3, consumers: 3, count: 500, size: 200,
		// Generous bounds: a healthy run ends as soon as everything was
		// consumed, so they only matter when something is wrong.
		duration: time.Minute, partitions: 3, create: true, drain: time.Minute,
		wait: 200 * time.Millisecond, progressEvery: 5 * time.Millisecond,
	}
}

func TestRunAgainstAFakeBrokerEndsAndReportsOK(t *testing.T) {
	q := newFakeQueue("load", 3)
	cfg := testConfig(q.serve(t).URL)
	cfg.json = true
	var stdout, stderr bytes.Buffer

	if err := run(t.Context(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("got error %v, want nil\n%s", err, stderr.String())
	}

	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("stdout %q is not one JSON object: %v", stdout.String(), err)
	}
	if s.Produced != 500 || s.Acked != 500 || s.Deliveries != 500 {
		t.Errorf("got produced %d, deliveries %d, acked %d, want 500 each", s.Produced, s.Deliveries, s.Acked)
	}
	if !s.History.OK || s.History.Consumed != 500 || s.History.Duplicates != 0 {
		t.Errorf("got history %+v, want OK with 500 consumed and no duplicates", s.History)
	}
	if s.ProducedBytes != 500*200 {
		t.Errorf("got %d bytes produced, want %d: every body is -size bytes", s.ProducedBytes, 500*200)
	}
	if s.ProduceLatency.Count != 500 || s.EndToEndLatency.Count != 500 {
		t.Errorf("got %d produce and %d end-to-end samples, want 500 each", s.ProduceLatency.Count, s.EndToEndLatency.Count)
	}
	if s.Watermarks != "checked" {
		t.Errorf("got watermarks %q, want checked", s.Watermarks)
	}
	for _, want := range []string{"produced 500/500", "produce:", "full flow:", "produce latency:", "end-to-end latency:", "history OK"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

// -batch sends the records through the batch route, and a record the
// broker answers 503 goes again alone with the next attempt: every record
// is still produced and consumed once.
func TestRunInBatchesRetriesOnlyTheRecordsRefused(t *testing.T) {
	q := newFakeQueue("load", 3)
	q.failEvery = 7
	cfg := testConfig(q.serve(t).URL)
	cfg.json, cfg.batch = true, 50
	var stdout, stderr bytes.Buffer
	if err := run(t.Context(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("got error %v, want nil\n%s", err, stderr.String())
	}
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatalf("stdout %q is not one JSON object: %v", stdout.String(), err)
	}
	if s.Produced != 500 || !s.History.OK || s.History.Lost != 0 || s.Batch != 50 || s.ProduceFailures == 0 {
		t.Errorf("got produced %d, history %+v, batch %d, retries %d, want 500 produced, history OK, batch 50 and some retries", s.Produced, s.History, s.Batch, s.ProduceFailures)
	}
}

func TestRunTextSummaryGoesToStdout(t *testing.T) {
	q := newFakeQueue("load", 3)
	cfg := testConfig(q.serve(t).URL)
	cfg.count = 50
	var stdout, stderr bytes.Buffer

	if err := run(t.Context(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("got error %v, want nil\n%s", err, stderr.String())
	}
	if !strings.Contains(stdout.String(), "history OK: produced 50") {
		t.Errorf("got stdout %q, want the text summary", stdout.String())
	}
}

func TestRunSurvivesRetriesAndRedeliveries(t *testing.T) {
	q := newFakeQueue("load", 3)
	q.failEvery = 7
	q.refuseAckEvery = 5
	cfg := testConfig(q.serve(t).URL)
	cfg.json = true
	var stdout, stderr bytes.Buffer

	if err := run(t.Context(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("got error %v, want nil\n%s", err, stderr.String())
	}
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	// A produce whose every attempt failed is only maybe-produced.
	if !s.History.OK || s.History.Produced+int(s.ProduceGaveUp) != 500 {
		t.Errorf("got history %+v and %d given up, want OK with 500 produced", s.History, s.ProduceGaveUp)
	}
	if s.ProduceFailures == 0 || s.AcksRefused == 0 || s.History.Duplicates == 0 {
		t.Errorf("got %d failed produces, %d refused acks, %d duplicates, want each above 0",
			s.ProduceFailures, s.AcksRefused, s.History.Duplicates)
	}
}

func TestRunReportsLoss(t *testing.T) {
	q := newFakeQueue("load", 3)
	q.loseEvery = 50 // 10 of the 500 are answered 202 and dropped
	cfg := testConfig(q.serve(t).URL)
	// The dropped ids never arrive, so the drain always runs to its end.
	cfg.drain = time.Second
	cfg.json = true
	var stdout, stderr bytes.Buffer

	err := run(t.Context(), cfg, &stdout, &stderr)
	if !errors.Is(err, errHistory) {
		t.Fatalf("got error %v, want errHistory", err)
	}
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.History.OK || s.History.Lost < 10 || len(s.History.LostSample) == 0 {
		t.Errorf("got history %+v, want a failure with at least 10 lost and a sample of them", s.History)
	}
	if !strings.Contains(stderr.String(), "history FAILED") {
		t.Errorf("got stderr %q, want history FAILED", stderr.String())
	}
}

func TestRunUsesAnExistingTopic(t *testing.T) {
	q := newFakeQueue("load", 3)
	q.exists = true
	// A message left by an earlier run: acked and counted, not a phantom.
	q.parts[0] = append(q.parts[0], &fakeRecord{body: measure.MakeBody("rold-p0-0000001", 1, 64, []byte(strings.Repeat("x", 64)))})
	cfg := testConfig(q.serve(t).URL)
	cfg.count = 20
	cfg.json = true
	var stdout, stderr bytes.Buffer

	if err := run(t.Context(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("got error %v, want nil\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "topic load exists; using it") {
		t.Errorf("got stderr %q, want the note about the existing topic", stderr.String())
	}
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Foreign != 1 || !s.History.OK {
		t.Errorf("got foreign %d, history OK %v, want 1 and true", s.Foreign, s.History.OK)
	}
}

func TestRunStopsOnAMissingTopic(t *testing.T) {
	q := newFakeQueue("load", 3)
	cfg := testConfig(q.serve(t).URL)
	cfg.create = false
	var stdout, stderr bytes.Buffer

	err := run(t.Context(), cfg, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "404 topic not found") {
		t.Fatalf("got error %v, want 404 topic not found", err)
	}
}

func TestRunEndsWhenCancelled(t *testing.T) {
	q := newFakeQueue("load", 3)
	q.loseEvery = 1 // nothing is ever stored, so the drain would wait for long
	cfg := testConfig(q.serve(t).URL)
	cfg.drain = time.Hour
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr bytes.Buffer
	go func() {
		// Cancel once producing is over, during the drain.
		for range 10000 {
			q.mu.Lock()
			n := q.produces
			q.mu.Unlock()
			if n >= cfg.count {
				break
			}
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()

	err := run(ctx, cfg, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("got error %v, want interrupted", err)
	}
	if !strings.Contains(stdout.String(), "interrupted: the figures below cover the run so far") {
		t.Errorf("got summary %q, want the interrupted note", stdout.String())
	}
}

func TestRefusesANonLoopbackServer(t *testing.T) {
	for _, server := range []string{"http://192.0.2.1:7942", "http://example.com", "http://10.0.0.1", "ftp://127.0.0.1"} {
		cfg := testConfig(server)
		var stdout, stderr bytes.Buffer
		if err := run(t.Context(), cfg, &stdout, &stderr); err == nil {
			t.Errorf("server %s: got nil error, want a refusal", server)
		}
	}
	for _, server := range []string{"http://127.0.0.1:7942", "http://localhost:1", "http://[::1]:7942", "http://127.1.2.3"} {
		if _, err := checkLoopback(server); err != nil {
			t.Errorf("server %s: got %v, want it accepted", server, err)
		}
	}
}

func TestParseFlagsDefaultsAlwaysEnd(t *testing.T) {
	t.Setenv("NARAD_SERVER", "")
	var stderr bytes.Buffer
	cfg, err := parseFlags(nil, &stderr)
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	if cfg.count != 100000 || cfg.duration != time.Minute || cfg.drain != 30*time.Second || cfg.wait != time.Second {
		t.Errorf("got count %d duration %s drain %s wait %s, want 100000 1m 30s 1s", cfg.count, cfg.duration, cfg.drain, cfg.wait)
	}
	if len(cfg.servers) != 1 || cfg.servers[0] != "http://127.0.0.1:7942" {
		t.Errorf("got servers %q, want [http://127.0.0.1:7942]", cfg.servers)
	}
	if _, err := parseFlags([]string{"-duration", "0s"}, &stderr); err == nil {
		t.Errorf("got nil error for -duration 0s, want one: the run must be bounded")
	}
}

// The load's bodies are measure's, and the history reads their ids.
func TestLoadBodyIsReadByTheHistory(t *testing.T) {
	b := measure.MakeBody("r1-p0-0000001", 1700000000123456789, 1024, measure.Pad(1024))
	if id, ok := history.ParseBody(b); !ok || id != "r1-p0-0000001" {
		t.Errorf("history.ParseBody: got %q %v, want r1-p0-0000001 true", id, ok)
	}
}

func TestBackoffIsCapped(t *testing.T) {
	if got := backoff(1); got != 50*time.Millisecond {
		t.Errorf("got %s, want 50ms", got)
	}
	if got := backoff(100); got != time.Second {
		t.Errorf("got %s, want 1s", got)
	}
}

// -rate is bounded: negative or absurd rates are refused with a reason.
func TestParseFlagsRate(t *testing.T) {
	var stderr bytes.Buffer
	if cfg, err := parseFlags([]string{"-rate", "500"}, &stderr); err != nil || cfg.ratePerSecond != 500 {
		t.Errorf("-rate 500: got %v, %v; want 500 and no error", cfg.ratePerSecond, err)
	}
	for _, bad := range []string{"-1", "1e9"} {
		if _, err := parseFlags([]string{"-rate", bad}, &stderr); err == nil || !strings.Contains(err.Error(), "-rate") {
			t.Errorf("-rate %s: got %v, want an error naming -rate", bad, err)
		}
	}
}

func TestProgressFinalLine(t *testing.T) {
	l := &loadRun{cfg: testConfig("http://127.0.0.1:1"), hist: history.New()}
	l.produced.Store(40)
	l.deliveries.Store(30)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	var tty, plain bytes.Buffer
	l.progress(ctx, &tty, true)
	l.progress(ctx, &plain, false)

	if !strings.HasPrefix(tty.String(), "\r") || !strings.HasSuffix(tty.String(), "\n") {
		t.Errorf("got %q, want a line redrawn with \\r and ended with a newline", tty.String())
	}
	if !strings.Contains(plain.String(), "produced 40/500") || !strings.Contains(plain.String(), "consumed 30") || strings.Contains(plain.String(), "\r") {
		t.Errorf("got %q, want a plain line with the counts", plain.String())
	}
}

func TestParseFlagsServerList(t *testing.T) {
	t.Setenv("NARAD_SERVER", "")
	var stderr bytes.Buffer
	cfg, err := parseFlags([]string{"-server", "http://127.0.0.1:7942, http://127.0.0.1:7943,http://localhost:7944/"}, &stderr)
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	want := []string{"http://127.0.0.1:7942", "http://127.0.0.1:7943", "http://localhost:7944/"}
	if strings.Join(cfg.servers, " ") != strings.Join(want, " ") {
		t.Errorf("got servers %q, want %q", cfg.servers, want)
	}

	// The environment's default may be a list too.
	t.Setenv("NARAD_SERVER", "http://127.0.0.1:1,http://[::1]:2")
	cfg, err = parseFlags(nil, &stderr)
	if err != nil || len(cfg.servers) != 2 || cfg.servers[1] != "http://[::1]:2" {
		t.Errorf("got servers %q, error %v, want the two from $NARAD_SERVER", cfg.servers, err)
	}
}

func TestParseFlagsRefusesBadServerEntries(t *testing.T) {
	t.Setenv("NARAD_SERVER", "")
	for _, tc := range []struct{ server, want string }{
		{"", "-server is empty"},
		{" ", "-server is empty"},
		{"http://127.0.0.1:1,,http://127.0.0.1:2", "entry 2 of 3 is empty"},
		{"http://127.0.0.1:1,", "entry 2 of 2 is empty"},
		{",http://127.0.0.1:1", "entry 1 of 2 is empty"},
		{"http://127.0.0.1:1,http://10.0.0.1:2", `-server entry 2 of 2: server url "http://10.0.0.1:2": the load driver only targets loopback addresses`},
		{"http://127.0.0.1:1,127.0.0.1:2", "-server entry 2 of 2"},
		{"http://127.0.0.1:1,ftp://127.0.0.1:2", "scheme must be http or https"},
		{"http://127.0.0.1:1,http://127.0.0.1:1/", "entries 1 and 2 are the same server http://127.0.0.1:1"},
		// A single URL keeps its error as it was.
		{"http://192.0.2.1:7942", `server url "http://192.0.2.1:7942": the load driver only targets loopback addresses`},
	} {
		var stderr bytes.Buffer
		_, err := parseFlags([]string{"-server", tc.server}, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("-server %q: got error %v, want one containing %q", tc.server, err, tc.want)
		}
	}
}

// serverLog records what reached one of several servers in front of one
// fakeQueue.
type serverLog struct {
	mu        sync.Mutex
	creates   int
	stats     int
	produces  map[string]int  // producer ("p3") -> produces it sent here
	consumes  int             // consume requests, answered or not
	leased    map[string]bool // receipt handles this server handed out
	acks      int
	strayAcks []string // acks of handles another server handed out
}

// logRequests wraps h: it notes each request in sl, reading the producer
// from a produce's body and the handle from a consume's answer.
func logRequests(t *testing.T, sl *serverLog, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		switch {
		case r.Method == http.MethodPost && path == "/v1/topics":
			sl.mu.Lock()
			sl.creates++
			sl.mu.Unlock()
		case r.Method == http.MethodGet && path == "/v1/topics/load":
			sl.mu.Lock()
			sl.stats++
			sl.mu.Unlock()
		case strings.HasSuffix(path, "/produce"):
			body, err := io.ReadAll(r.Body)
			if err != nil {
				t.Errorf("read produce body: %v", err)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			id, _, _ := measure.ParseBody(body)
			// ids are <run>-p<producer>-<n>.
			fields := strings.Split(id, "-")
			sl.mu.Lock()
			sl.produces[fields[min(1, len(fields)-1)]]++
			sl.mu.Unlock()
		case strings.HasSuffix(path, "/consume"):
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			var d messages.MessageInfo
			if rec.Code == 200 && json.Unmarshal(rec.Body.Bytes(), &d) == nil {
				sl.mu.Lock()
				sl.leased[d.ReceiptHandle] = true
				sl.mu.Unlock()
			}
			sl.mu.Lock()
			sl.consumes++
			sl.mu.Unlock()
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		case strings.HasSuffix(path, "/ack"):
			handle := r.URL.Query().Get("receipt_handle")
			sl.mu.Lock()
			sl.acks++
			if !sl.leased[handle] {
				sl.strayAcks = append(sl.strayAcks, handle)
			}
			sl.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func TestRunSpreadsWorkersOverEveryServer(t *testing.T) {
	q := newFakeQueue("load", 3)
	h := q.handler(t)
	logs := make([]*serverLog, 3)
	var urls []string
	for i := range logs {
		logs[i] = &serverLog{produces: map[string]int{}, leased: map[string]bool{}}
		srv := httptest.NewServer(logRequests(t, logs[i], h))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	cfg := testConfig(urls[0])
	cfg.servers = urls
	cfg.producers, cfg.consumers = 5, 4
	cfg.json = true
	var stdout, stderr bytes.Buffer

	if err := run(t.Context(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("got error %v, want nil\n%s", err, stderr.String())
	}
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if !s.History.OK || s.Acked != 500 || len(s.Servers) != 3 {
		t.Errorf("got history %+v, %d acked, servers %q, want OK, 500 and the three servers", s.History, s.Acked, s.Servers)
	}
	if !strings.Contains(stderr.String(), "servers:            3, workers round-robin:") {
		t.Errorf("text summary lacks the servers line:\n%s", stderr.String())
	}
	for i, sl := range logs {
		sl.mu.Lock()
		// Producer p uses server p mod 3; each producer sends something,
		// as they share the count but start before it runs out.
		var want []string
		for p := i; p < cfg.producers; p += len(logs) {
			want = append(want, fmt.Sprintf("p%d", p))
		}
		var got []string
		for p := range cfg.producers {
			if sl.produces[fmt.Sprintf("p%d", p)] > 0 {
				got = append(got, fmt.Sprintf("p%d", p))
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("server %d: got produces from %v, want from %v (%v)", i, got, want, sl.produces)
		}
		if sl.consumes == 0 || sl.acks == 0 {
			t.Errorf("server %d: got %d consumes and %d acks, want some of each", i, sl.consumes, sl.acks)
		}
		if len(sl.strayAcks) > 0 {
			t.Errorf("server %d: got acks of handles it did not hand out: %q", i, sl.strayAcks)
		}
		wantCreates, wantStats := 0, 0
		if i == 0 {
			wantCreates, wantStats = 1, 1
		}
		if sl.creates != wantCreates || sl.stats != wantStats {
			t.Errorf("server %d: got %d creates and %d stats reads, want %d and %d", i, sl.creates, sl.stats, wantCreates, wantStats)
		}
		sl.mu.Unlock()
	}
}

// gateProduce holds the produce of the message numbered n (by its id's
// suffix) until the queue has taken want acks, so that those acks happen
// while a producer is still running.
func gateProduce(q *fakeQueue, n, want int, h http.Handler) http.Handler {
	suffix := fmt.Sprintf("-%07d", n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/produce") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if id, _, ok := measure.ParseBody(body); ok && strings.HasSuffix(id, suffix) {
				for {
					q.mu.Lock()
					acks := q.acks
					q.mu.Unlock()
					if acks >= want || r.Context().Err() != nil {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
		}
		h.ServeHTTP(w, r)
	})
}

func TestRunCountsTheAcksMadeWhileProducing(t *testing.T) {
	q := newFakeQueue("load", 3)
	srv := httptest.NewServer(gateProduce(q, 400, 100, q.handler(t)))
	t.Cleanup(srv.Close)
	cfg := testConfig(srv.URL)
	cfg.json = true
	var stdout, stderr bytes.Buffer

	if err := run(t.Context(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("got error %v, want nil\n%s", err, stderr.String())
	}
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.AckedWhileProducing < 100 || s.AckedWhileProducing > s.Acked {
		t.Errorf("got %d acked while producing of %d acked, want 100 to %d", s.AckedWhileProducing, s.Acked, s.Acked)
	}
	if got, want := s.ConsumeAckMsgsPerSec, float64(s.AckedWhileProducing)/s.ProduceSeconds; got != want {
		t.Errorf("got consume+ack rate %.1f msgs/s, want %.1f (acked while producing / produce seconds)", got, want)
	}
	if s.EndToEndWhileProducing.Count < 100 || s.EndToEndWhileProducing.Count > s.EndToEndLatency.Count {
		t.Errorf("got %d end-to-end samples while producing of %d, want 100 to %d",
			s.EndToEndWhileProducing.Count, s.EndToEndLatency.Count, s.EndToEndLatency.Count)
	}
	if s.FirstProduceUnixNs == 0 || s.LastProduceUnixNs < s.FirstProduceUnixNs || s.LastAckUnixNs < s.FirstProduceUnixNs {
		t.Errorf("got bounds first %d, last produce %d, last ack %d, want first set and the others after it",
			s.FirstProduceUnixNs, s.LastProduceUnixNs, s.LastAckUnixNs)
	}
}

func TestRunGoesOnWithOneServerDown(t *testing.T) {
	q := newFakeQueue("load", 3)
	up := q.serve(t)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // its port now refuses connections, as a killed node's does
	cfg := testConfig(up.URL)
	cfg.servers = []string{up.URL, down.URL}
	cfg.json = true
	var stdout, stderr bytes.Buffer

	if err := run(t.Context(), cfg, &stdout, &stderr); err != nil {
		t.Fatalf("got error %v, want nil\n%s", err, stderr.String())
	}
	var s summary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	// Producer 1 and consumer 1 start on the dead server: each failed
	// attempt moves them to the live one, so nothing is given up.
	if s.Produced != 500 || s.ProduceGaveUp != 0 || s.Acked != 500 || !s.History.OK {
		t.Errorf("got %d produced, %d given up, %d acked, history %+v, want 500, 0, 500 and OK",
			s.Produced, s.ProduceGaveUp, s.Acked, s.History)
	}
	if s.ProduceFailures == 0 {
		t.Errorf("got 0 failed produce attempts, want some: a producer started on the dead server")
	}
}

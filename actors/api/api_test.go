package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/messages"
)

// The contract's end-to-end tests run against a real node in package
// actors (api_contract_test.go). These check what the handlers add over a
// node: the mapping of each domain answer to a status and text, and the
// order of the checks, against a fake node that answers what it is told.

// fakeNode answers every method with err, or with what its fields hold.
type fakeNode struct {
	ready, stopping, leaving atomic.Bool
	admit                    error
	err                      error
	delivery                 messages.Delivery
	found                    bool
	topic                    messages.TopicInfo
	abort                    AbortOutcome
	verdict                  DecommissionVerdict
	forget                   ForgetVerdict
	left                     string
	writeFailure             string
	// got is the last record produced or handle settled.
	got any
}

func (f *fakeNode) Ready() bool          { return f.ready.Load() }
func (f *fakeNode) Stopping() bool       { return f.stopping.Load() }
func (f *fakeNode) Leaving() bool        { return f.leaving.Load() }
func (f *fakeNode) LeftReason() string   { return f.left }
func (f *fakeNode) WriteFailure() string { return f.writeFailure }
func (f *fakeNode) Admit() error         { return f.admit }
func (f *fakeNode) Produce(_ context.Context, rec Record) error {
	f.got = rec
	return f.err
}
func (f *fakeNode) Consume(context.Context, string, int, time.Duration) (messages.Delivery, bool, error) {
	return f.delivery, f.found, f.err
}
func (f *fakeNode) Replay(context.Context, string, int, int64) (messages.Delivery, bool, error) {
	return f.delivery, f.found, f.err
}
func (f *fakeNode) Settle(_ context.Context, _ string, h Handle, _ messages.LeaseAction) error {
	f.got = h
	return f.err
}
func (f *fakeNode) ProduceBatch(_ context.Context, _ string, recs []Record) []error {
	f.got = recs
	errs := make([]error, len(recs))
	for i := range errs {
		errs[i] = f.err
	}
	return errs
}
func (f *fakeNode) ConsumeBatch(context.Context, string, int, time.Duration, int) ([]messages.Delivery, error) {
	if !f.found {
		return nil, f.err
	}
	return []messages.Delivery{f.delivery}, f.err
}
func (f *fakeNode) SettleBatch(_ context.Context, _ string, hs []Handle, _ messages.LeaseAction) []error {
	f.got = hs
	errs := make([]error, len(hs))
	for i := range errs {
		errs[i] = f.err
	}
	return errs
}
func (f *fakeNode) CreateTopic(context.Context, messages.CreateTopicRequest) (messages.TopicInfo, error) {
	return f.topic, f.err
}
func (f *fakeNode) AlterTopic(context.Context, string, messages.AlterTopicRequest) (messages.TopicInfo, error) {
	return f.topic, f.err
}
func (f *fakeNode) DeleteTopic(context.Context, string) error { return f.err }
func (f *fakeNode) Topic(string) (messages.TopicInfo, error) {
	if !f.found {
		return messages.TopicInfo{}, fmt.Errorf("topic: %w", ErrNotFound)
	}
	return f.topic, nil
}
func (f *fakeNode) TopicsAfter(string, int) ([]messages.TopicInfo, bool) { return nil, false }
func (f *fakeNode) PartitionStats(context.Context, string, int) ([]messages.PartitionInfo, error) {
	return nil, f.err
}
func (f *fakeNode) AttachChild(context.Context, string, string, int64) (messages.TopicInfo, error) {
	return messages.TopicInfo{}, f.err
}
func (f *fakeNode) Children(context.Context, string) (messages.ChildList, error) {
	return messages.ChildList{}, f.err
}
func (f *fakeNode) DetachChild(context.Context, string, string) error { return f.err }
func (f *fakeNode) Members(context.Context) []messages.MemberInfo     { return nil }
func (f *fakeNode) ClusterVersion(context.Context) (messages.ClusterVersionInfo, error) {
	return messages.ClusterVersionInfo{Version: 1, Finalizable: 2, Newest: 2, Members: []messages.MemberVersion{{ID: "n1", Reads: 2}}}, f.err
}
func (f *fakeNode) FinalizeClusterVersion(_ context.Context, v int) (messages.ClusterVersionInfo, error) {
	f.got = v
	return messages.ClusterVersionInfo{Version: v, Finalizable: 2, Newest: 2, Members: []messages.MemberVersion{{ID: "n1", Reads: 2}}}, f.err
}
func (f *fakeNode) Moves(context.Context, bool) messages.MoveList { return messages.MoveList{} }
func (f *fakeNode) MovesWithSummary(context.Context, bool) messages.MoveList {
	return messages.MoveList{Moves: []messages.MoveInfo{}, Summary: &messages.MoveSummary{Done: 7, Nodes: 3}}
}
func (f *fakeNode) SetAside(_ context.Context, node string) (messages.QuarantineList, error) {
	f.got = node
	return messages.QuarantineList{Nodes: []messages.NodeQuarantine{{Node: "n1", Copies: []messages.QuarantinedCopy{}}}}, f.err
}
func (f *fakeNode) ReleaseSetAside(_ context.Context, req messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	f.got = req
	return messages.QuarantineReleaseReply{Node: req.Node, Path: req.Path, DryRun: req.DryRun, Released: !req.DryRun}, f.err
}
func (f *fakeNode) Leaders() messages.LeaderList {
	return messages.LeaderList{Shards: []messages.ShardLeader{{Shard: 1, Kind: "metadata", Leader: "n2", Term: 4}}}
}
func (f *fakeNode) AbortMove(context.Context, string, int, string) AbortOutcome {
	return f.abort
}
func (f *fakeNode) Decommission(context.Context, string, bool) (DecommissionVerdict, error) {
	return f.verdict, f.err
}
func (f *fakeNode) CancelDecommission(context.Context, string) error { return f.err }
func (f *fakeNode) Forget(_ context.Context, _ string, dryRun, accept bool) (ForgetVerdict, error) {
	if !dryRun && !accept && f.err == nil {
		return f.forget, ErrInvalid
	}
	return f.forget, f.err
}

func readyNode() *fakeNode {
	f := &fakeNode{found: true}
	f.ready.Store(true)
	return f
}

// serve sends one request through Handler and returns the status and body.
func serve(t *testing.T, node Node, method, target, body string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	Handler(node, Options{}).ServeHTTP(rec, httptest.NewRequest(method, target, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

// wantError checks a contract error answer: status and the error key's text.
func wantError(t *testing.T, what string, code int, body string, status int, text string) {
	t.Helper()
	var e messages.ErrorBody
	if code != status || json.Unmarshal([]byte(body), &e) != nil || e.Error != text {
		t.Fatalf("%s: got %d %q, want %d {\"error\":%q}", what, code, body, status, text)
	}
}

func TestAHandlerPanicIs500WithAFixedBodyWithoutNewline(t *testing.T) {
	panics := metrics.NewSet().NewCounter("test_panics_total")
	srv := httptest.NewServer(recoverPanics(Options{Panics: panics}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") })))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/topics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || string(b) != `{"error":"internal server panic"}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("panic: got %d %q (%s), want 500 {\"error\":\"internal server panic\"} without newline, application/json", resp.StatusCode, b, resp.Header.Get("Content-Type"))
	}
	if panics.Get() != 1 {
		t.Fatalf("panics counted: got %d, want 1", panics.Get())
	}
}

// HTTP serves from process start, but the client API waits for readiness:
// before it the metastore may lag and the actors are not running.
// A node that left its cluster answers every /v1 call and /readyz 503
// with the reason, even while it still reads ready, and /healthz as before.
func TestANodeThatLeftAnswers503WithTheReason(t *testing.T) {
	f := &fakeNode{left: "node n4 left the cluster (decommissioned); it serves nothing"}
	f.ready.Store(true)
	h := Handler(f, Options{})
	for _, tc := range []struct {
		method, path string
		code         int
		body         string
	}{
		{"GET", "/readyz", http.StatusServiceUnavailable, `{"error":"node n4 left the cluster (decommissioned); it serves nothing"}` + "\n"},
		{"POST", "/v1/topics/t/produce", http.StatusServiceUnavailable, `{"error":"node n4 left the cluster (decommissioned); it serves nothing"}` + "\n"},
		{"GET", "/v1/cluster/members", http.StatusServiceUnavailable, `{"error":"node n4 left the cluster (decommissioned); it serves nothing"}` + "\n"},
		{"GET", "/healthz", http.StatusOK, `{"status":"ok"}` + "\n"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, strings.NewReader("x")))
		if rec.Code != tc.code || rec.Body.String() != tc.body {
			t.Errorf("%s %s: got %d %q, want %d %q", tc.method, tc.path, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
}

func TestTheClientAPIAnswers503UntilTheNodeIsReady(t *testing.T) {
	f := &fakeNode{}
	h := untilReady(f, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for path, want := range map[string]int{"/v1/topics": http.StatusServiceUnavailable, "/healthz": http.StatusTeapot, "/readyz": http.StatusTeapot} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != want {
			t.Errorf("%s before ready: got %d, want %d", path, rec.Code, want)
		}
	}
	f.ready.Store(true)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/topics", nil))
	if rec.Code != http.StatusTeapot {
		t.Fatalf("/v1/topics once ready: got %d, want it served", rec.Code)
	}
}

// Each refusal of a produce has its own status and text (contract §8,
// §13), however the node wrapped it.
func TestProduceRefusalsMapToTheContractsAnswers(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		text   string
	}{
		{ErrDraining, 503, "node is being decommissioned; produce to another node"},
		{ErrStopping, 503, "node is shutting down"},
		{ErrBacklogFull, 503, "ingress backlog full; retry later"},
		{ErrIngressFull, 503, "ingress queue full; retry later"},
		{ErrNotFound, 404, "topic not found"},
		{ErrNoSuchPartition, 400, "invalid argument: partition out of range"},
		{ErrTooLarge, 413, "request body too large"},
		{Invalid("body does not match the schema"), 400, "invalid argument: body does not match the schema"},
		{errors.New("disk on fire"), 503, "produce failed"},
	} {
		f := readyNode()
		f.err = fmt.Errorf("produce to t: %w", tc.err)
		code, body := serve(t, f, "POST", "/v1/topics/t/produce", "x")
		wantError(t, tc.err.Error(), code, body, tc.status, tc.text)
	}
}

// A draining node refuses a produce before it reads anything of the
// request, as the handler did before the node answered through Admit.
func TestProduceIsRefusedWhileDrainingBeforeTheRequestIsRead(t *testing.T) {
	f := readyNode()
	f.admit = ErrDraining
	code, body := serve(t, f, "POST", "/v1/topics/t/produce?partition=x&partition=y", "")
	wantError(t, "draining, bad query", code, body, 503, "node is being decommissioned; produce to another node")
	if f.got != nil {
		t.Fatalf("produce reached the node: %+v", f.got)
	}
}

func TestProduceHandsTheNodeTheRecordAsSent(t *testing.T) {
	f := readyNode()
	if code, body := serve(t, f, "POST", "/v1/topics/t/produce?key=k&partition=2", "hello"); code != 202 || body != "" {
		t.Fatalf("produce: got %d %q, want 202 without a body", code, body)
	}
	rec := f.got.(Record)
	if rec.Topic != "t" || rec.Partition != 2 || rec.Key != "k" || string(rec.Body) != "hello" || rec.Received.IsZero() {
		t.Fatalf("record: got %+v, want t/2, key k, body hello, a receive time", rec)
	}
	serve(t, f, "POST", "/v1/topics/t/produce", "x")
	if rec := f.got.(Record); rec.Partition != -1 || rec.Key != "" {
		t.Fatalf("record without key or partition: got %+v, want partition -1 and no key", rec)
	}
}

func TestConsumeAnswers(t *testing.T) {
	d := messages.Delivery{Partition: 1, Offset: 7, Key: []byte("k"), Body: []byte(`{"a":1}`), Time: 2e9, Nonce: 9}
	for _, tc := range []struct {
		name   string
		query  string
		err    error
		found  bool
		status int
		text   string
	}{
		{"leased", "", nil, true, 200, ""},
		{"nothing", "", nil, false, 204, ""},
		{"no topic", "", ErrNotFound, false, 404, "topic not found"},
		{"no partition", "partition=9", ErrNoSuchPartition, false, 400, "invalid partition"},
		{"aged out", "partition=1&offset=0", ErrGone, false, 410, "receipt handle no longer matches an active reservation"},
		{"owner down", "partition=1&offset=0", ErrUnavailable, false, 503, "partition unavailable; retry later"},
		{"anything else", "partition=1&offset=0", errors.New("?"), false, 500, "consume failed"},
	} {
		f := readyNode()
		f.delivery, f.found = d, tc.found
		if tc.err != nil {
			f.err = fmt.Errorf("consume: %w", tc.err)
		}
		code, body := serve(t, f, "GET", "/v1/topics/t/consume?"+tc.query, "")
		switch tc.status {
		case 200:
			want := `{"topic":"t","partition":1,"offset":7,"key":"k","payload":{"a":1},"timestamp":2,"receipt_handle":"1:7:9"}` + "\n"
			if code != 200 || body != want {
				t.Fatalf("%s: got %d %q, want 200 %q", tc.name, code, body, want)
			}
		case 204:
			if code != 204 || body != "" {
				t.Fatalf("%s: got %d %q, want 204 without a body", tc.name, code, body)
			}
		default:
			wantError(t, tc.name, code, body, tc.status, tc.text)
		}
	}
}

func TestAckAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		query  string
		err    error
		status int
		text   string
	}{
		{"acked", "receipt_handle=1:2:3", nil, 204, ""},
		{"no handle", "", nil, 400, "receipt_handle required"},
		{"malformed", "receipt_handle=1:2:0", nil, 400, "receipt handle is malformed"},
		{"bad extend", "receipt_handle=1:2:3&extend=maybe", nil, 400, "invalid argument: extend must be true, 1, 0 or false"},
		{"no topic", "receipt_handle=1:2:3", ErrNotFound, 404, "topic not found"},
		{"stale", "receipt_handle=1:2:3", ErrGone, 410, "receipt handle no longer matches an active reservation"},
		{"acked-ahead full", "receipt_handle=1:2:3", ErrAckedAheadFull, 503, "acked-ahead set is full; head of queue may be stuck"},
		{"owner down", "receipt_handle=1:2:3", ErrUnavailable, 503, "partition unavailable; retry later"},
	} {
		f := readyNode()
		f.err = tc.err
		code, body := serve(t, f, "POST", "/v1/topics/t/ack?"+tc.query, "")
		if tc.status == 204 {
			if code != 204 || f.got != (Handle{Partition: 1, Offset: 2, Nonce: 3}) {
				t.Fatalf("%s: got %d with handle %+v, want 204 for 1:2:3", tc.name, code, f.got)
			}
			continue
		}
		wantError(t, tc.name, code, body, tc.status, tc.text)
	}
}

func TestTopicRefusalsMapToTheContractsAnswers(t *testing.T) {
	for _, tc := range []struct {
		method, path, body string
		err                error
		status             int
		text               string
	}{
		{"POST", "/v1/topics", `{"name":"t"}`, ErrConflict, 409, "topic already exists"},
		{"POST", "/v1/topics", `{"name":"t","parent":"p"}`, ErrParentNotFound, 404, "parent topic not found"},
		{"POST", "/v1/topics", `{"name":"t"}`, Invalid("partitions must be between 3 and 256"), 400, "invalid argument: partitions must be between 3 and 256"},
		{"POST", "/v1/topics", `{"name":"t"}`, ErrUnavailable, 503, "control plane temporarily unavailable"},
		{"POST", "/v1/topics", `{"name":"t"}`, errors.New("?"), 500, "create topic failed"},
		{"POST", "/v1/topics", `{"name":"t","x":1}`, nil, 400, `invalid json: json: unknown field "x"`},
		{"PATCH", "/v1/topics/t", `{"partitions":9}`, ErrNotFound, 404, "topic not found"},
		{"PATCH", "/v1/topics/t", `{"partitions":9}`, errors.New("?"), 500, "alter topic failed"},
		{"DELETE", "/v1/topics/t", "", ErrNotFound, 404, "topic not found"},
		{"DELETE", "/v1/topics/t", "", errors.New("?"), 500, "delete topic failed"},
		{"GET", "/v1/topics/t", "", errors.New("owner gone"), 500, "partition stats failed"},
		{"GET", "/v1/topics?limit=0", "", nil, 400, "limit must be a positive integer"},
	} {
		f := readyNode()
		if tc.err != nil {
			f.err = fmt.Errorf("topic t: %w", tc.err)
		}
		code, body := serve(t, f, tc.method, tc.path, tc.body)
		wantError(t, tc.method+" "+tc.path, code, body, tc.status, tc.text)
	}
}

// A missing topic is 404 whatever ?partition= says: the topic is looked
// up first.
func TestDescribingAMissingTopicIs404BeforeItsPartitionIsRead(t *testing.T) {
	f := readyNode()
	f.found = false
	code, body := serve(t, f, "GET", "/v1/topics/t?partition=x", "")
	wantError(t, "missing topic, bad partition", code, body, 404, "topic not found")
	f.found, f.topic = true, messages.TopicInfo{Name: "t", Partitions: 3}
	code, body = serve(t, f, "GET", "/v1/topics/t?partition=3", "")
	wantError(t, "partition past the count", code, body, 400, "invalid partition")
}

func TestAbortOutcomesMapToStatuses(t *testing.T) {
	for result, status := range map[AbortResult]int{Aborted: 202, AbortNoMove: 409, AbortRefused: 409, AbortNotFound: 404, AbortUnknown: 503} {
		f := readyNode()
		f.abort = AbortOutcome{Result: result, Owner: "n1", Target: "n2", Reason: "why"}
		code, body := serve(t, f, "POST", "/v1/cluster/moves/t/1/abort", "")
		var got messages.AbortMoveReply
		if code != status || json.Unmarshal([]byte(body), &got) != nil || got.Result != string(result) || got.Topic != "t" || got.Partition != 1 || got.Owner != "n1" {
			t.Fatalf("%s: got %d %q, want %d with the outcome", result, code, body, status)
		}
	}
	code, body := serve(t, readyNode(), "POST", "/v1/cluster/moves/t/x/abort", "")
	wantError(t, "bad partition", code, body, 400, "invalid partition")
}

func TestDecommissionAnswers(t *testing.T) {
	refused := DecommissionVerdict{OwnedPartitions: 2, Refusal: "decommission cannot complete: too few voters"}
	for _, tc := range []struct {
		name, method, query string
		verdict             DecommissionVerdict
		err                 error
		status              int
		body                string
	}{
		{"started", "POST", "", DecommissionVerdict{}, nil, 204, ""},
		{"dry run", "POST", "?dry_run=1", DecommissionVerdict{OwnedPartitions: 2}, nil, 200, `{"member":"n2","verdict":"ok","owned_partitions":2}` + "\n"},
		{"refused dry run", "POST", "?dry_run=1", refused, nil, 200, `{"member":"n2","verdict":"refused","reason":"decommission cannot complete: too few voters","owned_partitions":2}` + "\n"},
		{"refused", "POST", "", refused, nil, 409, `{"error":"decommission cannot complete: too few voters"}` + "\n"},
		{"unknown member", "POST", "", DecommissionVerdict{}, ErrNotFound, 404, `{"error":"member not found"}` + "\n"},
		{"no leader", "POST", "", DecommissionVerdict{}, ErrUnavailable, 503, `{"error":"control plane temporarily unavailable"}` + "\n"},
		{"cancelled", "DELETE", "", DecommissionVerdict{}, nil, 204, ""},
		{"cancel unknown", "DELETE", "", DecommissionVerdict{}, ErrNotFound, 404, `{"error":"member not found"}` + "\n"},
		{"cancel without leader", "DELETE", "", DecommissionVerdict{}, ErrUnavailable, 503, `{"error":"control plane temporarily unavailable"}` + "\n"},
	} {
		f := readyNode()
		f.verdict, f.err = tc.verdict, tc.err
		code, body := serve(t, f, tc.method, "/v1/cluster/members/n2/decommission"+tc.query, "")
		if code != tc.status || body != tc.body {
			t.Fatalf("%s: got %d %q, want %d %q", tc.name, code, body, tc.status, tc.body)
		}
	}
}

// Forgetting a member whose disk is lost loses the records only it held,
// so the API asks for the loss to be accepted in the request itself, and a
// dry run shows what would happen first.
func TestForgetAnswers(t *testing.T) {
	waits := ForgetVerdict{Partitions: 3, Removal: "it stays in the Raft configuration until a node joins: too few voters"}
	alive := ForgetVerdict{Partitions: 3, Refusal: "the member is alive: decommission it instead"}
	for _, tc := range []struct {
		name, query string
		verdict     ForgetVerdict
		err         error
		status      int
		body        string
	}{
		{"forgotten", "?accept_data_loss=true", waits, nil, 200,
			`{"member":"n2","verdict":"forgotten","partitions":3,"removal":"it stays in the Raft configuration until a node joins: too few voters"}` + "\n"},
		{"dry run", "?dry_run=true", ForgetVerdict{Partitions: 3}, nil, 200, `{"member":"n2","verdict":"ok","partitions":3}` + "\n"},
		{"without accepting the loss", "", waits, nil, 400, ""},
		{"accept not a flag", "?accept_data_loss=yes please", waits, nil, 400, ""},
		{"refused", "?accept_data_loss=true", alive, nil, 409, `{"error":"forget cannot go on: the member is alive: decommission it instead"}` + "\n"},
		{"refused dry run", "?dry_run=true", alive, nil, 200,
			`{"member":"n2","verdict":"refused","reason":"the member is alive: decommission it instead","partitions":3}` + "\n"},
		{"unknown member", "?accept_data_loss=true", ForgetVerdict{}, ErrNotFound, 404, `{"error":"member not found"}` + "\n"},
		{"no leader", "?accept_data_loss=true", ForgetVerdict{}, ErrUnavailable, 503, `{"error":"control plane temporarily unavailable"}` + "\n"},
	} {
		f := readyNode()
		f.forget, f.err = tc.verdict, tc.err
		code, body := serve(t, f, "POST", "/v1/cluster/members/n2/forget"+strings.ReplaceAll(tc.query, " ", "%20"), "")
		if code != tc.status || (tc.body != "" && body != tc.body) {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, code, body, tc.status, tc.body)
		}
	}
}

func TestClusterVersionAnswers(t *testing.T) {
	refused := &Refusal{Kind: ErrConflict, Reason: "member n2 reads cluster version 0 at most; upgrade it first"}
	for _, tc := range []struct {
		name, method, body string
		err                error
		status             int
		want               string
	}{
		{"listed", "GET", "", nil, 200, `{"version":1,"finalizable":2,"newest":2,"members":[{"id":"n1","reads":2}]}` + "\n"},
		{"listed without leader", "GET", "", ErrUnavailable, 503, `{"error":"control plane temporarily unavailable"}` + "\n"},
		{"finalized", "POST", `{"version":2}`, nil, 200, `{"version":2,"finalizable":2,"newest":2,"members":[{"id":"n1","reads":2}]}` + "\n"},
		{"refused", "POST", `{"version":2}`, refused, 409, `{"error":"member n2 reads cluster version 0 at most; upgrade it first"}` + "\n"},
		{"not json", "POST", `{"version":`, nil, 400, ""},
		{"without leader", "POST", `{"version":2}`, ErrUnavailable, 503, `{"error":"control plane temporarily unavailable"}` + "\n"},
	} {
		f := readyNode()
		f.err = tc.err
		code, body := serve(t, f, tc.method, "/v1/cluster/version", tc.body)
		if code != tc.status || (tc.want != "" && body != tc.want) {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, code, body, tc.status, tc.want)
		}
	}
}

func TestReceiptHandlesParseOnlyThreeFieldsOfDigits(t *testing.T) {
	for in, want := range map[string]bool{"0:0:1": true, "12:345:6789": true, "1:2:0": false, "1:2": false, "1:2:3:4": false,
		"-1:2:3": false, "1:+2:3": false, "a:2:3": false, "1::3": false, "1:2:99999999999999999999": false} {
		if _, ok := parseHandle(in); ok != want {
			t.Errorf("parseHandle(%q): got %v, want %v", in, ok, want)
		}
	}
}

func TestPayloadsAreEncodedByTheirBytes(t *testing.T) {
	for in, want := range map[string][2]string{
		`{"a":1}`:  {`{"a":1}`, ""},
		"plain":    {`"plain"`, ""},
		"\xff\x00": {`"/wA="`, "base64"},
	} {
		p, enc := encodePayload([]byte(in))
		if string(p) != want[0] || enc != want[1] {
			t.Errorf("encodePayload(%q): got %s %q, want %s %q", in, p, enc, want[0], want[1])
		}
	}
}

// A consume's response is byte for byte what encoding/json makes of the
// message with the stored body as its RawMessage payload (the encoding
// before writeMessage spliced the payload in), for every kind of body and
// topic and key names holding the field's own text.
func TestAMessageIsWrittenAsEncodingJSONWouldWriteIt(t *testing.T) {
	bodies := []string{`{"a":1}`, " {\n \"a\" : [1, 2 ,\"<&>\"] }\t", `"\u2028"`, "\"\u2028\"", `null`, `12.5e3`, "plain <b>&</b>",
		"\xff\x00", "", `{"payload":0}`, `[1,2`, "\u2028 text"}
	names := [][2]string{{"t", ""}, {"t", "k"}, {`"payload":0`, `"payload":0,`}, {"<t>", "&k"}}
	for _, body := range bodies {
		for _, nm := range names {
			for _, handle := range []bool{true, false} {
				d := messages.Delivery{Partition: 3, Offset: 42, Key: []byte(nm[1]), Body: []byte(body), Time: 1e18, Nonce: 7}
				m := messageOf(nm[0], d, handle)
				old := m
				if json.Valid(d.Body) {
					old.Payload = json.RawMessage(body) // as stored: encoding/json compacts it
				}
				want := httptest.NewRecorder()
				writeJSON(want, http.StatusOK, old)
				got := httptest.NewRecorder()
				writeMessage(got, m)
				if got.Code != http.StatusOK || got.Body.String() != want.Body.String() {
					t.Fatalf("body %q, topic %q, key %q: got %d %s, want %d %s", body, nm[0], nm[1], got.Code, got.Body, want.Code, want.Body)
				}
				if got.Header().Get("Content-Length") != want.Header().Get("Content-Length") {
					t.Fatalf("body %q: got Content-Length %s, want %s", body, got.Header().Get("Content-Length"), want.Header().Get("Content-Length"))
				}
			}
		}
	}
}

// BenchmarkConsumeResponse is a consume's response for a 1 KiB JSON body:
// mode=encoder is the encoding before writeMessage (the payload checked by
// json.Valid, then validated and compacted again by encoding/json),
// mode=splice the current one.
func BenchmarkConsumeResponse(b *testing.B) {
	body := []byte(`{"id":"` + strings.Repeat("x", 1000) + `","n":1}`)
	d := messages.Delivery{Partition: 1, Offset: 99, Key: []byte("key-1"), Body: body, Time: 1e18, Nonce: 7}
	b.Run("mode=encoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := messageOf("topic", d, true)
			if json.Valid(d.Body) {
				m.Payload = json.RawMessage(d.Body)
			}
			writeJSON(httptest.NewRecorder(), http.StatusOK, m)
		}
	})
	b.Run("mode=splice", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			writeMessage(httptest.NewRecorder(), messageOf("topic", d, true))
		}
	})
}

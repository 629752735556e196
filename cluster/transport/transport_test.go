package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/messages"
)

func TestSubjects(t *testing.T) {
	got, err := NodeSubject("prod", "n1", "commit")
	if want := "narad.prod.node.n1.commit"; err != nil || got != want {
		t.Fatalf("NodeSubject: got %q, %v; want %q", got, err, want)
	}
	got, err = AdminSubject("prod", "members")
	if want := "narad.prod.admin.members"; err != nil || got != want {
		t.Fatalf("AdminSubject: got %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"", "a.b", "a b", "*", ">", "n>", "a\tb", "é", strings.Repeat("x", 65)} {
		if _, err := NodeSubject("prod", bad, "commit"); !errors.Is(err, ErrInvalid) {
			t.Errorf("NodeSubject with node %q: got %v, want ErrInvalid", bad, err)
		}
		if _, err := AdminSubject(bad, "members"); !errors.Is(err, ErrInvalid) {
			t.Errorf("AdminSubject with cluster %q: got %v, want ErrInvalid", bad, err)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{Cluster: "c", NodeID: "n1", URLs: []string{"nats://127.0.0.1:4222"}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("minimal config: got %v, want nil", err)
	}
	d := ok.WithDefaults()
	if d.RequestTimeout != DefaultRequestTimeout || d.MaxRetries != DefaultMaxRetries || d.MaxReconnects != -1 {
		t.Fatalf("defaults: got timeout %s retries %d reconnects %d", d.RequestTimeout, d.MaxRetries, d.MaxReconnects)
	}
	if got := (Config{MaxRetries: -1}).WithDefaults().MaxRetries; got != 0 {
		t.Fatalf("MaxRetries -1: got %d, want 0 (no retries)", got)
	}
	bad := Config{Cluster: "a.b", NodeID: "", RequestTimeout: time.Millisecond, RetryBackoff: time.Second,
		MaxPayloadBytes: -1, MaxConcurrentHandlers: -1, MaxReconnects: -2, MaxAdminTimeout: time.Hour}
	err := bad.Validate()
	for _, want := range []string{"Cluster", "NodeID", "URLs", "RetryBackoff", "MaxPayloadBytes", "MaxConcurrentHandlers", "MaxReconnects", "MaxAdminTimeout"} {
		if !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("Validate: got %v, want a complaint about %s", err, want)
		}
	}
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate: got %v, want ErrInvalid", err)
	}
}

func TestRoundTripBetweenNodesAndToSelf(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "rt-a", nil)
	b := newNode(t, s, "rt-b", nil)
	handled := `narad_nats_handled_total{node="rt-b",service="echo"}`
	handledBefore := counter(handled)
	var gotFrom atomic.Value
	if err := b.Handle("echo", func(_ context.Context, from string, req []byte) ([]byte, error) {
		gotFrom.Store(from)
		return append([]byte("b:"), req...), nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	got, err := a.Request(ctx, "rt-b", "echo", []byte("hello"))
	if err != nil || string(got) != "b:hello" {
		t.Fatalf("a -> b: got %q, %v; want %q", got, err, "b:hello")
	}
	if f := gotFrom.Load(); f != "rt-a" {
		t.Fatalf("handler saw from %q, want rt-a", f)
	}
	got, err = b.Request(ctx, "rt-b", "echo", []byte("me"))
	if err != nil || string(got) != "b:me" {
		t.Fatalf("b -> b (self): got %q, %v; want %q", got, err, "b:me")
	}
	got, err = a.Request(ctx, "rt-b", "echo", nil)
	if err != nil || string(got) != "b:" {
		t.Fatalf("empty body: got %q, %v; want %q", got, err, "b:")
	}
	if err := b.Handle("echo", echo); !errors.Is(err, ErrInvalid) {
		t.Fatalf("second handler for echo: got %v, want ErrInvalid", err)
	}
	if got := counter(handled) - handledBefore; got != 3 {
		t.Fatalf("handled_total on rt-b: got %d, want 3", got)
	}
}

type addReq struct{ A, B int }
type addResp struct{ Sum int }

func TestJSONHelpers(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "js-a", nil)
	b := newNode(t, s, "js-b", nil)
	if err := HandleJSON(b, "add", func(_ context.Context, _ string, in addReq) (addResp, error) {
		return addResp{Sum: in.A + in.B}, nil
	}); err != nil {
		t.Fatal(err)
	}
	var out addResp
	if err := RequestJSON(context.Background(), a, "js-b", "add", addReq{A: 2, B: 40}, &out); err != nil || out.Sum != 42 {
		t.Fatalf("add: got %+v, %v; want Sum 42", out, err)
	}
	_, err := a.Request(context.Background(), "js-b", "add", []byte("{not json"))
	if re, ok := errors.AsType[*RemoteError](err); !ok || re.Status != StatusBadRequest {
		t.Fatalf("bad JSON: got %v, want *RemoteError with status %d", err, StatusBadRequest)
	}
}

func TestHandlerErrorsArriveTyped(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "er-a", nil)
	b := newNode(t, s, "er-b", nil)
	must(t, b.Handle("owner", func(context.Context, string, []byte) ([]byte, error) {
		return nil, fmt.Errorf("partition t/3: %w", Errorf(421, "not the owner, try n3"))
	}))
	must(t, b.Handle("plain", func(context.Context, string, []byte) ([]byte, error) {
		return nil, errors.New("disk on fire")
	}))
	must(t, b.Handle("panics", func(context.Context, string, []byte) ([]byte, error) {
		panic("boom")
	}))
	ctx := context.Background()

	_, err := a.Request(ctx, "er-b", "owner", nil)
	re, ok := errors.AsType[*RemoteError](err)
	if !ok || re.Status != 421 || re.Msg != "not the owner, try n3" {
		t.Fatalf("status error: got %v, want *RemoteError{421, not the owner, try n3}", err)
	}
	if !errors.Is(err, ErrRemote) || NotProcessed(err) {
		t.Fatalf("status error: got Is(ErrRemote)=%v NotProcessed=%v, want true, false", errors.Is(err, ErrRemote), NotProcessed(err))
	}

	_, err = a.Request(ctx, "er-b", "plain", nil)
	re, ok = errors.AsType[*RemoteError](err)
	if !errors.Is(err, ErrRemote) || !ok || re.Status != StatusInternal || re.Msg != "disk on fire" {
		t.Fatalf("plain error: got %v, want ErrRemote with status 500 and the handler's message", err)
	}

	_, err = a.Request(ctx, "er-b", "panics", nil)
	re, ok = errors.AsType[*RemoteError](err)
	if !ok || re.Status != StatusInternal || !strings.Contains(re.Msg, "boom") {
		t.Fatalf("panicking handler: got %v, want status 500 mentioning boom", err)
	}
	if got, err := a.Request(ctx, "er-b", "plain", nil); got != nil || err == nil {
		t.Fatalf("node after a panic: got %q, %v; want the plain error again", got, err)
	}
}

func TestNoRespondersIsQuickAndRetriedBounded(t *testing.T) {
	s := startServer(t)
	// A timeout far above anything this test waits, so an ErrNoResponders
	// (not an ErrTimeout) proves the answer did not wait for it.
	a := newNode(t, s, "nr-a", func(c *Config) {
		c.RequestTimeout = time.Minute
		c.MaxRetries = 2
		c.RetryBackoff = time.Millisecond
	})
	retries := `narad_nats_request_retries_total{node="nr-a",service="commit"}`
	failed := `narad_nats_request_errors_total{node="nr-a",service="commit",reason="no_responders"}`
	before, failedBefore := counter(retries), counter(failed)

	_, err := a.Request(context.Background(), "nobody", "commit", []byte("x"))
	if !errors.Is(err, ErrNoResponders) || errors.Is(err, ErrTimeout) {
		t.Fatalf("request to an unserved node: got %v, want ErrNoResponders", err)
	}
	if !NotProcessed(err) {
		t.Fatalf("NotProcessed(%v): got false, want true", err)
	}
	if got := counter(retries) - before; got != 2 {
		t.Fatalf("retries: got %d, want 2 (MaxRetries)", got)
	}
	if got := counter(failed) - failedBefore; got != 1 {
		t.Fatalf("errors_total{reason=no_responders}: got %d, want 1 (one failed Request)", got)
	}
}

func TestSlowHandlerTimesOutAndIsNotRetried(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "to-a", func(c *Config) { c.RequestTimeout = 200 * time.Millisecond })
	b := newNode(t, s, "to-b", nil)
	var calls atomic.Int32
	must(t, b.Handle("slow", func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		calls.Add(1)
		<-ctx.Done() // slower than any deadline
		return nil, ctx.Err()
	}))

	_, err := a.Request(context.Background(), "to-b", "slow", []byte("x"))
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow handler: got %v, want ErrTimeout (deadline exceeded)", err)
	}
	if NotProcessed(err) {
		t.Fatalf("NotProcessed(timeout): got true, want false (outcome unknown)")
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("handler invocations: got %d, want 1 (a timeout is never retried)", got)
	}
	// The caller's own deadline, shorter than RequestTimeout, wins.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := a.Request(ctx, "to-b", "slow", nil); !errors.Is(err, ErrTimeout) {
		t.Fatalf("caller deadline: got %v, want ErrTimeout", err)
	}
	if got := calls.Load(); got != 2 {
		t.Fatalf("handler invocations: got %d, want 2", got)
	}
}

func TestPayloadOverMaxIsRefusedBeforeSending(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "tl-a", nil)
	b := newNode(t, s, "tl-b", nil)
	var calls atomic.Int32
	must(t, b.Handle("sink", func(_ context.Context, _ string, req []byte) ([]byte, error) {
		calls.Add(1)
		return nil, nil
	}))
	must(t, b.Handle("bloat", func(context.Context, string, []byte) ([]byte, error) {
		return make([]byte, 2<<20), nil
	}))
	max := a.nc.MaxPayload()
	if max != 1<<20 {
		t.Fatalf("server max payload: got %d, want the 1 MiB default", max)
	}
	ctx := context.Background()

	// Exactly max payload of body: the headers push it over.
	_, err := a.Request(ctx, "tl-b", "sink", make([]byte, max))
	if !errors.Is(err, ErrTooLarge) || !NotProcessed(err) {
		t.Fatalf("body of max payload: got %v, want ErrTooLarge (not processed)", err)
	}
	if got := calls.Load(); got != 0 {
		t.Fatalf("handler calls after a refused payload: got %d, want 0", got)
	}
	// A body that leaves room for the headers goes through, up to
	// MaxRequestBytes, which counts the headers at their longest.
	if got := a.MaxPayload(); got != max {
		t.Fatalf("MaxPayload: got %d, want the server's %d", got, max)
	}
	room := a.MaxRequestBytes()
	if room >= max || room < max-1024 {
		t.Fatalf("MaxRequestBytes: got %d, want a little below the max payload %d", room, max)
	}
	if _, err := a.Request(ctx, "tl-b", "sink", make([]byte, room)); err != nil {
		t.Fatalf("body of MaxRequestBytes %d: got %v, want nil", room, err)
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("handler calls: got %d, want 1", got)
	}
	// A reply too large comes back as a 413 RemoteError.
	_, err = a.Request(ctx, "tl-b", "bloat", nil)
	if re, ok := errors.AsType[*RemoteError](err); !ok || re.Status != StatusTooLarge || !errors.Is(err, ErrTooLarge) || NotProcessed(err) {
		t.Fatalf("oversized reply: got %v, want *RemoteError 413 matching ErrTooLarge, processed", err)
	}
	// Config.MaxPayloadBytes lowers the cap.
	c := newNode(t, s, "tl-c", func(c *Config) { c.MaxPayloadBytes = 4096 })
	if _, err := c.Request(ctx, "tl-b", "sink", make([]byte, 4096)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("body over MaxPayloadBytes: got %v, want ErrTooLarge", err)
	}
	if got := c.MaxPayload(); got != 4096 {
		t.Fatalf("MaxPayload with MaxPayloadBytes 4096: got %d, want 4096", got)
	}
}

func TestCallerDeadlineReachesHandler(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "dl-a", func(c *Config) { c.RequestTimeout = time.Minute })
	b := newNode(t, s, "dl-b", nil)
	seen := make(chan time.Time, 1)
	must(t, b.Handle("peek", func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			return nil, errors.New("no deadline")
		}
		seen <- dl
		return nil, nil
	}))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	want, _ := ctx.Deadline()
	if _, err := a.Request(ctx, "dl-b", "peek", nil); err != nil {
		t.Fatal(err)
	}
	got := <-seen
	// The budget travels in whole milliseconds and is re-anchored on arrival,
	// so the handler's deadline is the caller's give or take the transit and
	// rounding; the RequestTimeout of a minute would be far off.
	if d := got.Sub(want); d < -time.Second || d > time.Second {
		t.Fatalf("handler deadline: got %s from the caller's deadline, want within 1s (not RequestTimeout's minute)", d)
	}
	// Without a caller deadline, RequestTimeout is the budget.
	if _, err := a.Request(context.Background(), "dl-b", "peek", nil); err != nil {
		t.Fatal(err)
	}
	got = <-seen
	if d := time.Until(got); d < 50*time.Second || d > time.Minute {
		t.Fatalf("handler deadline without a caller deadline: got %s ahead, want about RequestTimeout (1m)", d)
	}
}

// TestAnAdminRequestHoldsAHandlerNoLongerThanTheCeiling: an admin or
// viewer client names its own budget (Narad-Timeout-Ms, here an hour);
// the node cuts it to MaxAdminTimeout, so the handler's slot of the shared
// pool comes back and the asker is told StatusTimeout.
func TestAnAdminRequestHoldsAHandlerNoLongerThanTheCeiling(t *testing.T) {
	s := startServer(t)
	n := newNode(t, s, "n1", func(c *Config) { c.MaxAdminTimeout = time.Second })
	budgets := make(chan time.Duration, 1)
	must(t, n.HandleAdmin("slow", func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		dl, _ := ctx.Deadline()
		budgets <- time.Until(dl)
		<-ctx.Done()
		return nil, ctx.Err()
	}))
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	hour := &nats.Msg{Subject: "narad.test.admin.slow", Header: nats.Header{messages.HeaderTimeoutMs: []string{"3600000"}}}
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	reply, err := nc.RequestMsgWithContext(ctx, hour)
	if err != nil {
		t.Fatalf("an admin request asking an hour: got %v, want the node's timeout answer after the 1s ceiling", err)
	}
	if got, want := reply.Header.Get(messages.HeaderStatus), strconv.Itoa(StatusTimeout); got != want {
		t.Fatalf("an admin request asking an hour: got status %q %s, want %s", got, reply.Data, want)
	}
	if got := <-budgets; got > time.Second {
		t.Fatalf("handler's budget: got %s, want at most the 1s ceiling", got)
	}
}

func TestAdminRequestAnsweredByExactlyOneNode(t *testing.T) {
	s := startServer(t)
	nodes := []*Transport{newNode(t, s, "ad-a", nil), newNode(t, s, "ad-b", nil), newNode(t, s, "ad-c", nil)}
	var calls [3]atomic.Int32
	type members struct {
		AnsweredBy string `json:"answered_by"`
	}
	for i, n := range nodes {
		must(t, HandleAdminJSON(n, "members", func(_ context.Context, _ string, _ struct{}) (members, error) {
			calls[i].Add(1)
			return members{AnsweredBy: n.NodeID()}, nil
		}))
	}
	const requests = 60
	for i := range requests {
		var out members
		if err := RequestAdminJSON(context.Background(), nodes[i%3], "members", struct{}{}, &out); err != nil || out.AnsweredBy == "" {
			t.Fatalf("admin request %d: got %+v, %v", i, out, err)
		}
	}
	total := calls[0].Load() + calls[1].Load() + calls[2].Load()
	if total != requests {
		t.Fatalf("handler invocations over 3 nodes: got %d, want %d (one per request)", total, requests)
	}

	// The stock `nats req narad.test.admin.members '{}'`: no Narad headers.
	nc, err := nats.Connect(s.ClientURL())
	must(t, err)
	defer nc.Close()
	resp, err := nc.Request("narad.test.admin.members", []byte("{}"), liveness)
	must(t, err)
	if !bytes.Contains(resp.Data, []byte(`"answered_by":"ad-`)) {
		t.Fatalf("nats req reply: got %s, want JSON naming the answering node", resp.Data)
	}
	// An error reply is JSON too, with the status in a header.
	must(t, nodes[0].HandleAdmin("fail", func(context.Context, string, []byte) ([]byte, error) {
		return nil, Errorf(503, "no leader")
	}))
	resp, err = nc.Request("narad.test.admin.fail", []byte("{}"), liveness)
	must(t, err)
	if got, want := string(resp.Data), `{"status":503,"error":"no leader"}`; got != want || resp.Header.Get(messages.HeaderStatus) != "503" {
		t.Fatalf("nats req error reply: got %s (status header %q), want %s", got, resp.Header.Get(messages.HeaderStatus), want)
	}
}

func TestCutOffNodeNeitherAnswersNorReaches(t *testing.T) {
	s := startServer(t)
	short := func(c *Config) { c.RequestTimeout = 150 * time.Millisecond }
	a := newNode(t, s, "co-a", short)
	b := newNode(t, s, "co-b", short)
	var aCalls, bCalls atomic.Int32
	must(t, a.Handle("echo", func(ctx context.Context, from string, req []byte) ([]byte, error) {
		aCalls.Add(1)
		return echo(ctx, from, req)
	}))
	must(t, b.Handle("echo", func(ctx context.Context, from string, req []byte) ([]byte, error) {
		bCalls.Add(1)
		return echo(ctx, from, req)
	}))
	ctx := context.Background()
	cutErrors := `narad_nats_request_errors_total{node="co-a",service="echo",reason="cut_off"}`
	cutBefore := counter(cutErrors)

	a.CutOff(true)
	if _, err := b.Request(ctx, "co-a", "echo", []byte("x")); !errors.Is(err, ErrTimeout) {
		t.Fatalf("b -> cut-off a: got %v, want ErrTimeout", err)
	}
	if got := aCalls.Load(); got != 0 {
		t.Fatalf("cut-off a's handler calls: got %d, want 0", got)
	}
	if _, err := a.Request(ctx, "co-b", "echo", []byte("x")); !errors.Is(err, ErrTimeout) {
		t.Fatalf("cut-off a -> b: got %v, want ErrTimeout", err)
	}
	if got := bCalls.Load(); got != 0 {
		t.Fatalf("b's handler calls from a cut-off a: got %d, want 0", got)
	}

	a.CutOff(false)
	if got, err := b.Request(ctx, "co-a", "echo", []byte("b2a")); err != nil || string(got) != "b2a" {
		t.Fatalf("b -> healed a: got %q, %v; want b2a", got, err)
	}
	if got, err := a.Request(ctx, "co-b", "echo", []byte("a2b")); err != nil || string(got) != "a2b" {
		t.Fatalf("healed a -> b: got %q, %v; want a2b", got, err)
	}
	if got := counter(cutErrors) - cutBefore; got != 1 {
		t.Fatalf("errors_total{reason=cut_off} on a: got %d, want 1", got)
	}
}

func TestCutOffIsRaceFree(t *testing.T) {
	s := startServer(t)
	short := func(c *Config) { c.RequestTimeout = 50 * time.Millisecond }
	a := newNode(t, s, "cr-a", short)
	b := newNode(t, s, "cr-b", short)
	must(t, a.Handle("echo", echo))
	must(t, b.Handle("echo", echo))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				if i == 0 {
					a.CutOff(j%2 == 0)
					continue
				}
				_, err := b.Request(context.Background(), "cr-a", "echo", []byte("x"))
				if err != nil && !errors.Is(err, ErrTimeout) {
					t.Errorf("request while flapping: got %v, want nil or ErrTimeout", err)
				}
			}
		})
	}
	wg.Wait()
	a.CutOff(false)
	if _, err := b.Request(context.Background(), "cr-a", "echo", []byte("x")); err != nil {
		t.Fatalf("after flapping, healed: got %v, want nil", err)
	}
}

func TestCloseCancelsHandlersAndLeavesNoGoroutines(t *testing.T) {
	s := startServer(t)
	base := runtime.NumGoroutine()

	a := newNode(t, s, "cl-a", nil)
	b := newNode(t, s, "cl-b", nil)
	entered := make(chan struct{})
	handlerErr := make(chan error, 1)
	must(t, b.Handle("block", func(ctx context.Context, _ string, _ []byte) ([]byte, error) {
		close(entered)
		<-ctx.Done()
		handlerErr <- ctx.Err()
		return nil, ctx.Err()
	}))
	callerErr := make(chan error, 1)
	go func() {
		_, err := a.Request(context.Background(), "cl-b", "block", nil)
		callerErr <- err
	}()
	<-entered
	b.Close()
	if got := <-handlerErr; !errors.Is(got, context.Canceled) {
		t.Fatalf("in-flight handler's ctx after Close: got %v, want context.Canceled", got)
	}
	if err := <-callerErr; err == nil {
		t.Fatalf("caller of a handler cancelled by Close: got nil, want an error")
	}
	if _, err := b.Request(context.Background(), "cl-a", "x", nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Request on a closed transport: got %v, want ErrClosed", err)
	}
	if err := b.Handle("late", echo); !errors.Is(err, ErrClosed) {
		t.Fatalf("Handle on a closed transport: got %v, want ErrClosed", err)
	}
	if _, err := a.Request(context.Background(), "cl-b", "block", nil); !errors.Is(err, ErrNoResponders) {
		t.Fatalf("request to the closed node: got %v, want ErrNoResponders", err)
	}
	a.Close()
	b.Close() // idempotent
	waitGoroutines(t, base)
}

func TestCloseEndsRequestsInFlight(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "cf-a", nil)
	b := newNode(t, s, "cf-b", nil)
	entered := make(chan struct{})
	release := make(chan struct{})
	must(t, b.Handle("hold", func(context.Context, string, []byte) ([]byte, error) {
		close(entered)
		<-release
		return nil, nil
	}))
	defer close(release)
	callerErr := make(chan error, 1)
	go func() {
		_, err := a.Request(context.Background(), "cf-b", "hold", nil)
		callerErr <- err
	}()
	<-entered
	a.Close()
	if err := <-callerErr; !errors.Is(err, ErrClosed) || NotProcessed(err) {
		t.Fatalf("request in flight when its transport closed: got %v, want ErrClosed, outcome unknown", err)
	}
}

func TestMaxConcurrentHandlersBoundsConcurrency(t *testing.T) {
	s := startServer(t)
	a := newNode(t, s, "mc-a", nil)
	b := newNode(t, s, "mc-b", func(c *Config) { c.MaxConcurrentHandlers = 2 })
	var running, peak atomic.Int32
	release := make(chan struct{})
	block := func(context.Context, string, []byte) ([]byte, error) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		running.Add(-1)
		return []byte("ok"), nil
	}
	// Two services share the one per-transport bound.
	must(t, b.Handle("one", block))
	must(t, b.Handle("two", block))

	const requests = 6
	var wg sync.WaitGroup
	errs := make(chan error, requests)
	for i := range requests {
		wg.Go(func() {
			_, err := a.Request(context.Background(), "mc-b", []string{"one", "two"}[i%2], nil)
			errs <- err
		})
	}
	waitFor(t, "two handlers running", func() bool { return running.Load() == 2 })
	// Give the other four requests time to arrive; an unbounded transport
	// would start them now. (Not a performance threshold: a slower machine
	// only makes this check weaker, never failing.)
	time.Sleep(50 * time.Millisecond)
	if got := running.Load(); got != 2 {
		t.Fatalf("handlers running with 6 requests waiting: got %d, want 2", got)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("bounded request: got %v, want nil", err)
		}
	}
	if got := peak.Load(); got != 2 {
		t.Fatalf("peak concurrent handlers: got %d, want 2", got)
	}
}

func TestConnectGivesUpWhenCtxEnds(t *testing.T) {
	base := runtime.NumGoroutine()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	// Port 1 on loopback: nothing listens there.
	_, err := Connect(ctx, Config{Cluster: "test", NodeID: "cg-a", URLs: []string{"nats://127.0.0.1:1"}}, nil)
	if !errors.Is(err, ErrNotConnected) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("connect with no server: got %v, want ErrNotConnected after the ctx deadline", err)
	}
	waitGoroutines(t, base)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

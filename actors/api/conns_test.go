package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// liveness bounds this file's waits: never reached on a healthy run.
const liveness = 10 * time.Second

// TestConnectionsPastTheCapAreAnswered503WithRetryAfter: with a cap of two
// connections both held by requests in progress, a third client is told
// 503 with Retry-After and the contract's error body at once, rather than
// waiting or being reset; once the two are closed a new one is served.
func TestConnectionsPastTheCapAreAnswered503WithRetryAfter(t *testing.T) {
	set := metrics.NewSet()
	limit := NewConnLimit(2, set, "n1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}, 8), make(chan struct{})
	srv := &http.Server{ConnContext: limit.ConnContext, Handler: limit.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusNoContent)
	}))}
	go srv.Serve(limit.Listener(ln))
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	// No keep-alive: each request its own connection, closed after it.
	client := &http.Client{Timeout: liveness, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func() (*http.Response, string, error) {
		resp, err := client.Get(url)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp, string(body), err
	}

	held := make(chan error, 2)
	for range 2 {
		go func() {
			_, _, err := get()
			held <- err
		}()
	}
	for range 2 {
		select {
		case <-entered:
		case <-time.After(liveness):
			t.Fatal("the two held requests never reached the handler")
		}
	}
	resp, body, err := get()
	if err != nil {
		t.Fatalf("a third connection past the cap of 2: got %v, want a 503 answer", err)
	}
	var e messages.ErrorBody
	if resp.StatusCode != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil || e.Error != textBusyConns {
		t.Fatalf("a third connection past the cap of 2: got %d %q, want 503 {\"error\":%q}", resp.StatusCode, body, textBusyConns)
	}
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Fatalf("503 past the cap: got Retry-After %q, want \"1\"", got)
	}
	close(release)
	for range 2 {
		if err := <-held; err != nil {
			t.Fatalf("a held request: %v", err)
		}
	}
	testnet.Eventually(t, liveness, "the held connections closed", func() bool { return limit.open.Load() == 0 && limit.busy.Load() == 0 })
	if resp, _, err := get(); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("a connection once the cap has room: got %v, %v; want 204", resp, err)
	}
	if got := set.GetOrCreateCounter(`narad_http_connections_refused_total{node="n1"}`).Get(); got != 1 {
		t.Fatalf("refused connections: got %d, want 1", got)
	}
}

// TestABusyConsumeIs503WithRetryAfter: a long poll past the node's cap
// (ErrBusy) is the contract's retryable 503 in its JSON error shape, with
// Retry-After, for one consume and a batch alike.
func TestABusyConsumeIs503WithRetryAfter(t *testing.T) {
	f := readyNode()
	f.err = fmt.Errorf("consume t: 1024 long polls wait on this node: %w", ErrBusy)
	for _, target := range []string{"/v1/topics/t/consume?wait=5s", "/v1/topics/t/consume/batch?wait=5s&max=10"} {
		rec := httptest.NewRecorder()
		Handler(f, Options{}).ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		wantError(t, target, rec.Code, rec.Body.String(), http.StatusServiceUnavailable, textBusyPolls)
		if got := rec.Header().Get("Retry-After"); got != "1" {
			t.Fatalf("%s: got Retry-After %q, want \"1\"", target, got)
		}
	}
}

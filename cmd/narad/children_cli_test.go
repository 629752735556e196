package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/naradmq/narad/cmd/narad/client"
)

// childrenBroker answers the three §7 routes with canned bodies and keeps
// what the CLI sent.
type childrenBroker struct {
	mu   sync.Mutex
	sent []string // "METHOD path body"
}

func newChildrenBroker(t *testing.T) (*childrenBroker, *httptest.Server) {
	t.Helper()
	cb := &childrenBroker{}
	record := func(r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		cb.mu.Lock()
		cb.sent = append(cb.sent, r.Method+" "+r.URL.EscapedPath()+" "+string(b))
		cb.mu.Unlock()
	}
	answer := func(w http.ResponseWriter, status int, body string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body+"\n")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/topics/{topic}/children", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		answer(w, 200, `{"name":"orders","partitions":3,"retention_ms":0,"visibility_timeout_ms":30000,"max_in_flight_per_partition":1024,"max_acked_ahead_per_partition":1024,"created_at":1,"role":"parent","children":["late"]}`)
	})
	mux.HandleFunc("GET /v1/topics/{topic}/children", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		if r.PathValue("topic") == "missing" {
			answer(w, 404, `{"error":"topic not found"}`)
			return
		}
		answer(w, 200, `{"parent":"orders","children":[{"name":"copy","delay_ms":0,"lag_messages":3,"lag_complete":true},{"name":"late","delay_ms":600000,"lag_messages":12,"lag_complete":false}]}`)
	})
	mux.HandleFunc("DELETE /v1/topics/{topic}/children/{child}", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST /v1/topics", func(w http.ResponseWriter, r *http.Request) {
		record(r)
		answer(w, 201, `{"name":"late","partitions":3,"retention_ms":0,"visibility_timeout_ms":30000,"max_in_flight_per_partition":1024,"max_acked_ahead_per_partition":1024,"created_at":1,"role":"child","parent":"orders","attach_epoch":"12","fanout_delay_ms":600000}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return cb, srv
}

func (cb *childrenBroker) last() string {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.sent[len(cb.sent)-1]
}

func TestTopicsChildrenCommands(t *testing.T) {
	cb, srv := newChildrenBroker(t)

	out, _, err := runCLI(t, runTopics, "attach", "--server", srv.URL, "--delay", "10m", "orders", "late")
	if err != nil || !strings.Contains(out, `"children": [`) {
		t.Fatalf("attach: got %q, %v, want the parent's record", out, err)
	}
	if got, want := cb.last(), `POST /v1/topics/orders/children {"child":"late","delay_ms":600000}`; got != want {
		t.Errorf("attach sent %q, want %q", got, want)
	}
	if _, _, err := runCLI(t, runTopics, "attach", "--server", srv.URL, "orders", "copy"); err != nil {
		t.Fatal(err)
	}
	if got, want := cb.last(), `POST /v1/topics/orders/children {"child":"copy"}`; got != want {
		t.Errorf("attach without --delay sent %q, want %q (no delay_ms)", got, want)
	}

	out, _, err = runCLI(t, runTopics, "children", "--server", srv.URL, "orders")
	if err != nil {
		t.Fatal(err)
	}
	want := "CHILD  DELAY  LAG\ncopy   0s     3\nlate   10m0s  12 (partial)\n"
	if out != want {
		t.Errorf("children printed %q, want %q", out, want)
	}
	if _, _, err := runCLI(t, runTopics, "children", "--server", srv.URL, "missing"); !client.IsStatus(err, 404) {
		t.Errorf("children of a missing parent: got %v, want a 404", err)
	}

	out, _, err = runCLI(t, runTopics, "detach", "--server", srv.URL, "orders", "late")
	if err != nil || out != "detached late from orders\n" {
		t.Fatalf("detach: got %q, %v", out, err)
	}
	if got, want := cb.last(), "DELETE /v1/topics/orders/children/late "; got != want {
		t.Errorf("detach sent %q, want %q", got, want)
	}

	if _, _, err := runCLI(t, runTopics, "create", "--server", srv.URL, "--parent", "orders", "--delay", "10m", "late"); err != nil {
		t.Fatal(err)
	}
	if got, want := cb.last(), `POST /v1/topics {"name":"late","parent":"orders","fanout_delay_ms":600000}`; got != want {
		t.Errorf("create under a parent sent %q, want %q", got, want)
	}

	for _, args := range [][]string{{"attach", "orders"}, {"detach", "orders"}, {"attach", "--delay", "-1s", "orders", "late"}} {
		if _, _, err := runCLI(t, runTopics, append(args, "--server", srv.URL)...); err == nil {
			t.Errorf("%v: got no error, want a usage error", args)
		}
	}
}

package actors

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// FuzzTheHTTPEdge sends arbitrary requests (method, target with path and
// query, one header, body) to the real router of a single-node broker, as
// the HTTP server would hand them over (parsed by http.ReadRequest; what
// does not parse never reaches the router). Each answer must be one the
// contract allows: no panic (the API counts them), no 5xx but the
// documented 503, and every produce answered 202 committed: the topic's
// high watermarks reach the count of its 202s.
//
//	go test ./actors -run '^$' -fuzz FuzzTheHTTPEdge -fuzztime 10m
func FuzzTheHTTPEdge(f *testing.F) { fuzzTheEdge(f, false) }

// FuzzTheSecuredHTTPEdge is the same on a node with security on: the
// seeds carry the admin's, a user's, a wrong and no credentials, so the
// fuzzer works the authentication and the permission checks too.
//
//	go test ./actors -run '^$' -fuzz FuzzTheSecuredHTTPEdge -fuzztime 10m
func FuzzTheSecuredHTTPEdge(f *testing.F) { fuzzTheEdge(f, true) }

// fuzzAdminPassword is the secured fuzz node's admin password.
const fuzzAdminPassword = "fuzz-admin"

func fuzzTheEdge(f *testing.F, secured bool) {
	tn := newTestNode(f, func(c *Config) {
		c.MaxConsumeWait = 5 * time.Millisecond
		c.SecurityEnabled, c.AdminPassword = secured, fuzzAdminPassword
	})
	auth := func(user, password string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	}
	admin := auth("admin", fuzzAdminPassword)
	if secured {
		tn.user, tn.password = "admin", fuzzAdminPassword
		deadline := time.Now().Add(30 * time.Second)
		for code, _ := tn.do("GET", "/v1/users", nil); code != http.StatusOK; code, _ = tn.do("GET", "/v1/users", nil) {
			if time.Now().After(deadline) {
				f.Fatalf("the seeded admin: got %d, want 200 within 30 s", code)
			}
			time.Sleep(20 * time.Millisecond)
		}
		tn.must(http.StatusCreated, "POST", "/v1/users", []byte(`{"username":"pat","password":"pw","grants":[{"action":"produce","patterns":["f"]},{"action":"consume","patterns":["f*"]}]}`))
	}
	tn.createTopic("f", 3)
	tn.must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"s","partitions":3,"schema":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}}`))
	e := &edgeBook{handler: tn.n.server.Handler, accepted: map[string]int64{"f": 0, "s": 0}}
	if secured {
		e.authorization = admin
	}

	seeds := []struct {
		method, target, hname, hval, body string
	}{
		{"POST", "/v1/topics/f/produce?key=k1", "Content-Type", "application/json", `{"id":1}`},
		{"POST", "/v1/topics/f/produce?partition=2", "", "", "raw bytes"},
		{"POST", "/v1/topics/s/produce", "", "", `{"id":7}`},
		{"POST", "/v1/topics/s/produce", "", "", `{"id":"x"}`},
		{"POST", "/v1/topics/f/produce?key=%ff%fe", "", "", `x`},
		{"GET", "/v1/topics/f/consume?wait=1ms", "", "", ""},
		{"GET", "/v1/topics/f/consume?partition=0&offset=0", "", "", ""},
		{"POST", "/v1/topics/f/ack?receipt_handle=0:0:1", "", "", ""},
		{"POST", "/v1/topics/f/ack?receipt_handle=0:0:1&extend=0", "", "", ""},
		{"GET", "/v1/topics", "", "", ""},
		{"GET", "/v1/topics/f", "", "", ""},
		{"POST", "/v1/topics", "Content-Type", "application/json", `{"name":"g","partitions":3}`},
		{"PATCH", "/v1/topics/f", "", "", `{"retention_ms":60000}`},
		{"DELETE", "/v1/topics/g", "", "", ""},
		{"GET", "/v1/cluster/members", "", "", ""},
		{"GET", "/v1/cluster/moves?detail=1", "", "", ""},
		{"POST", "/v1/cluster/members/n9/decommission?dry_run=1", "", "", ""},
		{"GET", "/v1/users", "", "", ""},
		{"POST", "/v1/users", "", "", `{"username":"u","password":"p","grants":[{"action":"create","patterns":["x*"]}]}`},
		{"PUT", "/v1/users/pat/password", "", "", `{"new_password":"q","current_password":"pw"}`},
		{"GET", "/healthz", "", "", ""},
		{"GET", "/readyz", "", "", ""},
		{"OPTIONS", "/v1/topics/f/produce", "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, s.hname, s.hval, []byte(s.body))
		if secured {
			for _, a := range []string{admin, auth("pat", "pw"), auth("admin", "wrong"), "Basic !!"} {
				f.Add(s.method, s.target, "Authorization", a, []byte(s.body))
			}
		}
	}
	handler := tn.n.server.Handler
	f.Fuzz(func(t *testing.T, method, target, hname, hval string, body []byte) {
		req := edgeRequest(method, target, hname, hval, body)
		if req == nil {
			return // the server answers 400 before any router sees it
		}
		panics := tn.n.metrics.httpPanics.Get()
		rec := httptest.NewRecorder()
		answerWithin(t, edgeAnswerBound, req.Method+" "+req.URL.String(), func() { handler.ServeHTTP(rec, req) })
		if got := tn.n.metrics.httpPanics.Get(); got != panics {
			t.Fatalf("%s %s: the handler panicked (answered %d %q)", req.Method, req.URL, rec.Code, rec.Body.String())
		}
		if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s %s: got %d %q, want no 5xx but 503", req.Method, req.URL, rec.Code, rec.Body.String())
		}
		e.after(t, req, rec.Code, body)
	})
}

// edgeRequest builds the request the HTTP server would hand the router,
// or nil when the server itself would refuse it.
func edgeRequest(method, target, hname, hval string, body []byte) *http.Request {
	var raw strings.Builder
	fmt.Fprintf(&raw, "%s %s HTTP/1.1\r\nHost: fuzz\r\n", method, target)
	if hname != "" {
		fmt.Fprintf(&raw, "%s: %s\r\n", hname, hval)
	}
	fmt.Fprintf(&raw, "Content-Length: %d\r\n\r\n", len(body))
	raw.Write(body)
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw.String())))
	if err != nil || strings.ContainsAny(target, "\r\n ") {
		return nil
	}
	req.RemoteAddr = "127.0.0.1:1"
	return req
}

// edgeBook keeps, per topic, how many produces were answered 202 since
// the topic was last created, and checks they all committed.
type edgeBook struct {
	handler  http.Handler
	accepted map[string]int64
	// authorization is the header the book's own reads send (a secured
	// node's admin), "" for none.
	authorization string
}

// do sends one request straight to the router (the test node's helpers
// report to the fuzz test's F, which a fuzz target must not use).
func (e *edgeBook) do(method, path string) (int, []byte) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(method, path, nil)
	if e.authorization != "" {
		req.Header.Set("Authorization", e.authorization)
	}
	e.handler.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// maxFuzzTopics bounds the topics the fuzzer may leave behind: each one
// holds open files and actors.
const maxFuzzTopics = 16

func (e *edgeBook) after(t *testing.T, req *http.Request, code int, body []byte) {
	seg := pathSegments(req.URL)
	switch {
	case code == http.StatusAccepted && len(seg) == 4 && seg[0] == "v1" && seg[1] == "topics" && seg[3] == "produce":
		e.accepted[seg[2]]++
		e.waitCommitted(t, seg[2])
	case code == http.StatusNoContent && req.Method == "DELETE" && len(seg) == 3 && seg[0] == "v1" && seg[1] == "topics":
		delete(e.accepted, seg[2])
	case code == http.StatusNoContent && req.Method == "PUT" && len(seg) == 4 && seg[1] == "users" && seg[2] == "admin" && seg[3] == "password":
		// The fuzzer changed the admin's password: the book's reads follow.
		var pw struct {
			New string `json:"new_password"`
		}
		if err := json.Unmarshal(body, &pw); err == nil && e.authorization != "" {
			e.authorization = "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+pw.New))
		}
	case code == http.StatusCreated && req.Method == "POST" && len(seg) == 2 && seg[0] == "v1" && seg[1] == "topics":
		var created struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(body, &created); err == nil {
			e.accepted[created.Name] = 0
		}
		e.trim(t)
	}
}

// pathSegments splits the path the way the router matches it: on the
// escaped path, each segment unescaped.
func pathSegments(u *url.URL) []string {
	parts := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	for i, p := range parts {
		if s, err := url.PathUnescape(p); err == nil {
			parts[i] = s
		}
	}
	return parts
}

// waitCommitted polls the topic's stats until its high watermarks add up
// to every produce answered 202 (the commit is asynchronous: WAL, then
// the dispatcher, then the partition).
func (e *edgeBook) waitCommitted(t *testing.T, topic string) {
	want := e.accepted[topic]
	deadline := time.Now().Add(edgeAnswerBound)
	var got int64
	for time.Now().Before(deadline) {
		code, b := e.do("GET", "/v1/topics/"+url.PathEscape(topic))
		if code == http.StatusNotFound {
			delete(e.accepted, topic) // deleted meanwhile: its records went with it
			return
		}
		var st struct {
			Stats []struct {
				HWM int64 `json:"high_watermark"`
			} `json:"partition_stats"`
		}
		if code == http.StatusOK && json.Unmarshal(b, &st) == nil {
			got = 0
			for _, p := range st.Stats {
				got += p.HWM
			}
			if got >= want {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("topic %s: got %d records committed, want the %d answered 202 (goroutines in %s)", topic, got, want, dumpGoroutines())
}

// edgeAnswerBound bounds one request of the fuzz target, and the commit of
// a produce answered 202: the longest documented wait is a consume's
// MaxConsumeWait (5 ms here) and a metastore proposal's timeout, so an
// answer this late is a hang. It stays below the fuzz engine's own hang
// detection, so that the goroutines are dumped and the input named.
const edgeAnswerBound = 8 * time.Second

// answerWithin runs fn and fails the test, with every goroutine's stack dumped
// to a file, if it takes longer than d.
func answerWithin(t *testing.T, d time.Duration, what string, fn func()) {
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s: no answer within %s (goroutines in %s)", what, d, dumpGoroutines())
	}
}

// dumpGoroutines writes every goroutine's stack to a temp file and names it.
func dumpGoroutines() string {
	buf := make([]byte, 64<<20)
	buf = buf[:runtime.Stack(buf, true)]
	f, err := os.CreateTemp("", "narad-fuzz-hang-*.txt")
	if err != nil {
		return "(no dump: " + err.Error() + ")"
	}
	defer f.Close()
	f.Write(buf)
	return f.Name()
}

// trim deletes topics the fuzzer created beyond maxFuzzTopics.
func (e *edgeBook) trim(t *testing.T) {
	if len(e.accepted) <= maxFuzzTopics {
		return
	}
	for name := range e.accepted {
		if name == "f" || name == "s" {
			continue
		}
		if code, b := e.do("DELETE", "/v1/topics/"+url.PathEscape(name)); code != http.StatusNoContent && code != http.StatusNotFound {
			t.Fatalf("delete fuzz topic %s: got %d %s", name, code, b)
		}
		delete(e.accepted, name)
		if len(e.accepted) <= maxFuzzTopics {
			return
		}
	}
}

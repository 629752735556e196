package actors

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/messages"
)

// Issue 14 item 4: a schema's $ref resolves inside the schema document
// only. A file on the host, /etc/passwd or a URL is a 400 on create and on
// alter whose message holds none of the target's bytes, and nothing is
// loaded; an internal ref still works.
func TestIssue14SchemaRefsResolveOnlyInsideTheDocument(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host.json")
	if err := os.WriteFile(host, []byte(`{"type":"string","description":"secret-from-the-host"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer web.Close()
	tn := ctNode(t)
	ctCreate(t, tn, `{"name":"plain"}`)
	for _, tc := range []struct{ schema, outside string }{
		{`{"$ref":"file:///etc/passwd"}`, "file:///etc/passwd"},
		{`{"$ref":"file://` + host + `"}`, "file://" + host},
		{`{"properties":{"a":{"$ref":"file://` + host + `#/type"}}}`, "file://" + host},
		{`{"$ref":"` + web.URL + `/s.json"}`, web.URL + "/s.json"},
		{`{"$id":"` + web.URL + `/root.json","$ref":"other.json"}`, web.URL + "/other.json"},
		{`{"$schema":"file://` + host + `"}`, "file://" + host},
	} {
		want := fmt.Sprintf(`invalid argument: schema does not compile: %q is outside the schema document; a $ref may only point inside it (such as "#/$defs/name")`, tc.outside)
		r := ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"refs","schema":`+tc.schema+`}`))
		ctWantError(t, "create with "+tc.schema, r, http.StatusBadRequest, want)
		ctWantNoTopic(t, tn, "refs")
		r = ctDo(t, tn, "PATCH", "/v1/topics/plain", []byte(`{"schema":`+tc.schema+`}`))
		ctWantError(t, "alter with "+tc.schema, r, http.StatusBadRequest, want)
		if strings.Contains(string(r.body), "secret-from-the-host") || strings.Contains(string(r.body), "root:") {
			t.Fatalf("alter with %s: the answer %q holds bytes of the target", tc.schema, r.body)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("web server: got %d requests, want none", n)
	}
	ctProduce(t, tn, "plain", "", []byte(`not json`)) // no schema took

	ctCreate(t, tn, `{"name":"inner","schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"id":{"type":"integer"}},"type":"object","properties":{"id":{"$ref":"#/$defs/id"}}}}`)
	ctProduce(t, tn, "inner", "", []byte(`{"id":1}`))
	ctWantError(t, "produce against an internal ref", ctDo(t, tn, "POST", "/v1/topics/inner/produce", []byte(`{"id":"one"}`)), http.StatusBadRequest, "invalid argument: ...")
}

// Issue 14 item 4: a receipt handle's nonce cannot be guessed from another.
// Having seen its own handle, a consumer tries the next lease's offset with
// its own nonce and each of the 1,000 on either side: every try is a 410,
// and the other consumer's lease is untouched (its own handle still acks).
// The issue's broker answered 204 to the nonce one up.
func TestIssue14AReceiptHandleCannotBeGuessedFromAnother(t *testing.T) {
	tn := ctNode(t)
	tn.createTopic("guess", 3)
	ctProduce(t, tn, "guess", "partition=0", []byte("a"))
	ctProduce(t, tn, "guess", "partition=0", []byte("b"))
	ctWaitCommitted(t, tn, "guess", 0, 1)
	seen := ctConsume(t, tn, "guess", "partition=0")
	other := ctConsume(t, tn, "guess", "partition=0")
	if seen == nil || other == nil || seen.Offset != 0 || other.Offset != 1 {
		t.Fatalf("two leases: got %+v and %+v, want offsets 0 and 1", seen, other)
	}
	var nonce uint64
	if _, err := fmt.Sscanf(seen.ReceiptHandle, "0:0:%d", &nonce); err != nil {
		t.Fatalf("handle %q: %v, want 0:0:<nonce>", seen.ReceiptHandle, err)
	}
	for d := -1000; d <= 1000; d++ {
		guess := fmt.Sprintf("0:1:%d", nonce+uint64(d))
		r := ctAck(t, tn, "guess", guess, "")
		if r.code == http.StatusBadRequest && nonce+uint64(d) == 0 {
			continue // 0 is no nonce at all
		}
		ctWantError(t, "ack of guessed handle "+guess, r, http.StatusGone, errStale)
	}
	ctWantEmpty(t, "ack by the lease's holder", ctAck(t, tn, "guess", other.ReceiptHandle, ""), http.StatusNoContent)
	ctWantEmpty(t, "ack of the handle seen", ctAck(t, tn, "guess", seen.ReceiptHandle, ""), http.StatusNoContent)
}

// Issue 14 item 4: a lease after a restart never matches a handle from
// before it, though it leases the same offset. The handle from before was
// nacked, so the restart keeps no lease of the record and serves it again.
func TestIssue14AHandleFromBeforeARestartMatchesNoLeaseAfterIt(t *testing.T) {
	tn := ctNode(t)
	tn.createTopic("reboot", 3)
	ctProduce(t, tn, "reboot", "partition=0", []byte("a"))
	ctWaitCommitted(t, tn, "reboot", 0, 0)
	before := ctConsume(t, tn, "reboot", "partition=0")
	ctWantEmpty(t, "nack before the restart", ctAck(t, tn, "reboot", before.ReceiptHandle, "&extend=0"), http.StatusNoContent)
	tn.restart()
	after := ctConsume(t, tn, "reboot", "partition=0&wait=5s")
	if before == nil || after == nil || after.Offset != before.Offset {
		t.Fatalf("leases around a restart: got %+v and %+v, want the same offset twice", before, after)
	}
	ctWantError(t, "ack of the handle from before the restart", ctAck(t, tn, "reboot", before.ReceiptHandle, ""), http.StatusGone, errStale)
	ctWantEmpty(t, "ack of the handle after", ctAck(t, tn, "reboot", after.ReceiptHandle, ""), http.StatusNoContent)
}

// pipeListener serves net.Pipe connections, so an http.Server runs inside
// a synctest bubble on its fake clock.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial hands the server one end of a new pipe and returns the other.
func (l *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	l.conns <- server
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// Issue 14 item 4: the client API's server cuts off a client that has not
// sent its headers within HTTPReadHeaderTimeout, well before the read
// timeout, while a prompt request is served. On synctest's clock.
func TestIssue14TheHTTPServerCutsOffAClientThatTricklesItsHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.HTTPReadHeaderTimeout = time.Second
		srv := httpServer(cfg, api.NewConnLimit(cfg.MaxHTTPConnections, metrics.NewSet(), cfg.NodeID), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }), testLogger(t))
		l := newPipeListener()
		served := make(chan error, 1)
		go func() { served <- srv.Serve(l) }()
		defer srv.Close() // a failure below still ends the bubble's goroutines

		slow := l.dial()
		defer slow.Close()
		if _, err := io.WriteString(slow, "GET /healthz HTTP/1.1\r\nHost: narad\r\n"); err != nil {
			t.Fatalf("slow client's first header: %v", err)
		}
		var closed atomic.Bool
		go func() {
			io.Copy(io.Discard, slow) // ends when the server closes its end
			closed.Store(true)
		}()
		time.Sleep(2 * cfg.HTTPReadHeaderTimeout)
		synctest.Wait()
		if !closed.Load() {
			t.Fatalf("slow client after %v without its headers: got the connection open, want it closed (read timeout %v)", 2*cfg.HTTPReadHeaderTimeout, httpReadTimeout)
		}
		prompt := l.dial()
		go io.WriteString(prompt, "GET /healthz HTTP/1.1\r\nHost: narad\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(prompt), nil)
		if err != nil || resp.StatusCode != http.StatusTeapot {
			t.Fatalf("prompt client: got %v, %v, want 418", resp, err)
		}
		resp.Body.Close()
		prompt.Close()

		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Fatalf("Serve: got %v, want ErrServerClosed", err)
		}
	})
}

// Issue 14 item 4: HTTPReadHeaderTimeout is required, and bounded by the
// read timeout it sits within.
func TestIssue14HTTPReadHeaderTimeoutIsValidated(t *testing.T) {
	for _, v := range []time.Duration{0, -time.Second, httpReadTimeout + time.Nanosecond} {
		cfg := DefaultConfig()
		cfg.NodeID, cfg.DataDir = "n1", t.TempDir()
		cfg.HTTPReadHeaderTimeout = v
		if err := cfg.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "HTTPReadHeaderTimeout") {
			t.Errorf("HTTPReadHeaderTimeout %v: got %v, want an ErrInvalid naming it", v, err)
		}
	}
	cfg := DefaultConfig()
	cfg.NodeID, cfg.DataDir = "n1", t.TempDir()
	if cfg.HTTPReadHeaderTimeout != 5*time.Second {
		t.Errorf("default HTTPReadHeaderTimeout: got %v, want 5s", cfg.HTTPReadHeaderTimeout)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("default config: got %v, want valid", err)
	}
}

// Issue 14 item 4, on a real node: dry_run=true judges and leaves the
// member as it was; a key that is not UTF-8 writes nothing.
func TestIssue14DryRunTrueAndNonUTF8KeysOnANode(t *testing.T) {
	tn := ctNode(t)
	id := tn.n.cfg.NodeID
	var v messages.DecommissionReply
	ctWantJSON(t, "dry_run=true", ctDo(t, tn, "POST", "/v1/cluster/members/"+id+"/decommission?dry_run=true", nil), http.StatusOK, &v)
	if v.Member != id || v.Verdict == "draining" {
		t.Fatalf("dry_run=true: got %+v, want a verdict on %s that started nothing", v, id)
	}
	ctWantError(t, "dry_run=yes", ctDo(t, tn, "POST", "/v1/cluster/members/"+id+"/decommission?dry_run=yes", nil), http.StatusBadRequest, "invalid argument: dry_run must be true, 1, false or 0")
	var members messages.MemberList
	ctWantJSON(t, "members", ctDo(t, tn, "GET", "/v1/cluster/members", nil), http.StatusOK, &members)
	for _, m := range members.Members {
		if m.Draining {
			t.Fatalf("member %s: got draining after dry runs, want not", m.ID)
		}
	}

	tn.createTopic("keys", 3)
	ctWantError(t, "key %ff%fe", ctDo(t, tn, "POST", "/v1/topics/keys/produce?key=%ff%fe", []byte("x")), http.StatusBadRequest, "invalid argument: key is not valid UTF-8")
	ctSettle(t, tn)
	if n := ctRecords(t, tn, "keys"); n != 0 {
		t.Fatalf("records after a refused key: got %d, want 0", n)
	}
}

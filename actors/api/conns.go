package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
)

// A client past a cap on waiting clients (connections, long polls) is told
// 503 with Retry-After: the contract's retryable status, and a pause the
// client's backoff may honour rather than spin on.
const retryAfterSeconds = 1

// retryAfter sets the Retry-After header of an answer to a busy node.
func retryAfter(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
}

// busyConnAnswers is how many connections past the cap are served at once,
// each only to be told 503: beyond it a new connection is closed unanswered,
// so a flood still cannot take more file descriptors than the cap and this.
const busyConnAnswers = 64

// textBusyConns is the 503 of a connection past the cap.
const textBusyConns = "too many connections to this node; retry later"

// ConnLimit caps the client API's open connections. Its Listener counts
// them; a connection accepted past the cap is still read, so its client
// gets a clear 503 with Retry-After (Handler) instead of a reset, and is
// closed after that answer. Make one with NewConnLimit.
type ConnLimit struct {
	max int
	// open counts the connections within max; busy, the ones past it
	// being answered 503 (at most busyConnAnswers).
	open, busy atomic.Int64
	refused    *metrics.Counter
}

// NewConnLimit caps connections at max (at least 1), with its series in
// set under node's label: narad_http_connections (open within the cap)
// and narad_http_connections_refused_total.
func NewConnLimit(max int, set *metrics.Set, node string) *ConnLimit {
	l := &ConnLimit{max: max}
	set.GetOrCreateGauge(fmt.Sprintf(`narad_http_connections{node=%q}`, node), func() float64 { return float64(l.open.Load()) })
	l.refused = set.GetOrCreateCounter(fmt.Sprintf(`narad_http_connections_refused_total{node=%q}`, node))
	return l
}

// Listener counts the connections ln accepts. It must wrap the TCP
// listener, under TLS, so a busy connection is still answered over TLS.
func (l *ConnLimit) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, limit: l}
}

// ConnContext marks the requests of a connection accepted past the cap:
// http.Server.ConnContext.
func (l *ConnLimit) ConnContext(ctx context.Context, c net.Conn) context.Context {
	for {
		switch cc := c.(type) {
		case *countedConn:
			if cc.busy {
				return context.WithValue(ctx, busyConnKey{}, true)
			}
			return ctx
		case interface{ NetConn() net.Conn }: // *tls.Conn
			c = cc.NetConn()
		default:
			return ctx
		}
	}
}

// Handler answers every request of a connection past the cap with 503,
// Retry-After and Connection: close, and passes the others to next.
func (l *ConnLimit) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if busy, _ := r.Context().Value(busyConnKey{}).(bool); busy {
			retryAfter(w)
			w.Header().Set("Connection", "close")
			writeError(w, http.StatusServiceUnavailable, textBusyConns)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type busyConnKey struct{}

// limitListener is ConnLimit's listener.
type limitListener struct {
	net.Listener
	limit *ConnLimit
}

// Accept takes the next connection: within the cap, one to serve; past
// it, one to answer 503 while busyConnAnswers allow, else it closes the
// connection and takes the next.
func (ll *limitListener) Accept() (net.Conn, error) {
	l := ll.limit
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= int64(l.max) {
			return &countedConn{Conn: c, count: &l.open}, nil
		}
		l.open.Add(-1)
		l.refused.Inc()
		if l.busy.Add(1) <= busyConnAnswers {
			return &countedConn{Conn: c, count: &l.busy, busy: true}, nil
		}
		l.busy.Add(-1)
		c.Close()
	}
}

// countedConn gives its place back when closed, once.
type countedConn struct {
	net.Conn
	count *atomic.Int64
	busy  bool // accepted past the cap: answered 503
	once  sync.Once
}

// CloseWrite half-closes a TCP connection, so net/http can finish an
// answer before closing (a client's unread request would otherwise reset
// the answer away); other connections have nothing to half-close.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.count.Add(-1) })
	return c.Conn.Close()
}

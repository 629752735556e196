package proc

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP relay on a loopback port in front of one upstream address
// (a NATS server): a node given the proxy's address instead of the server's
// can be cut off the server while its process lives on, which is a
// partition and not a crash. Cut severs every relayed connection and
// refuses new ones (each is accepted and closed at once, so the client sees
// its connection drop, as after a reset) until Restore.
//
// Every goroutine a Proxy starts ends on Close: the accept loop when the
// listener closes, the two copies of a connection when either side closes.
type Proxy struct {
	Addr     string // host:port the proxy listens on
	Upstream string // host:port it relays to

	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	cut    bool
	closed bool
	conns  map[*relay]struct{}
}

// relay is one client connection and its connection upstream.
type relay struct{ client, upstream net.Conn }

func (r *relay) close() {
	r.client.Close()
	r.upstream.Close()
}

// MaxProxyConns bounds the connections a proxy relays at once: a node holds
// one NATS connection, a reconnect loop a second for a moment; more is a
// client gone wrong, refused like a cut.
const MaxProxyConns = 16

// proxyDialTimeout bounds a dial upstream: a killed NATS server refuses at
// once, a stopped one would hold the client's connect until its own
// timeout.
const proxyDialTimeout = 2 * time.Second

// ErrProxyClosed is a proxy used after Close.
var ErrProxyClosed = errors.New("proxy closed")

// NewProxy listens on a free loopback port and relays each connection to
// upstream, until Close.
func NewProxy(upstream string) (*Proxy, error) { return NewProxyOn("127.0.0.1", upstream) }

// NewProxyOn is NewProxy listening on host: a cluster's ListenHost, where
// nodes in namespaces of their own reach it.
func NewProxyOn(host, upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", upstream, err)
	}
	p := &Proxy{Addr: ln.Addr().String(), Upstream: upstream, ln: ln, conns: map[*relay]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// URL is the proxy's address as a NATS URL.
func (p *Proxy) URL() string { return "nats://" + p.Addr }

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			// Only Close ends the listener; a transient accept error
			// on loopback is not worth a retry loop here.
			return
		}
		p.mu.Lock()
		refuse := p.cut || p.closed || len(p.conns) >= MaxProxyConns
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		// The dial runs beside the loop, so one slow dial does not hold
		// up a refusal.
		p.wg.Go(func() { p.open(c) })
	}
}

// open dials upstream for client c and relays both ways until either side
// closes or the proxy cuts or closes.
func (p *Proxy) open(c net.Conn) {
	u, err := net.DialTimeout("tcp", p.Upstream, proxyDialTimeout)
	if err != nil {
		c.Close()
		return
	}
	r := &relay{client: c, upstream: u}
	p.mu.Lock()
	if p.cut || p.closed || len(p.conns) >= MaxProxyConns {
		// Cut while dialling: the cut covers this one too.
		p.mu.Unlock()
		r.close()
		return
	}
	p.conns[r] = struct{}{}
	p.mu.Unlock()

	var both sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		// One direction ending ends the other: a half-open relay would
		// keep a dead server looking alive.
		r.close()
	}
	both.Go(func() { pipe(u, c) })
	both.Go(func() { pipe(c, u) })
	both.Wait()
	p.mu.Lock()
	delete(p.conns, r)
	p.mu.Unlock()
}

// Cut severs every connection relayed now and refuses new ones until
// Restore. It returns how many connections it severed.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for r := range p.conns {
		r.close()
	}
	return len(p.conns)
}

// Restore relays new connections again after a Cut.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

// Conns is how many connections the proxy relays now.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops the listener, severs every connection and waits for every
// goroutine of the proxy to end. A second Close returns ErrProxyClosed.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrProxyClosed
	}
	p.closed = true
	for r := range p.conns {
		r.close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

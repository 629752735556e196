package testnet

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
)

// Ports hands out loopback addresses from one range of ports. The range
// lies below the kernel's ephemeral range (32768 and up on Linux): a port
// from that range, free a moment ago, can be taken by an outgoing
// connection before the test listens on it. A port is handed out at most
// once per Ports, because a cluster picks all its addresses before any node
// listens and would otherwise collide with itself.
type Ports struct {
	r         Range
	mu        sync.Mutex
	handedOut map[int]bool
}

// Range is a span of ports starting at Base.
type Range struct{ Base, Span int }

// Ports is the hand-out of r's ports; keep one per test binary (a package
// variable), so that no two tests of it get the same port.
func (r Range) Ports() *Ports { return &Ports{r: r, handedOut: map[int]bool{}} }

// Addr is "127.0.0.1:port" for a port of the range that was free a moment
// ago and never handed out by p; it fails the test when the range is used
// up.
func (p *Ports) Addr(t testing.TB) string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 1000 {
		port := p.r.Base + rand.IntN(p.r.Span)
		if p.handedOut[port] {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		p.handedOut[port] = true
		return addr
	}
	t.Fatalf("no free port left in %d..%d", p.r.Base, p.r.Base+p.r.Span-1)
	return ""
}

// Block hands out n consecutive ports, first to first+n-1, each free a
// moment ago and never handed out by p: for a script that numbers its
// processes' ports from a base (deploy/local-cluster.sh).
func (p *Ports) Block(t testing.TB, n int) (first int) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	starts := p.r.Span - n + 1
	// From a random start, every start in turn: a block fails only when no
	// n free ports lie side by side.
	off := rand.IntN(starts)
	for i := range starts {
		first = p.r.Base + (off+i)%starts
		free := true
		for port := first; port < first+n && free; port++ {
			if p.handedOut[port] {
				free = false
				break
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if !free {
			continue
		}
		for port := first; port < first+n; port++ {
			p.handedOut[port] = true
		}
		return first
	}
	t.Fatalf("no %d free consecutive ports left in %d..%d", n, p.r.Base, p.r.Base+p.r.Span-1)
	return 0
}

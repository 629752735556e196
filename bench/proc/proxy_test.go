package proc

import (
	"bufio"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// ioBound keeps a broken proxy from hanging the test; it is no threshold
// the test judges by.
const ioBound = 10 * time.Second

// echoServer echoes every line back until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			wg.Go(func() { io.Copy(c, c); c.Close() })
		}
	})
	return ln.Addr().String()
}

// roundTrip writes line and reads its echo through conn.
func roundTrip(conn net.Conn, line string) (string, error) {
	conn.SetDeadline(time.Now().Add(ioBound))
	if _, err := io.WriteString(conn, line+"\n"); err != nil {
		return "", err
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	return got[:len(got)-1], nil
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioBound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestAProxyRelaysCutsRefusesAndRestores(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	before := dial(t, p.Addr)
	if got, err := roundTrip(before, "hello"); err != nil || got != "hello" {
		t.Fatalf("through the proxy: got %q, %v, want hello", got, err)
	}

	if n := p.Cut(); n != 1 {
		t.Errorf("severed by the cut: got %d connections, want 1", n)
	}
	if got, err := roundTrip(before, "after the cut"); err == nil {
		t.Errorf("a connection open before the cut: got %q, want it severed", got)
	}
	during := dial(t, p.Addr)
	if got, err := roundTrip(during, "during"); err == nil {
		t.Errorf("a connection made during the cut: got %q, want it refused", got)
	}

	p.Restore()
	after := dial(t, p.Addr)
	if got, err := roundTrip(after, "back"); err != nil || got != "back" {
		t.Errorf("after the restore: got %q, %v, want back", got, err)
	}
}

func TestAProxyRefusesPastItsBound(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i := range MaxProxyConns {
		if _, err := roundTrip(dial(t, p.Addr), "x"); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, MaxProxyConns, err)
		}
	}
	if got, err := roundTrip(dial(t, p.Addr), "one too many"); err == nil {
		t.Errorf("connection %d: got %q, want it refused", MaxProxyConns+1, got)
	}
}

func TestAProxyWhoseUpstreamIsGoneDropsTheClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	p, err := NewProxy(gone)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got, err := roundTrip(dial(t, p.Addr), "anyone"); err == nil {
		t.Errorf("upstream closed: got %q, want the connection dropped", got)
	}
}

// Close returns only once every goroutine of the proxy ended (it waits for
// them), so a Close that returns with relays open is the proof.
func TestClosingAProxyEndsEveryConnection(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	open := []net.Conn{dial(t, p.Addr), dial(t, p.Addr)}
	for _, c := range open {
		if _, err := roundTrip(c, "up"); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatalf("close: got %v, want nil", err)
	}
	if got := p.Conns(); got != 0 {
		t.Errorf("connections after close: got %d, want 0", got)
	}
	for i, c := range open {
		if got, err := roundTrip(c, "still?"); err == nil {
			t.Errorf("connection %d after close: got %q, want it closed", i, got)
		}
	}
	if err := p.Close(); !errors.Is(err, ErrProxyClosed) {
		t.Errorf("second close: got %v, want ErrProxyClosed", err)
	}
}

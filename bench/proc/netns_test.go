package proc

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The helper modes of this test binary, started in a node's namespace:
// listen answers "ok" on every connection; dial connects once and prints
// what happened.
const (
	listenEnv = "NARAD_PROC_TEST_LISTEN"
	dialEnv   = "NARAD_PROC_TEST_DIAL"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(listenEnv); addr != "" {
		serveOK(addr)
		return
	}
	if addr := os.Getenv(dialEnv); addr != "" {
		fmt.Println(dialOnce(addr))
		return
	}
	os.Exit(m.Run())
}

func serveOK(addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(1)
	}
	serveListener(ln)
}

// dialOnce is "ok", "timeout" or the error of one connection to addr.
func dialOnce(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	if err != nil {
		return err.Error()
	}
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(line)
}

// dialFrom runs one dial from node's namespace and returns what it said.
func dialFrom(t *testing.T, c *Cluster, node *Node, addr string) string {
	t.Helper()
	ns, err := c.slotOf(node)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.startIn(ns, "dial", append(os.Environ(), dialEnv+"="+addr))
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	out, err := os.ReadFile(p.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err := os.Remove(p.LogPath); err != nil {
		t.Fatal(err)
	}
	return lines[len(lines)-1]
}

func TestADropCutsOneNodeFromAnotherWhileBothReachTheBench(t *testing.T) {
	if err := NetnsAvailable(); err != nil {
		t.Skip(err)
	}
	c, err := New(os.Args[0], t.TempDir(), 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UseNetns(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	if got := hostOf(n1.Raft); got == "127.0.0.1" || got != hostOf(n1.HTTP) {
		t.Fatalf("n1's Raft on %s, HTTP on %s: want both on its namespace's address", n1.Raft, n1.HTTP)
	}
	// Each node "serves Raft"; the bench listens where NATS would.
	for _, n := range c.Nodes {
		ns, err := c.slotOf(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.startIn(ns, n.ID, append(os.Environ(), listenEnv+"="+n.Raft)); err != nil {
			t.Fatal(err)
		}
	}
	bench, err := net.Listen("tcp", net.JoinHostPort(c.ListenHost(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer bench.Close()
	go serveListener(bench)
	waitServing(t, n1.Raft)
	waitServing(t, n2.Raft)

	if got := dialFrom(t, c, n1, n2.Raft); got != "ok" {
		t.Fatalf("n1 to n2 before the drop: got %q, want ok", got)
	}
	if err := c.Drop(n1, n2); err != nil {
		t.Fatal(err)
	}
	if got := dialFrom(t, c, n1, n2.Raft); got != "timeout" {
		t.Errorf("n1 to n2 dropped: got %q, want timeout (silence, not a refusal)", got)
	}
	if got := dialFrom(t, c, n1, bench.Addr().String()); got != "ok" {
		t.Errorf("n1 to the bench while its packets to n2 are dropped: got %q, want ok", got)
	}
	if got := dialOnce(n2.Raft); got != "ok" {
		t.Errorf("the bench to n2 while n1's packets to it are dropped: got %q, want ok", got)
	}
	if err := c.Undrop(n1, n2); err != nil {
		t.Fatal(err)
	}
	if got := dialFrom(t, c, n1, n2.Raft); got != "ok" {
		t.Errorf("n1 to n2 after the undrop: got %q, want ok", got)
	}
}

func serveListener(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintln(c, "ok")
		c.Close()
	}
}

func waitServing(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for dialOnce(addr) != "ok" {
		if time.Now().After(deadline) {
			t.Fatalf("%s never served", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAFilledLoopDiskRefusesWritesUntilFreedAndTheOthersDoNot(t *testing.T) {
	if err := LoopDisksAvailable(); err != nil {
		t.Skip(err)
	}
	c, err := New(os.Args[0], t.TempDir(), 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.UseLoopDisks(64); err != nil {
		c.Close()
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	n1, n2 := c.Nodes[0], c.Nodes[1]
	for _, n := range c.Nodes {
		if err := os.MkdirAll(c.DataDir(n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(n *Node) error {
		return os.WriteFile(filepath.Join(c.DataDir(n), "record"), make([]byte, 1<<20), 0o600)
	}
	took, err := c.FillDisk(n1)
	if err != nil {
		t.Fatal(err)
	}
	if took < 32<<20 {
		t.Errorf("ballast of n1's 64 MiB disk: got %d bytes, want most of it", took)
	}
	if err := write(n1); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("a write to n1's full disk: got %v, want ENOSPC", err)
	}
	if err := write(n2); err != nil {
		t.Errorf("a write to n2's disk while n1's is full: got %v, want nil", err)
	}
	if err := c.FreeDisk(n1); err != nil {
		t.Fatal(err)
	}
	if err := write(n1); err != nil {
		t.Errorf("a write to n1's disk after FreeDisk: got %v, want nil", err)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// bannerWriter keeps what narad dev prints and closes ready once the
// banner is out: the test waits on that, not on a clock.
type bannerWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	once  sync.Once
}

func (w *bannerWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), "Stop with Ctrl-C.") {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

func (w *bannerWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// devRun is a narad dev running in this process until stop.
type devRun struct {
	out  *bannerWriter
	logs *bannerWriter
	done chan error
	stop context.CancelFunc
}

// startDev runs narad dev with args and waits for its banner; it fails
// the test when dev returns first.
func startDev(t *testing.T, args ...string) *devRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d := &devRun{out: &bannerWriter{ready: make(chan struct{})}, logs: &bannerWriter{ready: make(chan struct{})}, done: make(chan error, 1), stop: cancel}
	go func() { d.done <- runDev(ctx, args, d.out, d.logs) }()
	t.Cleanup(func() { d.halt(t) })
	select {
	case <-d.out.ready:
	case err := <-d.done:
		d.done <- err
		t.Fatalf("narad dev %q: got %v before the banner, want it running", args, err)
	}
	return d
}

// halt stops the run and waits for it to return.
func (d *devRun) halt(t *testing.T) {
	t.Helper()
	if d.stop == nil {
		return
	}
	d.stop()
	d.stop = nil
	if err := <-d.done; err != nil {
		t.Errorf("narad dev stop: got %v, want nil", err)
	}
}

func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// narad dev's NATS listens on the port --nats-port names (4222 unless
// told), the banner says where, and narad cluster reaches the nodes there.
// At --log-level info, Dragonboat's info lines stay out (its level is warn
// unless --dragonboat-log-level says otherwise).
func TestDevNATSListensOnItsFixedPortAndTheClusterCLIFindsIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev node")
	}
	dir := t.TempDir()
	natsAddr := freePort(t)
	d := startDev(t, "--data", dir, "--http-base", fmt.Sprintf("127.0.0.1:%d", devPort(t)), "--nats-port", portOf(t, natsAddr), "--log-level", "info")
	url := "nats://" + natsAddr
	if banner := d.out.String(); !strings.Contains(banner, "NATS on "+url) {
		t.Fatalf("banner: got %q, want it to name NATS on %s", banner, url)
	}
	var out, errOut bytes.Buffer
	creds := filepath.Join(dir, "nats", "admin.nk")
	if err := runCluster(context.Background(), []string{"members", "--nats", url, "--nats-creds", creds}, &out, &errOut); err != nil {
		t.Fatalf("cluster members on %s: got %v (%s), want the members", url, err, errOut.String())
	}
	if !strings.Contains(out.String(), "n1") {
		t.Fatalf("cluster members: got %q, want n1 listed", out.String())
	}
	for _, line := range strings.Split(d.logs.String(), "\n") {
		if strings.Contains(line, "component=dragonboat") && !strings.Contains(line, "level=WARN") && !strings.Contains(line, "level=ERROR") {
			t.Fatalf("logs: got Dragonboat line %q, want only its warnings and errors", line)
		}
	}
	if !strings.Contains(d.logs.String(), `msg="node ready"`) {
		t.Fatalf("logs: got %q, want the node's own info lines", d.logs.String())
	}
}

// narad dev runs Raft over mutual TLS on certificates it makes in its
// data directory (the key only its owner reads): its Raft port refuses a
// client without a certificate of its CA.
func TestDevRaftRunsOverMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dev node")
	}
	dir, p := t.TempDir(), devPort(t)
	startDev(t, "--data", dir, "--http-base", fmt.Sprintf("127.0.0.1:%d", p), "--nats-port", "0", "--log-level", "error")
	for name, want := range map[string]os.FileMode{"ca.key": 0o600, "node.key": 0o600, "node.crt": 0o644} {
		fi, err := os.Stat(filepath.Join(dir, devRaftCertsDir, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: got %v (%v), want mode %v", name, fi, err, want)
		}
	}
	raft := fmt.Sprintf("127.0.0.1:%d", p+10000)
	if err := raftRefusal(raft, nil); err == nil || !strings.Contains(err.Error(), "remote error: tls") {
		t.Errorf("a client without a certificate on dev's Raft port %s: got %v, want the node's TLS alert", raft, err)
	}
}

func TestDevRefusesABadDragonboatLogLevelNamingTheFlag(t *testing.T) {
	err := runDev(context.Background(), []string{"--data", t.TempDir(), "--dragonboat-log-level", "loud"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--dragonboat-log-level") {
		t.Fatalf("got %v, want a refusal naming --dragonboat-log-level", err)
	}
}

func TestDevNATSDefaultsToTheClusterCLIsDefault(t *testing.T) {
	if got, want := "nats://127.0.0.1:"+strconv.Itoa(devNATSPort), defaultNATS; got != want {
		t.Fatalf("dev NATS URL: got %s, want the cluster CLI's default %s", got, want)
	}
}

// A taken --nats-port is refused at once, naming the flag that moves it.
func TestDevRefusesATakenNATSPortNamingTheFlag(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = runDev(context.Background(), []string{"--data", t.TempDir(), "--http-base", fmt.Sprintf("127.0.0.1:%d", devPort(t)), "--nats-port", portOf(t, l.Addr().String())}, io.Discard, io.Discard)
	if !errors.Is(err, errNATSPortTaken) || !strings.Contains(err.Error(), "--nats-port") {
		t.Fatalf("got %v, want %v naming --nats-port", err, errNATSPortTaken)
	}
}

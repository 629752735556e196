package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cluster/transport"
)

// lockedBuffer is a bytes.Buffer written by one goroutine and read by the test.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// devPorts hands out narad dev's HTTP base ports (testnet.NaradDev).
var devPorts = testnet.NaradDev.Ports()

// devPort is an HTTP port for narad dev below the ephemeral range whose
// Raft port (10000 above) is below it too and free.
func devPort(t *testing.T) int {
	t.Helper()
	for range 100 {
		_, ps, _ := net.SplitHostPort(devPorts.Addr(t))
		p, _ := strconv.Atoi(ps)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+10000))
		if err != nil {
			continue
		}
		l.Close()
		return p
	}
	t.Fatal("no free port pair below the ephemeral range")
	return 0
}

// TestDevSecuresItsNATSAndSaysWhereTheCredentialsAre: narad dev's NATS
// refuses a client without credentials; the admin seed its banner names
// runs the cluster commands, the viewer's only the read verbs.
func TestDevSecuresItsNATSAndSaysWhereTheCredentialsAre(t *testing.T) {
	if testing.Short() {
		t.Skip("runs narad dev")
	}
	data := t.TempDir()
	ctx, stop := context.WithCancel(context.Background())
	var out lockedBuffer
	done := make(chan error, 1)
	go func() {
		done <- runDev(ctx, []string{"--data", data, "--http-base", fmt.Sprintf("127.0.0.1:%d", devPort(t)), "--nats-port", "0", "--log-level", "error"}, &out, io.Discard)
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("narad dev: %v", err)
		}
	}()
	natsURL := regexp.MustCompile(`NATS on (nats://[0-9.:]+):`)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "Stop with Ctrl-C") {
		if time.Now().After(deadline) {
			t.Fatalf("no banner after 30s: %s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	m := natsURL.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("banner names no NATS URL: %s", out.String())
	}
	creds := transport.Credentials{Dir: filepath.Join(data, "nats")}
	admin := creds.File(transport.RoleAdmin)
	if !strings.Contains(out.String(), "--nats-creds "+admin) {
		t.Fatalf("banner: got %s, want it to name --nats-creds %s", out.String(), admin)
	}

	if nc, err := nats.Connect(m[1], nats.NoReconnect()); !errors.Is(err, nats.ErrAuthorization) {
		if err == nil {
			nc.Close()
		}
		t.Fatalf("connect to dev's NATS without credentials: got %v, want %v", err, nats.ErrAuthorization)
	}
	cluster := func(seed string, args ...string) error {
		return runCluster(context.Background(), append(args, "--nats", m[1], "--nats-creds", seed, "--timeout", "2s"), io.Discard, io.Discard)
	}
	if err := cluster(admin, "members"); err != nil {
		t.Fatalf("cluster members with the admin seed: %v", err)
	}
	viewer := creds.File(transport.RoleViewer)
	if err := cluster(viewer, "status"); err != nil {
		t.Fatalf("cluster status with the viewer seed: %v", err)
	}
	if err := cluster(viewer, "decommission", "n1", "--dry-run"); !errors.Is(err, nats.ErrPermissionViolation) {
		t.Fatalf("decommission with the viewer seed: got %v, want %v (a mutating verb)", err, nats.ErrPermissionViolation)
	}
	// A lone node's decommission is refused: an error, but the node's answer.
	if err := cluster(admin, "decommission", "n1", "--dry-run"); err != nil && !strings.Contains(err.Error(), "status") && !strings.Contains(err.Error(), "refused") {
		t.Fatalf("decommission --dry-run with the admin seed: %v, want an answer from a node", err)
	}
}

// TestServeRefusesAPartialRaftTLSSet: --raft-tls-* reach the metastore,
// whose Validate wants all three files or none.
func TestServeRefusesAPartialRaftTLSSet(t *testing.T) {
	// Cancelled: were the files not to reach the metastore, the node
	// would give up starting instead of serving until a signal.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := runServe(ctx, []string{"--data", t.TempDir(), "--http", "127.0.0.1:0",
		"--raft", "127.0.0.1:0", "--raft-tls-ca", "ca.pem", "--log-level", "error"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "TLSCAFile \"ca.pem\"") || !strings.Contains(err.Error(), "want all three or none") {
		t.Fatalf("serve --raft-tls-ca alone: got %v, want the metastore's refusal naming TLSCAFile", err)
	}
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// childEnv marks a re-executed test binary that runs narad itself, so the
// crash test can SIGKILL a real process without building a second binary.
const childEnv = "NARAD_TEST_RUN_AS_NARAD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := run(ctx, args, os.Stdin, os.Stdout, os.Stderr)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "narad:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childNode is `narad serve` running in a child process.
type childNode struct {
	t     *testing.T
	args  []string
	base  string
	cmd   *exec.Cmd
	logTo *os.File
}

// naradPorts hands out this package's ports (testnet.Narad).
var naradPorts = testnet.Narad.Ports()

// freePort is a loopback address with a port of this package's range,
// below the kernel's ephemeral range, so no outgoing connection takes it
// before the child listens on it.
func freePort(t *testing.T) string { return naradPorts.Addr(t) }

func newChildNode(t *testing.T, dir string) *childNode {
	httpAddr, raftAddr := freePort(t), freePort(t)
	logf, err := os.Create(filepath.Join(dir, "node.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A failed run's node log is the evidence: the temp dir goes with the test.
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil {
				const tail = 64 << 10
				if len(b) > tail {
					b = b[len(b)-tail:]
				}
				t.Logf("node log (last %d bytes):\n%s", len(b), b)
			}
		}
		logf.Close()
	})
	c := &childNode{t: t, base: "http://" + httpAddr, logTo: logf,
		args: []string{"serve", "--id", "n1", "--data", filepath.Join(dir, "data"), "--http", httpAddr, "--raft", raftAddr, "--log-level", "warn", "--security-enabled=false"}}
	c.args = append(c.args, raftCertFlags(t, filepath.Join(dir, "certs"))...)
	t.Cleanup(func() {
		if c.cmd != nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	return c
}

func (c *childNode) start() {
	c.t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, c.args...)...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout, cmd.Stderr = c.logTo, c.logTo
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.cmd = cmd
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(c.base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node did not become ready; see %s", c.logTo.Name())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// evidence logs what the node says of topic and of its commits waiting in
// the ingress WAL, so a failed history tells records never committed
// (a dispatcher backlog) from records committed and not delivered (a
// partition's high watermark past its acks).
func (c *childNode) evidence(topic string) {
	c.t.Helper()
	get := func(path string) (int, string) {
		resp, err := http.Get(c.base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// One partition at a time: a whole topic's stats fail with any one.
	for p := 0; p < 64; p++ {
		code, body := get(fmt.Sprintf("/v1/topics/%s?partition=%d", topic, p))
		if code == http.StatusBadRequest {
			break // past the last partition
		}
		c.t.Logf("GET /v1/topics/%s?partition=%d: %d %s", topic, p, code, body)
	}
	_, metricsText := get("/metrics")
	for _, line := range strings.Split(metricsText, "\n") {
		for _, series := range []string{"narad_dispatcher_", "narad_partition", "narad_ingress", "narad_commit"} {
			if strings.HasPrefix(line, series) {
				c.t.Log(line)
				break
			}
		}
	}
}

// kill ends the node with SIGKILL: no shutdown code runs.
func (c *childNode) kill() {
	c.cmd.Process.Kill()
	c.cmd.Wait()
	c.cmd = nil
}

// TestKillMidRunLosesNoAcceptedRecord runs producers and consumers against
// a node, SIGKILLs it mid-run, restarts it on the same data, and checks
// with the history checker that every produce answered 202 is consumed at
// least once. Duplicates are reported, never a gap.
func TestKillMidRunLosesNoAcceptedRecord(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs a child process")
	}
	node := newChildNode(t, t.TempDir())
	node.start()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	post := func(path string, body []byte) (int, []byte, error) {
		resp, err := client.Post(node.base+path, "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b, nil
	}
	if code, b, err := post("/v1/topics", []byte(`{"name":"crash","partitions":6,"visibility_timeout_ms":3000}`)); err != nil || code != http.StatusCreated {
		t.Fatalf("create topic: %d %s %v", code, b, err)
	}

	h := history.New()
	const producers, perProducer = 4, 400
	var produced, refused atomic.Int64
	var prodWG, consWG sync.WaitGroup
	stopConsumers := make(chan struct{})
	for p := 0; p < producers; p++ {
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			for i := 0; i < perProducer; i++ {
				id := fmt.Sprintf("p%d-%05d", p, i)
				// Retry each message until a 202, within a bound: a retry
				// after an unknown outcome may duplicate, never lose.
				for attempt := 0; attempt < 600; attempt++ {
					code, _, err := post("/v1/topics/crash/produce", history.MakeBody(id, 64))
					if err == nil && code == http.StatusAccepted {
						h.Produced(id)
						produced.Add(1)
						break
					}
					h.ProduceFailed(id)
					refused.Add(1)
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	consume := func() {
		defer consWG.Done()
		for {
			select {
			case <-stopConsumers:
				return
			default:
			}
			resp, err := client.Get(node.base + "/v1/topics/crash/consume?wait=1s")
			if err != nil {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				continue
			}
			d, err := h.Delivered("crash", b)
			if err != nil {
				t.Error(err)
				return
			}
			if code, _, err := post("/v1/topics/crash/ack?receipt_handle="+url.QueryEscape(d.ReceiptHandle), nil); err == nil && code == http.StatusNoContent {
				h.Acked(d.ID)
			}
		}
	}
	for c := 0; c < 3; c++ {
		consWG.Add(1)
		go consume()
	}

	// Kill once a third of the load is in, mid-run.
	for produced.Load() < producers*perProducer/3 {
		time.Sleep(10 * time.Millisecond)
	}
	before := refused.Load()
	node.kill()
	// Restart once the producers met the dead node, so that the history
	// holds attempts whose outcome they could not know.
	for refused.Load() == before {
		time.Sleep(10 * time.Millisecond)
	}
	node.start()
	prodWG.Wait()

	deadline := time.Now().Add(90 * time.Second)
	for h.Outstanding() > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	close(stopConsumers)
	consWG.Wait()
	rep := h.Check()
	t.Logf("history after a SIGKILL mid-run: %s", rep)
	if !rep.OK() {
		node.evidence("crash")
		t.Fatalf("history check failed: %s", rep)
	}
	if rep.Produced != producers*perProducer {
		t.Fatalf("produced %d distinct ids with 202, want %d", rep.Produced, producers*perProducer)
	}
}

// TestSigtermDrainsTheWALAndExitsZero stops a node with SIGTERM while it
// holds accepted records: it commits them, writes consumer positions, exits
// 0, and after a restart every record is there once and acks made before
// the stop are kept.
func TestSigtermDrainsTheWALAndExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	node := newChildNode(t, t.TempDir())
	node.start()
	client := &http.Client{Timeout: 10 * time.Second}
	mustPost := func(path string, body []byte, want int) []byte {
		t.Helper()
		resp, err := client.Post(node.base+path, "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("POST %s: got %d %s, want %d", path, resp.StatusCode, b, want)
		}
		return b
	}
	mustPost("/v1/topics", []byte(`{"name":"term","partitions":3}`), http.StatusCreated)
	const n = 200
	for i := 0; i < n; i++ {
		mustPost("/v1/topics/term/produce", history.MakeBody(fmt.Sprintf("m%03d", i), 16), http.StatusAccepted)
	}
	// Ack one record before the stop: it must not come back.
	var first messages.MessageInfo
	resp, err := client.Get(node.base + "/v1/topics/term/consume?wait=5s")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&first)
	resp.Body.Close()
	mustPost("/v1/topics/term/ack?receipt_handle="+url.QueryEscape(first.ReceiptHandle), nil, http.StatusNoContent)
	ackedID, _ := history.ParseBody(first.Payload)

	node.cmd.Process.Signal(syscall.SIGTERM)
	if err := node.cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v, want status 0", err)
	}
	node.cmd = nil
	node.start()
	seen := map[string]int{}
	for {
		resp, err := client.Get(node.base + "/v1/topics/term/consume?wait=1s")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNoContent {
			break
		}
		var m messages.MessageInfo
		json.Unmarshal(b, &m)
		id, _ := history.ParseBody(m.Payload)
		seen[id]++
		mustPost("/v1/topics/term/ack?receipt_handle="+url.QueryEscape(m.ReceiptHandle), nil, http.StatusNoContent)
	}
	if seen[ackedID] != 0 {
		t.Fatalf("record %s acked before the stop was delivered again", ackedID)
	}
	if len(seen) != n-1 {
		t.Fatalf("after the restart: got %d distinct records, want %d", len(seen), n-1)
	}
	for id, c := range seen {
		if c != 1 {
			t.Fatalf("record %s delivered %d times after a graceful stop, want once", id, c)
		}
	}
}

func TestNatsCommandServesUntilStopped(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	addr := freePort(t)
	creds := t.TempDir()
	var out bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$", "--", "nats", "--listen", addr, "--data", creds)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("nats did not listen on %s: %s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// It wrote the credentials before listening; only they connect.
	if nc, err := nats.Connect("nats://"+addr, nats.NoReconnect()); !errors.Is(err, nats.ErrAuthorization) {
		if err == nil {
			nc.Close()
		}
		t.Errorf("connect without credentials: got %v, want %v", err, nats.ErrAuthorization)
	}
	for _, role := range transport.Roles {
		seed := transport.Credentials{Dir: creds}.File(role)
		opt, err := nats.NkeyOptionFromSeed(seed)
		if err != nil {
			t.Fatalf("%s seed: %v", role, err)
		}
		nc, err := nats.Connect("nats://"+addr, opt, nats.NoReconnect())
		if err != nil {
			t.Errorf("connect with %s: %v", seed, err)
			continue
		}
		nc.Close()
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v (%s), want 0", err, out.String())
	}
}

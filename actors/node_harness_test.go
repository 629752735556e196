package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// testNode is one node started in-process on loopback, with its data in a
// temp dir that survives restart().
type testNode struct {
	t    testing.TB
	cfg  Config
	mcfg metastore.Config
	n    *Node
	base string
	http *http.Client
	// user and password, when user is set, go with every request as HTTP
	// Basic credentials (a node with security on: secured).
	user, password string
}

// authorize adds the node's test credentials, if any, to a request.
func (tn *testNode) authorize(req *http.Request) {
	if tn.user != "" {
		req.SetBasicAuth(tn.user, tn.password)
	}
}

// testPorts hands out this package's ports (testnet.Actors).
var testPorts = testnet.Actors.Ports()

// freeAddr is a loopback address with a port of this package's range,
// free a moment ago and never handed out before (testnet.Ports).
func freeAddr(t testing.TB) string { return testPorts.Addr(t) }

// testLogger is the nodes' logger: everything with -v, else their last
// warnings printed if the test fails (testnet.Logger).
func testLogger(t testing.TB) *slog.Logger { return testnet.Logger(t) }

// newTestNode starts a node; tweak adjusts its config before the start.
// Every answer its client gets from a route of the OpenAPI description is
// held to it (api_openapi_test.go).
func newTestNode(t testing.TB, tweak ...func(*Config)) *testNode {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.SecurityEnabled = false // a test with security on says so
	cfg.HTTPAddr = freeAddr(t)
	cfg.MaxConsumeWait = 2 * time.Second
	cfg.Dispatch.CommitRetryInterval = 100 * time.Millisecond
	cfg.ShutdownDrainTimeout = 5 * time.Second
	for _, f := range tweak {
		f(&cfg)
	}
	raft := freeAddr(t)
	mcfg := metastore.Config{NodeID: cfg.NodeID, ReplicaID: 1, RaftAddr: raft, RTTMillisecond: 2, ElectionRTT: 20, HeartbeatRTT: 2}
	tn := &testNode{t: t, cfg: cfg, mcfg: mcfg, base: "http://" + cfg.HTTPAddr,
		http: &http.Client{Timeout: clusterWaitBound, Transport: checkOpenAPI(t, nil)}}
	tn.start()
	t.Cleanup(func() { tn.stop() })
	return tn
}

func (tn *testNode) start() {
	tn.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, tn.cfg, tn.mcfg, testLogger(tn.t))
	if err != nil {
		tn.t.Fatalf("start node: %v", err)
	}
	tn.n = n
}

func (tn *testNode) stop() {
	if tn.n == nil {
		return
	}
	// An idle keep-alive connection would hold the server's shutdown.
	tn.http.CloseIdleConnections()
	if err := tn.n.Stop(context.Background()); err != nil {
		tn.t.Errorf("stop node: %v", err)
	}
	tn.n = nil
}

// restart stops the node gracefully and starts it again on the same data.
func (tn *testNode) restart() {
	tn.t.Helper()
	tn.stop()
	tn.start()
}

// do sends a request and returns the status and body.
func (tn *testNode) do(method, path string, body []byte) (int, []byte) {
	tn.t.Helper()
	req, err := http.NewRequest(method, tn.base+path, bytes.NewReader(body))
	if err != nil {
		tn.t.Fatal(err)
	}
	tn.authorize(req)
	resp, err := tn.http.Do(req)
	if err != nil {
		tn.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// must sends a request and fails the test unless the status is want.
func (tn *testNode) must(want int, method, path string, body []byte) []byte {
	tn.t.Helper()
	got, b := tn.do(method, path, body)
	// The control plane's transient 503 (a leadership moving, a metastore
	// too slow to answer in time on a loaded machine) is asked again, as a
	// client would; a create whose first try's outcome was unknown may
	// find its topic there (409), which is the create done.
	retried := false
	for deadline := time.Now().Add(clusterWaitBound); got == http.StatusServiceUnavailable && want != got &&
		bytes.Contains(b, []byte(controlPlaneUnavailable)) && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		got, b = tn.do(method, path, body)
		retried = true
	}
	if retried && want == http.StatusCreated && got == http.StatusConflict {
		return b
	}
	if got != want {
		tn.t.Fatalf("%s %s: got %d %s, want %d", method, path, got, b, want)
	}
	return b
}

// controlPlaneUnavailable is the API's words for a transient 503 of the
// control plane.
const controlPlaneUnavailable = "control plane temporarily unavailable"

func (tn *testNode) createTopic(name string, partitions int) {
	tn.t.Helper()
	tn.must(http.StatusCreated, "POST", "/v1/topics", []byte(fmt.Sprintf(`{"name":%q,"partitions":%d}`, name, partitions)))
}

// consume pulls one message, or returns nil on 204.
func (tn *testNode) consume(topic, query string) *messages.MessageInfo {
	tn.t.Helper()
	code, b := tn.do("GET", "/v1/topics/"+topic+"/consume?"+query, nil)
	switch code {
	case http.StatusNoContent:
		return nil
	case http.StatusOK:
		var m messages.MessageInfo
		if err := json.Unmarshal(b, &m); err != nil {
			tn.t.Fatalf("consume: %v in %s", err, b)
		}
		return &m
	default:
		tn.t.Fatalf("consume %s?%s: got %d %s", topic, query, code, b)
		return nil
	}
}

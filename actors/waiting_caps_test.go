package actors

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// TestIssue48ANodeAnswersPastItsCapsOnWaitingClients: a node's caps on
// waiting consumes and on open connections answer through its HTTP API
// at once, with the contract's retryable 503 in its JSON shape and a
// Retry-After, and serve again once there is room.
func TestIssue48ANodeAnswersPastItsCapsOnWaitingClients(t *testing.T) {
	tn := newTestNode(t, func(c *Config) {
		c.MaxHTTPConnections, c.MaxConsumeLongPolls = 4, 1
		c.HTTPReadHeaderTimeout = httpReadTimeout // the held connections send nothing
	})
	tn.createTopic("quiet", 3)
	tn.http.CloseIdleConnections()
	gauge := func(name string) float64 {
		return tn.n.metrics.set.GetOrCreateGauge(fmt.Sprintf(`%s{node=%q}`, name, tn.cfg.NodeID), nil).Get()
	}
	// Each request on its own connection, closed after its answer.
	client := &http.Client{Timeout: clusterWaitBound, Transport: &http.Transport{DisableKeepAlives: true}}
	get := func(path string) (int, string, string) {
		t.Helper()
		resp, err := client.Get(tn.base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header.Get("Retry-After")
	}
	want503 := func(what string, code int, body, retryAfter, text string) {
		t.Helper()
		var e messages.ErrorBody
		if code != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil || e.Error != text || retryAfter != "1" {
			t.Fatalf("%s: got %d %q Retry-After %q, want 503 {\"error\":%q} Retry-After \"1\"", what, code, body, retryAfter, text)
		}
	}

	first := make(chan int, 1)
	go func() {
		code := 0
		if resp, err := client.Get(tn.base + "/v1/topics/quiet/consume?wait=2s"); err == nil {
			code = resp.StatusCode
			resp.Body.Close()
		}
		first <- code
	}()
	testnet.Eventually(t, clusterWaitBound, "one long poll waiting", func() bool { return gauge("narad_consume_long_polls") == 1 })
	code, body, retry := get("/v1/topics/quiet/consume?wait=2s")
	want503("a second long poll past a cap of 1", code, body, retry, "too many consumes waiting on this node; retry later")
	if code := <-first; code != http.StatusNoContent {
		t.Fatalf("the first long poll on an empty topic: got %d, want 204 after its wait", code)
	}

	testnet.Eventually(t, clusterWaitBound, "no connection open", func() bool { return gauge("narad_http_connections") == 0 })
	var held []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", tn.cfg.HTTPAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	testnet.Eventually(t, clusterWaitBound, "four connections held", func() bool { return gauge("narad_http_connections") == 4 })
	code, body, retry = get("/healthz")
	want503("a fifth connection past a cap of 4", code, body, retry, "too many connections to this node; retry later")
	for _, c := range held {
		c.Close()
	}
	testnet.Eventually(t, clusterWaitBound, "a connection served once the held ones closed", func() bool {
		code, _, _ := get("/healthz")
		return code == http.StatusOK
	})
}

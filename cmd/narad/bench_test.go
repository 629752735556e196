package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cmd/narad/client"
)

// Each bound of a bench run, at its edge: the default is valid, one past
// the edge is refused with an error naming the flag.
func TestBenchConfigBounds(t *testing.T) {
	type c = benchConfig
	testnet.CheckValidate(t, defaultBenchConfig, []testnet.ConfigCase[c]{
		{Name: "count_1", Edit: func(c *c) { c.count = 1 }, Field: ""},
		{Name: "count_0", Edit: func(c *c) { c.count = 0 }, Field: "--count"},
		{Name: "count_over", Edit: func(c *c) { c.count = benchMaxCount + 1 }, Field: "--count"},
		{Name: "size_min", Edit: func(c *c) { c.sizeBytes = benchMinSize }, Field: ""},
		{Name: "size_below_min", Edit: func(c *c) { c.sizeBytes = benchMinSize - 1 }, Field: "--size"},
		{Name: "size_1MiB", Edit: func(c *c) { c.sizeBytes = 1 << 20 }, Field: ""},
		{Name: "size_over_1MiB", Edit: func(c *c) { c.sizeBytes = 1<<20 + 1 }, Field: "--size"},
		{Name: "concurrency_0", Edit: func(c *c) { c.producers = 0 }, Field: "--concurrency"},
		{Name: "concurrency_max", Edit: func(c *c) { c.producers = benchMaxWorkers }, Field: ""},
		{Name: "concurrency_over", Edit: func(c *c) { c.producers = benchMaxWorkers + 1 }, Field: "--concurrency"},
		{Name: "consumers_over", Edit: func(c *c) { c.consume, c.consumers = true, benchMaxWorkers+1 }, Field: "--consumers"},
		{Name: "consumers_0", Edit: func(c *c) { c.consume, c.consumers = true, 0 }, Field: "--consumers"},
		{Name: "rate_negative", Edit: func(c *c) { c.ratePerSecond = -1 }, Field: "--rate"},
		{Name: "rate_over", Edit: func(c *c) { c.ratePerSecond = 1e9 }, Field: "--rate"},
		{Name: "rate_500", Edit: func(c *c) { c.ratePerSecond = 500 }, Field: ""},
		{Name: "batch_0", Edit: func(c *c) { c.batch = 0 }, Field: "--batch"},
		{Name: "batch_max", Edit: func(c *c) { c.batch = benchMaxBatch }, Field: ""},
		{Name: "batch_over", Edit: func(c *c) { c.batch = benchMaxBatch + 1 }, Field: "--batch"},
		{Name: "batch_past_8MiB", Edit: func(c *c) { c.batch, c.sizeBytes = 10, 1<<20 }, Field: "--batch"},
		{Name: "wait_over", Edit: func(c *c) { c.wait = benchMaxWait + time.Second }, Field: "--wait"},
		{Name: "drain_0", Edit: func(c *c) { c.drain = 0 }, Field: "--drain"},
		{Name: "drain_over", Edit: func(c *c) { c.drain = benchMaxDrain + time.Second }, Field: "--drain"},
		{Name: "partitions_0", Edit: func(c *c) { c.partitions = 0 }, Field: "--partitions"},
		{Name: "topic_empty", Edit: func(c *c) { c.topic = "" }, Field: "--topic"},
		{Name: "no_server", Edit: func(c *c) { c.servers = nil }, Field: "--server"},
		{Name: "server_not_http", Edit: func(c *c) { c.servers = []string{"ftp://127.0.0.1:1"} }, Field: "--server"},
		{Name: "server_twice", Edit: func(c *c) { c.servers = []string{"http://127.0.0.1:1", "http://127.0.0.1:1/"} }, Field: "--server"},
		{Name: "three_servers", Edit: func(c *c) { c.servers = []string{"http://a:1", "http://b:1", "https://c:1"} }, Field: ""},
	})
}

// countingBroker answers every request 500 and counts them: a bad flag
// must be refused before anything is sent.
func countingBroker(t *testing.T) (*atomic.Int64, string) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		http.Error(w, "no", http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	return &n, srv.URL
}

// Bad flags get an error that names what is wrong, exit status 1, and no
// request is sent.
func TestBenchRefusesBadFlagsBeforeSending(t *testing.T) {
	sent, url := countingBroker(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--size", "10"}, "--size must be 62 bytes"},
		{[]string{"--size", "2097152"}, "1 MiB"},
		{[]string{"--count", "0"}, "--count must be 1 to 100000000"},
		{[]string{"--count", "many"}, "invalid value"},
		{[]string{"--concurrency", "5000"}, "--concurrency must be 1 to 1024"},
		{[]string{"--rate", "-5"}, "--rate must be 0"},
		{[]string{"--batch", "0"}, "--batch must be 1 to 1000"},
		{[]string{"--batch", "100", "--size", "100000"}, "past the batch route's 8 MiB"},
		{[]string{"--consumers", "4"}, "--consumers needs --consume"},
		{[]string{"--wait", "2s"}, "--wait needs --consume"},
		{[]string{"--consume", "--wait", "1m"}, "--wait must be 0 to 30s"},
		{[]string{"--partitions", "6"}, "--partitions needs --create"},
		{[]string{"orders"}, "unexpected arguments"},
		{[]string{"--server", url + ",," + url}, "entry 2 of 3 is empty"},
		{[]string{"--server", url + "," + url}, "entries 1 and 2 are the same node"},
		{[]string{"--no-such-flag"}, "flag provided but not defined"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"bench", "--server", url}, tc.args...)
			var stderr bytes.Buffer
			err := run(context.Background(), args, strings.NewReader(""), io.Discard, &stderr)
			if err == nil || !strings.Contains(err.Error(), tc.want) || exitCode(err) != 1 {
				t.Fatalf("got %v (exit %d), want an error saying %q", err, exitCode(err), tc.want)
			}
			if !strings.Contains(stderr.String(), "usage: narad bench") {
				t.Errorf("stderr: got %q, want the usage", stderr.String())
			}
		})
	}
	if n := sent.Load(); n != 0 {
		t.Fatalf("requests sent: got %d, want 0", n)
	}
}

// The ledger counts a record pending from its 202 to its first ack, in
// either order of the two (an ack can come back before its produce's
// 202), and a second ack of a record is not counted again.
func TestBenchLedger(t *testing.T) {
	l := newLedger(100)
	l.produced(1)
	l.produced(2)
	l.produced(64) // the last record of the second word
	if got := l.pending(); got != 3 {
		t.Fatalf("three produced: pending %d, want 3", got)
	}
	if !l.acked(2) || l.acked(2) {
		t.Fatalf("acking 2 twice: want the first counted, not the second")
	}
	if !l.acked(7) { // acked before its 202 was recorded
		t.Fatalf("ack of 7 before its 202: want it counted")
	}
	l.produced(7)
	if got, want := l.pending(), int64(2); got != want {
		t.Fatalf("pending: got %d, want %d (1 and 64)", got, want)
	}
	if got := l.unacked(); got != 2 {
		t.Fatalf("unacked: got %d, want 2", got)
	}
	l.acked(1)
	l.acked(64)
	if l.pending() != 0 || l.unacked() != 0 || l.ackedCount() != 4 {
		t.Fatalf("all acked: pending %d, unacked %d, acked %d; want 0, 0, 4", l.pending(), l.unacked(), l.ackedCount())
	}

	// Many workers at once: every record produced and acked once, in any
	// order, leaves nothing pending.
	l = newLedger(10000)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for n := int64(w + 1); n <= 10000; n += 8 {
				if n%2 == 0 {
					l.acked(n)
					l.produced(n)
				} else {
					l.produced(n)
					l.acked(n)
				}
			}
		})
	}
	wg.Wait()
	if l.pending() != 0 || l.unacked() != 0 || l.ackedCount() != 10000 {
		t.Fatalf("concurrent: pending %d, unacked %d, acked %d; want 0, 0, 10000", l.pending(), l.unacked(), l.ackedCount())
	}
}

// benchJSON runs narad bench with --json and returns its summary.
func benchJSON(t *testing.T, args ...string) (benchSummary, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(context.Background(), append([]string{"bench", "--json"}, args...), strings.NewReader(""), &out, &errOut)
	var s benchSummary
	if out.Len() > 0 {
		if jerr := json.Unmarshal(out.Bytes(), &s); jerr != nil {
			t.Fatalf("bench --json printed %q: %v", out.String(), jerr)
		}
	}
	return s, errOut.String(), err
}

// narad bench against a real node with security on: it says when the
// topic is missing, connects by flags or by a saved context, and the counts it reports are what the node received
// (produce N: the high watermarks add up to N) and served (with --consume:
// every record consumed and acked, none left to redeliver).
func TestBenchOnANode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	base := securedNode(t)
	as := []string{"--server", base, "--user", "admin", "--password", "rootpw"}

	_, _, err := benchJSON(t, append([]string{"--topic", "absent"}, as...)...)
	if !errors.Is(err, errBenchTopicMissing) || !strings.Contains(err.Error(), "--create") {
		t.Fatalf("a missing topic: got %v, want %v naming --create", err, errBenchTopicMissing)
	}
	if _, _, err := benchJSON(t, "--server", base, "--topic", "absent"); !client.IsStatus(err, http.StatusUnauthorized) {
		t.Fatalf("without credentials: got %v, want 401", err)
	}

	// Produce only, onto a topic it creates, at a rate, connected by a
	// saved context (narad ctx) rather than flags.
	t.Setenv("NARAD_CONFIG_DIR", t.TempDir())
	for _, v := range []string{"NARAD_SERVER", "NARAD_USER", "NARAD_PASSWORD", "NARAD_CONTEXT"} {
		t.Setenv(v, "")
	}
	if _, err := narad(t, "ctx", "add", "node", "--server", base, "--user", "admin", "--password", "rootpw"); err != nil {
		t.Fatal(err)
	}
	const n = 300
	s, progress, err := benchJSON(t, "--topic", "bench-p", "--create", "--partitions", "3", "--count", "300", "--size", "200", "--concurrency", "4", "--rate", "5000")
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, progress)
	}
	if s.Produced != n || s.ProducedBytes != n*200 || s.ProduceLatency.Count != n || s.ProduceGaveUp != 0 {
		t.Fatalf("summary: produced %d (%d bytes, %d latencies, %d given up), want %d of 200 bytes", s.Produced, s.ProducedBytes, s.ProduceLatency.Count, s.ProduceGaveUp, n)
	}
	if !strings.Contains(progress, "produced 300/300") || !strings.Contains(progress, "produce:      300 records") {
		t.Errorf("stderr: got %q, want the progress line and the text summary", progress)
	}
	c, err := client.New(base, client.Options{User: "admin", Password: "rootpw"})
	if err != nil {
		t.Fatal(err)
	}
	watermarks := func(topic string) int64 {
		d, err := c.GetTopic(context.Background(), topic)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		for _, p := range d.PartitionStats {
			sum += p.HighWatermark
		}
		return sum
	}
	var sum int64
	testnet.Eventually(t, 30*time.Second, "the high watermarks to add up to the records produced", func() bool {
		sum = watermarks("bench-p")
		return sum >= n
	})
	if sum != n {
		t.Fatalf("high watermarks: got %d, want %d", sum, n)
	}

	// Consume and ack too, produced through the batch route, on a topic
	// that exists (made here with a short lease, so that a record left
	// unacked would come back quickly).
	if _, err := narad(t, append([]string{"topics", "create", "bench-c", "--partitions", "3", "--visibility", "1s"}, as...)...); err != nil {
		t.Fatal(err)
	}
	s, progress, err = benchJSON(t, append([]string{"--topic", "bench-c", "--count", "300", "--size", "100", "--concurrency", "3", "--batch", "7", "--consume", "--consumers", "5"}, as...)...)
	if err != nil {
		t.Fatalf("bench --consume: %v\n%s", err, progress)
	}
	if s.Produced != n || s.ProducedBytes != n*100 || s.ProduceLatency.Count != n || s.Acked != n || s.Unacked != 0 || s.Consumed < n || s.Foreign != 0 || s.EndToEndLatency.Count < n || s.AckLatency.Count < n {
		t.Fatalf("summary: produced %d, acked %d, unacked %d, consumed %d, foreign %d, e2e samples %d, ack samples %d; want %d produced, consumed and acked",
			s.Produced, s.Acked, s.Unacked, s.Consumed, s.Foreign, s.EndToEndLatency.Count, s.AckLatency.Count, n)
	}
	testnet.Eventually(t, 30*time.Second, "the high watermarks of bench-c to add up to the records produced", func() bool {
		sum = watermarks("bench-c")
		return sum >= n
	})
	if sum != n {
		t.Fatalf("bench-c high watermarks: got %d, want %d", sum, n)
	}
	// Every record was acked: a consume that waits past the 1 s lease
	// finds none to redeliver.
	d, err := c.Consume(context.Background(), "bench-c", client.ConsumeOptions{Wait: 2 * time.Second})
	if err != nil || d != nil {
		t.Fatalf("consume after the bench: got %+v, %v; want nothing left", d, err)
	}
}

// Stopped (Ctrl-C) mid-run, bench ends, says it was interrupted, and still
// prints what it measured so far.
func TestBenchInterruptedPrintsTheRunSoFar(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var produced atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/topics/t":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"name":"t","partitions":3,"partition_stats":[]}`)
		case r.Method == http.MethodPost && r.URL.Path == "/v1/topics/t/produce":
			// Read the body whole: only then does the server notice the
			// client going away and end r's context.
			io.Copy(io.Discard, r.Body)
			if produced.Add(1) == 6 {
				// The operator's Ctrl-C, after five records: the sixth is
				// held until the client gives it up.
				cancel()
				<-r.Context().Done()
				return
			}
			w.WriteHeader(http.StatusAccepted)
		default:
			http.Error(w, "unexpected", http.StatusTeapot)
		}
	}))
	t.Cleanup(srv.Close)
	var out bytes.Buffer
	err := run(ctx, []string{"bench", "--server", srv.URL, "--topic", "t", "--count", "100000", "--concurrency", "1"}, strings.NewReader(""), &out, io.Discard)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("got %v, want an interrupted run", err)
	}
	if !strings.Contains(out.String(), "interrupted: the figures below cover the run so far") || !strings.Contains(out.String(), "produce:      5 records") {
		t.Fatalf("summary: got %q, want the interrupted run's 5 records", out.String())
	}
}

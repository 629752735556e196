package transport

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/nats-io/nats-server/v2/server"
)

// liveness bounds every wait in these tests: long enough never to fire on a
// healthy run, short enough that a hang fails instead of stalling CI.
const liveness = 10 * time.Second

// startServer runs an embedded NATS server on a random loopback port until
// the test ends. NoSigs: the embedded server would otherwise exit the
// process on SIGTERM.
func startServer(t testing.TB) *server.Server {
	t.Helper()
	return runServer(t, &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true})
}

// runServer runs an embedded NATS server with o until the test ends.
func runServer(t testing.TB, o *server.Options) *server.Server {
	t.Helper()
	return testnet.StartNATS(t, o)
}

// newNode connects a transport for node id to s; mut may adjust the config.
// It is closed when the test ends (Close is idempotent).
func newNode(t testing.TB, s *server.Server, id string, mut func(*Config)) *Transport {
	t.Helper()
	cfg := Config{Cluster: "test", NodeID: id, URLs: []string{s.ClientURL()}}
	if mut != nil {
		mut(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	tr, err := Connect(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("connect %s: %v", id, err)
	}
	t.Cleanup(tr.Close)
	return tr
}

// echo answers with the request body.
func echo(_ context.Context, _ string, req []byte) ([]byte, error) { return req, nil }

// waitFor polls cond until it holds or liveness passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testnet.Eventually(t, liveness, what, cond)
}

// waitGoroutines waits until at most want goroutines run, and fails with a
// dump of them otherwise.
func waitGoroutines(t testing.TB, want int) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			var buf bytes.Buffer
			_ = pprof.Lookup("goroutine").WriteTo(&buf, 1)
			t.Fatalf("goroutines: got %d, want <= %d after %s:\n%s", runtime.NumGoroutine(), want, liveness, buf.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// counter reads a counter series of the default metrics set.
func counter(name string) uint64 { return metrics.GetOrCreateCounter(name).Get() }

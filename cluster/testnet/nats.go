package testnet

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// natsReadyWithin bounds an embedded server's start.
const natsReadyWithin = 10 * time.Second

// StartNATS runs an embedded NATS server with o (nil: the defaults) on a
// loopback port of its own choosing (the server listens on port 0, so no
// other test can take it first), without signal handlers or logs unless o
// says so, and shuts it down when the test ends.
func StartNATS(t testing.TB, o *server.Options) *server.Server {
	t.Helper()
	if o == nil {
		o = &server.Options{}
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = server.RANDOM_PORT
	}
	o.NoSigs, o.NoLog = true, true
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(natsReadyWithin) {
		s.Shutdown()
		t.Fatalf("nats did not start within %s", natsReadyWithin)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

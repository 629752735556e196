package transport

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
)

// BenchmarkRequest: 1 KiB request and 1 KiB reply between two transports on
// one embedded NATS server over loopback, with 1 and 16 concurrent callers.
func BenchmarkRequest(b *testing.B) {
	s := startServer(b)
	caller := newNode(b, s, "bench-a", nil)
	server := newNode(b, s, "bench-b", nil)
	reply := make([]byte, 1024)
	must(b, server.Handle("echo", func(context.Context, string, []byte) ([]byte, error) { return reply, nil }))
	req := make([]byte, 1024)
	roundTrips(b, len(req)+len(reply), func() error {
		_, err := caller.Request(context.Background(), "bench-b", "echo", req)
		return err
	})
}

// BenchmarkRawNATS is the baseline for BenchmarkRequest: bare nats.go
// request/reply of the same sizes between two connections, no headers, no
// handler goroutine, so the difference is the transport's own cost.
func BenchmarkRawNATS(b *testing.B) {
	s := startServer(b)
	nc, err := nats.Connect(s.ClientURL())
	must(b, err)
	defer nc.Close()
	srv, err := nats.Connect(s.ClientURL())
	must(b, err)
	defer srv.Close()
	reply := make([]byte, 1024)
	_, err = srv.Subscribe("raw.echo", func(m *nats.Msg) { _ = m.Respond(reply) })
	must(b, err)
	must(b, srv.Flush())
	req := make([]byte, 1024)
	roundTrips(b, len(req)+len(reply), func() error {
		_, err := nc.Request("raw.echo", req, liveness)
		return err
	})
}

// BenchmarkSecuredRequest: BenchmarkRequest's 1 KiB round trip on an open
// server (the baseline, "open") beside one that authenticates nkeys and
// checks the role permissions on every message ("secured"), in one run:
//
//	go test ./cluster/transport -run '^$' -bench SecuredRequest -count 5 | go run ./bench/ratio -base open
func BenchmarkSecuredRequest(b *testing.B) {
	open := startServer(b)
	secured, creds := securedServer(b, TLSFiles{})
	for _, callers := range []int{1, 16} {
		for _, mode := range []string{"open", "secured"} {
			s, auth := open, Auth{}
			if mode == "secured" {
				s, auth = secured, Auth{CredsFile: creds.File(RoleNode)}
			}
			b.Run(fmt.Sprintf("callers=%d/%s", callers, mode), func(b *testing.B) {
				withAuth := func(c *Config) { c.Auth = auth }
				caller := newNode(b, s, "a-"+mode, withAuth)
				server := newNode(b, s, "b-"+mode, withAuth)
				reply := make([]byte, 1024)
				must(b, server.Handle("echo", func(context.Context, string, []byte) ([]byte, error) { return reply, nil }))
				req := make([]byte, 1024)
				b.SetBytes(int64(len(req) + len(reply)))
				b.ResetTimer()
				spread(b, callers, func() error {
					_, err := caller.Request(context.Background(), "b-"+mode, "echo", req)
					return err
				})
				b.StopTimer()
				caller.Close()
				server.Close()
			})
		}
	}
}

// roundTrips benchmarks call with 1 and then 16 concurrent callers, each
// call moving bytes, and reports the calls a second.
func roundTrips(b *testing.B, bytes int, call func() error) {
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			b.SetBytes(int64(bytes))
			b.ReportAllocs()
			b.ResetTimer()
			spread(b, callers, call)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
		})
	}
}

// spread makes b.N calls over callers goroutines and waits for them; an
// error fails the benchmark and ends its goroutine's share.
func spread(b *testing.B, callers int, call func() error) {
	var wg sync.WaitGroup
	for c := range callers {
		n := b.N / callers
		if c < b.N%callers {
			n++
		}
		wg.Go(func() {
			for range n {
				if err := call(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

package actors

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/messages"
)

// benchNode is a node of its own for one member of a benchmark, with the
// topic bench and, secured, the user producer allowed to produce to it and
// its credentials cached (the slow hash ran once, before the timer). A
// node per member: one that served a member before is slower for the
// next (its WAL and log grew), which would pass for the member's cost.
func benchNode(b *testing.B, security bool) *testNode {
	tweak := func(c *Config) { c.SecurityEnabled = false }
	if security {
		tweak = secured("rootpw")
	}
	tn := newTestNode(b, tweak)
	ctx := context.Background()
	if _, err := tn.n.CreateTopic(ctx, messages.CreateTopicRequest{Name: "bench"}); err != nil {
		b.Fatal(err)
	}
	if !security {
		return tn
	}
	tn.waitForAdmin("rootpw")
	if _, err := tn.n.CreateUser(ctx, messages.CreateUserRequest{Username: "producer", Password: "pw",
		Grants: []messages.Grant{{Action: api.ActionProduce, Patterns: []string{"bench"}}}}); err != nil {
		b.Fatal(err)
	}
	if _, err := tn.n.Authenticate(ctx, "producer", "pw"); err != nil {
		b.Fatal(err)
	}
	return tn
}

// BenchmarkProduceAuth is a produce over HTTP to a node without security
// ("off", the baseline) and to one with HTTP Basic, the user lookup and
// the permission check ("on", the credential cache warm). Interleave
// processes, since the machine is shared:
//
//	go test -c -o /tmp/actors.test ./actors
//	for i in 1 2 3 4 5 6; do /tmp/actors.test -test.run '^$' -test.bench ProduceAuth -test.benchtime 3000x; done | go run ./bench/ratio -base off
func BenchmarkProduceAuth(b *testing.B) {
	for _, security := range []bool{false, true} {
		name := "off"
		if security {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			tn := benchNode(b, security)
			body := []byte(`{"id":1}`)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				client := &http.Client{}
				for pb.Next() {
					req, err := http.NewRequest("POST", tn.base+"/v1/topics/bench/produce?partition=0", bytes.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					req.SetBasicAuth("producer", "pw")
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						b.Errorf("produce: got %d, want 202", resp.StatusCode)
						return
					}
				}
			})
			b.StopTimer()
		})
	}
}

// BenchmarkAuthenticateCached is what authentication adds to a request
// once the cache is warm (the replica's user read, the keyed hash of the
// password, the cache lookup and the permission check, "auth"), beside
// one produce straight into a node without HTTP ("produce", the
// baseline): the ratio says how many authentications one produce costs.
//
//	go test ./actors -run '^$' -bench AuthenticateCached -count 5 | go run ./bench/ratio -base produce
func BenchmarkAuthenticateCached(b *testing.B) {
	b.Run("produce", func(b *testing.B) {
		tn := benchNode(b, false)
		ctx := context.Background()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := tn.n.Produce(ctx, api.Record{Topic: "bench", Partition: 0, Body: []byte(`{"id":1}`)}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.StopTimer()
	})
	b.Run("auth", func(b *testing.B) {
		tn := benchNode(b, true)
		ctx := context.Background()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				u, err := tn.n.Authenticate(ctx, "producer", "pw")
				if err != nil || !api.Allowed(u, api.ActionProduce, "bench") {
					b.Errorf("authenticate: got %v, want allowed", err)
					return
				}
			}
		})
		b.StopTimer()
	})
}

package controller

import (
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// leaderView is a replica whose metadata leader a test sets: none at
// first.
type leaderView struct {
	mu     sync.Mutex
	leader uint64
}

func (v *leaderView) Leader(uint64) (uint64, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.leader, v.leader != 0
}
func (v *leaderView) ReplicaID() uint64          { return 1 }
func (v *leaderView) Members() []messages.Member { return nil }

func (v *leaderView) lead(id uint64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.leader = id
}

// answering is a controller actor that answers every Ask with err.
type answering struct{ err error }

func (a answering) Receive(ctx actor.Context) {
	if ask, ok := ctx.Message().(*Ask); ok {
		ctx.Respond(Answer{Reply: messages.ControllerReply{Blocked: map[string]string{"asked": ask.Req.DeleteTopic}}, Err: a.err})
	}
}

func clientOf(t *testing.T, v *leaderView, clk *testnet.Clock, err error) *Client {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testnet.Logger(t) }))
	t.Cleanup(system.Shutdown)
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return answering{err} }))
	return NewClient(ClientDeps{NodeID: "n1", Timeout: time.Hour, Replica: v, Root: system.Root, Local: pid, Clock: clk})
}

// While no metadata leader is known the client asks again, on its clock;
// once this node leads, its own controller answers, and a refusal comes
// back with the controller's sentinel.
func TestTheClientAsksAgainUntilALeaderAnswers(t *testing.T) {
	v, clk := &leaderView{}, testnet.NewClock()
	c := clientOf(t, v, clk, nil)
	type result struct {
		rep messages.ControllerReply
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := c.Ask(t.Context(), messages.ControllerRequest{DeleteTopic: "orders"})
		done <- result{rep, err}
	}()
	testnet.Eventually(t, 10*time.Second, "the client's first retry", func() bool { return clk.Pending() == 1 })
	v.lead(1)
	clk.Advance(clientRetryFirst)
	got := <-done
	if got.err != nil || got.rep.Blocked["asked"] != "orders" {
		t.Fatalf("got %+v, %v; want the local controller's answer to the request", got.rep, got.err)
	}
	refused := clientOf(t, v, clk, metastore.ErrExists)
	if _, err := refused.Ask(t.Context(), messages.ControllerRequest{}); !errors.Is(err, metastore.ErrExists) {
		t.Fatalf("a refusal: got %v, want metastore.ErrExists", err)
	}
}

package departure

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// replica is a metastore replica of a few members, each owning a count of
// partitions; SetLeaving fails while refusals are left.
type replica struct {
	mu          sync.Mutex
	owned       map[string]int
	members     map[string]messages.Member
	refusals    int
	transferred bool
}

func (r *replica) OwnedCount(node string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owned[node]
}

func (r *replica) Member(id string) (messages.Member, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.members[id]
	return m, ok
}

func (r *replica) Members() []messages.Member {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []messages.Member
	for _, m := range r.members {
		out = append(out, m)
	}
	return out
}

func (r *replica) SetLeaving(_ context.Context, id string, leaving bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refusals > 0 {
		r.refusals--
		return errors.New("proposal timed out")
	}
	m := r.members[id]
	m.Leaving = leaving
	r.members[id] = m
	return nil
}

func (r *replica) ReplicaID() uint64 { return 1 }

func (r *replica) TransferAllLeadership(context.Context, uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.transferred = true
	return nil
}

func (r *replica) setOwned(node string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owned[node] = n
}

// cluster is n1, which hands off, and n2, alive unless said otherwise.
func cluster(n2 messages.Member) *replica {
	n2.ID = "n2"
	return &replica{owned: map[string]int{"n1": 3},
		members: map[string]messages.Member{"n1": {ID: "n1", Status: messages.MemberAlive}, "n2": n2}}
}

func leaver(r *replica, clk *testnet.Clock) *Leaver {
	return New(Deps{NodeID: "n1", Replica: r, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		RetryAfter: time.Second, Stopping: func() bool { return false }, Clock: clk})
}

type result struct{ before, after int }

func handOff(l *Leaver, timeout time.Duration) <-chan result {
	done := make(chan result, 1)
	go func() {
		b, a, _ := l.HandOff(context.Background(), timeout)
		done <- result{b, a}
	}()
	return done
}

// Rule B8: the node marks itself leaving, reads not ready, and waits until
// it owns nothing; then it hands its metastore leaderships off. The flag
// is proposed again after a proposal that failed.
func TestRuleB8HandOffMarksLeavingAndEndsOnceTheNodeOwnsNothing(t *testing.T) {
	r := cluster(messages.Member{Status: messages.MemberAlive})
	r.refusals = 1
	clk := testnet.NewClock()
	l := leaver(r, clk)
	done := handOff(l, time.Hour)
	armed := func() bool { return clk.Pending() == 1 }
	testnet.Eventually(t, 10*time.Second, "the retry of the leaving flag", armed)
	if !l.Leaving() {
		t.Fatal("a node handing off: got not leaving, want leaving (/readyz 503)")
	}
	clk.Advance(time.Second)
	testnet.Eventually(t, 10*time.Second, "the first poll", armed)
	if m, _ := r.Member("n1"); !m.Leaving {
		t.Fatal("the leaving flag was not proposed again after a refusal")
	}
	r.setOwned("n1", 0)
	clk.Advance(poll)
	if got := <-done; got != (result{3, 0}) {
		t.Fatalf("got %+v, want 3 owned before and none after", got)
	}
	if !r.transferred {
		t.Fatal("a node that owns nothing kept its metastore leaderships")
	}
}

// Rule B11: when no other node can take partitions (every other one is
// leaving too), the hand-off ends at once with what the node still owns.
func TestRuleB11HandOffEndsWhenNoOtherNodeTakesPartitions(t *testing.T) {
	r := cluster(messages.Member{Status: messages.MemberAlive, Leaving: true})
	if got := <-handOff(leaver(r, testnet.NewClock()), time.Hour); got != (result{3, 3}) {
		t.Fatalf("got %+v, want 3 owned before and after", got)
	}
}

// Rule B9: a zero timeout skips the hand-off; the node never reads leaving.
func TestRuleB9AZeroTimeoutSkipsTheHandOff(t *testing.T) {
	r := cluster(messages.Member{Status: messages.MemberAlive})
	l := leaver(r, testnet.NewClock())
	if got := <-handOff(l, 0); got != (result{3, 3}) || l.Leaving() {
		t.Fatalf("got %+v, leaving %v; want 3 and 3, not leaving", got, l.Leaving())
	}
	if m, _ := r.Member("n1"); m.Leaving {
		t.Fatal("a skipped hand-off proposed the leaving flag")
	}
}

package actors

import (
	"testing"
	"time"

	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/messages"
)

// sendTo sends msg to partition p of topic, the answer to come to the inbox.
func (in *inbox) sendTo(topic string, p int, msg any) {
	in.t.Helper()
	tp, ok := in.tn.n.store.Topic(topic)
	if !ok {
		in.t.Fatalf("topic %s unknown", topic)
	}
	k := messages.PartitionKey{Topic: topic, Incarnation: tp.Incarnation, Partition: p}
	in.tn.n.system.Root.RequestWithCustomSender(partition.PID(in.tn.n.system, k), msg, in.pid)
}

// wake opens partitions 0..n-1 of topic, as a request through their door
// would: created at rest, they have no actor for sendTo to reach until
// then.
func (in *inbox) wake(topic string, n int) {
	in.t.Helper()
	inc := in.tn.incarnationOf(topic)
	sys := in.tn.n.system
	for p := range n {
		k := messages.PartitionKey{Topic: topic, Incarnation: inc, Partition: p}
		res, err := sys.Root.RequestFuture(partition.SupervisorPID(sys), partition.Wake{Key: k}, 10*time.Second).Result()
		if err != nil || res.(partition.Woken).Err != "" {
			in.t.Fatalf("wake %v: got %v %+v, want it open", k, err, res)
		}
	}
}

// noAnswerYet fails if an answer is waiting: partitions 0..n-1 of topic
// each answer a stats request after what was sent to them before, so by
// then they answered whatever they were going to answer.
func (in *inbox) noAnswerYet(topic string, n int, what string) {
	in.t.Helper()
	for p := range n {
		in.quiet(topic, p)
	}
	select {
	case m := <-in.got:
		in.t.Fatalf("%s: got %T %+v, want no answer", what, m, m)
	default:
	}
}

func wantHandoff(in *inbox, what string, status messages.Status) *messages.HandoffResult {
	in.t.Helper()
	r := wantNext[*messages.HandoffResult](in, what)
	if r.Status != status {
		in.t.Fatalf("%s: got status %d (%s), want %d", what, r.Status, r.Err, status)
	}
	return r
}

// rule B5: a node arms at most MaxNewFreezesPerTick new freezes per tick
// and none while MaxFrozenPartitions of its partitions are frozen; a
// prepare it holds waits parked and is answered when its turn comes, or
// "held" after FreezeHoldFor. The gauges report both.
func TestRuleB5TheSourcePacesTheFreezesItArms(t *testing.T) {
	clk := newFakeClock()
	tn := frozenNode(t, clk, func(c *Config) {
		c.MaxNewFreezesPerTick, c.MaxFrozenPartitions = 2, 3
		c.FreezePaceTick = 10 * time.Millisecond
	})
	tn.createTopic("f", 6)
	in := newInbox(t, tn)
	in.wake("f", 6)
	for p := range 5 {
		in.sendTo("f", p, &messages.Handoff{Op: messages.HandoffPrepare})
	}
	first := wantHandoff(in, "the first prepare of the tick", messages.StatusOK)
	wantHandoff(in, "the second prepare of the tick", messages.StatusOK)
	in.noAnswerYet("f", 5, "a third prepare in the same tick")
	if frozen, held := tn.n.pacingCounts(t.Context()); frozen != 2 || held != 3 {
		t.Fatalf("counts: got frozen %d held %d, want 2 and 3", frozen, held)
	}
	if got := tn.n.metrics.partitionsFrozen.Get(); got != 2 {
		t.Fatalf("narad_partitions_frozen: got %v, want 2", got)
	}

	clk.Advance(10 * time.Millisecond) // next tick: one more, then the cap of 3
	wantHandoff(in, "the parked prepare granted on the next tick", messages.StatusOK)
	clk.Advance(10 * time.Millisecond)
	in.noAnswerYet("f", 5, "a prepare with 3 frozen")
	if got := tn.n.metrics.movesHeld.Get(); got != 2 {
		t.Fatalf("narad_moves_held: got %v, want 2", got)
	}

	// A release frees room for the head of the line at once.
	tp, _ := tn.n.store.Topic("f")
	k0 := messages.PartitionKey{Topic: "f", Incarnation: tp.Incarnation, Partition: 0}
	// Which partition answered first is up to the actors: the release goes
	// to each, and only the one holding that token lets go.
	granted := first
	for p := range 5 {
		k := k0
		k.Partition = p
		if _, err := tn.n.route.Ask(t.Context(), k, &messages.Handoff{Op: messages.HandoffRelease, Token: granted.Token}); err != nil {
			t.Fatalf("release: %v", err)
		}
	}
	clk.Advance(10 * time.Millisecond)
	wantHandoff(in, "the head of the line once a freeze ended", messages.StatusOK)

	// The last one waits past FreezeHoldFor: answered held, keeping its turn.
	clk.Advance(tn.cfg.freezeHold())
	wantHandoff(in, "a prepare parked past FreezeHoldFor", messages.StatusHeld)
	if frozen, held := tn.n.pacingCounts(t.Context()); frozen != 3 || held != 1 {
		t.Fatalf("counts after the hold: got frozen %d held %d, want 3 and 1 (the held move keeps its place)", frozen, held)
	}
}

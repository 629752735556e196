package actors

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/messages"
)

// The freeze's rules are proved one by one on freeze.Step
// (actors/freeze); these tests prove that the partition actor feeds it
// what happens and carries out what it decides. Their time is a fakeClock:
// a freeze lapses, and a lease poll fires, only when the test says so.

// frozenNode is a single node whose partitions take their time from clk.
func frozenNode(t *testing.T, clk *fakeClock, tweak ...func(*Config)) *testNode {
	t.Helper()
	return newTestNode(t, append([]func(*Config){func(c *Config) {
		// The tests move the clock by whole TTLs: a record held by the
		// freeze must stay on its partition, not outlast the reroute grace
		// (rule K3, proved by the dispatcher's own tests).
		c.clock, c.Dispatch.RerouteGrace = clk, time.Hour
	}}, tweak...)...)
}

// inbox is an actor that keeps every answer sent to it, in arrival order.
// Requests sent through it from one goroutine reach a partition in that
// order, and the partition's answers come back in the order it sent them:
// an answer still missing when a later request's answer has arrived was
// never sent. That is how a test sees that something did not happen
// without waiting for a while.
type inbox struct {
	t   *testing.T
	tn  *testNode
	pid *actor.PID
	got chan any
}

func newInbox(t *testing.T, tn *testNode) *inbox {
	in := &inbox{t: t, tn: tn, got: make(chan any, 64)}
	in.pid = tn.n.system.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started, *actor.Stopping, *actor.Stopped, *actor.Restarting:
		default:
			in.got <- c.Message()
		}
	}))
	return in
}

// send sends msg to partition 0 of topic, the answer to come to the inbox.
func (in *inbox) send(topic string, msg any) {
	in.t.Helper()
	tp, ok := in.tn.n.store.Topic(topic)
	if !ok {
		in.t.Fatalf("topic %s unknown", topic)
	}
	k := messages.PartitionKey{Topic: topic, Incarnation: tp.Incarnation, Partition: 0}
	in.tn.n.system.Root.RequestWithCustomSender(partition.PID(in.tn.n.system, k), msg, in.pid)
}

// next is the next answer; it fails the test after clusterWaitBound.
func (in *inbox) next() any {
	in.t.Helper()
	select {
	case m := <-in.got:
		return m
	case <-time.After(clusterWaitBound):
		in.t.Fatalf("no answer in %s", clusterWaitBound)
		return nil
	}
}

// wantNext fails unless the next answer is a T, and returns it.
func wantNext[T any](in *inbox, what string) T {
	in.t.Helper()
	m := in.next()
	v, ok := m.(T)
	if !ok {
		var want T
		in.t.Fatalf("%s: got %T %+v, want a %T", what, m, m, want)
	}
	return v
}

// settle sends a stats request and waits for its answer, so everything
// the partition answered to the requests sent before it is in the inbox.
// It fails the test on any answer it did not expect.
func (in *inbox) settle(topic string) {
	in.t.Helper()
	in.send(topic, &messages.GetStats{})
	wantNext[*messages.PartitionStats](in, "the answers so far, then the stats")
}

// prepare sends a prepare to partition 0 of topic and waits until the
// freeze it asks for closed the gate, or its prepare is parked (quiet).
// For a prepare that answers nothing meanwhile.
func (in *inbox) prepare(topic string) {
	in.t.Helper()
	in.send(topic, &messages.Handoff{Op: messages.HandoffPrepare})
	in.quiet(topic, 0)
}

// quiet waits until every message sent to partition p of topic before it
// went round the freeze's actors: the partition forwarded it to its freeze
// actor (its stats come after), the freeze actor asked the pacer (its
// status comes after), the pacer answered (its figures come after the turn
// it sent), the freeze actor took the turn and told the gate (its status
// again), and the partition took that (its stats again). Whatever any of
// them was going to answer meanwhile is in the inbox by then.
func (in *inbox) quiet(topic string, p int) {
	in.t.Helper()
	in.sendTo(topic, p, &messages.GetStats{})
	wantNext[*messages.PartitionStats](in, "the answers so far, then the stats")
	in.sendTo(topic, p, freeze.Ask{})
	wantNext[freeze.Status](in, "the answers so far, then the freeze's status")
	in.tn.n.pacingCounts(in.t.Context())
	in.sendTo(topic, p, freeze.Ask{})
	wantNext[freeze.Status](in, "the answers so far, then the freeze's status")
	in.sendTo(topic, p, &messages.GetStats{})
	wantNext[*messages.PartitionStats](in, "the answers so far, then the stats")
}

// within polls check until it returns nil, and fails the test with the
// last error after d: a bound on something that must happen, never a
// measure of how long it takes.
func within(t *testing.T, d time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in %s: %v", what, d, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantHWM waits for partition 0 of topic to reach hwm, moving a fake
// clock on so that the dispatcher retries what it holds.
func wantHWM(t *testing.T, tn *testNode, topic string, hwm int64) {
	t.Helper()
	within(t, clusterWaitBound, fmt.Sprintf("HWM %d", hwm), func() error {
		// The dispatcher retries held records on the node's clock: a fake
		// one moves a retry interval per look.
		if clk, ok := tn.cfg.clock.(*fakeClock); ok {
			clk.Advance(tn.cfg.Dispatch.CommitRetryInterval)
		}
		if got := hwmOf(t, tn, topic); got != hwm {
			return fmt.Errorf("got HWM %d, want %d", got, hwm)
		}
		return nil
	})
}

// commitOf is a commit of one record, as the dispatcher would send it.
func commitOf(body string) *messages.Commit {
	return &messages.Commit{Records: []messages.CommitRecord{{Seq: 1 << 40, Key: []byte("k"), Body: []byte(body)}}}
}

// askPartition sends msg to partition 0 of topic on a single node.
func askPartition(t *testing.T, tn *testNode, topic string, msg any) any {
	t.Helper()
	tp, ok := tn.n.store.Topic(topic)
	if !ok {
		t.Fatalf("topic %s unknown", topic)
	}
	res, err := tn.n.route.Ask(context.Background(), messages.PartitionKey{Topic: topic, Incarnation: tp.Incarnation, Partition: 0}, msg)
	if err != nil {
		t.Fatalf("%T: %v", msg, err)
	}
	return res
}

func handoff(t *testing.T, tn *testNode, h messages.Handoff) *messages.HandoffResult {
	t.Helper()
	return askPartition(t, tn, "f", &h).(*messages.HandoffResult)
}

// The source side of a move on one node (rules F1, F5, F6, F9, F12).
func TestHandoffFreezeOnTheSource(t *testing.T) {
	clk := newFakeClock()
	tn := frozenNode(t, clk)
	tn.createTopic("f", 3)
	for range 3 {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"x"`))
	}
	wantHWM(t, tn, "f", 3)

	// rule F5: a prepare arms a freeze and returns a token with the listing.
	r := handoff(t, tn, messages.Handoff{Op: messages.HandoffPrepare})
	if r.Status != messages.StatusOK || r.Token == "" || r.Listing == nil || r.Listing.HWM != 3 {
		t.Fatalf("prepare: got %+v, want a token and a listing at HWM 3", r)
	}
	token := r.Token

	// rule F1: commits are refused while frozen (the dispatcher keeps
	// them: produce still answers 202) and consume pauses on it.
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"held"`))
	if c := askPartition(t, tn, "f", commitOf(`"direct"`)).(*messages.CommitResult); c.Status != messages.StatusFrozen {
		t.Fatalf("commit while frozen: got %+v, want refused as frozen", c)
	}
	if got := hwmOf(t, tn, "f"); got != 3 {
		t.Fatalf("HWM while frozen: got %d, want 3 (commits refused)", got)
	}
	if m := tn.consume("f", "partition=0&wait=0"); m != nil {
		t.Fatalf("consume while frozen: got offset %d, want nothing", m.Offset)
	}

	// rule F6: a re-arm extends the freeze its token names; another token
	// is refused.
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffRearm, Token: token}); r.Status != messages.StatusOK {
		t.Fatalf("re-arm: got %+v, want OK", r)
	}
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffRearm, Token: "other"}); r.Status != messages.StatusGone {
		t.Fatalf("re-arm with a wrong token: got %+v, want gone (409)", r)
	}
	// rule F9: the fence checks the HWM too.
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffFence, Token: token, HWM: 2}); r.Status != messages.StatusGone {
		t.Fatalf("fence with another HWM: got %+v, want gone (409)", r)
	}
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffFence, Token: token, HWM: 3}); r.Status != messages.StatusOK {
		t.Fatalf("fence: got %+v, want OK", r)
	}

	// rules F6, F9, F12: a re-arm just before the lapse holds the freeze a
	// full TTL from the re-arm; unattended then, it lapses on that TTL, the
	// fence refuses, and the held record lands.
	clk.Advance(tn.cfg.Move.FreezeTTL - time.Nanosecond)
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffRearm, Token: token}); r.Status != messages.StatusOK {
		t.Fatalf("re-arm just before the TTL: got %+v, want OK", r)
	}
	clk.Advance(tn.cfg.Move.FreezeTTL)
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffFence, Token: token, HWM: 3}); r.Status != messages.StatusGone {
		t.Fatalf("fence after the TTL: got %+v, want gone (409)", r)
	}
	wantHWM(t, tn, "f", 4)
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffRearm, Token: token}); r.Status != messages.StatusGone {
		t.Fatalf("re-arm after the lapse: got %+v, want gone: a token never arms a new freeze", r)
	}
}

// rule K4: consume pauses on the frozen partition only; the topic's other
// partitions keep serving, to a queue-mode consume too.
func TestRuleK4ConsumePausesOnTheFrozenPartitionOnly(t *testing.T) {
	clk := newFakeClock()
	tn := frozenNode(t, clk)
	tn.createTopic("f", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"frozen"`))
	wantHWM(t, tn, "f", 1)
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffPrepare}); r.Status != messages.StatusOK || r.Token == "" {
		t.Fatalf("prepare of partition 0: got %+v, want a token", r)
	}
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=1", []byte(`"free"`))
	if m := tn.consume("f", "wait=5s"); m == nil || m.Partition != 1 {
		t.Fatalf("queue-mode consume while partition 0 is frozen: got %+v, want partition 1's record", m)
	}
	if m := tn.consume("f", "partition=0&wait=0"); m != nil {
		t.Fatalf("consume of the frozen partition 0: got offset %d, want nothing", m.Offset)
	}
	if m := tn.consume("f", "wait=0"); m != nil {
		t.Fatalf("queue-mode consume with only the frozen partition's record left: got partition %d offset %d, want nothing", m.Partition, m.Offset)
	}
}

// rules F2, F4: a prepare with a lease out waits, polling, until the
// lease is acked (or LeaseDrainTimeout passed), and reports the in-memory
// frontier that ack moved; a lease still out at the deadline stays out of
// the listing's position (rule K5).
func TestRuleF2PrepareWaitsForLeasesOutThenReports(t *testing.T) {
	clk := newFakeClock()
	tn := frozenNode(t, clk)
	tn.createTopic("f", 3)
	for _, body := range []string{`"a"`, `"b"`} {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(body))
	}
	wantHWM(t, tn, "f", 2)
	in := newInbox(t, tn)

	first := tn.consume("f", "partition=0&wait=0")
	if first == nil || first.Offset != 0 {
		t.Fatalf("consume: got %+v, want offset 0", first)
	}
	in.prepare("f") // the prepare waits: the stats come first
	tn.must(http.StatusNoContent, "POST", "/v1/topics/f/ack?receipt_handle="+url.QueryEscape(first.ReceiptHandle), nil)
	in.settle("f") // an ack does not report; the poll does
	clk.Advance(partition.LeaseDrainPoll)
	r := wantNext[*messages.HandoffResult](in, "the prepare, once its poll saw the ack")
	if r.Status != messages.StatusOK || r.Listing == nil || r.Listing.HWM != 2 || r.Listing.Position.Frontier != 0 {
		t.Fatalf("prepare: got %+v, want a listing at HWM 2 with the acked offset 0 in its frontier", r)
	}
	handoff(t, tn, messages.Handoff{Op: messages.HandoffRelease, Token: r.Token})

	second := tn.consume("f", "partition=0&wait=0")
	if second == nil || second.Offset != 1 {
		t.Fatalf("consume after the release: got %+v, want offset 1", second)
	}
	in.prepare("f")
	clk.Advance(tn.cfg.Partition.LeaseDrainTimeout - time.Nanosecond)
	in.settle("f") // the poll before the deadline found the lease out
	clk.Advance(partition.LeaseDrainPoll)
	r = wantNext[*messages.HandoffResult](in, "the prepare, past the lease drain's deadline")
	if r.Status != messages.StatusOK || r.Listing == nil || r.Listing.Position.Frontier != 0 {
		t.Fatalf("prepare: got %+v, want a listing whose frontier leaves the leased offset 1 out", r)
	}
}

// rule C4: chunk reads return committed bytes only, within the listing.
func TestTransferChunksStayWithinTheListing(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("f", 3)
	for range 5 {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"abcdefgh"`))
	}
	var ls *messages.PartitionListing
	waitFor(t, func() bool {
		ls = askPartition(t, tn, "f", &messages.ListPartition{}).(*messages.PartitionListing)
		return ls.HWM == 5
	})
	if len(ls.Segments) != 1 || ls.Position.Frontier != -1 {
		t.Fatalf("listing: got %+v, want one segment and nothing acked", ls)
	}
	seg := ls.Segments[0]
	var got int64
	for {
		ch := askPartition(t, tn, "f", &messages.ReadChunk{Segment: seg.Name, Pos: got, Max: 37}).(*messages.Chunk)
		if ch.Status != messages.StatusOK {
			t.Fatalf("chunk at %d: got %+v", got, ch)
		}
		if len(ch.Data) == 0 {
			break
		}
		if len(ch.Data) > 37 {
			t.Fatalf("chunk at %d: got %d bytes, want at most 37", got, len(ch.Data))
		}
		got += int64(len(ch.Data))
	}
	if got != seg.Size {
		t.Fatalf("chunks: got %d bytes, want the listed %d", got, seg.Size)
	}
}

// rule K5 (source side): what a listing and a prepare report of the
// consumers is the committed offset and the acked-ahead offsets; leases
// in flight stay out of both (the new owner redelivers them).
func TestRuleK5TheListingCarriesAcksNotLeases(t *testing.T) {
	clk := newFakeClock()
	tn := frozenNode(t, clk)
	tn.createTopic("f", 3)
	for i := range 6 {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", fmt.Appendf(nil, `"r%d"`, i))
	}
	wantHWM(t, tn, "f", 6)
	var leased []*messages.MessageInfo
	for i := range 4 {
		m := tn.consume("f", "partition=0&wait=0")
		if m == nil || m.Offset != int64(i) {
			t.Fatalf("consume %d: got %+v, want offset %d", i, m, i)
		}
		leased = append(leased, m)
	}
	for _, i := range []int{0, 2} { // offsets 1 and 3 stay leased
		tn.must(http.StatusNoContent, "POST", "/v1/topics/f/ack?receipt_handle="+url.QueryEscape(leased[i].ReceiptHandle), nil)
	}
	want := messages.ConsumerPosition{Frontier: 0, AckedAhead: []int64{2}}
	ls := askPartition(t, tn, "f", &messages.ListPartition{}).(*messages.PartitionListing)
	if ls.Position.Frontier != want.Frontier || !slices.Equal(ls.Position.AckedAhead, want.AckedAhead) {
		t.Fatalf("listing position with offsets 0 and 2 acked, 1 and 3 leased: got %+v, want %+v", ls.Position, want)
	}
	// The prepare waits out the lease drain (rule F2) with 1 and 3 still
	// out, then reports the same position.
	in := newInbox(t, tn)
	in.prepare("f")
	clk.Advance(tn.cfg.Partition.LeaseDrainTimeout)
	r := wantNext[*messages.HandoffResult](in, "the prepare, past the lease drain's deadline")
	if r.Status != messages.StatusOK || r.Listing == nil {
		t.Fatalf("prepare: got %+v, want a listing", r)
	}
	if got := r.Listing.Position; got.Frontier != want.Frontier || !slices.Equal(got.AckedAhead, want.AckedAhead) {
		t.Fatalf("prepare's position with offsets 1 and 3 leased: got %+v, want %+v", got, want)
	}
}

// A listing asked to carry the bytes of a small partition carries each
// segment's committed bytes, all of them; one past the bound carries none.
func TestAListingCarriesASmallPartitionsBytes(t *testing.T) {
	tn := newTestNode(t)
	tn.createTopic("s", 3)
	for i := range 3 {
		tn.must(http.StatusAccepted, "POST", "/v1/topics/s/produce?partition=0", fmt.Appendf(nil, `"small-%d"`, i))
	}
	wantHWM(t, tn, "s", 3)
	ls := askPartition(t, tn, "s", &messages.ListPartition{InlineBytes: 1 << 20}).(*messages.PartitionListing)
	var all []byte
	for _, sg := range ls.Segments {
		if int64(len(sg.Data)) != sg.Size {
			t.Fatalf("segment %s: got %d bytes inline, want its %d", sg.Name, len(sg.Data), sg.Size)
		}
		all = append(all, sg.Data...)
	}
	for i := range 3 {
		if body := fmt.Sprintf(`"small-%d"`, i); !bytes.Contains(all, []byte(body)) {
			t.Fatalf("inline bytes: got %d bytes without %s, want every record", len(all), body)
		}
	}
	ls = askPartition(t, tn, "s", &messages.ListPartition{InlineBytes: 1}).(*messages.PartitionListing)
	for _, sg := range ls.Segments {
		if sg.Data != nil {
			t.Fatalf("segment %s past the bound: got %d bytes inline, want none", sg.Name, len(sg.Data))
		}
	}
}

// A freeze actor that panics takes its partition down with it: the freeze
// died, and only the partition's restart knows what its gate may let
// through then (it opens frozen while a move targets it). Here no move
// does: the restarted partition takes commits again, and the destination's
// token names nothing.
func TestAFreezeActorThatPanicsRestartsItsPartition(t *testing.T) {
	clk := newFakeClock()
	var armed atomic.Bool
	tn := frozenNode(t, clk, func(c *Config) {
		c.faults = &faultHooks{partition: partition.Knobs{FreezeStep: func(k messages.PartitionKey, ev any) {
			if _, rearm := ev.(freeze.Rearm); rearm && armed.Load() {
				panic("injected: a bug in the freeze actor")
			}
		}}}
	})
	tn.createTopic("f", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"x"`))
	wantHWM(t, tn, "f", 1)
	r := handoff(t, tn, messages.Handoff{Op: messages.HandoffPrepare})
	if r.Status != messages.StatusOK || r.Token == "" {
		t.Fatalf("prepare: got %+v, want a token", r)
	}
	restarts := tn.n.metrics.actorRestarts.Get()
	armed.Store(true)
	in := newInbox(t, tn)
	in.send("f", &messages.Handoff{Op: messages.HandoffRearm, Token: r.Token})
	within(t, clusterWaitBound, "the partition restarted", func() error {
		if got := tn.n.metrics.actorRestarts.Get(); got != restarts+1 {
			return fmt.Errorf("got %d partition restarts, want %d", got, restarts+1)
		}
		return nil
	})
	armed.Store(false)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"y"`))
	wantHWM(t, tn, "f", 2)
	if r := handoff(t, tn, messages.Handoff{Op: messages.HandoffFence, Token: r.Token, HWM: 2}); r.Status != messages.StatusGone {
		t.Fatalf("a fence of the dead freeze's token: got %+v, want gone (409)", r)
	}
}

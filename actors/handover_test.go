package actors

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// syncHold holds one partition's next write between its fsync and its
// publish (the partition.Knobs.Synced fault hook), until released.
type syncHold struct {
	mu      sync.Mutex
	key     string // topic/partition to hold; "" holds nothing
	held    chan struct{}
	release chan struct{}
}

func newSyncHold() *syncHold { return &syncHold{} }

// arm holds the next write of topic/partition that finishes its fsync.
func (h *syncHold) arm(topic string, partition int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.key = fmt.Sprintf("%s/%d", topic, partition)
	h.held, h.release = make(chan struct{}), make(chan struct{})
}

func (h *syncHold) hook(k messages.PartitionKey) {
	h.mu.Lock()
	if h.key != fmt.Sprintf("%s/%d", k.Topic, k.Partition) {
		h.mu.Unlock()
		return
	}
	h.key = "" // one write only
	held, release := h.held, h.release
	h.mu.Unlock()
	close(held)
	<-release
}

// waitHeld waits until the armed write is held, or fails the test.
func (h *syncHold) waitHeld(t *testing.T) {
	t.Helper()
	select {
	case <-h.held:
	case <-time.After(clusterWaitBound):
		t.Fatalf("timed out after %s waiting for a write to be held before its publish", clusterWaitBound)
	}
}

func (h *syncHold) unblock() { close(h.release) }

// holdSecondRecord creates topic f and produces "a" to its partition 0,
// visible, then "b", whose write is held between its fsync and its
// publish until h is unblocked.
func holdSecondRecord(t *testing.T, tn *testNode, h *syncHold) {
	t.Helper()
	tn.createTopic("f", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"a"`))
	waitFor(t, func() bool { return hwmOf(t, tn, "f") == 1 })
	h.arm("f", 0)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"b"`))
	h.waitHeld(t)
}

// hwmOf is partition 0's HWM on a single node, read from its actor.
func hwmOf(t *testing.T, tn *testNode, topic string) int64 {
	t.Helper()
	return askPartition(t, tn, topic, &messages.ListPartition{}).(*messages.PartitionListing).HWM
}

// rule F3: a batch already past the freeze gate (written, held between
// its fsync and its publish) when PrepareHandoff arrives is in the HWM the
// prepare reports, which waits for it; a commit that passed the gate but
// was not written yet is refused with nothing appended; and nothing moves
// the reported HWM while the freeze holds.
func TestRuleF3PrepareReportsEveryBatchPastTheGate(t *testing.T) {
	h := newSyncHold()
	tn := frozenNode(t, newFakeClock(), func(c *Config) { c.faults = &faultHooks{partition: partition.Knobs{Synced: h.hook}} })
	holdSecondRecord(t, tn, h)
	in := newInbox(t, tn)
	// "c" passes the gate while "b" syncs: it waits in the stash.
	in.send("f", commitOf(`"c"`))
	in.send("f", &messages.Handoff{Op: messages.HandoffPrepare})
	// The prepare goes round the freeze actor and the pacer; the gate
	// closes when the freeze actor's Close reaches the partition, and "c",
	// still in the stash behind "b", is refused then.
	if c := wantNext[*messages.CommitResult](in, "the stashed commit, as the gate arms"); c.Status != messages.StatusFrozen {
		t.Fatalf("stashed commit: got %+v, want refused as frozen", c)
	}
	// Reporting now would hand out an HWM that "b" is about to pass: the
	// stats come back before any report.
	in.send("f", &messages.GetStats{})
	wantNext[*messages.PartitionStats](in, "the stats, sent after the gate armed")
	h.unblock()
	r := wantNext[*messages.HandoffResult](in, "the prepare, once the held batch is visible")
	if r.Status != messages.StatusOK || r.Listing == nil {
		t.Fatalf("prepare: got %+v, want a token and a listing", r)
	}
	if r.Listing.HWM != 2 {
		t.Fatalf("prepare reported HWM %d, want 2: the batch past the gate is in it and the stashed one is not", r.Listing.HWM)
	}
	// The reported HWM is final: the fence at it holds, and a commit
	// retried meanwhile is refused.
	if f := handoff(t, tn, messages.Handoff{Op: messages.HandoffFence, Token: r.Token, HWM: 2}); f.Status != messages.StatusOK {
		t.Fatalf("fence at the reported HWM: got %+v, want OK", f)
	}
	if c := askPartition(t, tn, "f", commitOf(`"c"`)).(*messages.CommitResult); c.Status != messages.StatusFrozen {
		t.Fatalf("commit retried under the freeze: got %+v, want refused as frozen", c)
	}
	if got := hwmOf(t, tn, "f"); got != 2 {
		t.Fatalf("HWM under the freeze: got %d, want the reported 2", got)
	}
	handoff(t, tn, messages.Handoff{Op: messages.HandoffRelease, Token: r.Token})
	tn.must(http.StatusAccepted, "POST", "/v1/topics/f/produce?partition=0", []byte(`"c"`))
	wantHWM(t, tn, "f", 3)
	for off, want := range []string{`"a"`, `"b"`, `"c"`} {
		if m := tn.consume("f", fmt.Sprintf("partition=0&offset=%d", off)); m == nil || string(m.Payload) != want {
			t.Fatalf("offset %d: got %+v, want %s", off, m, want)
		}
	}
}

// The publish guard behind rule F3: with F3 broken on purpose (a prepare
// that reports while a batch is still on its way), the batch's publish
// would move the reported HWM; the partition refuses it, counts it, and
// the records land after the freeze instead of behind a flip.
func TestRuleF3GuardRefusesAPublishPastAReportedHWM(t *testing.T) {
	h := newSyncHold()
	tn := frozenNode(t, newFakeClock(), func(c *Config) {
		c.faults = &faultHooks{partition: partition.Knobs{Synced: h.hook, ReportPastPipeline: true}}
	})
	refused := tn.n.metrics.frozenPublishRefused
	before := refused.Get()
	holdSecondRecord(t, tn, h)
	// A flushed "b" would need one more write for its commit frame; hold
	// the first write, whose publish leaves "b" awaiting, then hold none.
	r := handoff(t, tn, messages.Handoff{Op: messages.HandoffPrepare})
	if r.Status != messages.StatusOK || r.Listing == nil || r.Listing.HWM != 1 {
		t.Fatalf("early prepare: got %+v, want a report at HWM 1", r)
	}
	h.unblock()
	// "b" now awaits its commit frame; that write would move the HWM.
	within(t, clusterWaitBound, "the publish past the reported HWM refused", func() error {
		if hwm := hwmOf(t, tn, "f"); hwm != 1 {
			t.Fatalf("HWM under a reported freeze: got %d, want 1", hwm)
		}
		if got := refused.Get() - before; got < 1 {
			return fmt.Errorf("got %d publishes refused, want at least 1", got)
		}
		return nil
	})
	if got := hwmOf(t, tn, "f"); got != 1 {
		t.Fatalf("HWM under a reported freeze: got %d, want 1", got)
	}
	handoff(t, tn, messages.Handoff{Op: messages.HandoffRelease, Token: r.Token})
	wantHWM(t, tn, "f", 2)
	if m := tn.consume("f", "partition=0&offset=1"); m == nil || string(m.Payload) != `"b"` {
		t.Fatalf("offset 1 after the freeze: got %+v, want \"b\"", m)
	}
}

// A source whose freeze lapsed after the fence, and that committed
// records before the flip, holds records past the HWM the move flipped
// at. As it lets the partition go it sets the copy aside (quarantine),
// logs the offsets and counts them: never silently dropped.
func TestClusterAHandedOverSourceSetsAsideRecordsPastTheFlip(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	flipGate := newGate("m", 0, false)
	// The partitions' freezes run on a clock the test moves: the source's
	// lapses when the test says, not after a sleep.
	clk := newFakeClock()
	c := moveTestCluster(t, newGate("none", 0, false), func(_ int, cfg *Config) {
		cfg.clock = clk
		cfg.Move.FreezeTTL = 400 * time.Millisecond
		cfg.RequestTimeout = 500 * time.Millisecond
		cfg.faults.mover.Flip = func(ctx context.Context, k messages.PartitionKey) { flipGate.hook(ctx, k, false) }
	})
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":3}`))
	const records = 10
	dest := c.destinationFor("m", 0)
	for i := range records {
		c.node(dest).must(http.StatusAccepted, "POST", "/v1/topics/m/produce?partition=0", []byte(fmt.Sprintf(`"r%02d"`, i)))
	}
	c.waitFor("every record committed at the owner", func() bool {
		hwm, ok := partitionHWM(c.node(dest), "m", 0)
		return ok && hwm == records
	})
	owner := c.planMove("m", 0, dest)
	setAside := c.node(owner).n.metrics.handoverSetAsideRecs
	before := setAside.Get()

	// The flip is about to be proposed at HWM 10. Cut the source off, so
	// no re-arm reaches it: its freeze lapses and it commits what its own
	// clients produce.
	<-flipGate.reached
	c.cutOff(owner, true)
	clk.Advance(time.Second)
	for i := range 3 {
		c.node(owner).must(http.StatusAccepted, "POST", "/v1/topics/m/produce?partition=0", []byte(fmt.Sprintf(`"late%d"`, i)))
	}
	c.waitFor("the late records committed on the cut-off source", func() bool {
		// A re-arm already on its way when the cut came may renew the
		// freeze once more: every poll moves past any TTL.
		clk.Advance(time.Second)
		tp, _ := c.node(owner).n.store.Topic("m")
		res, err := c.node(owner).n.route.Ask(context.Background(), messages.PartitionKey{Topic: "m", Incarnation: tp.Incarnation}, &messages.ListPartition{})
		ls, _ := res.(*messages.PartitionListing)
		return err == nil && ls != nil && ls.HWM == records+3
	})
	flipGate.release()
	c.waitFor("the flip in the source's replica", func() bool {
		a := c.assignmentOf(owner, "m", 0)
		return a.Owner == fmt.Sprintf("n%d", dest+1) && a.Target == ""
	})
	c.cutOff(owner, false)

	a := c.assignmentOf(owner, "m", 0)
	if a.FlippedFrom != fmt.Sprintf("n%d", owner+1) || a.FlippedAtHWM != records {
		t.Fatalf("assignment after the flip: got %+v, want flipped from n%d at %d", a, owner+1, records)
	}
	c.waitFor("the source's copy set aside", func() bool { return setAside.Get()-before == 3 })
	q := storage.PartitionPath(c.node(owner).cfg.DataDir, "m", 0) + ".quarantine"
	if _, err := os.Stat(q); err != nil {
		t.Fatalf("quarantine %s: %v", q, err)
	}
	if _, err := os.Stat(storage.PartitionPath(c.node(owner).cfg.DataDir, "m", 0)); !os.IsNotExist(err) {
		t.Fatalf("the source's partition path: got %v, want it moved aside", err)
	}
}

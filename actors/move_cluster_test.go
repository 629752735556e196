package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/mover"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// testLoad is producers and consumers running against a cluster's nodes
// for the whole of a test, recording a history: start it, change the
// cluster, then finish it and check that nothing was lost.
type testLoad struct {
	t        testing.TB
	c        *testCluster
	nodes    []*testNode // the nodes at the start; a node joined later takes no load
	topics   []string
	h        *history.History
	produced atomic.Int64
	up       []atomic.Bool
	stop     chan struct{}
	prodWG   sync.WaitGroup
	consWG   sync.WaitGroup
}

// loadSpec says what a testLoad produces: producers per topic, records
// per producer, and keys (0: the broker picks one per record; else each
// producer cycles through this many keys of its own).
type loadSpec struct {
	topics      []string
	producers   int
	perProducer int
	keys        int
}

// startLoad runs producers that each produce perProducer records, and
// consumers that ack what they get, spread over the nodes that are up.
func startLoad(c *testCluster, topic string, producers, perProducer int) *testLoad {
	return startLoadOf(c, loadSpec{topics: []string{topic}, producers: producers, perProducer: perProducer})
}

// startLoadOf runs the load spec describes: each topic gets its own
// producers, and three consumers go round the topics.
func startLoadOf(c *testCluster, spec loadSpec) *testLoad {
	l := &testLoad{t: c.t, c: c, nodes: append([]*testNode(nil), c.nodes...), topics: spec.topics, h: history.New(),
		up: make([]atomic.Bool, len(c.nodes)), stop: make(chan struct{})}
	for i := range l.nodes {
		l.up[i].Store(true)
	}
	for ti, topic := range spec.topics {
		for p := range spec.producers {
			l.prodWG.Go(func() { l.produce(topic, ti*spec.producers+p, spec.perProducer, spec.keys) })
		}
	}
	for k := range 3 {
		l.consWG.Go(func() { l.consume(k) })
	}
	return l
}

func (l *testLoad) produce(topic string, p, records, keys int) {
	for i := range records {
		id := fmt.Sprintf("%s/p%d-%05d", topic, p, i)
		path := "/v1/topics/" + topic + "/produce"
		if keys > 0 {
			path += fmt.Sprintf("?key=p%d-k%d", p, i%keys)
		}
		for attempt := 0; attempt < 1000; attempt++ {
			code, _, err := l.pick(p+i+attempt).attempt("POST", path, history.MakeBody(id, 64))
			if err == nil && code == http.StatusAccepted {
				l.h.Produced(id)
				l.produced.Add(1)
				break
			}
			l.h.ProduceFailed(id)
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func (l *testLoad) consume(k int) {
	for n := 0; ; n++ {
		select {
		case <-l.stop:
			return
		default:
		}
		topic := l.topics[(k+n)%len(l.topics)]
		tn := l.pick(k + n)
		code, b, err := tn.attempt("GET", "/v1/topics/"+topic+"/consume?wait=300ms", nil)
		if err != nil || code != http.StatusOK {
			continue
		}
		d, err := l.h.Delivered(topic, b)
		if err != nil {
			l.t.Error(err)
			return
		}
		if code, _, err := tn.attempt("POST", "/v1/topics/"+topic+"/ack?receipt_handle="+url.QueryEscape(d.ReceiptHandle), nil); err == nil && code == http.StatusNoContent {
			l.h.Acked(d.ID)
		}
	}
}

// pick is a node that is up, as a load balancer would choose.
func (l *testLoad) pick(k int) *testNode {
	n := len(l.nodes)
	for j := range n {
		if i := (k + j) % n; l.up[i].Load() {
			return l.nodes[i]
		}
	}
	return l.nodes[0]
}

// down takes node i out of the load balancer before it is killed or cut
// off; back puts it back once it runs again.
func (l *testLoad) down(i int) { l.up[i].Store(false) }
func (l *testLoad) back(i int) { l.up[i].Store(true) }

func (l *testLoad) waitProduced(n int64) {
	l.c.waitFor(fmt.Sprintf("%d records produced", n), func() bool { return l.produced.Load() >= n })
}

// waitDelivered waits until h has nothing outstanding, for as long as
// deliveries go on: it gives up once none came for clusterWaitBound, and
// returns what is outstanding then.
func waitDelivered(h *history.History) int {
	last, moved := h.Outstanding(), time.Now()
	for last > 0 && time.Since(moved) < clusterWaitBound {
		time.Sleep(20 * time.Millisecond)
		if n := h.Outstanding(); n < last {
			last, moved = n, time.Now()
		}
	}
	return last
}

// finish waits for the producers, then for every accepted record to be
// consumed, and fails the test unless the history is clean. It waits for
// as long as deliveries go on (a loaded machine drains slowly) and gives
// up once none came for clusterWaitBound: the records then outstanding are
// stuck, and the failure says where the cluster holds them.
func (l *testLoad) finish() history.Report {
	l.t.Helper()
	l.prodWG.Wait()
	last := waitDelivered(l.h)
	close(l.stop)
	l.consWG.Wait()
	rep := l.h.Check()
	if last > 0 {
		l.t.Fatalf("no record delivered for %s with %d outstanding; %s\n%s", clusterWaitBound, len(rep.Lost), l.whereHeld(), rep)
	}
	if !rep.OK() {
		l.t.Fatalf("history check failed: %s", rep)
	}
	return rep
}

// whereHeld describes where the cluster holds records: each node's ingress
// WAL backlog (accepted, not committed), and each partition's owner, HWM
// and leases out as its owner reports them.
func (l *testLoad) whereHeld() string {
	var b strings.Builder
	b.WriteString("WAL backlogs:")
	var any *testNode
	for _, tn := range l.c.nodes {
		if tn.n != nil {
			r, _ := tn.n.wal.Backlog()
			fmt.Fprintf(&b, " %s:%d", tn.cfg.NodeID, r)
			any = tn
		}
	}
	if any == nil {
		return b.String()
	}
	for _, topic := range l.topics {
		t, ok := any.n.store.Topic(topic)
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "\n%s:", topic)
		for _, a := range any.n.store.Assignments(t.Incarnation, t.Partitions) {
			k := messages.PartitionKey{Topic: topic, Incarnation: t.Incarnation, Partition: a.Partition}
			res, err := any.n.route.Ask(context.Background(), k, &messages.GetStats{})
			st, _ := res.(*messages.PartitionStats)
			if err != nil || st == nil {
				fmt.Fprintf(&b, " %d@%s(%v)", a.Partition, a.Owner, err)
				continue
			}
			fmt.Fprintf(&b, " %d@%s hwm=%d out=%d", a.Partition, a.Owner, st.HighWatermark, st.InFlight)
		}
	}
	return b.String()
}

// knows reports whether node i's replica has applied topic's creation: a
// replica other than the one that created it may lag, so a wait asks this
// before it asks owned.
func (c *testCluster) knows(i int, topic string) bool {
	_, ok := c.node(i).n.Store().Topic(topic)
	return ok
}

// owned counts the partitions of topic each node owns, as node i's replica
// has them, and how many have a target.
func (c *testCluster) owned(i int, topic string) (perNode map[string]int, moving int) {
	s := c.node(i).n.Store()
	t, ok := s.Topic(topic)
	if !ok {
		c.t.Fatalf("topic %s unknown on n%d", topic, i+1)
	}
	perNode = map[string]int{}
	for _, a := range s.Assignments(t.Incarnation, t.Partitions) {
		perNode[a.Owner]++
		if a.Target != "" {
			moving++
		}
	}
	return perNode, moving
}

// rule L1, L7: a fourth node joins while produce and consume run; the
// controller plans the surplus onto it, the moves copy, freeze, fence,
// install and flip, and the history shows no loss.
func TestClusterAJoiningNodeTakesItsShareWithNoLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes")
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) {
		cfg.MoveTick, cfg.Controller.RebalanceInterval = 100*time.Millisecond, 100*time.Millisecond
		cfg.MaxInFlightMoves = 2
	})
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":12,"visibility_timeout_ms":2000}`))
	load := startLoad(c, "m", 3, 300)
	load.waitProduced(200)

	j := c.join()
	c.waitFor("n4 owning 3 of 12 partitions and no move in flight", func() bool {
		per, moving := c.owned(0, "m")
		return per["n4"] == 3 && moving == 0
	})
	rep := load.finish()
	per, _ := c.owned(j, "m")
	t.Logf("after the rebalance: %v; %s", per, rep)
	for _, id := range []string{"n1", "n2", "n3", "n4"} {
		if per[id] != 3 {
			t.Errorf("partitions of %s: got %d, want 3 (12 over 4)", id, per[id])
		}
	}
	c.waitFor("n4 counting 3 moves done", func() bool { return c.node(j).n.metrics.movesDone.Get() >= 3 })
	// The moved copies hold the records from offset 0: a replay on n4 of
	// each partition it now owns finds its first record.
	owners, _ := ownersOf(t, c.node(j), "m")
	for p, o := range owners {
		if o != "n4" {
			continue
		}
		if code, body := c.node(j).do("GET", fmt.Sprintf("/v1/topics/m/consume?partition=%d&offset=0", p), nil); code != http.StatusOK {
			t.Errorf("replay of partition %d offset 0 on n4: got %d %s, want 200", p, code, body)
		}
	}
}

// gate holds a move's copy passes of one partition until it is opened:
// the test then changes the cluster while the move stands in a phase.
type gate struct {
	mu      sync.Mutex
	key     string       // topic/partition held
	final   bool         // hold passes under the freeze, not catch-up passes
	skip    atomic.Int32 // matching passes let through before holding
	open    chan struct{}
	reached chan struct{} // closed when a held pass first arrives
	once    sync.Once
	passes  atomic.Int32 // matching passes started, held or not
}

func newGate(topic string, partition int, final bool) *gate {
	return &gate{key: fmt.Sprintf("%s/%d", topic, partition), final: final, open: make(chan struct{}), reached: make(chan struct{})}
}

func (g *gate) hook(ctx context.Context, k messages.PartitionKey, final bool) error {
	if fmt.Sprintf("%s/%d", k.Topic, k.Partition) != g.key || final != g.final {
		return nil
	}
	g.passes.Add(1)
	if g.skip.Add(-1) >= 0 {
		return nil
	}
	g.once.Do(func() { close(g.reached) })
	select {
	case <-g.open:
	case <-ctx.Done():
	}
	return nil
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.open:
	default:
		close(g.open)
	}
}

// moveTestCluster is three nodes with the planner off, so a test moves one
// partition by hand, with short move timings and the gate's hook.
func moveTestCluster(t *testing.T, g *gate, tweak ...func(int, *Config)) *testCluster {
	return newTestCluster(t, 3, append([]func(int, *Config){func(_ int, cfg *Config) {
		cfg.Controller.Rebalance = false
		cfg.MoveTick, cfg.Controller.RebalanceInterval = 100*time.Millisecond, 100*time.Millisecond
		cfg.faults = &faultHooks{mover: mover.Knobs{Pass: g.hook}}
	}}, tweak...)...)
}

// planMove sets the target of topic/partition to node to, as the
// controller would, and returns the owner's index.
func (c *testCluster) planMove(topic string, partition, to int) int {
	c.t.Helper()
	s := c.node(to).n.Store()
	// The topic may be newer than this node's replica (a create answered
	// by another node): a target set against incarnation 0 is refused
	// as invalid.
	var t messages.Topic
	c.waitFor(fmt.Sprintf("topic %s on n%d's replica", topic, to+1), func() bool {
		var ok bool
		t, ok = s.Topic(topic)
		return ok
	})
	want := fmt.Sprintf("n%d", to+1)
	// A metastore that cannot answer in time (a loaded machine, -race) is
	// asked again, as a client would: a target set by a try whose answer
	// was lost reads as set.
	deadline := time.Now().Add(clusterWaitBound)
	var a messages.Assignment
	for {
		var err error
		a, _, err = s.LeaderAssignment(context.Background(), t.Incarnation, partition)
		if err == nil && a.Target == want {
			break
		}
		if err == nil {
			var r messages.AssignResult
			r, err = s.SetTarget(context.Background(), messages.SetTarget{Incarnation: t.Incarnation, Partition: partition, Owner: a.Owner, To: want})
			if err == nil && r.Code != messages.ResultOK {
				c.t.Fatalf("set target: got %+v, want OK", r)
			}
			if err == nil {
				break
			}
		}
		if !errors.Is(err, metastore.ErrUnavailable) || time.Now().After(deadline) {
			c.t.Fatalf("plan the move of %s/%d to %s: %v", topic, partition, want, err)
		}
	}
	var owner int
	fmt.Sscanf(a.Owner, "n%d", &owner)
	return owner - 1
}

// waitForOwner waits until node i owns topic/partition with no move left
// on it, as node i's replica has it: the move's flip committed.
//
// It also waits until node i serves the partition: the supervisor opens it
// a pass after its replica applied the flip, and until then the API
// answers 503 (retry later), as clients expect.
func (c *testCluster) waitForOwner(i int, topic string, part int) {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("n%d owning and serving %s/%d", i+1, topic, part), func() bool {
		a := c.assignmentOf(i, topic, part)
		if a.Owner != fmt.Sprintf("n%d", i+1) || a.Target != "" {
			return false
		}
		n := c.node(i).n
		k := messages.PartitionKey{Topic: topic, Incarnation: a.Incarnation, Partition: part}
		res, err := n.system.Root.RequestFuture(partition.PID(n.system, k), &messages.GetStats{}, time.Second).Result()
		_, serving := res.(*messages.PartitionStats)
		return err == nil && serving
	})
}

// assignmentOf is topic/partition's assignment as node i's replica has it.
func (c *testCluster) assignmentOf(i int, topic string, partition int) messages.Assignment {
	s := c.node(i).n.Store()
	t, _ := s.Topic(topic)
	for _, a := range s.Assignments(t.Incarnation, t.Partitions) {
		if a.Partition == partition {
			return a
		}
	}
	return messages.Assignment{}
}

// destinationFor is a node that does not own topic/partition.
func (c *testCluster) destinationFor(topic string, partition int) int {
	owner := c.assignmentOf(0, topic, partition).Owner
	for i := range c.nodes {
		if fmt.Sprintf("n%d", i+1) != owner {
			return i
		}
	}
	c.t.Fatal("no destination")
	return -1
}

func stagingExists(tn *testNode, topic string, partition int) bool {
	_, err := os.Stat(storage.StagingPath(tn.cfg.DataDir, topic, partition))
	return err == nil
}

// moveCopyExists reports a move's copy on a destination that does not own
// the partition: in staging, or placed at the partition's path before its
// freeze (issue 46).
func moveCopyExists(tn *testNode, topic string, partition int) bool {
	_, err := os.Stat(storage.PartitionPath(tn.cfg.DataDir, topic, partition))
	return err == nil || stagingExists(tn, topic, partition)
}

// rules T3, T4: an abort mid-copy clears the target (202, owner
// unchanged), the destination stops its worker and drops its staging copy,
// and produce and consume never notice.
func TestClusterAnAbortMidMoveLeavesThePartitionWithItsOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	g := newGate("m", 0, true) // held under the freeze
	// A freeze longer than the harness's waits: only the worker's release
	// can lift it in time.
	c := moveTestCluster(t, g, func(_ int, cfg *Config) { cfg.Move.FreezeTTL = 2 * clusterWaitBound })
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":3,"visibility_timeout_ms":2000}`))
	load := startLoad(c, "m", 2, 200)
	load.waitProduced(100)
	dest := c.destinationFor("m", 0)
	owner := c.planMove("m", 0, dest)
	<-g.reached
	if !moveCopyExists(c.node(dest), "m", 0) {
		t.Fatal("the move's copy before the abort: got none, want the worker's")
	}
	// rule T5: the listing shows both sides and, with detail, the
	// destination's own report of the move.
	var listed messages.MoveList
	if err := json.Unmarshal(c.node(owner).must(http.StatusOK, "GET", "/v1/cluster/moves?detail=1", nil), &listed); err != nil {
		t.Fatal(err)
	}
	if len(listed.Moves) != 1 || listed.Moves[0].FromStatus != "alive" || listed.Moves[0].ToStatus != "alive" ||
		listed.Moves[0].Progress == nil || listed.Moves[0].Progress.Phase != "finalize" || listed.Moves[0].Progress.BytesCopied == 0 {
		t.Fatalf("moves with detail: got %+v, want one move finalizing with bytes copied, both sides alive", listed)
	}

	var out messages.AbortMoveReply
	body := c.node(owner).must(http.StatusAccepted, "POST", fmt.Sprintf("/v1/cluster/moves/m/0/abort?target=n%d", dest+1), nil)
	if err := json.Unmarshal(body, &out); err != nil || out.Result != "aborted" || out.Owner != fmt.Sprintf("n%d", owner+1) || out.Target != "" {
		t.Fatalf("abort: got %s (%v), want aborted with the owner unchanged and no target", body, err)
	}
	g.release()
	c.waitFor("the destination's copy removed", func() bool { return !moveCopyExists(c.node(dest), "m", 0) })
	// The worker lifted the freeze as it stopped: the partition commits
	// again long before its TTL.
	hwm := func() int64 {
		ls, _ := askPartition(t, c.node(owner), "m", &messages.ListPartition{}).(*messages.PartitionListing)
		return ls.HWM
	}
	before := hwm()
	c.node(owner).must(http.StatusAccepted, "POST", "/v1/topics/m/produce?partition=0", history.MakeBody("after-the-abort", 16))
	load.h.Produced("after-the-abort")
	c.waitFor("a commit to partition 0 after the abort", func() bool { return hwm() > before })
	// A second abort has nothing to abort.
	c.node(owner).must(http.StatusConflict, "POST", "/v1/cluster/moves/m/0/abort", nil)
	rep := load.finish()
	if a := c.assignmentOf(0, "m", 0); a.Owner != fmt.Sprintf("n%d", owner+1) || a.Target != "" {
		t.Fatalf("after the abort: got %+v, want owner n%d and no target", a, owner+1)
	}
	t.Logf("abort mid-move: %s", rep)
}

// rules F12, T1: the destination dies while the source is frozen; the
// freeze lapses on its TTL, the partition keeps serving from its owner,
// and the controller clears the target once the destination has been dead
// DeadTargetAbortAfter.
func TestClusterADestinationKilledMidFreezeLeavesThePartitionServing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	g := newGate("m", 0, true)
	c := moveTestCluster(t, g, func(_ int, cfg *Config) {
		cfg.Move.FreezeTTL = time.Second
		cfg.Controller.DeadTargetAbortAfter = time.Second
	})
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":3,"visibility_timeout_ms":2000}`))
	load := startLoad(c, "m", 2, 300)
	load.waitProduced(100)
	dest := c.destinationFor("m", 0)
	c.planMove("m", 0, dest)
	<-g.reached // frozen, draining under the freeze
	load.down(dest)
	c.kill(dest)
	g.release()
	other := 3 - dest - c.leader()
	if other < 0 || other > 2 || other == dest {
		other = (dest + 1) % 3
	}
	c.waitFor("the target of the dead destination cleared", func() bool { return c.assignmentOf(other, "m", 0).Target == "" })
	// The freeze lapsed: the partition takes commits and serves again.
	c.node(other).must(http.StatusAccepted, "POST", "/v1/topics/m/produce?partition=0", history.MakeBody("after-the-lapse", 16))
	load.h.Produced("after-the-lapse")
	// What the killed node accepted before it died sits in its ingress
	// WAL until it returns.
	c.restart(dest)
	load.back(dest)
	rep := load.finish()
	if a := c.assignmentOf(dest, "m", 0); a.Target != "" {
		t.Fatalf("after the destination returned: got %+v, want no target (it runs no worker for a cleared move)", a)
	}
	t.Logf("destination killed mid-freeze: %s", rep)
}

// rule P1: the source dies mid-copy and comes back; the worker keeps its
// session, retries, and the move completes with nothing lost.
func TestClusterASourceKilledMidCopyAndRestartedCompletesTheMove(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	g := newGate("m", 0, false)
	c := moveTestCluster(t, g)
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":3,"visibility_timeout_ms":2000}`))
	load := startLoad(c, "m", 2, 300)
	load.waitProduced(100)
	dest := c.destinationFor("m", 0)
	owner := c.planMove("m", 0, dest)
	<-g.reached
	load.down(owner)
	c.kill(owner)
	held := g.passes.Load()
	g.release()
	c.waitFor("a few passes against the dead source", func() bool { return g.passes.Load() >= held+2 })
	c.restart(owner)
	load.back(owner)
	c.waitForOwner(dest, "m", 0)
	rep := load.finish()
	t.Logf("source killed mid-copy: %s", rep)
}

// rule C3: a partition written faster than it copies still moves: the
// pre-copy stops after its bounds and freezes anyway (a non-converged
// cutover, counted), and nothing is lost. Before each catch-up pass the
// test commits one more record to the partition, so no pass ever finds
// the copy caught up.
func TestClusterAPartitionWrittenFasterThanItCopiesStillMoves(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	var load *testLoad
	var owner *testNode
	var extra atomic.Int32
	writeAhead := func(ctx context.Context, k messages.PartitionKey, final bool) error {
		if k.Partition != 0 || final {
			return nil
		}
		before, ok := partitionHWM(owner, "m", 0)
		id := fmt.Sprintf("extra-%d", extra.Add(1))
		if code, _, err := owner.attempt("POST", "/v1/topics/m/produce?partition=0", history.MakeBody(id, 64)); err != nil || code != http.StatusAccepted || !ok {
			return nil
		}
		load.h.Produced(id)
		for ctx.Err() == nil {
			if hwm, ok := partitionHWM(owner, "m", 0); ok && hwm > before {
				return nil
			}
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) {
		cfg.Controller.Rebalance = false
		cfg.MoveTick = 100 * time.Millisecond
		cfg.Move.CatchUpStopBytes = 0 // only a pass that copies nothing converges
		cfg.Move.MaxCatchUpPasses = 4
		cfg.faults = &faultHooks{mover: mover.Knobs{Pass: writeAhead}}
	})
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":3,"visibility_timeout_ms":2000}`))
	load = startLoad(c, "m", 3, 300)
	load.waitProduced(100)
	dest := c.destinationFor("m", 0)
	var o int
	fmt.Sscanf(c.assignmentOf(0, "m", 0).Owner, "n%d", &o)
	owner = c.node(o - 1)
	before := c.node(dest).n.metrics.nonConverged.Get()
	c.planMove("m", 0, dest)
	c.waitForOwner(dest, "m", 0)
	rep := load.finish()
	if got := c.node(dest).n.metrics.nonConverged.Get() - before; got < 1 {
		t.Errorf("non-converged cutovers: got %d, want at least 1", got)
	}
	t.Logf("hot partition, %d records written ahead of the passes: %s", extra.Load(), rep)
}

// partitionHWM reads a partition's high watermark from a node's topic
// stats without failing the test (for hooks on other goroutines).
func partitionHWM(tn *testNode, topic string, partition int) (int64, bool) {
	code, body, err := tn.attempt("GET", "/v1/topics/"+topic, nil)
	if err != nil || code != http.StatusOK {
		return 0, false
	}
	var d messages.TopicDetails
	if json.Unmarshal(body, &d) != nil {
		return 0, false
	}
	for _, ps := range d.PartitionStats {
		if ps.Index == partition {
			return ps.HighWatermark, true
		}
	}
	return 0, false
}

// rules P2-P5: the source is cut off from the bus mid-move and stays so
// past ForcePromoteAfter; the destination promotes the copy it holds,
// which reaches the source's last high watermark, and serves every record.
func TestClusterASourceCutOffPastForcePromoteAfterIsPromoted(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	g := newGate("m", 0, false)
	g.skip.Store(1)
	c := moveTestCluster(t, g, func(_ int, cfg *Config) {
		cfg.Move.ForcePromoteAfter = time.Second
		cfg.Move.CatchUpStopBytes = 0
		cfg.RequestTimeout = 500 * time.Millisecond
	})
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":3}`))
	const records = 40
	for i := range records {
		c.node(0).must(http.StatusAccepted, "POST", "/v1/topics/m/produce?partition=0", []byte(fmt.Sprintf(`"r%02d"`, i)))
	}
	dest := c.destinationFor("m", 0)
	c.waitFor("every record committed at the owner", func() bool {
		_, hwm := ownersOf(t, c.node(dest), "m")
		return hwm == records
	})
	owner := c.planMove("m", 0, dest)
	<-g.reached // the first pass copied everything
	c.cutOff(owner, true)
	g.release()
	c.waitForOwner(dest, "m", 0)
	c.cutOff(owner, false)
	for off := range records {
		m := c.node(dest).consume("m", fmt.Sprintf("partition=0&offset=%d", off))
		if m == nil || string(m.Payload) != fmt.Sprintf(`"r%02d"`, off) {
			t.Fatalf("offset %d on the promoted copy: got %+v, want r%02d", off, m, off)
		}
	}
	marker, err := storage.ReadMarker(storage.PartitionPath(c.node(dest).cfg.DataDir, "m", 0))
	if err != nil || !marker.ForcePromoted || marker.PromotedHWM != records || marker.SourceNode != fmt.Sprintf("n%d", owner+1) {
		t.Fatalf("move marker: got %+v (%v), want a force-promote at %d from n%d", marker, err, records, owner+1)
	}
}

// rules X1, X3, X5: the leader of the partition's assignment shard dies
// while the flip is proposed; whatever the proposal's answer, the worker
// resolves it through the next leader and the move completes with
// nothing lost.
func TestClusterAFlipWhoseLeaderDiesMidProposalCompletes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	flipGate := newGate("m", 0, false)
	c := moveTestCluster(t, newGate("none", 0, false), func(_ int, cfg *Config) {
		cfg.faults.mover.Flip = func(ctx context.Context, k messages.PartitionKey) { flipGate.hook(ctx, k, false) }
	})
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":3,"visibility_timeout_ms":2000}`))
	load := startLoad(c, "m", 2, 300)
	load.waitProduced(100)
	dest := c.destinationFor("m", 0)
	owner := c.planMove("m", 0, dest)
	third := 3 - owner - dest
	// Lead the partition's assignment shard from the third node, so that
	// killing the leader kills neither side of the move.
	s := c.node(dest).n.Store()
	tp, _ := s.Topic("m")
	shard := metastore.AssignmentShard(tp.Incarnation, 0, len(s.Shards())-1)
	if err := c.node(owner).n.Store().TransferLeadership(context.Background(), shard, uint64(third+1)); err != nil {
		t.Fatalf("move the shard's leadership to n%d: %v", third+1, err)
	}
	<-flipGate.reached
	load.down(third)
	flipGate.release()
	c.kill(third)
	c.waitForOwner(dest, "m", 0)
	c.restart(third)
	load.back(third)
	rep := load.finish()
	t.Logf("flip with its leader killed: %s", rep)
}

// rule K1: no client request is refused during a move. The move is held
// under the freeze while every node takes produce to the frozen partition;
// each answer is counted at the raw HTTP level, with no retry to hide a
// refusal: every one is 202, and every record lands at the new owner
// after the flip (rule K2).
func TestClusterRuleK1ProduceIsAcceptedThroughoutAMove(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	g := newGate("m", 0, true) // held under the freeze
	// A freeze that outlasts the harness's waits: it holds while the test
	// produces, whatever the machine's load.
	c := moveTestCluster(t, g, func(_ int, cfg *Config) { cfg.Move.FreezeTTL = 2 * clusterWaitBound })
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":3}`))
	var accepted int64
	refused := map[string]int{} // answer (status or transport error) -> count
	produce := func(phase string, perNode int) {
		for i := range perNode {
			for n, tn := range c.nodes {
				code, body, err := tn.attempt("POST", "/v1/topics/m/produce?partition=0", fmt.Appendf(nil, `"%s-n%d-%d"`, phase, n+1, i))
				switch {
				case err != nil:
					refused[fmt.Sprintf("%s: %v", phase, err)]++
				case code != http.StatusAccepted:
					refused[fmt.Sprintf("%s: %d %s", phase, code, strings.TrimSpace(string(body)))]++
				default:
					accepted++
				}
			}
		}
	}
	produce("before", 5)
	dest := c.destinationFor("m", 0)
	owner := c.planMove("m", 0, dest)
	produce("catch-up", 5)
	<-g.reached // frozen, the first pass under the freeze held
	if r := askPartition(t, c.node(owner), "m", commitOf(`"probe"`)).(*messages.CommitResult); r.Status != messages.StatusFrozen {
		t.Fatalf("a commit at the source while the move is held: got status %v, want frozen", r.Status)
	}
	produce("frozen", 10)
	g.release()
	c.waitForOwner(dest, "m", 0)
	produce("after", 5)
	if len(refused) != 0 {
		t.Fatalf("produce answers other than 202 during a move: got %v (%d accepted), want none", refused, accepted)
	}
	c.waitFor(fmt.Sprintf("all %d accepted records at the new owner", accepted), func() bool {
		hwm, ok := partitionHWM(c.node(dest), "m", 0)
		return ok && hwm == accepted
	})
}

package actors

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/mover"
	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// sweepTestCluster is three nodes with the planner off (moves are planned
// by hand), short move timings and a stale-copy sweep every 3 runner
// ticks, so a sweep comes every few hundred milliseconds.
func sweepTestCluster(t *testing.T, tweak ...func(int, *Config)) *testCluster {
	return newTestCluster(t, 3, append([]func(int, *Config){func(_ int, cfg *Config) {
		cfg.Controller.Rebalance = false
		cfg.MoveTick, cfg.Controller.RebalanceInterval = 100*time.Millisecond, 100*time.Millisecond
		cfg.Mover.SweepEveryTicks = 3
	}}, tweak...)...)
}

// gatePhase is where an incGate holds its move.
type gatePhase int

const (
	atCatchUp gatePhase = iota // before a catch-up copy pass
	atFinal                    // before a copy pass under the freeze
	atFlip                     // after the install, before the flip
)

// incGate holds one move of one partition of one topic incarnation in a
// phase until it is opened or its worker stops. Unlike gate it names the
// incarnation, so a recreated topic's moves of the same partition pass.
type incGate struct {
	key     messages.PartitionKey
	at      gatePhase
	open    chan struct{}
	reached chan struct{}
	once    sync.Once
	close   sync.Once
}

func newIncGate(k messages.PartitionKey, at gatePhase) *incGate {
	return &incGate{key: k, at: at, open: make(chan struct{}), reached: make(chan struct{})}
}

func (g *incGate) hold(ctx context.Context, k messages.PartitionKey, at gatePhase) {
	if k != g.key || at != g.at {
		return
	}
	g.once.Do(func() { close(g.reached) })
	select {
	case <-g.open:
	case <-ctx.Done():
	}
}

func (g *incGate) release() { g.close.Do(func() { close(g.open) }) }

func (g *incGate) wasReached() bool {
	select {
	case <-g.reached:
		return true
	default:
		return false
	}
}

// gateHooks is what the nodes' fault hooks call; the test sets its gates
// once the topic exists (the hooks are set before the nodes start).
type gateHooks struct {
	mu    sync.Mutex
	gates []*incGate
}

func (h *gateHooks) set(gates ...*incGate) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gates = gates
}

func (h *gateHooks) hold(ctx context.Context, k messages.PartitionKey, at gatePhase) {
	h.mu.Lock()
	gates := h.gates
	h.mu.Unlock()
	for _, g := range gates {
		g.hold(ctx, k, at)
	}
}

func (h *gateHooks) faults() *faultHooks {
	return &faultHooks{mover: mover.Knobs{
		Pass: func(ctx context.Context, k messages.PartitionKey, final bool) error {
			at := atCatchUp
			if final {
				at = atFinal
			}
			h.hold(ctx, k, at)
			return nil
		},
		Flip: func(ctx context.Context, k messages.PartitionKey) { h.hold(ctx, k, atFlip) },
	}}
}

// Phases of the delete-and-recreate load: a record's body names the phase
// it was produced in.
const (
	phaseOld int32 = iota // the first incarnation, before the delete was sent
	phaseMid              // between the delete and every node knowing the new one
	phaseNew              // every node's replica names the new incarnation
)

var phaseNames = [...]string{phaseOld: "old", phaseMid: "mid", phaseNew: "new"}

// recreateLoad produces to a topic across a delete and recreate. A record
// of the old phase whose first attempt's 202 came back before the delete
// was sent is certainly the old incarnation's (certainOld); one produced in the new
// phase was validated against the new incarnation by whichever node took
// it, since a replica never goes back. Whatever was produced in between
// may have landed in either, and counts as maybe.
type recreateLoad struct {
	t     testing.TB
	c     *testCluster
	topic string
	phase atomic.Int32
	up    []atomic.Bool    // the nodes clients go to
	h     *history.History // the new incarnation's history
	mu    sync.Mutex
	// certainOld holds the old ids answered 202 at their first attempt
	// before the delete was sent.
	certainOld map[string]bool
	// oldInNew lists certainly-old ids delivered from the new incarnation.
	oldInNew []string
	oldAcked atomic.Int64
	stop     chan struct{}  // producers and consumers end
	consStop chan struct{}  // the old-phase consumers end
	consWG   sync.WaitGroup // the new-phase consumers
	oldWG    sync.WaitGroup // the old-phase consumers
	prodWG   sync.WaitGroup
}

func startRecreateLoad(c *testCluster, topic string, producers, newPerProducer int) *recreateLoad {
	l := &recreateLoad{t: c.t, c: c, topic: topic, h: history.New(), certainOld: map[string]bool{},
		stop: make(chan struct{}), consStop: make(chan struct{}), up: make([]atomic.Bool, len(c.nodes))}
	for i := range l.up {
		l.up[i].Store(true)
	}
	for p := range producers {
		l.prodWG.Go(func() { l.produce(p, newPerProducer) })
	}
	for k := range 2 {
		l.oldWG.Go(func() { l.consume(k, phaseOld) })
	}
	return l
}

// produce sends records until it got newPerProducer of the new phase
// accepted: each id is tried while its phase lasts, then given up as maybe.
func (l *recreateLoad) produce(p, newPerProducer int) {
	accepted := 0
	for i := 0; accepted < newPerProducer; i++ {
		select {
		case <-l.stop:
			return
		default:
		}
		ph := l.phase.Load()
		id := fmt.Sprintf("%s/p%d-%05d", phaseNames[ph], p, i)
		for attempt := 0; ; attempt++ {
			if l.phase.Load() != ph || attempt == 1000 {
				l.h.ProduceFailed(id)
				break
			}
			code, _, err := l.pick(p+i+attempt).attempt("POST", "/v1/topics/"+l.topic+"/produce", history.MakeBody(id, 64))
			if err == nil && code == http.StatusAccepted {
				switch {
				case ph == phaseNew:
					l.h.Produced(id)
					accepted++
				case ph == phaseOld && l.phase.Load() == phaseOld && attempt == 0:
					// A failed earlier attempt could have landed later,
					// anywhere: only a first attempt is certain.
					l.mu.Lock()
					l.certainOld[id] = true
					l.mu.Unlock()
					l.oldAcked.Add(1)
				default:
					l.h.ProduceFailed(id) // may be in either incarnation
				}
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// consume takes and acks records. In the new phase it records them in the
// new incarnation's history: a consume asked once every replica names the
// new incarnation reads only its partitions (they are keyed by it). In the
// old phase what it takes is not judged.
func (l *recreateLoad) consume(k int, ph int32) {
	stop, h := l.stop, l.h
	if ph == phaseOld {
		stop, h = l.consStop, history.New()
	}
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		tn := l.pick(k + n)
		code, b, err := tn.attempt("GET", "/v1/topics/"+l.topic+"/consume?wait=300ms", nil)
		if err != nil || code != http.StatusOK {
			continue
		}
		d, err := h.Delivered(l.topic, b)
		if err != nil {
			l.t.Error(err)
			return
		}
		if ph == phaseNew {
			l.mu.Lock()
			if l.certainOld[d.ID] {
				l.oldInNew = append(l.oldInNew, fmt.Sprintf("%s at %d@%d", d.ID, d.Partition, d.Offset))
			}
			l.mu.Unlock()
		}
		if code, _, err := tn.attempt("POST", "/v1/topics/"+l.topic+"/ack?receipt_handle="+url.QueryEscape(d.ReceiptHandle), nil); err == nil && code == http.StatusNoContent {
			h.Acked(d.ID)
		}
	}
}

// pick is a node that is up, as a load balancer would choose.
func (l *recreateLoad) pick(k int) *testNode {
	n := len(l.c.nodes)
	for j := range n {
		if i := (k + j) % n; l.up[i].Load() {
			return l.c.node(i)
		}
	}
	return l.c.node(0)
}

// toMid ends the old-phase consumers and marks every later produce as
// maybe; toNew starts the new incarnation's consumers.
func (l *recreateLoad) down(i int) { l.up[i].Store(false) }
func (l *recreateLoad) back(i int) { l.up[i].Store(true) }

func (l *recreateLoad) toMid() {
	l.phase.Store(phaseMid)
	close(l.consStop)
	l.oldWG.Wait()
}

func (l *recreateLoad) toNew() {
	l.phase.Store(phaseNew)
	for k := range 3 {
		l.consWG.Go(func() { l.consume(k, phaseNew) })
	}
}

// finish waits for the producers and for every new-phase record to be
// consumed (for as long as deliveries go on), and returns the history.
func (l *recreateLoad) finish() history.Report {
	l.t.Helper()
	l.prodWG.Wait()
	waitDelivered(l.h)
	close(l.stop)
	l.consWG.Wait()
	return l.h.Check()
}

// rule V10, rule S7: a topic is deleted and recreated under the same name
// while moves of its partitions are in flight, under produce and consume
// load: one move held under the freeze (records wait for it in the ingress
// WALs), one installed and held before its flip, one done, and one held
// under the freeze on a node that is then killed, so the delete never
// reaches it and it comes back with the deleted incarnation's directory
// and a staging copy. The recreated topic's partitions move too, one onto
// that staging copy's node. Every record accepted for the new incarnation
// is consumed from it, no record accepted for the old one is in it or
// anywhere under its path, every node's topic directory names the new
// incarnation, and the deleted incarnation's directories are gone from
// every node (set aside, then removed by the sweep once the leader
// confirms the incarnation gone).
func TestClusterTopicRecreatedDuringMovesKeepsIncarnationsApart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	hooks := &gateHooks{}
	c := sweepTestCluster(t, func(_ int, cfg *Config) {
		cfg.faults = hooks.faults()
		// Records held for the frozen partitions stay held until the
		// delete, rather than reroute to a sibling.
		cfg.Dispatch.RerouteGrace = 2 * clusterWaitBound
	})
	const topic, parts = "reborn", 4
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(fmt.Sprintf(`{"name":%q,"partitions":%d,"visibility_timeout_ms":2000}`, topic, parts)))
	old := c.node(0).incarnationOf(topic)
	key := func(inc uint64, p int) messages.PartitionKey {
		return messages.PartitionKey{Topic: topic, Incarnation: inc, Partition: p}
	}
	gates := []*incGate{newIncGate(key(old, 0), atFinal), newIncGate(key(old, 1), atFinal), newIncGate(key(old, 2), atFlip)}
	hooks.set(gates...)
	defer func() {
		for _, g := range gates {
			g.release()
		}
	}()

	load := startRecreateLoad(c, topic, 3, 150)
	c.waitFor("old records accepted", func() bool { return load.oldAcked.Load() >= 100 })
	dest := map[int]int{}
	for p := range parts {
		dest[p] = c.destinationFor(topic, p)
		c.planMove(topic, p, dest[p])
	}
	c.waitForOwner(dest[3], topic, 3)
	for _, g := range gates {
		c.waitFor(fmt.Sprintf("the move of %s held", partitionKeyString(g.key)), g.wasReached)
	}
	// Partitions 0 and 1 are frozen: what is produced to them now waits in
	// the ingress WALs when the delete lands.
	c.waitFor("records held in an ingress WAL", func() bool {
		var held int64
		for _, tn := range c.nodes {
			r, _ := tn.n.wal.Backlog()
			held += r
		}
		return held >= 5
	})
	// Partition 1's destination goes down holding its staging copy: the
	// delete never reaches it.
	down := dest[1]
	if !moveCopyExists(c.node(down), topic, 1) {
		t.Fatalf("the move's copy of %s on n%d before the kill: got none, want the held move's", partitionKeyString(key(old, 1)), down+1)
	}
	load.down(down)
	c.kill(down)

	load.toMid()
	inc := recreateRetrying(t, c.node((down+1)%len(c.nodes)), topic, parts)
	c.restart(down)
	load.back(down)
	c.waitFor("every replica naming the new incarnation", func() bool {
		for _, tn := range c.nodes {
			if tp, ok := tn.n.store.Topic(topic); !ok || tp.Incarnation != inc {
				return false
			}
		}
		return true
	})
	load.toNew()
	for _, g := range gates {
		g.release()
	}
	// The new incarnation's partitions go where the old ones' moves went:
	// 0 where the frozen move copied to, 2 where the old install waited for
	// its flip, 1 onto the old staging copy left on the node that was down.
	for _, p := range []int{0, 2, 1} {
		a := c.assignmentOf(dest[p], topic, p)
		t.Logf("new incarnation %d's partition %d: placed on %s; the old one's move went to n%d", inc, p, a.Owner, dest[p]+1)
		if a.Owner != fmt.Sprintf("n%d", dest[p]+1) {
			c.planMove(topic, p, dest[p])
		}
		c.waitForOwner(dest[p], topic, p)
	}
	c.waitFor("no move of the new incarnation in flight", func() bool { _, moving := c.owned(0, topic); return moving == 0 })

	rep := load.finish()
	t.Logf("delete and recreate during moves: %d old records accepted before the delete; new incarnation %s", load.oldAcked.Load(), rep)
	if len(load.oldInNew) > 0 {
		t.Errorf("records of the deleted incarnation %d delivered from the new one %d: got %d (%v), want none", old, inc, len(load.oldInNew), load.oldInNew)
	}
	if !rep.OK() {
		t.Fatalf("history of the new incarnation: %s", rep)
	}
	// Every record the new incarnation holds, read from offset 0 on its
	// owner, is none of the old incarnation's.
	var found []string
	for p := range parts {
		for _, b := range c.node(0).bodiesAt(topic, inc, p) {
			if id, ok := history.ParseBody([]byte(b)); ok && load.certainOld[id] {
				found = append(found, fmt.Sprintf("%s in %d", id, p))
			}
		}
	}
	if len(found) > 0 {
		t.Errorf("new incarnation %d's partitions: got %d records of the old incarnation %d (%v), want none", inc, len(found), old, found)
	}
	// The deleted incarnation's directories: set aside under .stale by the
	// new incarnation's preparation, or left under topics/ where no
	// partition of the new one opened, and removed by the sweep (S7).
	var left []string
	ok := c.eventually(func() bool {
		left = left[:0]
		for _, tn := range c.nodes {
			if got, marked, err := storage.TopicIncarnation(tn.cfg.DataDir, topic); err != nil || (marked && got != inc) {
				left = append(left, fmt.Sprintf("%s: topics/%s names %d (%v)", tn.cfg.NodeID, topic, got, err))
			}
			stale, err := storage.StaleDirs(tn.cfg.DataDir)
			if err != nil {
				left = append(left, err.Error())
			}
			for _, d := range stale {
				if d.Topic == topic {
					left = append(left, fmt.Sprintf("%s: %s", tn.cfg.NodeID, d.Path))
				}
			}
		}
		return len(left) == 0
	})
	if !ok {
		t.Errorf("deleted incarnation %d's directories: got %v left, want none (new incarnation %d)", old, left, inc)
	}
	// Nor does any file under the topic's path on any node hold a record
	// of the old incarnation: not a copy served, not one set aside there as
	// if it were the new incarnation's (segments hold bodies as written).
	for _, tn := range c.nodes {
		if ids := certainOldIDsUnder(storage.TopicPath(tn.cfg.DataDir, topic), load.certainOld); len(ids) > 0 {
			t.Errorf("%s: files under topics/%s hold %d records of the deleted incarnation %d (%v), want none", tn.cfg.NodeID, topic, len(ids), old, ids)
		}
	}
	for _, tn := range c.nodes {
		if ents, _ := os.ReadDir(filepath.Join(tn.cfg.DataDir, ".moves")); len(ents) > 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Logf("%s: left under .moves: %v", tn.cfg.NodeID, names)
		}
	}
}

// oldIDPattern finds the ids of old-phase bodies (history.MakeBody) in raw
// file bytes.
var oldIDPattern = regexp.MustCompile(`"id":"(old/p[0-9]+-[0-9]+)"`)

// certainOldIDsUnder lists, sorted, the ids of certain that any file under
// dir holds.
func certainOldIDsUnder(dir string, certain map[string]bool) []string {
	seen := map[string]bool{}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil
		}
		for _, m := range oldIDPattern.FindAllSubmatch(b, -1) {
			if id := string(m[1]); certain[id] {
				seen[id] = true
			}
		}
		return nil
	})
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// recreateRetrying deletes the topic and creates it again under the same
// name, retrying while the metastore has no leader (a node was just
// killed), and returns the new incarnation.
func recreateRetrying(t *testing.T, tn *testNode, topic string, partitions int) uint64 {
	t.Helper()
	old := tn.incarnationOf(topic)
	deadline := time.Now().Add(clusterWaitBound)
	for attempt := 0; ; attempt++ {
		code, b, err := tn.attempt("DELETE", "/v1/topics/"+topic, nil)
		if err == nil && (code == http.StatusNoContent || (code == http.StatusNotFound && attempt > 0)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delete %s: got %d %s (%v), want 204", topic, code, b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	body := []byte(fmt.Sprintf(`{"name":%q,"partitions":%d,"visibility_timeout_ms":2000}`, topic, partitions))
	for attempt := 0; ; attempt++ {
		code, b, err := tn.attempt("POST", "/v1/topics", body)
		if err == nil && (code == http.StatusCreated || (code == http.StatusConflict && attempt > 0)) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create %s again: got %d %s (%v), want 201", topic, code, b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	var inc uint64
	ok := eventuallyWithin(clusterWaitBound, func() bool {
		tp, found := tn.n.store.Topic(topic)
		inc = tp.Incarnation
		return found && inc != old
	})
	if !ok {
		t.Fatalf("recreated %s: the replica still names incarnation %d", topic, old)
	}
	return inc
}

// eventuallyWithin polls cond until it holds or d passes.
func eventuallyWithin(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// diskFigures is what a node's topics/ holds, by what each entry is.
type diskFigures struct {
	owned   int64 // partition directories the node owns
	stale   int64 // partition directories of partitions it does not own
	staleN  int
	markers int64 // the topic directories' incarnation files
	other   int64 // anything else under topics/ that is no copy set aside
	// quarantine is the inventory's total (under topics/, .moves, .stale),
	// quarantineTopics the part of it under topics/.
	quarantine, quarantineTopics int64
	quarantineN                  int
}

func (f diskFigures) String() string {
	return fmt.Sprintf("owned %d B, stale %d B in %d copies, quarantine %d B in %d copies, markers %d B, other %d B",
		f.owned, f.stale, f.staleN, f.quarantine, f.quarantineN, f.markers, f.other)
}

// diskOf measures node i's topics/ entry by entry, each partition
// directory judged owned or not by the node's replica, so that a partition
// growing while it is measured cannot unbalance the sums.
func (c *testCluster) diskOf(i int) diskFigures {
	c.t.Helper()
	tn := c.node(i)
	var f diskFigures
	q, err := storage.Quarantined(tn.cfg.DataDir)
	if err != nil {
		c.t.Fatalf("inventory of n%d: %v", i+1, err)
	}
	setAside := map[string]bool{}
	for _, cp := range q {
		f.quarantine += cp.Bytes
		f.quarantineN++
		setAside[cp.Path] = true
	}
	root := filepath.Join(tn.cfg.DataDir, "topics")
	topics, _ := os.ReadDir(root)
	for _, te := range topics {
		tp, known := tn.n.store.Topic(te.Name())
		ents, _ := os.ReadDir(filepath.Join(root, te.Name()))
		for _, e := range ents {
			rel := filepath.Join("topics", te.Name(), e.Name())
			path := filepath.Join(tn.cfg.DataDir, rel)
			n, err := storage.DirBytes(path)
			if !e.IsDir() {
				info, _ := e.Info()
				n, err = 0, nil
				if info != nil {
					n = info.Size()
				}
			}
			if err != nil {
				continue // removed while measured
			}
			p, perr := strconv.Atoi(e.Name())
			switch {
			case e.Name() == "incarnation" && !e.IsDir():
				f.markers += n
			case setAside[rel]:
				f.quarantineTopics += n
			case perr == nil && known && c.ownsNow(i, tp, p):
				f.owned += n
			case perr == nil:
				f.stale += n
				f.staleN++
			default:
				f.other += n
			}
		}
	}
	return f
}

// ownsNow reports whether node i's replica has it owning partition p.
func (c *testCluster) ownsNow(i int, t messages.Topic, p int) bool {
	a, ok := c.node(i).n.store.Assignment(t.Incarnation, p)
	return ok && a.Owner == fmt.Sprintf("n%d", i+1)
}

// moveAll moves every partition of topic not on node to there, all at
// once, and waits until node owns and serves each.
func (c *testCluster) moveAll(topic string, partitions, to int) {
	c.t.Helper()
	var moved []int
	for p := range partitions {
		if c.assignmentOf(to, topic, p).Owner != fmt.Sprintf("n%d", to+1) {
			c.planMove(topic, p, to)
			moved = append(moved, p)
		}
	}
	for _, p := range moved {
		c.waitForOwner(to, topic, p)
	}
}

// rule S1, rule S3, rule R5: every partition of a topic moves from n1 to
// n2 and back, five times, under produce and consume load. After the
// first rounds the test waits for the sweep to reclaim the copies each
// move leaves on its source; the last rounds move back at once, so the
// install may meet its own old copy and set it aside. Each node's topics/
// ends holding its owned partitions and nothing else but copies the
// inventory counts as set aside, and every record accepted is consumed.
func TestClusterMovesBackAndForthLeaveOnlyOwnedDataAndTheQuarantine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c := sweepTestCluster(t)
	const topic, parts, a, b = "swept", 4, 0, 1
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(fmt.Sprintf(`{"name":%q,"partitions":%d,"visibility_timeout_ms":2000}`, topic, parts)))
	const producers, perProducer = 2, 1000
	load := startLoadOf(c, loadSpec{topics: []string{topic}, producers: producers, perProducer: perProducer})
	load.waitProduced(100)
	c.moveAll(topic, parts, a)

	// settled waits until no node holds a copy of a partition it does not
	// own, nor anything else uncounted under topics/.
	settled := func(what string) []diskFigures {
		t.Helper()
		figs := make([]diskFigures, len(c.nodes))
		ok := c.eventually(func() bool {
			for i := range c.nodes {
				figs[i] = c.diskOf(i)
				if figs[i].staleN != 0 || figs[i].other != 0 {
					return false
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("%s: got %v, want no stale copy and nothing uncounted on any node", what, figs)
		}
		return figs
	}
	settled("after moving everything to n1")
	const rounds, waitRounds = 5, 3
	for r := 1; r <= rounds; r++ {
		produced := load.produced.Load()
		c.moveAll(topic, parts, b)
		before := c.diskOf(a)
		if r <= waitRounds {
			after := settled(fmt.Sprintf("round %d, on n2", r))
			t.Logf("round %d to n2: n1 right after the flips: %v; once swept: %v; n2: %v", r, before, after[a], after[b])
		} else {
			t.Logf("round %d to n2: n1 right after the flips: %v", r, before)
		}
		load.waitProduced(min(produced+60, producers*perProducer))
		c.moveAll(topic, parts, a)
		before = c.diskOf(b)
		after := settled(fmt.Sprintf("round %d, back on n1", r))
		t.Logf("round %d back to n1: n2 right after the flips: %v; once swept: %v; n1: %v", r, before, after[b], after[a])
	}
	figs := settled("after five rounds")
	for i, f := range figs {
		t.Logf("n%d at the end: %v", i+1, f)
		total := f.owned + f.stale + f.markers + f.other + f.quarantineTopics
		if total > f.owned+f.quarantine+f.markers {
			t.Errorf("n%d topics/: got %d B, want at most owned %d B + quarantine %d B + markers %d B", i+1, total, f.owned, f.quarantine, f.markers)
		}
	}
	rep := load.finish()
	t.Logf("five rounds n1 <-> n2: %s", rep)
	var reclaimed []string
	for _, tn := range c.nodes {
		reclaimed = append(reclaimed, fmt.Sprintf("%s %d B", tn.cfg.NodeID, int64(tn.n.metrics.sweepReclaimed.Get())))
	}
	t.Logf("reclaimed by the sweep: %s", strings.Join(reclaimed, ", "))
}

// partitionKeyString names a partition in the tests' messages.
func partitionKeyString(k messages.PartitionKey) string {
	return fmt.Sprintf("%s/%d", k.Topic, k.Partition)
}

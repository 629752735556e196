package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
	natsserver "github.com/nats-io/nats-server/v2/server"
)

// testCluster is n nodes started in-process on loopback, talking through
// one embedded NATS server, with a metastore on disk under each node's
// data dir so that a node killed and restarted keeps its Raft state. Tests
// drive it like a script:
//
//	c := newTestCluster(t, 3)
//	c.node(0).createTopic("t", 4)
//	c.kill(c.leader())
//	c.waitFor("a new metadata leader", ...)
//	c.restart(2)
//
// Nodes are indexed 0..n-1 and named n1..nN with Raft replica ids 1..N.
// Every method must run on the test goroutine (they may fail the test).
type testCluster struct {
	t     testing.TB
	nodes []*testNode
	// nats is the NATS server the nodes reach each other through;
	// restartedNATS the servers restartNATS started in its place, which
	// stop after the nodes.
	nats          *natsserver.Server
	restartedNATS []*natsserver.Server
}

// clusterWaitBound bounds every wait of the harness: a liveness bound, not
// a performance threshold, so it is generous for a loaded run, and longer
// under the race detector (raceSlowdown), which runs the nodes several
// times slower: beside a second suite on two cores, rebalances took past
// 30 s there.
const clusterWaitBound = 30 * time.Second * raceSlowdown

// newTestCluster starts n nodes and stops them when the test ends. tweak
// adjusts node i's config before its first start. The nodes start
// concurrently: Start blocks until the metastore is ready, which needs a
// quorum, so starting them one by one would never return.
func newTestCluster(t testing.TB, n int, tweak ...func(i int, c *Config)) *testCluster {
	t.Helper()
	ns := startTestNATS(t)
	raft := make(map[uint64]string, n)
	for i := range n {
		raft[uint64(i+1)] = freeAddr(t)
	}
	c := &testCluster{t: t, nats: ns}
	for i := range n {
		cfg := DefaultConfig()
		cfg.NodeID = fmt.Sprintf("n%d", i+1)
		cfg.DataDir = t.TempDir()
		cfg.HTTPAddr = freeAddr(t)
		cfg.Cluster = "test"
		cfg.SecurityEnabled = false // a test with security on says so
		cfg.NATSURL = ns.ClientURL()
		cfg.MaxConsumeWait = 2 * time.Second
		cfg.Dispatch.CommitRetryInterval = 100 * time.Millisecond
		cfg.ShutdownDrainTimeout = 5 * time.Second
		// Liveness bounds stretch under the race detector as the waits do:
		// there, beside a second suite, a node missed heartbeats for 500 ms
		// and was judged dead while it ran, and a child topic's create
		// waited past 10 s for the controller on the leader. A heartbeat
		// is a metastore proposal, so its rate stretches too.
		cfg.Membership.HeartbeatInterval = 50 * time.Millisecond * raceSlowdown
		cfg.Membership.DeadTimeout = 500 * time.Millisecond * raceSlowdown
		cfg.ControllerTimeout *= raceSlowdown
		for _, f := range tweak {
			f(i, &cfg)
		}
		id := uint64(i + 1)
		mcfg := metastore.Config{NodeID: cfg.NodeID, ReplicaID: id, RaftAddr: raft[id],
			Dir: filepath.Join(cfg.DataDir, "raft"), InitialMembers: raft,
			// Raft's round trip too: two race suites side by side on
			// two cores starve a 40 ms election timeout, and the
			// metastore of a four-node test then spends its minute
			// electing leaders (heartbeats time out, no move is planned).
			RTTMillisecond: 2 * raceSlowdown, ElectionRTT: 20, HeartbeatRTT: 2}
		c.nodes = append(c.nodes, &testNode{t: t, cfg: cfg, mcfg: mcfg, base: "http://" + cfg.HTTPAddr,
			http: &http.Client{Timeout: clusterWaitBound, Transport: checkOpenAPI(t, nil)}})
	}
	// Registered after startTestNATS's cleanup, so it runs before it: the
	// nodes stop while NATS is still up.
	t.Cleanup(c.stopAll)
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	c.start(all...)
	return c
}

// secureCluster is a newTestCluster tweak that runs every node secured
// (CONTRACT.md §2.1), the root user admin seeded with password.
func secureCluster(password string) func(int, *Config) {
	return func(_ int, c *Config) { c.SecurityEnabled, c.AdminPassword = true, password }
}

// loginAs makes every node's requests carry user's credentials, once admin
// can log in (the metadata leader seeds it after its election).
func (c *testCluster) loginAs(user, password string) {
	c.t.Helper()
	for _, tn := range c.nodes {
		tn.user, tn.password = user, password
	}
	c.waitFor("admin can log in", func() bool {
		code, _, err := c.nodes[0].attempt("GET", "/v1/users", nil)
		return err == nil && code == http.StatusOK
	})
}

// join starts one more node that asks the running cluster to admit it
// (its metastore replicas become non-voters) and returns its index.
func (c *testCluster) join() int {
	c.t.Helper()
	first := c.nodes[0]
	i := len(c.nodes)
	cfg := first.cfg
	cfg.NodeID = fmt.Sprintf("n%d", i+1)
	cfg.DataDir = c.t.TempDir()
	cfg.HTTPAddr = freeAddr(c.t)
	id := uint64(i + 1)
	mcfg := first.mcfg
	mcfg.NodeID, mcfg.ReplicaID, mcfg.RaftAddr = cfg.NodeID, id, freeAddr(c.t)
	mcfg.Dir, mcfg.InitialMembers, mcfg.Join = filepath.Join(cfg.DataDir, "raft"), nil, true
	c.nodes = append(c.nodes, &testNode{t: c.t, cfg: cfg, mcfg: mcfg, base: "http://" + cfg.HTTPAddr,
		http: &http.Client{Timeout: clusterWaitBound, Transport: checkOpenAPI(c.t, nil)}})
	c.start(i)
	return i
}

// start starts the given nodes concurrently on their data dirs and
// addresses, and fails the test if any of them does not start.
func (c *testCluster) start(is ...int) {
	c.t.Helper()
	errs := make([]error, len(is))
	var wg sync.WaitGroup
	for k, i := range is {
		tn := c.nodes[i]
		if tn.n != nil {
			c.t.Fatalf("start n%d: already running", i+1)
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), clusterWaitBound)
			defer cancel()
			n, err := Start(ctx, tn.cfg, tn.mcfg, testLogger(c.t))
			if err != nil {
				errs[k] = fmt.Errorf("start %s: %w", tn.cfg.NodeID, err)
				return
			}
			tn.n = n
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatal(err)
	}
}

// stopAll stops every running node gracefully, all at once: stopped one by
// one, the last ones would lose their quorum while they stop.
func (c *testCluster) stopAll() {
	var wg sync.WaitGroup
	for _, tn := range c.nodes {
		if tn.n != nil {
			wg.Go(tn.stop)
		}
	}
	wg.Wait()
	for _, s := range c.restartedNATS {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// node is node i, for the single-node helpers (do, must, createTopic,
// consume). Its HTTP address stays the same across restarts.
func (c *testCluster) node(i int) *testNode { return c.nodes[i] }

// kill stops node i abruptly. In-process there is no process to SIGKILL:
// kill is a fast stop, Stop with a context already cancelled, so the node
// does not wait for its dispatcher to drain the ingress WAL (what the WAL
// holds is replayed at restart) nor for HTTP requests in flight. It still
// closes its NATS connection, actors and stores in order, so partitions
// write their consumer state and no write is torn: a crash that loses the
// page cache is the SIGKILL test of cmd/narad, not this.
func (c *testCluster) kill(i int) {
	c.t.Helper()
	tn := c.nodes[i]
	if tn.n == nil {
		c.t.Fatalf("kill n%d: not running", i+1)
	}
	tn.http.CloseIdleConnections()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// The cancelled context makes HTTP shutdown answer context.Canceled
	// when a connection was still active: that is what kill asks for.
	if err := tn.n.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
		c.t.Errorf("kill n%d: %v", i+1, err)
	}
	tn.n = nil
}

// restart starts stopped nodes again on their data dirs and addresses,
// concurrently, and returns once each is ready (its metastore caught up).
// That needs a quorum of running members: restart a killed majority in one
// call.
func (c *testCluster) restart(is ...int) {
	c.t.Helper()
	c.start(is...)
}

// cutOff drops (on) or heals (off) node i's NATS traffic, both ways, with
// the transport's fault-injection seam: its requests to other nodes and
// theirs to it time out. Only NATS is cut: the metastore's Raft traffic is
// separate TCP between the nodes and still flows, so a cut-off node keeps
// its metastore replica. It withholds its heartbeats while NATS does not
// answer it (see Node.heartbeat), so the leader marks it dead, and alive
// again once healed.
func (c *testCluster) cutOff(i int, on bool) {
	c.t.Helper()
	tn := c.nodes[i]
	if tn.n == nil || tn.n.nats == nil {
		c.t.Fatalf("cut off n%d: not running with NATS", i+1)
	}
	tn.n.nats.CutOff(on)
}

// leader is the index of the running node whose metastore replica leads the
// metadata shard, waiting for an election if there is none yet.
func (c *testCluster) leader() int {
	c.t.Helper()
	leader := -1
	c.waitFor("a leader of the metadata shard", func() bool {
		for i, tn := range c.nodes {
			if tn.n == nil {
				continue
			}
			if id, ok := tn.n.Store().Leader(metastore.MetaShard); ok && id == tn.n.Store().ReplicaID() {
				leader = i
				return true
			}
		}
		return false
	})
	return leader
}

// waitFor polls cond until it holds, and fails the test with what if it
// does not within a generous bound.
func (c *testCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	if !c.eventually(cond) {
		c.t.Fatalf("timed out after %s waiting for %s", clusterWaitBound, what)
	}
}

// eventually polls cond until it holds or the bound passes, and reports
// whether it held: for a test that fails with what it last saw.
func (c *testCluster) eventually(cond func() bool) bool { return testnet.Wait(clusterWaitBound, cond) }

// memberStatuses is node i's GET /v1/cluster/members as id -> status.
func (c *testCluster) memberStatuses(i int) map[string]string {
	c.t.Helper()
	var r messages.MemberList
	if err := json.Unmarshal(c.node(i).must(http.StatusOK, "GET", "/v1/cluster/members", nil), &r); err != nil {
		c.t.Fatalf("members on n%d: %v", i+1, err)
	}
	out := make(map[string]string, len(r.Members))
	for _, m := range r.Members {
		out[m.ID] = m.Status
	}
	return out
}

// attempt sends a request without failing the test: for goroutines other
// than the test's, and for requests expected to fail while a node is down.
func (tn *testNode) attempt(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, tn.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	tn.authorize(req)
	resp, err := tn.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// topicNames is every topic GET /v1/topics lists, paging with a small
// limit so that paging is exercised.
func (tn *testNode) topicNames() []string {
	tn.t.Helper()
	var names []string
	token := ""
	for {
		var page messages.TopicPage
		b := tn.must(http.StatusOK, "GET", "/v1/topics?limit=7&page_token="+url.QueryEscape(token), nil)
		if err := json.Unmarshal(b, &page); err != nil {
			tn.t.Fatalf("list topics: %v in %s", err, b)
		}
		for _, t := range page.Topics {
			names = append(names, t.Name)
		}
		if page.NextPageToken == "" {
			return names
		}
		token = page.NextPageToken
	}
}

func TestClusterEveryNodeSeesEveryMemberAlive(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 nodes")
	}
	c := newTestCluster(t, 3)
	want := map[string]string{"n1": messages.MemberAlive, "n2": messages.MemberAlive, "n3": messages.MemberAlive}
	for i := range 3 {
		var got map[string]string
		// Each node registers itself: another node's replica sees the
		// record a few milliseconds later.
		if !c.eventually(func() bool { got = c.memberStatuses(i); return fmt.Sprint(got) == fmt.Sprint(want) }) {
			t.Errorf("members on n%d: got %v, want %v", i+1, got, want)
		}
	}
}

func TestClusterATopicCreatedOnOneNodeIsKnownToEvery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 nodes")
	}
	c := newTestCluster(t, 3)
	c.node(0).createTopic("t", 4)
	for _, i := range []int{1, 2} {
		var code int
		var got messages.TopicDetails
		var body []byte
		// A local replica lags the commit by milliseconds.
		ok := c.eventually(func() bool {
			code, body = c.node(i).do("GET", "/v1/topics/t", nil)
			got = messages.TopicDetails{}
			return code == http.StatusOK && json.Unmarshal(body, &got) == nil && got.Name == "t" && got.Partitions == 4
		})
		if !ok {
			t.Errorf("GET /v1/topics/t on n%d: got %d %s, want 200 with name t and partitions 4", i+1, code, body)
		}
	}
}

func TestClusterAKilledMemberIsMarkedDeadAndAliveAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 nodes")
	}
	c := newTestCluster(t, 3)
	var got map[string]string
	if !c.eventually(func() bool { got = c.memberStatuses(0); return got["n3"] == messages.MemberAlive }) {
		t.Fatalf("members on n1 before the kill: got %v, want n3 alive", got)
	}

	c.kill(2)
	if !c.eventually(func() bool { got = c.memberStatuses(0); return got["n3"] == messages.MemberDead }) {
		t.Fatalf("members on n1 after n3 was killed: got %v, want n3 dead", got)
	}

	c.restart(2)
	if !c.eventually(func() bool { got = c.memberStatuses(0); return got["n3"] == messages.MemberAlive }) {
		t.Fatalf("members on n1 after n3 restarted: got %v, want n3 alive", got)
	}
}

func TestClusterACutOffNodeIsMarkedDeadAndAliveWhenHealed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 nodes")
	}
	c := newTestCluster(t, 3)
	// Cut a node that does not lead the metadata shard: a cut-off leader
	// would still be the one judging liveness, which is a case of its own.
	cut := (c.leader() + 1) % 3
	watcher := (cut + 1) % 3
	id := fmt.Sprintf("n%d", cut+1)
	var got map[string]string
	if !c.eventually(func() bool { got = c.memberStatuses(watcher); return got[id] == messages.MemberAlive }) {
		t.Fatalf("members on n%d before the cut: got %v, want %s alive", watcher+1, got, id)
	}

	c.cutOff(cut, true)
	if !c.eventually(func() bool { got = c.memberStatuses(watcher); return got[id] == messages.MemberDead }) {
		t.Fatalf("members on n%d while %s is cut off: got %v, want %s dead", watcher+1, id, got, id)
	}
	for other, st := range got {
		if other != id && st != messages.MemberAlive {
			t.Errorf("members on n%d while %s is cut off: got %s %s, want alive", watcher+1, id, other, st)
		}
	}

	c.cutOff(cut, false)
	if !c.eventually(func() bool { got = c.memberStatuses(watcher); return got[id] == messages.MemberAlive }) {
		t.Fatalf("members on n%d after %s was healed: got %v, want %s alive", watcher+1, id, got, id)
	}
}

// A metadata leader cut off from NATS hands its leadership to another
// voter, so liveness is judged and creates are answered by a node the bus
// reaches; the cut-off node is marked dead and alive again when healed.
func TestClusterACutOffMetadataLeaderStepsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 nodes")
	}
	c := newTestCluster(t, 3)
	cut := c.leader()
	other := (cut + 1) % 3
	id := fmt.Sprintf("n%d", cut+1)

	c.cutOff(cut, true)
	c.waitFor("another node leading the metadata shard", func() bool { return c.leader() != cut })
	var got map[string]string
	if !c.eventually(func() bool { got = c.memberStatuses(other); return got[id] == messages.MemberDead }) {
		t.Fatalf("members on n%d while the old leader %s is cut off: got %v, want %s dead", other+1, id, got, id)
	}
	// The metadata leadership just moved: the control plane may answer a
	// transient 503, which a client retries (a 409 then means an earlier
	// attempt created it).
	c.waitFor("the topic created while "+id+" is cut off", func() bool {
		code, _ := c.node(other).do("POST", "/v1/topics", []byte(`{"name":"while-cut","partitions":3}`))
		return code == http.StatusCreated || code == http.StatusConflict
	})
	owners, _ := ownersOf(t, c.node(other), "while-cut")
	for p, o := range owners {
		if o == id {
			t.Errorf("partition %d of a topic created while %s was cut off: got owner %s, want a live member", p, id, o)
		}
	}

	c.cutOff(cut, false)
	if !c.eventually(func() bool { got = c.memberStatuses(other); return got[id] == messages.MemberAlive }) {
		t.Fatalf("members on n%d after %s was healed: got %v, want %s alive", other+1, id, got, id)
	}
}

// The metadata leader is killed while another node creates topics: creates
// answer 503 until a new leader is elected, then 201 again, and every topic
// that was acknowledged is still there.
func TestClusterMetadataLeaderKilledDuringWritesLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 nodes")
	}
	c := newTestCluster(t, 3)
	old := c.leader()
	writer := c.node((old + 1) % 3)

	const createsBeforeKill, createsAfterKill = 20, 20
	warm, killed := make(chan struct{}), make(chan struct{})
	var committed, problems []string // written by the writer, read after done
	retried := 0                     // creates that needed more than one attempt
	done := make(chan struct{})
	go func() {
		defer close(done)
		after := 0
		for k := 0; after < createsAfterKill; k++ {
			select {
			case <-killed:
				after++
			default:
			}
			name := fmt.Sprintf("w-%d", k)
			ok, retries, problem := createUntilAnswered(writer, name)
			if retries > 0 {
				retried++
			}
			if ok {
				committed = append(committed, name)
			}
			if problem != "" {
				problems = append(problems, problem)
			}
			if k+1 == createsBeforeKill {
				close(warm)
			}
		}
	}()

	<-warm
	c.kill(old)
	close(killed)
	<-done

	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("n%d led and was killed; %d topics committed through n%d, %d creates retried", old+1, len(committed), (old+1)%3+1, retried)
	for i := range 3 {
		if i == old {
			continue
		}
		var missing []string
		ok := c.eventually(func() bool {
			listed := c.node(i).topicNames()
			missing = missing[:0]
			for _, name := range committed {
				if !slices.Contains(listed, name) {
					missing = append(missing, name)
				}
			}
			return len(missing) == 0
		})
		if !ok {
			t.Errorf("GET /v1/topics on n%d: got %d of the %d committed topics, missing %v; want all", i+1,
				len(committed)-len(missing), len(committed), missing)
		}
	}
}

// createUntilAnswered creates a topic, retrying while the metastore has no
// leader (503, or no answer), for a bounded time. ok means the topic is
// committed: 201, or 409 after an earlier attempt whose answer was lost. A
// non-empty problem fails the test; retries counts the failed attempts. It does not fail the test itself: it
// runs on the writer's goroutine.
func createUntilAnswered(tn *testNode, name string) (ok bool, retries int, problem string) {
	body := []byte(fmt.Sprintf(`{"name":%q,"partitions":3}`, name))
	deadline := time.Now().Add(clusterWaitBound)
	for attempt := 0; ; attempt++ {
		code, b, err := tn.attempt("POST", "/v1/topics", body)
		switch {
		case err == nil && code == http.StatusCreated:
			return true, attempt, ""
		case err == nil && code == http.StatusConflict && attempt > 0:
			return true, attempt, ""
		case err == nil && code < 500:
			return false, attempt, fmt.Sprintf("create %s: got %d %s, want 201", name, code, b)
		}
		if time.Now().After(deadline) {
			return false, attempt, fmt.Sprintf("create %s: got %d %s (%v) after retrying for %s, want 201", name, code, b, err, clusterWaitBound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// movesWithin is the bound of a wait for many moves (a rebalance onto a
// joiner, a decommission that moves every partition off its node and takes
// it out of Raft): several controller passes and a move per partition,
// slow under -race on two cores; a liveness bound, not a measure.
const movesWithin = 2 * clusterWaitBound

// waitForMoves is waitFor with movesWithin.
func (c *testCluster) waitForMoves(what string, cond func() bool) {
	c.t.Helper()
	if !testnet.Wait(movesWithin, cond) {
		c.t.Fatalf("timed out after %s waiting for %s; %s", movesWithin, what, c.movesReport())
	}
}

// movesReport is what a failed wait for moves names: the moves in flight
// as the first running node lists them (each with its blocked reasons and
// progress), and each node's blocked-moves series that are not zero.
func (c *testCluster) movesReport() string {
	var b strings.Builder
	listed := false
	for i, tn := range c.nodes {
		if tn.n == nil {
			continue
		}
		if !listed {
			code, body := tn.do("GET", "/v1/cluster/moves", nil)
			if len(body) > 8<<10 {
				body = append(body[:8<<10:8<<10], "…"...)
			}
			fmt.Fprintf(&b, "moves listed by n%d (%d): %s", i+1, code, bytes.TrimSpace(body))
			listed = true
		}
		var m strings.Builder
		tn.n.metrics.set.WritePrometheus(&m)
		for _, line := range strings.Split(m.String(), "\n") {
			if strings.HasPrefix(line, "narad_moves_blocked") && !strings.HasSuffix(line, " 0") {
				fmt.Fprintf(&b, "; n%d: %s", i+1, line)
			}
		}
	}
	return b.String()
}

// waitDecommissioned waits until member id is gone with nothing owned or
// moving in topics, and otherwise fails with why it is not: what each
// running node's controller reports blocking it (rule D7), who owns what.
func (c *testCluster) waitDecommissioned(id string, topics []string) {
	c.t.Helper()
	var per map[string]int
	var moving int
	var member bool
	if testnet.Wait(movesWithin, func() bool {
		_, member = c.node(0).n.Store().Member(id)
		per, moving = c.ownedAcross(0, topics)
		return !member && per[id] == 0 && moving == 0
	}) {
		return
	}
	var blocked []string
	for i, tn := range c.nodes {
		if tn.n == nil {
			continue
		}
		var b strings.Builder
		tn.n.metrics.set.WritePrometheus(&b)
		for _, line := range strings.Split(b.String(), "\n") {
			if strings.HasPrefix(line, "narad_decommission_blocked{") && strings.HasSuffix(line, " 1") {
				blocked = append(blocked, fmt.Sprintf("n%d: %s", i+1, line))
			}
		}
	}
	c.t.Fatalf("%s not out of the members after %s: member %v, owned %v, %d moving, blocked %v", id, movesWithin, member, per, moving, blocked)
}

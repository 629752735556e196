package actors

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/startup"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
)

// heartbeatLog counts the log records of a node's heartbeat loop, the
// line a node that left kept writing every interval.
type heartbeatLog struct {
	slog.Handler
	mu    *sync.Mutex
	beats *int
}

func (h heartbeatLog) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "heartbeat") {
		h.mu.Lock()
		*h.beats++
		h.mu.Unlock()
	}
	return h.Handler.Handle(ctx, r)
}

func (h heartbeatLog) WithAttrs(as []slog.Attr) slog.Handler {
	return heartbeatLog{h.Handler.WithAttrs(as), h.mu, h.beats}
}

func (h heartbeatLog) WithGroup(g string) slog.Handler {
	return heartbeatLog{h.Handler.WithGroup(g), h.mu, h.beats}
}

// startJoiner starts the first node's config as joiner id with replicaID
// (0: ask the cluster) on dataDir and raftAddr (the same on a restart: a
// metastore dir is bound to it), logging to log, and returns the node or
// the error of Start. It is not added to c: the test stops it.
func startJoiner(c *testCluster, id string, replicaID uint64, dataDir, raftAddr string, log *slog.Logger) (*Node, error) {
	c.t.Helper()
	first := c.nodes[0]
	cfg := first.cfg
	cfg.NodeID, cfg.DataDir, cfg.HTTPAddr = id, dataDir, freeAddr(c.t)
	mcfg := first.mcfg
	mcfg.NodeID, mcfg.ReplicaID, mcfg.RaftAddr = id, replicaID, raftAddr
	mcfg.Dir, mcfg.InitialMembers, mcfg.Join = filepath.Join(dataDir, "raft"), nil, true
	ctx, cancel := context.WithTimeout(context.Background(), clusterWaitBound)
	defer cancel()
	return Start(ctx, cfg, mcfg, log)
}

// A joiner started without a replica id gets one from the cluster and
// keeps it; once decommissioned it stops being a node: Left closes,
// /readyz and the client API answer 503 with the reason, it answers no
// admin verb (so none waits on it), and its heartbeat loop ends. Its
// replica id is refused ever after, with what to do; a fresh joiner gets
// the next id.
func TestClusterANodeThatLeftStopsBeingANode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five nodes")
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) {
		cfg.MoveTick, cfg.Controller.RebalanceInterval = 100*time.Millisecond, 100*time.Millisecond
	})
	var (
		mu    sync.Mutex
		beats int
	)
	log := slog.New(heartbeatLog{testLogger(t).Handler(), &mu, &beats})
	dir4, raft4 := t.TempDir(), freeAddr(t)
	n4, err := startJoiner(c, "n4", 0, dir4, raft4, log)
	if err != nil {
		t.Fatalf("start n4 without a replica id: %v", err)
	}
	t.Cleanup(func() { n4.Stop(context.Background()) })
	if got := n4.Store().ReplicaID(); got != 4 {
		t.Fatalf("n4's replica id: got %d, want 4 (above the initial 1-3)", got)
	}
	if got, ok, err := startup.ReadReplicaID(dir4); got != 4 || !ok || err != nil {
		t.Fatalf("n4's kept replica id: got (%d, %t, %v), want 4", got, ok, err)
	}

	c.waitFor("the decommission of n4 accepted", func() bool {
		code, body := c.node(0).do("POST", "/v1/cluster/members/n4/decommission", nil)
		if code == http.StatusConflict && strings.Contains(string(body), "the member is dead") {
			return false // a starved heartbeat; alive again at the next (rule D8)
		}
		if code == http.StatusServiceUnavailable && strings.Contains(string(body), controlPlaneUnavailable) {
			return false // transient, asked again as a client would
		}
		if code != http.StatusNoContent {
			t.Fatalf("decommission n4: got %d %s, want 204", code, body)
		}
		return true
	})
	select {
	case <-n4.Left():
	case <-time.After(clusterWaitBound):
		t.Fatal("n4 decommissioned: Left not closed")
	}

	why := "node n4 left the cluster (decommissioned); it serves nothing"
	tn4 := &testNode{t: t, base: "http://" + n4.Addr(), http: &http.Client{Timeout: 10 * time.Second}}
	for _, path := range []string{"/readyz", "/v1/topics", "/v1/cluster/members"} {
		code, body := tn4.do("GET", path, nil)
		if want := fmt.Sprintf(`{"error":%q}`+"\n", why); code != http.StatusServiceUnavailable || string(body) != want {
			t.Errorf("GET %s on n4: got %d %s, want 503 %s", path, code, body, want)
		}
	}

	// The controller drops the member record right after the removal.
	// Any of n1-n3 may answer the members verb below from its own
	// replica, so each must have applied the removal.
	c.waitFor("n4 out of the members on n1-n3", func() bool {
		for i := range 3 {
			if _, ok := c.node(i).n.Store().Member("n4"); ok {
				return false
			}
		}
		return true
	})
	// Four nodes were in the admin verbs' queue group: were n4 still in
	// it, about one request in four would reach it.
	cli, err := transport.Connect(context.Background(), transport.Config{Cluster: "test", NodeID: "cli",
		URLs: []string{c.node(0).cfg.NATSURL}, RequestTimeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for k := range 16 {
		var st messages.AdminStatus
		if err := transport.RequestAdminJSON(context.Background(), cli, "status", struct{}{}, &st); err != nil || st.AnsweredBy == "n4" {
			t.Fatalf("status request %d: got (answered by %q, %v), want an answer from n1-n3", k, st.AnsweredBy, err)
		}
		var ms messages.AdminMemberList
		if err := transport.RequestAdminJSON(context.Background(), cli, "members", struct{}{}, &ms); err != nil {
			t.Fatalf("members request %d: got %v, want an answer", k, err)
		}
		for _, m := range ms.Members {
			if m.ID == "n4" {
				t.Fatalf("members request %d: got n4 listed, want it gone", k)
			}
		}
	}

	// The heartbeat loop ended: over many intervals it neither withheld a
	// beat (its NATS connection is closed) nor logged one.
	heard := func() (int, uint64) {
		mu.Lock()
		defer mu.Unlock()
		return beats, n4.metrics.beatsWithheld.Get()
	}
	logged, withheld := heard()
	time.Sleep(20 * n4.cfg.Membership.HeartbeatInterval)
	if l, w := heard(); l != logged || w != withheld {
		t.Errorf("heartbeats after n4 left: got %d more log lines and %d more withheld, want none", l-logged, w-withheld)
	}

	// Its id can never be used again: not by the node started again on
	// its data dir ...
	if err := n4.Stop(context.Background()); err != nil {
		t.Errorf("stop n4 after it left: %v", err)
	}
	_, err = startJoiner(c, "n4", 0, dir4, raft4, testLogger(t))
	if want := "this data dir belongs to a node that left"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("restart of n4 on its data dir: got %v, want an error saying %q", err, want)
	}
	// ... nor by hand ...
	_, err = startJoiner(c, "n5", 4, t.TempDir(), freeAddr(t), testLogger(t))
	if want := "replica id 4 was used by a removed node and can never rejoin; start without --replica-id to get a fresh one"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("join with the removed --replica-id 4: got %v, want an error saying %q", err, want)
	}
	// ... nor by handing it out: a fresh joiner gets the next.
	dir5, raft5 := t.TempDir(), freeAddr(t)
	n5, err := startJoiner(c, "n5", 0, dir5, raft5, testLogger(t))
	if err != nil {
		t.Fatalf("start n5 without a replica id: %v", err)
	}
	if got := n5.Store().ReplicaID(); got != 5 {
		t.Errorf("n5's replica id: got %d, want 5", got)
	}
	if err := n5.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Started again, it reads its id back from the data dir and asks for
	// none (the next allocation is still 6), and a flag naming another is
	// refused before anything opens.
	_, err = startJoiner(c, "n5", 9, dir5, raft5, testLogger(t))
	if want := "belongs to replica id 5, not --replica-id 9"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("restart of n5 with --replica-id 9: got %v, want an error saying %q", err, want)
	}
	n5, err = startJoiner(c, "n5", 0, dir5, raft5, testLogger(t))
	if err != nil {
		t.Fatalf("restart n5: %v", err)
	}
	defer n5.Stop(context.Background())
	if got := n5.Store().ReplicaID(); got != 5 {
		t.Errorf("n5's replica id after a restart: got %d, want 5", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterWaitBound)
	defer cancel()
	if got, err := c.node(0).n.Store().AllocateReplicaID(ctx); err != nil || got != 6 {
		t.Errorf("allocation after n5's restart: got (%d, %v), want 6 (the restart asked for none)", got, err)
	}
	if err := os.Remove(filepath.Join(dir5, startup.ReplicaIDFile+".tmp")); !os.IsNotExist(err) {
		t.Errorf("temporary replica id file: got %v, want none left", err)
	}
}

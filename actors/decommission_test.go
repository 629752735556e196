package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/actors/controller"
	"github.com/naradmq/narad/bench/history"

	"github.com/naradmq/narad/messages"
)

// rules D1-D6: a voter is decommissioned to zero under load: its
// partitions move off, it refuses produce, a non-voter is promoted so
// three voters stay, and it leaves the Raft configuration and the members.
func TestClusterADecommissionedVoterDrainsToZeroAndLeavesRaft(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes")
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) {
		cfg.MoveTick, cfg.Controller.RebalanceInterval = 100*time.Millisecond, 100*time.Millisecond
		cfg.MaxInFlightMoves = 4
	})
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"m","partitions":12,"visibility_timeout_ms":2000}`))
	load := startLoad(c, "m", 3, 300)
	load.waitProduced(100)
	j := c.join()
	c.waitFor("n4 owning 3 partitions after the rebalance", func() bool {
		per, moving := c.owned(0, "m")
		return per["n4"] == 3 && moving == 0
	})

	gone := (c.leader() + 1) % 3 // a voter that does not lead the metadata
	id := fmt.Sprintf("n%d", gone+1)
	// A dry run says what would happen and changes nothing.
	c.waitFor("the dry run of "+id+"'s decommission answered", func() bool {
		code, body := c.node(j).do("POST", "/v1/cluster/members/"+id+"/decommission?dry_run=1", nil)
		if code == http.StatusServiceUnavailable {
			return false // the control plane's transient 503, retried as a client would
		}
		if code != http.StatusOK {
			t.Fatalf("dry run of %s's decommission: got %d %s, want 200", id, code, body)
		}
		return true
	})
	if m, _ := c.node(j).n.Store().Member(id); m.Draining {
		t.Fatal("a dry run set the drain flag")
	}
	// A member the leader misjudged dead for a moment (a starved
	// heartbeat: DeadTimeout is 500 ms here) is rightly refused (rule
	// D8); it reads alive again at its next heartbeat. Any other answer
	// fails the test.
	c.waitFor("the decommission of "+id+" accepted", func() bool {
		code, body := c.node(j).do("POST", "/v1/cluster/members/"+id+"/decommission", nil)
		if code == http.StatusConflict && strings.Contains(string(body), "the member is dead") {
			return false
		}
		if code != http.StatusNoContent {
			t.Fatalf("decommission %s: got %d %s, want 204", id, code, body)
		}
		return true
	})
	probes := 0
	c.waitFor(id+" refusing produce", func() bool {
		// A probe taken before the flag reached the node is a record
		// like any other: the history must know it.
		probes++
		pid := fmt.Sprintf("probe-%d", probes)
		code, _ := c.node(gone).do("POST", "/v1/topics/m/produce", history.MakeBody(pid, 16))
		if code == http.StatusAccepted {
			load.h.Produced(pid)
		}
		return code == http.StatusServiceUnavailable
	})
	store := c.node(j).n.Store()
	c.waitFor(id+" out of the members and of every shard's Raft configuration", func() bool {
		if _, ok := store.Member(id); ok {
			return false
		}
		for _, sh := range store.Shards() {
			rm, err := store.RaftMembership(context.Background(), sh)
			if err != nil {
				return false
			}
			if _, v := rm.Voters[uint64(gone+1)]; v || len(rm.Voters) != 3 {
				return false
			}
		}
		return true
	})
	load.down(gone)
	rep := load.finish()
	per, moving := c.owned(j, "m")
	t.Logf("after the decommission of %s: %v; %s", id, per, rep)
	if per[id] != 0 || moving != 0 || per["n4"] == 0 {
		t.Fatalf("owners: got %v with %d moving, want none on %s", per, moving, id)
	}
	if m, _ := store.Member("n4"); m.Role != messages.RoleVoter {
		t.Fatalf("n4: got role %q, want voter (promoted to keep three)", m.Role)
	}
}

// rule D7: a decommission that cannot progress says why, in the members
// listing of the admin verb, whichever node answers it.
func TestClusterABlockedDecommissionSaysWhyInTheMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	// Planning off: the draining node's partitions stay, so it waits.
	c := newTestCluster(t, 3, func(_ int, cfg *Config) {
		cfg.Controller.Rebalance = false
		cfg.Controller.RebalanceInterval = 100 * time.Millisecond
	})
	c.node(0).createTopic("t", 3)
	id := fmt.Sprintf("n%d", (c.leader()+1)%3+1)
	if err := c.node(0).n.Store().SetDraining(context.Background(), id, true); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect(c.node(0).cfg.NATSURL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var got messages.AdminMemberList
	c.waitFor(id+" listed with why its decommission waits", func() bool {
		msg, err := nc.Request("narad.test.admin.members", []byte("{}"), 5*time.Second)
		if err != nil || json.Unmarshal(msg.Data, &got) != nil {
			return false
		}
		for _, m := range got.Members {
			if m.ID == id {
				return m.Draining && m.DecommissionBlocked == "partitions_left"
			}
		}
		return false
	})
}

// rule D6 (the draining node's side): its drain service says it refuses
// produce only once its member record is draining, and counts as held
// every record accepted and not yet handed to its owner, including a
// produce admitted before the flag that has not answered yet: the leader
// must not count zero while such a produce may still answer 202.
func TestRuleD6TheDrainServiceCountsEveryAdmittedProduceUntilHandedOn(t *testing.T) {
	held, reached := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tn := newTestNode(t, func(c *Config) {
		c.faults = &faultHooks{produceAdmitted: func(_ string, body []byte) {
			if string(body) == `"held"` {
				once.Do(func() { close(reached) })
				<-held
			}
		}}
	})
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // before the node stops, should the test fail first
	tn.createTopic("d", 3)
	tn.must(http.StatusAccepted, "POST", "/v1/topics/d/produce?partition=0", []byte(`"first"`))
	waitFor(t, func() bool { return tn.n.drain.Status().Backlog == 0 }) // "first" handed on
	if got := tn.n.drain.Status(); got.Refusing {
		t.Fatalf("drain status of a node not draining: got %+v, want not refusing", got)
	}

	// A produce admitted before the flag, held before its WAL append.
	answered := make(chan int, 1)
	go func() {
		code, _, err := tn.attempt("POST", "/v1/topics/d/produce?partition=0", []byte(`"held"`))
		if err != nil {
			code = -1
		}
		answered <- code
	}()
	<-reached
	if err := tn.n.store.SetDraining(context.Background(), tn.cfg.NodeID, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, tn.n.draining)
	if got := tn.n.drain.Status(); !got.Refusing || got.Backlog < 1 {
		t.Fatalf("drain status with a produce admitted before the flag, not yet answered: got %+v, want refusing with a backlog of at least 1", got)
	}
	if code, body := tn.do("POST", "/v1/topics/d/produce?partition=0", []byte(`"late"`)); code != http.StatusServiceUnavailable {
		t.Fatalf("produce while draining: got %d %s, want 503", code, body)
	}

	release()
	if code := <-answered; code != http.StatusAccepted {
		t.Fatalf("the produce admitted before the flag: got %d, want 202", code)
	}
	waitFor(t, func() bool { return tn.n.drain.Status() == controller.DrainStatus{Refusing: true} })
	if got := hwmOf(t, tn, "d"); got != 2 {
		t.Fatalf("partition 0 once the drain service counts zero: got HWM %d, want 2 (first and held)", got)
	}
}

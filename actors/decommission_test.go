package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/bench/history"

	"github.com/naradmq/narad/messages"
)

// rule D8: a decommission that could never complete is refused up front.
func TestDecommissionVerdict(t *testing.T) {
	m := func(id string, replica uint64, status string) messages.Member {
		return messages.Member{ID: id, ReplicaID: replica, Status: status}
	}
	alive, dead := messages.MemberAlive, messages.MemberDead
	three := map[uint64]string{1: "a", 2: "b", 3: "c"}
	four := map[uint64]string{1: "a", 2: "b", 3: "c", 4: "d"}
	five := map[uint64]string{1: "a", 2: "b", 3: "c", 4: "d", 5: "e"}
	for _, tc := range []struct {
		name    string
		id      string
		members []messages.Member
		rv      raftView
		owned   int
		refused string // a word of the reason, "" for accepted
	}{
		{"a lone node", "n1", []messages.Member{m("n1", 1, alive)}, raftView{Voters: map[uint64]string{1: "a"}}, 3, "no other live member"},
		{"three voters and nobody to promote", "n2", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive)}, raftView{Voters: three}, 2, "too few voters"},
		{"three voters and a non-voter to promote", "n2", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, alive)},
			raftView{Voters: three, NonVoters: map[uint64]string{4: "d"}}, 2, ""},
		{"a non-voter leaves freely", "n4", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, alive)},
			raftView{Voters: three, NonVoters: map[uint64]string{4: "d"}}, 1, ""},
		{"a dead owner", "n4", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, dead)}, raftView{Voters: four}, 5, "dead"},
		{"a dead member that owns nothing", "n4", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, alive), m("n4", 4, dead)}, raftView{Voters: four}, 0, ""},
		{"no live majority left", "n1", []messages.Member{m("n1", 1, alive), m("n2", 2, alive), m("n3", 3, dead), m("n4", 4, dead), m("n5", 5, alive)},
			raftView{Voters: five}, 0, "no live majority"},
		{"not a member", "n9", []messages.Member{m("n1", 1, alive)}, raftView{Voters: map[uint64]string{1: "a"}}, 0, "not a member"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decommissionVerdict(tc.id, tc.members, tc.rv, tc.owned)
			switch {
			case tc.refused == "" && got != "":
				t.Fatalf("got refused: %s, want accepted", got)
			case tc.refused != "" && !strings.Contains(got, tc.refused):
				t.Fatalf("got %q, want a refusal saying %q", got, tc.refused)
			}
		})
	}
}

// rules D1-D6: a voter is decommissioned to zero under load: its
// partitions move off, it refuses produce, a non-voter is promoted so
// three voters stay, and it leaves the Raft configuration and the members.
func TestClusterADecommissionedVoterDrainsToZeroAndLeavesRaft(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four nodes")
	}
	c := newTestCluster(t, 3, func(_ int, cfg *Config) {
		cfg.MoveTick, cfg.RebalanceInterval = 100*time.Millisecond, 100*time.Millisecond
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
	c.node(j).must(http.StatusOK, "POST", "/v1/cluster/members/"+id+"/decommission?dry_run=1", nil)
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
		cfg.Rebalance = false
		cfg.RebalanceInterval = 100 * time.Millisecond
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

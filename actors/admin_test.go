package actors

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

// startTestNATS runs an embedded NATS server with the max_payload of the
// one narad embeds (cmd/narad: 8 MiB): NATS's default 1 MiB cannot carry a
// commit of the largest record, and nodes refuse to start on it.
func startTestNATS(t testing.TB) *natsserver.Server {
	return startNATSWithMaxPayload(t, 8<<20)
}

// startNATSWithMaxPayload runs an embedded NATS server whose max_payload
// is maxPayload bytes until the test ends.
func startNATSWithMaxPayload(t testing.TB, maxPayload int64) *natsserver.Server {
	t.Helper()
	return testnet.StartNATS(t, &natsserver.Options{MaxPayload: int32(maxPayload)})
}

// The admin verbs answer a plain NATS request with a JSON body, as the
// stock `nats req narad.<cluster>.admin.members '{}'` sends it.
func TestAdminVerbsAnswerAPlainNATSRequest(t *testing.T) {
	ns := startTestNATS(t)
	// The controller's pass would clear the hand-made move to a
	// non-member (rule T1): it runs once at start, then not for an hour.
	// The busy interval too: the topic's create marks the controller busy,
	// and a busy pass due late (a loaded machine, -race) would otherwise
	// land after the move is set.
	tn := newTestNode(t, func(c *Config) {
		c.NATSURL, c.Cluster = ns.ClientURL(), "test"
		c.Controller.RebalanceInterval, c.Controller.RebalanceBusyInterval = time.Hour, time.Hour
	})
	tn.createTopic("t", 3)
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	msg, err := nc.Request("narad.test.admin.members", []byte("{}"), 5*time.Second)
	if err != nil {
		t.Fatalf("admin members: %v", err)
	}
	var members messages.AdminMemberList
	if err := json.Unmarshal(msg.Data, &members); err != nil {
		t.Fatalf("admin members body %s: %v", msg.Data, err)
	}
	if len(members.Members) != 1 || members.Members[0].ID != "n1" || members.Members[0].OwnedPartitions != 3 ||
		members.Members[0].Role != messages.RoleVoter || members.Members[0].RaftAddr == "" {
		t.Fatalf("admin members: got %+v, want n1, a voter with its raft address, owning 3 partitions", members)
	}

	msg, err = nc.Request("narad.test.admin.status", nil, 5*time.Second)
	if err != nil {
		t.Fatalf("admin status: %v", err)
	}
	var st messages.AdminStatus
	if err := json.Unmarshal(msg.Data, &st); err != nil {
		t.Fatalf("admin status body %s: %v", msg.Data, err)
	}
	if st.Cluster != "test" || !st.Ready || st.Members != 1 || st.Alive != 1 || st.Topics != 1 || len(st.Shards) != 5 || st.MetadataLeader != "n1" {
		t.Fatalf("admin status: got %+v, want cluster test, ready, 1 alive member, 1 topic, 5 shards, n1 leading the metadata", st)
	}
	for _, sh := range st.Shards {
		if sh.Leader != 1 || sh.Role != "leader" || sh.Term == 0 {
			t.Fatalf("shard %d: got leader %d, role %q, term %d, want replica 1, leader, a term", sh.Shard, sh.Leader, sh.Role, sh.Term)
		}
	}

	msg, err = nc.Request("narad.test.admin.topics", []byte("{}"), 5*time.Second)
	if err != nil {
		t.Fatalf("admin topics: %v", err)
	}
	var topics messages.AdminTopicList
	if err := json.Unmarshal(msg.Data, &topics); err != nil {
		t.Fatalf("admin topics body %s: %v", msg.Data, err)
	}
	if len(topics.Topics) != 1 || topics.Topics[0].Name != "t" || topics.Topics[0].Partitions != 3 ||
		topics.Topics[0].Owners["n1"] != 3 || topics.Topics[0].Unplaced != 0 || topics.Topics[0].Incarnation == 0 {
		t.Fatalf("admin topics: got %+v, want t with 3 partitions, all on n1", topics)
	}

	// A move planned by hand (the planner comes with moves): both the
	// admin verb and GET /v1/cluster/moves list it.
	tt, _ := tn.n.store.Topic("t")
	if r, err := tn.n.store.SetTarget(context.Background(), messages.SetTarget{Incarnation: tt.Incarnation, Partition: 2, Owner: "n1", To: "n9"}); err != nil || r.Code != messages.ResultOK {
		t.Fatalf("set a target: got %+v, %v", r, err)
	}
	want := messages.MoveList{Moves: []messages.MoveInfo{{Topic: "t", Partition: 2, From: "n1", To: "n9",
		FromStatus: "alive", ToStatus: "not_a_member", Blocked: []string{"target_not_member"}}}}
	msg, err = nc.Request("narad.test.admin.moves", []byte("{}"), 5*time.Second)
	if err != nil {
		t.Fatalf("admin moves: %v", err)
	}
	var moves messages.MoveList
	if err := json.Unmarshal(msg.Data, &moves); err != nil || !reflect.DeepEqual(moves, want) {
		t.Fatalf("admin moves: got %+v (%v), want %+v", moves, err, want)
	}
	moves = messages.MoveList{}
	if err := json.Unmarshal(tn.must(http.StatusOK, "GET", "/v1/cluster/moves", nil), &moves); err != nil || !reflect.DeepEqual(moves, want) {
		t.Fatalf("GET /v1/cluster/moves: got %+v (%v), want %+v", moves, err, want)
	}
}

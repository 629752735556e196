package actors

import (
	"encoding/json"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/messages"
)

func startTestNATS(t *testing.T) *natsserver.Server {
	t.Helper()
	s, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats did not start")
	}
	t.Cleanup(s.Shutdown)
	return s
}

// The admin verbs answer a plain NATS request with a JSON body, as the
// stock `nats req narad.<cluster>.admin.members '{}'` sends it.
func TestAdminVerbsAnswerAPlainNATSRequest(t *testing.T) {
	ns := startTestNATS(t)
	tn := newTestNode(t, func(c *Config) { c.NATSURL, c.Cluster = ns.ClientURL(), "test" })
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
	var members adminMembersReply
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
	var st statusReply
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
}

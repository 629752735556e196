package actors

import (
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/naradmq/narad/messages"
)

// The faults of the nemesis run (bench/chaos, issue 30), each under load in
// the in-process harness, where a process is not needed: producers and
// consumers through every node, the history checked at the end (every
// record answered 202 delivered, no phantom, no offset reused). A test
// proves its fault when its name says "Fault" and the kind: go test
// ./actors -run TestFault lists them. Disk errors and clock steps, which a
// node turns on through /debug/faults, are in debugfaults_test.go. The
// kinds that need a process live elsewhere: kill in cmd/narad
// (TestKillMidRunLosesNoAcceptedRecord), stop (SIGSTOP past the dead
// timeout) only in bench/chaos.

// fault cut: a node's NATS connection is cut while its process, its
// metastore replica and its HTTP listener live on; it is marked dead, its
// partitions stay its own (a dead owner keeps its disk) and are served
// again once it is healed.
func TestFaultCutANodeOffNATSUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c, load := underFaultLoad(t)
	cut := (c.leader() + 1) % 3
	watcher := (cut + 1) % 3
	id := fmt.Sprintf("n%d", cut+1)
	c.cutOff(cut, true)
	c.waitFor(id+" dead while it is cut off", func() bool { return c.memberStatuses(watcher)[id] == messages.MemberDead })
	c.cutOff(cut, false)
	c.waitFor(id+" alive once healed", func() bool { return c.memberStatuses(watcher)[id] == messages.MemberAlive })
	rep := load.finish()
	t.Logf("%s cut off from NATS past the dead timeout: %s", id, rep)
}

// fault natskill: the NATS server every node reaches the others through
// is killed and, a moment later, started again on its port. Commits of a
// node's own partitions need no NATS; produce forwarded to another owner
// and every peer request fail meanwhile and are retried.
func TestFaultNATSServerKilledAndRestartedUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c, load := underFaultLoad(t)
	c.restartNATS(time.Second)
	load.waitProduced(400)
	rep := load.finish()
	t.Logf("NATS killed for 1 s: %s", rep)
}

// fault leader: the node that leads the metadata shard is killed under
// load and started again: another voter is elected, the controller's
// passes and the liveness judgement carry on there.
func TestFaultMetadataLeaderKilledUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	c, load := underFaultLoad(t)
	leader := c.leader()
	load.down(leader)
	c.kill(leader)
	c.waitFor("another node leading the metadata shard", func() bool { return c.leader() != leader })
	c.restart(leader)
	load.back(leader)
	rep := load.finish()
	t.Logf("metadata leader n%d killed: %s", leader+1, rep)
}

// underFaultLoad starts three nodes and a load on a topic of six
// partitions, and returns once 100 records were accepted: the faults of
// this file strike in the middle of it.
func underFaultLoad(t *testing.T) (*testCluster, *testLoad) {
	t.Helper()
	c := newTestCluster(t, 3)
	c.node(0).must(http.StatusCreated, "POST", "/v1/topics", []byte(`{"name":"f","partitions":6,"visibility_timeout_ms":2000}`))
	load := startLoad(c, "f", 2, 300)
	load.waitProduced(100)
	return c, load
}

// restartNATS kills the cluster's NATS server, and after down starts a
// new one on the same port, with the same options: the nodes reconnect
// to the URL they were given. The new server stops after the nodes.
func (c *testCluster) restartNATS(down time.Duration) {
	c.t.Helper()
	old := c.nats
	addr, ok := old.Addr().(*net.TCPAddr)
	if !ok {
		c.t.Fatalf("restart NATS: got listener address %v, want TCP", old.Addr())
	}
	// The options startTestNATS gives: NATS keeps its own copy unexported.
	opts := natsserver.Options{Host: addr.IP.String(), Port: addr.Port, MaxPayload: 8 << 20, NoSigs: true, NoLog: true}
	old.Shutdown()
	old.WaitForShutdown()
	time.Sleep(down)
	s, err := natsserver.NewServer(&opts)
	if err != nil {
		c.t.Fatalf("restart NATS on %s:%d: %v", opts.Host, opts.Port, err)
	}
	go s.Start()
	if !s.ReadyForConnections(clusterWaitBound) {
		s.Shutdown()
		c.t.Fatalf("NATS on %s:%d not ready again within %s", opts.Host, opts.Port, clusterWaitBound)
	}
	c.nats = s
	c.restartedNATS = append(c.restartedNATS, s)
}

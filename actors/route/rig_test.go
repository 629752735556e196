package route

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"
	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/cluster/metastore/metastoretest"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The package's test rig: two routers over one NATS server. n1's serves
// the real partition actors of a partitions supervisor of its own (its
// actor system, a metastore replica held in memory: metastoretest), as a
// node's router does; n2's reaches them through groups. No Node, no Raft.

// rigGroups are the node's default group bounds (actors.DefaultConfig).
var rigGroups = GroupConfig{CommitGroupMaxItems: 256, CommitGroupsInFlight: 2, MoveGroupMaxItems: 128, MoveGroupsInFlight: 4}

// rigTimeout is the node's default RequestTimeout; rigGroupWait its
// MoveGroupWaitFor.
const (
	rigTimeout   = 10 * time.Second
	rigGroupWait = time.Second
)

// groupRig is node n1 owning topic t over NATS, and a move source client
// of a node n2 that reaches it through groups.
type groupRig struct {
	t     *testing.T
	src   *Router // n1's, serving its partitions to peers
	topic messages.Topic
	g     *MoveGroups
	ns    string // the NATS URL
}

func newGroupRig(t *testing.T, partitions int) *groupRig {
	ns := testnet.StartNATS(t, &natsserver.Options{MaxPayload: 8 << 20})
	topic := messages.Topic{Name: "t", Incarnation: 1, Partitions: partitions}
	src := startSource(t, ns.ClientURL(), topic)
	client, err := transport.Connect(context.Background(), transport.Config{Cluster: "test", NodeID: "n2", URLs: []string{ns.ClientURL()}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	// n2's replica names n1 the owner of every partition of t, and of one
	// partition past them that n1 does not serve.
	owners := make([]string, partitions+1)
	for i := range owners {
		owners[i] = "n1"
	}
	f := metastoretest.NewReplica()
	f.Put(topic, owners...)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testnet.Logger(t) }))
	t.Cleanup(sys.Shutdown)
	r := &Router{Self: "n2", System: sys, Replica: f, NATS: client, Timeout: 5 * time.Second}
	return &groupRig{t: t, src: src, topic: topic, g: NewMoveGroups(r, rigGroups, nil), ns: ns.ClientURL()}
}

// startSource is node n1: a partitions supervisor serving every partition
// of topic, and its router serving them to peers over NATS at url, as a
// node wires them (actors/node.go). It returns once each partition answers.
func startSource(t *testing.T, url string, topic messages.Topic) *Router {
	t.Helper()
	nats, err := transport.Connect(context.Background(), transport.Config{Cluster: "test", NodeID: "n1", URLs: []string{url}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nats.Close)
	replica := metastoretest.NewReplica()
	owners := make([]string, topic.Partitions)
	for i := range owners {
		owners[i] = "n1"
	}
	replica.Put(topic, owners...)
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testnet.Logger(t) }))
	r := &Router{Self: "n1", System: sys, Replica: replica, NATS: nats, Timeout: rigTimeout, LeaseTimeout: 2 * time.Second, GroupWait: rigGroupWait}
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return partition.NewSupervisor(sourceDeps(t, r), replica, new(atomic.Int64))
	}), partition.SupervisorName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sys.Root.StopFuture(pid).Wait()
		sys.Shutdown()
	})
	if err := r.Serve(); err != nil {
		t.Fatal(err)
	}
	for p := range topic.Partitions {
		k := messages.PartitionKey{Topic: topic.Name, Incarnation: topic.Incarnation, Partition: p}
		testnet.Eventually(t, 20*time.Second, fmt.Sprintf("partition %d served on n1", p), func() bool {
			_, err := r.Local(context.Background(), k, &messages.GetStats{})
			return err == nil
		})
	}
	return r
}

// sourceDeps is what n1's node would hand its partitions supervisor, with
// the node's defaults: no pacer, no sync lane, no open bound, no figures,
// no commit notices; r is the fan-out's route.
func sourceDeps(t *testing.T, r *Router) partition.Deps {
	set := metrics.NewSet()
	counter := func() *metrics.Counter {
		return set.NewCounter(fmt.Sprintf("rig_counter_%d", len(set.ListMetricNames())))
	}
	m := partition.Metrics{CommitSeconds: set.NewPrometheusHistogram(`narad_commit_seconds{node="n1"}`)}
	for _, c := range []**metrics.Counter{&m.CommitRecords, &m.CommitsExpired, &m.CommitFailures, &m.Consumed,
		&m.Acked, &m.Nacked, &m.Extended, &m.Redelivered, &m.CorruptSkipped,
		&m.FrozenPublishRefused, &m.HandoverSetAside, &m.HandoverSetAsideRecs, &m.AcksRepeated, &m.LeasesRestored,
		&m.RecordsAlreadyCommitted} {
		*c = counter()
	}
	mc := move.DefaultConfig()
	return partition.Deps{Config: partition.DefaultConfig(), NodeID: "n1", DataDir: t.TempDir(), LogConfig: storage.DefaultLogConfig(),
		Consumer: storage.DefaultConsumerConfig(), RequestTimeout: rigTimeout, MoveTick: time.Second,
		MoveChunkBytes: 768 << 10, FreezeTTL: mc.FreezeTTL, ConfirmRetry: mc.RetryAfter,
		FreezeHoldFor: 2 * time.Second, Logger: testnet.Logger(t), Clock: clock.Wall{}, Metrics: m,
		Fanout: fanout.Deps{Config: fanout.DefaultConfig(), RequestTimeout: rigTimeout, Logger: testnet.Logger(t),
			Route: r, PartitionOf: func(string, int) int { return 0 },
			Metrics: fanout.Metrics{Copied: counter(), Failures: counter(), Skipped: counter(), Panics: counter(), Lags: fanout.NewLags("n1", set)}}}
}

// newGroupMetrics are group series of a set of their own.
func newGroupMetrics() *GroupMetrics {
	set := metrics.NewSet()
	return &GroupMetrics{CommitGroups: set.NewCounter("commit_groups"), CommitGroupItems: set.NewCounter("commit_group_items"),
		MoveGroups: set.NewCounter("move_groups"), MoveGroupItems: set.NewCounter("move_group_items")}
}

func (r *groupRig) key(p int) messages.PartitionKey {
	return messages.PartitionKey{Topic: r.topic.Name, Incarnation: r.topic.Incarnation, Partition: p}
}

// calls are groupCalls for a listing of each partition.
func (r *groupRig) calls(parts ...int) []*groupCall {
	out := make([]*groupCall, len(parts))
	for i, p := range parts {
		msg := &messages.ListPartition{}
		out[i] = &groupCall{ctx: context.Background(), req: requestOf(r.key(p), msg), done: make(chan struct{})}
	}
	return out
}

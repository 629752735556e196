package partition

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/fanout"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/cluster/metastore/metastoretest"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The package's test rig: the partitions supervisor of one node, n1, in an
// actor system of its own, over a metastore replica held in memory
// (fakeReplica: `cluster/metastore/metastoretest`), with the fan-out's route a
// stand-in for the node's router (rigRoute). No Node, no Raft, no NATS.

// fakeReplica is the tests' metastore replica in memory.
type fakeReplica = metastoretest.Replica

func newFakeReplica() *fakeReplica { return metastoretest.NewReplica() }

// supervisorRig is the partitions supervisor of node n1 alone, in an actor
// system of its own, over a fake replica.
type supervisorRig struct {
	t       testing.TB
	replica *fakeReplica
	system  *actor.ActorSystem
	owned   *atomic.Int64
	dataDir string
	// fanoutPanics is the fan-out's panics counter, read by the tests.
	fanoutPanics *metrics.Counter
	// leasesRestored is narad_leases_restored_total, read by the tests.
	leasesRestored *metrics.Counter
	// alreadyCommitted is narad_commit_records_already_committed_total.
	alreadyCommitted *metrics.Counter
}

// rigDeps is what a node would hand its supervisor, with the node's
// defaults: the rig's data dir and logger, no pacer, no sync lane, no
// open bound, no figures, no commit notices.
func rigDeps(t testing.TB, dataDir string) Deps {
	mc := move.DefaultConfig()
	return Deps{Config: DefaultConfig(), NodeID: "n1", DataDir: dataDir, LogConfig: storage.DefaultLogConfig(),
		Consumer: storage.DefaultConsumerConfig(), RequestTimeout: 10 * time.Second, MoveTick: time.Second,
		MoveChunkBytes: 768 << 10, FreezeTTL: mc.FreezeTTL, ConfirmRetry: mc.RetryAfter,
		FreezeHoldFor: 2 * time.Second, Logger: testnet.Logger(t), Clock: clock.Wall{}}
}

func newSupervisorRig(t testing.TB, tweak ...func(*Deps)) *supervisorRig {
	t.Helper()
	return newSupervisorRigOver(t, newFakeReplica(), tweak...)
}

// newSupervisorRigOver is the rig over replica, which may already place
// partitions here: the supervisor's first pass finds them (a node's
// start). It returns once that pass ran, so a topic put after it is one
// created while the node runs.
func newSupervisorRigOver(t testing.TB, replica *fakeReplica, tweak ...func(*Deps)) *supervisorRig {
	t.Helper()
	r := &supervisorRig{t: t, replica: replica, system: actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testnet.Logger(t) })),
		owned: new(atomic.Int64), dataDir: t.TempDir()}
	set := metrics.NewSet()
	r.fanoutPanics = set.NewCounter(`narad_fanout_actor_panics_total{node="n1"}`)
	d := rigDeps(t, r.dataDir)
	// A rig's partitions open at their create, as its tests ask them by
	// their actor; a test of the create at rest turns it back on.
	d.Config.CreatedAtRest = false
	d.Metrics = Metrics{CommitSeconds: set.NewPrometheusHistogram(`narad_commit_seconds{node="n1"}`)}
	for _, c := range []**metrics.Counter{&d.Metrics.CommitRecords, &d.Metrics.CommitsExpired, &d.Metrics.CommitFailures, &d.Metrics.Consumed,
		&d.Metrics.Acked, &d.Metrics.Nacked, &d.Metrics.Extended, &d.Metrics.Redelivered, &d.Metrics.CorruptSkipped,
		&d.Metrics.FrozenPublishRefused, &d.Metrics.HandoverSetAside, &d.Metrics.HandoverSetAsideRecs, &d.Metrics.AcksRepeated, &d.Metrics.LeasesRestored,
		&d.Metrics.RecordsAlreadyCommitted} {
		*c = set.NewCounter(fmt.Sprintf("rig_counter_%d", len(set.ListMetricNames())))
	}
	r.leasesRestored = d.Metrics.LeasesRestored
	r.alreadyCommitted = d.Metrics.RecordsAlreadyCommitted
	d.Fanout = fanout.Deps{Config: fanout.DefaultConfig(), RequestTimeout: time.Second, Logger: testnet.Logger(t),
		Route: rigRoute{system: r.system, replica: r.replica}, PartitionOf: partitionForKey,
		Metrics: fanout.Metrics{Copied: set.NewCounter("copied"), Failures: set.NewCounter("failures"), Skipped: set.NewCounter("skipped"),
			Panics: r.fanoutPanics, Lags: fanout.NewLags("n1", set)}}
	for _, f := range tweak {
		f(&d)
	}
	r.dataDir = d.DataDir
	pid, err := r.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor {
		return NewSupervisor(d, r.replica, r.owned)
	}), SupervisorName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = r.system.Root.StopFuture(pid).Wait()
		r.system.Shutdown()
	})
	if _, err := Request(context.Background(), r.system.Root, pid, Reconcile{}, 10*time.Second); err != nil {
		t.Fatalf("the supervisor's first pass: %v", err)
	}
	return r
}

// serving reports whether partition p of t has an actor here that answers.
func (r *supervisorRig) serving(t messages.Topic, p int) bool {
	k := messages.PartitionKey{Topic: t.Name, Incarnation: t.Incarnation, Partition: p}
	_, err := Request(context.Background(), r.system.Root, PID(r.system, k), &messages.GetStats{}, time.Second)
	return err == nil
}

// ask sends msg to partition k's actor and returns its answer.
func (r *supervisorRig) ask(k messages.PartitionKey, msg any) any {
	r.t.Helper()
	res, err := Request(context.Background(), r.system.Root, PID(r.system, k), msg, 5*time.Second)
	if err != nil {
		r.t.Fatalf("ask %T: %v", msg, err)
	}
	return res
}

// commit commits one record of sequence seq to partition k and returns
// the answer's status.
func (r *supervisorRig) commit(k messages.PartitionKey, seq uint64) messages.Status {
	r.t.Helper()
	return r.ask(k, &messages.Commit{Key: k, Records: []messages.CommitRecord{{Seq: seq, Body: []byte(`"x"`)}}}).(*messages.CommitResult).Status
}

// servedWithOneRecord puts topic orders (incarnation 7, one partition)
// on n1, waits until it is served here, and commits record 1 to it.
func (r *supervisorRig) servedWithOneRecord() (messages.Topic, messages.PartitionKey) {
	r.t.Helper()
	orders := messages.Topic{Name: "orders", Incarnation: 7, Partitions: 1}
	r.replica.Put(orders, "n1")
	r.waitServing(orders, 0, true)
	k := messages.PartitionKey{Topic: "orders", Incarnation: 7, Partition: 0}
	if got := r.commit(k, 1); got != messages.StatusOK {
		r.t.Fatalf("commit before the move: got status %d, want OK", got)
	}
	return orders, k
}

// waitServing waits until partition p of t is served here, or not, as want
// says.
func (r *supervisorRig) waitServing(t messages.Topic, p int, want bool) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for r.serving(t, p) != want {
		if time.Now().After(deadline) {
			r.t.Fatalf("partition %s/%d served here: got %v, want %v", t.Name, p, !want, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// errNoOwner is a partition without an owner, as the router answers it.
var errNoOwner = errors.New("partition has no owner")

// rigRoute stands in for the node's router as the fan-out's route: a
// partition owned by n1 is asked here, one without an owner is refused
// (the router of a node without NATS does the same), and a key's
// partition keeps to itself unless its owner reads dead.
type rigRoute struct {
	system  *actor.ActorSystem
	replica *fakeReplica
}

func (rr rigRoute) Topic(name string) (messages.Topic, bool) { return rr.replica.Topic(name) }

func (rr rigRoute) LivePartition(t messages.Topic, p int) int {
	for i := 0; i < t.Partitions; i++ {
		q := (p + i) % t.Partitions
		a, _ := rr.replica.Assignment(t.Incarnation, q)
		if m, ok := rr.replica.Member(a.Owner); ok && m.Status != messages.MemberDead {
			return q
		}
		if a.Owner == "n1" {
			return q
		}
	}
	return p
}

func (rr rigRoute) Ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error) {
	if a, _ := rr.replica.Assignment(k.Incarnation, k.Partition); a.Owner == "" {
		return nil, fmt.Errorf("%s/%d: %w", k.Topic, k.Partition, errNoOwner)
	}
	return Request(ctx, rr.system.Root, PID(rr.system, k), msg, time.Second)
}

// partitionForKey is the produce rule (produce.PartitionForKey), which the
// node hands the fan-out as its PartitionOf.
func partitionForKey(key string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}

// fakeClock is a clock the test moves (cluster/testnet.Clock).
type fakeClock = testnet.Clock

func newFakeClock() *fakeClock { return testnet.NewClock() }

package mover

import (
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/cluster/membership"
	"github.com/naradmq/narad/cluster/metastore/metastoretest"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The package's test rig: the Deps of a node as actors.DefaultConfig
// makes them, a fake replica of the metastore, the node's series in a set
// of their own, and the acts under the topic guard as the node runs them.
// The runner and worker tests run on it without a node or a cluster.

// testDeps are a node's Deps at its defaults (actors.DefaultConfig: a 1 s
// MoveTick, 10 s RequestTimeout, 768 KiB chunks), on node "n1" with data
// under dir; the runner's store, source and logger are the test's.
func testDeps(dir string) Deps {
	return Deps{NodeID: "n1", DataDir: dir, LogConfig: storage.DefaultLogConfig(), RequestTimeout: 10 * time.Second,
		Tick: time.Second, DeadTimeout: membership.Config{}.WithDefaults().DeadTimeout, Move: move.DefaultConfig(),
		ChunkBytes: 768 << 10, Config: DefaultConfig(), Logger: slog.New(slog.DiscardHandler), Guards: storage.NewGuards(),
		Metrics: newTestMetrics()}
}

// newTestMetrics are the runner's and workers' series in a set of their
// own, named as the node names them.
func newTestMetrics() Metrics {
	set := metrics.NewSet()
	m := Metrics{InFlight: set.NewGauge("narad_moves_in_flight", nil), Done: set.NewCounter("narad_moves_done_total"),
		Bytes: set.NewCounter("narad_move_bytes_copied_total"), NonConverged: set.NewCounter("narad_move_nonconverged_cutovers_total"),
		Seconds: set.NewPrometheusHistogram("narad_move_seconds"), FreezeSeconds: set.NewPrometheusHistogram("narad_move_freeze_seconds"),
		Passes: set.NewPrometheusHistogram("narad_move_passes"), LastFreeze: set.NewGauge("narad_move_last_freeze_seconds", nil),
		InstallNotWhole: set.NewCounter("narad_move_install_not_whole_total"), StagingSetAside: set.NewCounter("narad_move_staging_set_aside_total")}
	for ph := range m.PhaseSeconds {
		m.PhaseSeconds[ph] = set.NewPrometheusHistogram(fmt.Sprintf(`narad_move_phase_seconds{phase=%q}`, move.Phase(ph)))
	}
	m.Blocked = func(reason string, delta float64) {
		set.GetOrCreateGauge(fmt.Sprintf(`narad_moves_blocked{reason=%q}`, reason), nil).Add(delta)
	}
	return m
}

// newTestSystem is an actor system that logs to the test.
func newTestSystem(t *testing.T) *actor.ActorSystem {
	return actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return testnet.Logger(t) }))
}

// fakeReplica is the local replica the runner and workers read, the
// tests' metastore replica in memory (metastoretest.Replica): topics,
// members and assignments, and a version that moves with each change.
type fakeReplica = metastoretest.Replica

func newFakeReplica() *fakeReplica { return metastoretest.NewReplica() }

// rigDirs are the acts under the topic guard as the node runs them
// (actors/guard.go: prepareTopicDir, renameBackUnderGuard), over the
// rig's replica.
type rigDirs struct {
	dataDir string
	guards  *storage.Guards
	topics  interface {
		Topic(name string) (messages.Topic, bool)
	}
}

func (r rigDirs) Prepare(k messages.PartitionKey) error {
	unlock := r.guards.Lock(k.Topic)
	defer unlock()
	if t, ok := r.topics.Topic(k.Topic); !ok || t.Incarnation != k.Incarnation {
		return fmt.Errorf("prepare the directory of topic %s for incarnation %d: the topic record names %d (found %v): %w",
			k.Topic, k.Incarnation, t.Incarnation, ok, storage.ErrGuardRefused)
	}
	if r.guards.OtherIncarnationOpen(k.Topic, k.Incarnation) {
		return fmt.Errorf("prepare the directory of topic %s for incarnation %d: a partition of another incarnation is still open in it: %w",
			k.Topic, k.Incarnation, storage.ErrGuardRefused)
	}
	if _, err := storage.PrepareTopicDir(r.dataDir, k.Topic, k.Incarnation); err != nil {
		return fmt.Errorf("prepare the directory of topic %s: %w", k.Topic, err)
	}
	return nil
}

func (r rigDirs) Reclaim(k messages.PartitionKey, reclaim func(path string) (bool, error)) (bool, error) {
	unlock := r.guards.Lock(k.Topic)
	defer unlock()
	if err := r.guards.PathFree(r.dataDir, k.Topic, k.Incarnation, k.Partition, false); err != nil {
		return false, fmt.Errorf("reclaim: %w", err)
	}
	return reclaim(storage.PartitionPath(r.dataDir, k.Topic, k.Partition))
}

func (r rigDirs) RenameBack(k messages.PartitionKey, installed os.FileInfo) error {
	unlock := r.guards.Lock(k.Topic)
	defer unlock()
	if err := r.guards.PathFree(r.dataDir, k.Topic, k.Incarnation, k.Partition, false); err != nil {
		return fmt.Errorf("rename back: %w", err)
	}
	path := storage.PartitionPath(r.dataDir, k.Topic, k.Partition)
	now, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("rename back %s: %w", path, err)
	}
	if installed == nil || !os.SameFile(now, installed) {
		return fmt.Errorf("rename back %s: the path no longer names the directory the install put there: %w", path, storage.ErrGuardRefused)
	}
	return storage.RenameBack(path, storage.StagingPath(r.dataDir, k.Topic, k.Partition))
}

package actors

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// guardRig is a data dir with a topic directory prepared for one
// incarnation and a staged copy of its partition 0, and the deps of a node.
type guardRig struct {
	t       *testing.T
	d       deps
	key     messages.PartitionKey
	staging *storage.Staging
}

func newGuardRig(t *testing.T) *guardRig {
	t.Helper()
	cfg := DefaultConfig()
	cfg.DataDir = t.TempDir()
	r := &guardRig{t: t, d: deps{cfg: cfg, log: testLogger(t), guards: storage.NewGuards()},
		key: messages.PartitionKey{Topic: "g", Incarnation: 7, Partition: 0}}
	if _, err := storage.PrepareTopicDir(cfg.DataDir, "g", 7); err != nil {
		t.Fatal(err)
	}
	s, _, err := storage.OpenStaging(storage.StagingPath(cfg.DataDir, "g", 0), cfg.Log, "a move")
	if err != nil {
		t.Fatal(err)
	}
	r.staging = s
	return r
}

// install puts the staged copy at the partition's path as a move's
// install does (actors/mover, which runs it under the guard; nothing else
// holds it here).
func (r *guardRig) install() error {
	_, err := r.staging.Install(r.path(), storage.InstallOptions{Now: time.Now()})
	return err
}

func (r *guardRig) path() string {
	return storage.PartitionPath(r.d.cfg.DataDir, r.key.Topic, r.key.Partition)
}

// rule V9: the rename back moves the install off the path only while the
// marker names its incarnation and the path still names the directory the
// install put there; refused, it moves nothing.
func TestRuleV9TheRenameBackMovesOnlyTheDirectoryTheInstallPutThere(t *testing.T) {
	r := newGuardRig(t)
	if err := r.install(); err != nil {
		t.Fatal(err)
	}
	installed, err := os.Stat(r.path())
	if err != nil {
		t.Fatal(err)
	}
	// The path now names another directory (the copy went with its
	// incarnation's directory, and a successor's partition sits there).
	if err := os.Rename(r.path(), r.path()+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(r.path(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := r.d.guard().RenameBackUnderGuard(r.key, installed); !errors.Is(err, partition.ErrGuardRefused) {
		t.Fatalf("rename back of a path naming another directory: got %v, want refused", err)
	}
	if _, err := os.Stat(r.path()); err != nil {
		t.Fatalf("the path after a refused rename back: %v, want it untouched", err)
	}
	// Back as the install left it, but under another incarnation's marker.
	os.Remove(r.path())
	if err := os.Rename(r.path()+".moved", r.path()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(storage.TopicPath(r.d.cfg.DataDir, "g")+"/incarnation", []byte("8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.d.guard().RenameBackUnderGuard(r.key, installed); !errors.Is(err, partition.ErrGuardRefused) {
		t.Fatalf("rename back under incarnation 8's marker: got %v, want refused", err)
	}
	if err := os.WriteFile(storage.TopicPath(r.d.cfg.DataDir, "g")+"/incarnation", []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.d.guard().RenameBackUnderGuard(r.key, installed); err != nil {
		t.Fatalf("rename back of the install itself: %v", err)
	}
	if _, err := os.Stat(storage.StagingPath(r.d.cfg.DataDir, "g", 0)); err != nil {
		t.Fatalf("staging after the rename back: %v", err)
	}
}

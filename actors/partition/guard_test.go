package partition

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// guardRig is a data dir with a topic directory prepared for one
// incarnation and a staged copy of its partition 0, and the node's guard
// over it.
type guardRig struct {
	t       *testing.T
	g       Guard
	key     messages.PartitionKey
	staging *storage.Staging
}

func newGuardRig(t *testing.T) *guardRig {
	t.Helper()
	r := &guardRig{t: t, g: Guard{Guards: storage.NewGuards(), DataDir: t.TempDir(), Log: testnet.Logger(t)},
		key: messages.PartitionKey{Topic: "g", Incarnation: 7, Partition: 0}}
	if _, err := storage.PrepareTopicDir(r.g.DataDir, "g", 7); err != nil {
		t.Fatal(err)
	}
	s, _, err := storage.OpenStaging(storage.StagingPath(r.g.DataDir, "g", 0), storage.DefaultLogConfig(), "a move")
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
	return storage.PartitionPath(r.g.DataDir, r.key.Topic, r.key.Partition)
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
	if err := r.g.RenameBackUnderGuard(r.key, installed); !errors.Is(err, ErrGuardRefused) {
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
	if err := os.WriteFile(storage.TopicPath(r.g.DataDir, "g")+"/incarnation", []byte("8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.g.RenameBackUnderGuard(r.key, installed); !errors.Is(err, ErrGuardRefused) {
		t.Fatalf("rename back under incarnation 8's marker: got %v, want refused", err)
	}
	if err := os.WriteFile(storage.TopicPath(r.g.DataDir, "g")+"/incarnation", []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := r.g.RenameBackUnderGuard(r.key, installed); err != nil {
		t.Fatalf("rename back of the install itself: %v", err)
	}
	if _, err := os.Stat(storage.StagingPath(r.g.DataDir, "g", 0)); err != nil {
		t.Fatalf("staging after the rename back: %v", err)
	}
}

// staticTopics is a topic record table for Guard.PrepareTopicDir.
type staticTopics map[string]messages.Topic

func (s staticTopics) Topic(name string) (messages.Topic, bool) { t, ok := s[name]; return t, ok }

// rule V10: the preparation re-reads the topic record under the guard and
// refuses unless it names the incarnation the move read, and refuses while
// a partition of another incarnation is open in the directory; otherwise
// it sets a deleted incarnation's directory aside and stamps its own.
func TestRuleV10ThePreparationRereadsTheRecordUnderTheGuard(t *testing.T) {
	r := newGuardRig(t)
	k8 := messages.PartitionKey{Topic: "g", Incarnation: 8, Partition: 0}
	if err := r.g.PrepareTopicDir(staticTopics{"g": {Name: "g", Incarnation: 9}}, k8); !errors.Is(err, ErrGuardRefused) {
		t.Fatalf("prepare for 8 with the record naming 9: got %v, want refused", err)
	}
	if err := r.g.PrepareTopicDir(staticTopics{}, k8); !errors.Is(err, ErrGuardRefused) {
		t.Fatalf("prepare for 8 with no record: got %v, want refused", err)
	}
	r.g.Guards.MarkOpen("g", 7, 1)
	if err := r.g.PrepareTopicDir(staticTopics{"g": {Name: "g", Incarnation: 8}}, k8); !errors.Is(err, ErrGuardRefused) {
		t.Fatalf("prepare for 8 with a partition of 7 open: got %v, want refused", err)
	}
	if inc, _, _ := storage.TopicIncarnation(r.g.DataDir, "g"); inc != 7 {
		t.Fatalf("the marker after refused preparations: got %d, want 7 untouched", inc)
	}
	r.g.Guards.MarkClosed("g", 7, 1)
	if err := r.g.PrepareTopicDir(staticTopics{"g": {Name: "g", Incarnation: 8}}, k8); err != nil {
		t.Fatalf("prepare for 8 with the record naming 8: %v", err)
	}
	if inc, _, _ := storage.TopicIncarnation(r.g.DataDir, "g"); inc != 8 {
		t.Fatalf("the marker after the preparation: got %d, want 8", inc)
	}
	stale, err := storage.StaleDirs(r.g.DataDir)
	if err != nil || len(stale) != 1 || stale[0].Incarnation != 7 {
		t.Fatalf("set aside: got %+v (%v), want incarnation 7's directory", stale, err)
	}
}

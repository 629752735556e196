package mover

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// guardRig is a data dir with a topic directory prepared for one
// incarnation and a staged copy of its partition 0, and the Deps of a
// node's install (no batcher: each copy installs alone).
type guardRig struct {
	t       *testing.T
	d       Deps
	key     messages.PartitionKey
	staging *storage.Staging
}

func newGuardRig(t *testing.T) *guardRig {
	t.Helper()
	dir := t.TempDir()
	r := &guardRig{t: t, d: Deps{DataDir: dir, LogConfig: storage.DefaultLogConfig(), Guards: storage.NewGuards()},
		key: messages.PartitionKey{Topic: "g", Incarnation: 7, Partition: 0}}
	if _, err := storage.PrepareTopicDir(dir, "g", 7); err != nil {
		t.Fatal(err)
	}
	s, _, err := storage.OpenStaging(storage.StagingPath(dir, "g", 0), r.d.LogConfig, "a move")
	if err != nil {
		t.Fatal(err)
	}
	r.staging = s
	return r
}

func (r *guardRig) install() error {
	_, err := (*InstallBatcher)(nil).install(r.d, r.key, r.staging, storage.InstallOptions{Now: time.Now()})
	return err
}

func (r *guardRig) path() string {
	return storage.PartitionPath(r.d.DataDir, r.key.Topic, r.key.Partition)
}

// rule V9: the install acts on the partition's path only under the topic's
// guard, while the topic directory's marker names the incarnation the move
// prepared it for and no log is open there; refused, it changes nothing
// and the copy stays staged for the next attempt.
func TestRuleV9TheInstallRunsOnlyUnderTheGuardsChecks(t *testing.T) {
	t.Run("the marker names another incarnation", func(t *testing.T) {
		r := newGuardRig(t)
		if _, err := storage.PrepareTopicDir(r.d.DataDir, "g", 8); err != nil { // deleted and recreated
			t.Fatal(err)
		}
		if err := r.install(); !errors.Is(err, storage.ErrGuardRefused) {
			t.Fatalf("install of incarnation 7 under incarnation 8's marker: got %v, want refused", err)
		}
		if _, err := os.Stat(r.path()); !os.IsNotExist(err) {
			t.Fatalf("the path after a refused install: got %v, want nothing there", err)
		}
		if _, err := os.Stat(r.staging.Dir()); err != nil {
			t.Fatalf("the staged copy after a refused install: got %v, want it kept", err)
		}
	})
	t.Run("a log is open at the path", func(t *testing.T) {
		r := newGuardRig(t)
		r.d.Guards.MarkOpen("g", 7, 0)
		if err := r.install(); !errors.Is(err, storage.ErrGuardRefused) {
			t.Fatalf("install under an open log: got %v, want refused", err)
		}
		r.d.Guards.MarkClosed("g", 7, 0)
		if err := r.install(); err != nil {
			t.Fatalf("install once the log closed: %v", err)
		}
		if _, err := os.Stat(r.path()); err != nil {
			t.Fatalf("the path after the install: %v", err)
		}
	})
	t.Run("the install waits for the guard", func(t *testing.T) {
		r := newGuardRig(t)
		unlock := r.d.Guards.Lock("g")
		done := make(chan error, 1)
		go func() { done <- r.install() }()
		select {
		case err := <-done:
			unlock()
			t.Fatalf("install while another holds the guard: got %v before the release, want it to wait", err)
		case <-time.After(50 * time.Millisecond):
		}
		unlock()
		if err := <-done; err != nil {
			t.Fatalf("install after the release: %v", err)
		}
	})
}

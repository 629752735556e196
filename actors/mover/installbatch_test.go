package mover

import (
	"errors"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// An install is read back under the guard before it counts: a batch that
// reports a copy installed while the path holds it short, or not at all
// (issue 26: a second install of the same copy set the first one's aside),
// answers that copy ErrInvariant, and its move is not flipped.
func TestAnInstallThatLeftNoWholeCopyAtThePathIsNotDone(t *testing.T) {
	d := testDeps(t.TempDir())
	k := messages.PartitionKey{Topic: "t", Incarnation: 3, Partition: 0}
	if _, err := storage.PrepareTopicDir(d.DataDir, k.Topic, k.Incarnation); err != nil {
		t.Fatal(err)
	}
	target := storage.PartitionPath(d.DataDir, k.Topic, k.Partition)
	item := guardedInstall{key: k, item: storage.InstallItem{Target: target,
		Options: storage.InstallOptions{Marker: storage.Marker{PromotedHWM: 2}, Now: time.Now()}}}
	// The batch says it installed the copy but left the path as it was.
	reportsDone := func(items []storage.InstallItem) ([]storage.InstallResult, []error) {
		return make([]storage.InstallResult, len(items)), make([]error, len(items))
	}
	if out := installGuarded(d, []guardedInstall{item}, reportsDone); !errors.Is(out[0].err, errInvariant) {
		t.Fatalf("nothing at the path: got %v, want ErrInvariant", out[0].err)
	}
	l, err := storage.OpenLog(target, d.LogConfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(time.Now(), []storage.Entry{{Body: []byte(`"one"`)}}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if out := installGuarded(d, []guardedInstall{item}, reportsDone); !errors.Is(out[0].err, errInvariant) {
		t.Fatalf("a copy at hwm 1 where 2 was installed: got %v, want ErrInvariant", out[0].err)
	}
	l, _ = storage.OpenLog(target, d.LogConfig)
	l.Append(time.Now(), []storage.Entry{{Body: []byte(`"two"`)}})
	l.Close()
	if out := installGuarded(d, []guardedInstall{item}, reportsDone); out[0].err != nil {
		t.Fatalf("the copy whole at hwm 2: got %v, want it done", out[0].err)
	}
}

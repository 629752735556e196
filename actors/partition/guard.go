package partition

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// Every act on a partition's directory runs under its topic's open guard
// (storage.Guards, one per node, in Deps; rules V9, V10, S6): the partition
// actor's open, the preparation of the topic directory, a move's install
// and rename back, and the sweep's reclaim. Under the guard each re-checks
// what it relies on (the topic record, the directory's incarnation
// marker, that no log is open at the path) and refuses otherwise: a topic
// deleted and recreated under the same name meanwhile keeps its name and
// so its guard, and its successor's directory is never moved, stamped or
// removed by an act meant for the deleted incarnation.

// ErrGuardRefused is an act the guard's checks refused; the caller
// retries or gives up, and nothing was changed. It is storage's sentinel,
// so that the refusals of Guards.PathFree and of the sweeper
// (actors/sweeper) are the same error as this package's own.
var ErrGuardRefused = storage.ErrGuardRefused

// TopicRecords is what the guard re-reads of the topic record.
type TopicRecords interface {
	Topic(name string) (messages.Topic, bool)
}

// Guard is a node's topic open guard over its data dir, with the logger
// a set-aside is reported to. A move's install and rename back (the root
// package's mover) use it as the partition actors do.
type Guard struct {
	Guards  *storage.Guards
	DataDir string
	Log     *slog.Logger
}

// PrepareTopicDir makes the topic's directory belong to k's incarnation
// (storage.PrepareTopicDir) under the guard: only while the local replica's
// record still names that incarnation, re-read under the guard (rule V10),
// and while no partition of another incarnation is open in it. A directory
// of another incarnation, or one without a marker holding files, is set
// aside, never deleted, and logged. The partitions supervisor calls it
// before it opens a partition, and a move before it installs one.
func (d Guard) PrepareTopicDir(topics TopicRecords, k messages.PartitionKey) error {
	unlock := d.Guards.Lock(k.Topic)
	defer unlock()
	if t, ok := topics.Topic(k.Topic); !ok || t.Incarnation != k.Incarnation {
		return fmt.Errorf("prepare the directory of topic %s for incarnation %d: the topic record names %d (found %v): %w",
			k.Topic, k.Incarnation, t.Incarnation, ok, ErrGuardRefused)
	}
	if d.Guards.OtherIncarnationOpen(k.Topic, k.Incarnation) {
		return fmt.Errorf("prepare the directory of topic %s for incarnation %d: a partition of another incarnation is still open in it: %w",
			k.Topic, k.Incarnation, ErrGuardRefused)
	}
	res, err := storage.PrepareTopicDir(d.DataDir, k.Topic, k.Incarnation)
	if res.SetAside != "" {
		d.Log.Warn("set aside a topic directory that was not this incarnation's", "topic", k.Topic, "found", res.Found, "serving", k.Incarnation, "set_aside", res.SetAside)
	}
	if err != nil {
		return fmt.Errorf("prepare the directory of topic %s: %w", k.Topic, err)
	}
	return nil
}

// open marks k's partition open, under the guard, once the topic
// directory's marker names k's incarnation; the caller opens the log next
// and calls closed once it closed. A directory that is not k's
// incarnation's (its preparation lost a race) is refused.
func (d Guard) open(k messages.PartitionKey) error {
	unlock := d.Guards.Lock(k.Topic)
	defer unlock()
	ok, err := storage.MarkerNames(d.DataDir, k.Topic, k.Incarnation, false)
	if err != nil {
		return fmt.Errorf("open partition %s: %w", keyString(k), err)
	}
	if !ok {
		return fmt.Errorf("open partition %s: the topic directory's marker does not name incarnation %d: %w",
			keyString(k), k.Incarnation, ErrGuardRefused)
	}
	d.Guards.MarkOpen(k.Topic, k.Incarnation, k.Partition)
	return nil
}

// closed records k's log closed.
func (d Guard) closed(k messages.PartitionKey) {
	d.Guards.MarkClosed(k.Topic, k.Incarnation, k.Partition)
}

// PathFree is the check an install and a rename back make under the
// guard (rule V9, storage.Guards.PathFree): the topic directory's marker
// names k's incarnation (or is absent, when absentOK) and no log is open at
// the partition's path.
func (d Guard) PathFree(k messages.PartitionKey, absentOK bool) error {
	return d.Guards.PathFree(d.DataDir, k.Topic, k.Incarnation, k.Partition, absentOK)
}

// RenameBackUnderGuard takes a move's install off the partition's path
// back to staging (storage.RenameBack), under the guard: only while the
// marker names the move's incarnation, no log is open there, and the path
// still names the directory the install put there (installed, as stat'ed
// right after the install). Refused, it moves nothing: the copy went with
// its incarnation's directory when that was set aside.
func (d Guard) RenameBackUnderGuard(k messages.PartitionKey, installed os.FileInfo) error {
	unlock := d.Guards.Lock(k.Topic)
	defer unlock()
	if err := d.PathFree(k, false); err != nil {
		return fmt.Errorf("rename back: %w", err)
	}
	path := storage.PartitionPath(d.DataDir, k.Topic, k.Partition)
	now, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("rename back %s: %w", path, err)
	}
	if installed == nil || !os.SameFile(now, installed) {
		return fmt.Errorf("rename back %s: the path no longer names the directory the install put there: %w", path, ErrGuardRefused)
	}
	return storage.RenameBack(path, storage.StagingPath(d.DataDir, k.Topic, k.Partition))
}

// ReclaimUnderGuard runs reclaim on k's path under the guard, only while
// the topic directory's marker names k's incarnation and no log is open
// there (rule S6): a move's stage clearing an earlier ownership's copy
// before its freeze (storage.ReclaimEarlierCopy). Refused, it runs nothing.
func (d Guard) ReclaimUnderGuard(k messages.PartitionKey, reclaim func(path string) (bool, error)) (bool, error) {
	unlock := d.Guards.Lock(k.Topic)
	defer unlock()
	if err := d.PathFree(k, false); err != nil {
		return false, fmt.Errorf("reclaim: %w", err)
	}
	return reclaim(storage.PartitionPath(d.DataDir, k.Topic, k.Partition))
}

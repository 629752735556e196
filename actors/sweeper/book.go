package sweeper

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// Book is a node's quarantine book: its last inventory of the copies it
// set aside (storage.Quarantined) and of its topic directories without a
// marker, behind the gauges of rules S7 and S8. The node takes the first
// at start, before the sweeper runs (TakeQuarantineAtStart); from then on
// it belongs to the sweeper actor, which alone changes it (after each
// pass, each "quarantine" listing and each release) and answers every read
// of it by message (asks.go), so it has no lock. The walks that fill it
// run off the actor (takeInventory).
type Book struct {
	metrics Metrics
	last    inventory
}

// inventory is one walk's finding; taken is false until the first.
type inventory struct {
	taken   bool
	copies  []storage.QuarantinedCopy
	orphans []string
	bytes   int64
}

func newBook(m Metrics) *Book { return &Book{metrics: m} }

// takeInventory walks dataDir for the copies set aside and the orphan
// topic directories. It only reads, so walks may overlap.
func takeInventory(dataDir string) (inventory, error) {
	copies, err := storage.Quarantined(dataDir)
	if err != nil {
		return inventory{}, fmt.Errorf("inventory of copies set aside: %w", err)
	}
	orphans, err := storage.OrphanTopicDirs(dataDir)
	if err != nil {
		return inventory{}, fmt.Errorf("inventory of orphan topic dirs: %w", err)
	}
	s := inventory{taken: true, copies: copies, orphans: orphans}
	for _, c := range copies {
		s.bytes += c.Bytes
	}
	return s, nil
}

// apply makes s the book's inventory and sets the gauges from it.
func (b *Book) apply(s inventory) {
	b.last = s
	b.metrics.QuarantinedCopies.Set(float64(len(s.copies)))
	b.metrics.QuarantinedBytes.Set(float64(s.bytes))
	b.metrics.OrphanTopicDirs.Set(float64(len(s.orphans)))
}

// refresh takes the inventory of dataDir and applies it; a walk that
// fails leaves the last inventory in place. It walks on the caller's
// goroutine: for the start and for tests, never the sweeper's mailbox.
func (b *Book) refresh(dataDir string) error {
	s, err := takeInventory(dataDir)
	if err != nil {
		return err
	}
	b.apply(s)
	return nil
}

// snapshot is the last inventory. Its slices are never written again (an
// inventory replaces them), so an answer may carry them.
func (b *Book) snapshot() inventory { return b.last }

// reclaimed counts n bytes the stale-copy sweep removed.
func (b *Book) reclaimed(n int64) { b.metrics.Reclaimed.AddInt64(n) }

// reclaimedBytes is what the sweep reclaimed since the node started.
func (b *Book) reclaimedBytes() int64 { return int64(b.metrics.Reclaimed.Get()) }

// nodeQuarantineOf is one node's listing from its inventory: at most limit
// copies and orphan directories, totals over all of them, ages at now.
func nodeQuarantineOf(node string, s inventory, reclaimed int64, limit int, now time.Time) messages.NodeQuarantine {
	out := messages.NodeQuarantine{Node: node, Copies: []messages.QuarantinedCopy{}, TotalCopies: len(s.copies), TotalBytes: s.bytes,
		ReclaimedBytes: reclaimed}
	for _, c := range s.copies[:min(len(s.copies), limit)] {
		out.Copies = append(out.Copies, copyInfo(c, now))
	}
	for _, o := range s.orphans[:min(len(s.orphans), limit)] {
		out.OrphanTopicDirs = append(out.OrphanTopicDirs, filepath.ToSlash(o))
	}
	return out
}

func copyInfo(c storage.QuarantinedCopy, now time.Time) messages.QuarantinedCopy {
	return messages.QuarantinedCopy{Path: filepath.ToSlash(c.Path), Kind: string(c.Kind), Topic: c.Topic, Partition: c.Partition,
		Incarnation: c.Incarnation, Bytes: c.Bytes, ModifiedMs: c.Modified.UnixMilli(), AgeMs: max(0, now.Sub(c.Modified).Milliseconds())}
}

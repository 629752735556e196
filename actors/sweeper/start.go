package sweeper

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/storage"
)

// What a node runs on its data dir at start, before it serves (so before
// it accepts a topic create) and before the sweeper runs: rule S7's
// startup sweep first, then rule S8's listing of every copy set aside.

// SweepOrphansAtStart is the startup sweep (rule S7): before the node
// serves, so before it accepts a topic create that could claim the name,
// every topic directory without an incarnation marker is removed, or set
// aside when it holds a copy set aside (storage.SweepOrphanTopicDir).
func SweepOrphansAtStart(log *slog.Logger, dataDir string) {
	orphans, err := storage.OrphanTopicDirs(dataDir)
	if err != nil {
		log.Error("startup sweep: list the topic directories without a marker", "err", err)
		return
	}
	for _, rel := range orphans {
		topic := filepath.Base(rel)
		to, n, err := storage.SweepOrphanTopicDir(dataDir, topic)
		switch {
		case err != nil:
			log.Error("startup sweep: a topic directory without a marker", "topic", topic, "err", err)
		case to != "":
			log.Error("startup sweep: a topic directory without a marker holds copies set aside; set aside whole", "topic", topic, "to", to)
		default:
			log.Warn("startup sweep: removed a topic directory without a marker", "topic", topic, "bytes", n)
		}
	}
}

// TakeQuarantineAtStart takes the node's first inventory and lists every
// copy set aside at error, one line each, then one summary line (rule S8):
// each may hold the only copy of some records, and nobody else will say so.
// The book it returns is the sweeper's (New); c reads the copies' ages.
func TakeQuarantineAtStart(log *slog.Logger, c clock.Clock, dataDir string, m Metrics) *Book {
	b := newBook(m)
	if err := b.refresh(dataDir); err != nil {
		log.Error("copies set aside: no inventory at start; the quarantine gauges read 0 until the sweep takes one", "err", err)
		return b
	}
	s := b.snapshot()
	now := c.Now()
	for _, c := range s.copies {
		log.Error("copy set aside: it may hold the only copy of its records; release it once it is not needed",
			"path", c.Path, "kind", c.Kind, "topic", c.Topic, "partition", c.Partition, "bytes", c.Bytes,
			"age", now.Sub(c.Modified).Round(time.Second))
	}
	switch {
	case len(s.copies) > 0:
		log.Error("copies set aside at start: list them with `narad cluster quarantine`, release one with `narad cluster quarantine release`",
			"copies", len(s.copies), "bytes", s.bytes, "orphan_topic_dirs", len(s.orphans))
	case len(s.orphans) > 0:
		log.Warn("no copy set aside at start; topic directories without an incarnation marker", "orphan_topic_dirs", s.orphans)
	default:
		log.Info("no copy set aside at start")
	}
	return b
}

package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Guards is a node's topic open guard (rules V9, V10, S6, S7): one lock per
// topic name, held by everything that opens, installs, renames back,
// reclaims or removes a directory under the topic's path. A topic deleted
// and recreated under the same name keeps its name, and so its guard: the
// holder re-reads the topic directory's incarnation marker under the lock
// and acts only while it names the incarnation it means to act on, so a
// move or a sweep of a deleted incarnation never touches its successor's
// directory.
//
// The table holds an entry only while someone holds or waits for its lock,
// so it is bounded by the node's concurrent directory operations.
type Guards struct {
	mu    sync.Mutex
	locks map[string]*topicLock
	// open holds the partitions whose log is open: an install, a rename
	// back or a reclaim never acts under an open log (rule V9), and a
	// topic directory is never set aside while any partition of another
	// incarnation is open in it. Bounded by the partitions this node runs.
	open map[string]map[openPartition]bool // by topic name
}

type openPartition struct {
	incarnation uint64
	partition   int
}

type topicLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; the entry goes when it reaches zero
}

// NewGuards returns an empty guard table.
func NewGuards() *Guards {
	return &Guards{locks: map[string]*topicLock{}, open: map[string]map[openPartition]bool{}}
}

// Lock takes the topic's guard and returns its release. A nil Guards
// guards nothing (a test rig without a node).
func (g *Guards) Lock(topic string) (unlock func()) {
	if g == nil {
		return func() {}
	}
	g.mu.Lock()
	l := g.locks[topic]
	if l == nil {
		l = &topicLock{}
		g.locks[topic] = l
	}
	l.refs++
	g.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		g.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(g.locks, topic)
		}
		g.mu.Unlock()
	}
}

// LockAll takes the guards of every named topic, in name order so that two
// batches never wait for each other, and returns their release.
func (g *Guards) LockAll(topics []string) (unlock func()) {
	names := slices.Clone(topics)
	slices.Sort(names)
	names = slices.Compact(names)
	unlocks := make([]func(), 0, len(names))
	for _, t := range names {
		unlocks = append(unlocks, g.Lock(t))
	}
	return func() {
		for i := len(unlocks) - 1; i >= 0; i-- {
			unlocks[i]()
		}
	}
}

// MarkOpen records the partition's log open; the caller holds the topic's
// guard and checked the directory's marker under it. MarkClosed, once the
// log is closed, takes it off.
func (g *Guards) MarkOpen(topic string, inc uint64, partition int) {
	if g == nil {
		return
	}
	g.mu.Lock()
	if g.open[topic] == nil {
		g.open[topic] = map[openPartition]bool{}
	}
	g.open[topic][openPartition{inc, partition}] = true
	g.mu.Unlock()
}

// MarkClosed records the partition's log closed.
func (g *Guards) MarkClosed(topic string, inc uint64, partition int) {
	if g == nil {
		return
	}
	g.mu.Lock()
	delete(g.open[topic], openPartition{inc, partition})
	if len(g.open[topic]) == 0 {
		delete(g.open, topic)
	}
	g.mu.Unlock()
}

// PartitionOpen reports whether a log of the topic's partition is open, of
// any incarnation: its path is not free for an install or a reclaim.
func (g *Guards) PartitionOpen(topic string, partition int) bool {
	return g.anyOpen(topic, func(k openPartition) bool { return k.partition == partition })
}

// OtherIncarnationOpen reports whether a partition of another incarnation
// of the topic is open: its directory must not be set aside yet.
func (g *Guards) OtherIncarnationOpen(topic string, inc uint64) bool {
	return g.anyOpen(topic, func(k openPartition) bool { return k.incarnation != inc })
}

// anyOpen reports whether an open partition of the topic matches; a nil
// Guards (a node without the guard) has none open.
func (g *Guards) anyOpen(topic string, match func(openPartition) bool) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.open[topic] {
		if match(k) {
			return true
		}
	}
	return false
}

// TopicOpen reports whether any partition of the topic name is open.
func (g *Guards) TopicOpen(topic string) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.open[topic]) > 0
}

// PathFree is the check an install, a rename back and a sweep's reclaim
// make under the topic's guard, which the caller holds (rule V9): the
// topic directory's marker names inc (or is absent, when absentOK: a
// reclaim acts on a copy whose directory lost its marker, rule S6) and no
// log of the topic's partition is open at its path. A refusal wraps
// ErrGuardRefused. A nil Guards sees no log open.
func (g *Guards) PathFree(dataDir, topic string, inc uint64, partition int, absentOK bool) error {
	ok, err := MarkerNames(dataDir, topic, inc, absentOK)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("partition %s/%d: the topic directory's marker does not name incarnation %d: %w",
			topic, partition, inc, ErrGuardRefused)
	case g.PartitionOpen(topic, partition):
		return fmt.Errorf("partition %s/%d: a log is open at its path: %w", topic, partition, ErrGuardRefused)
	}
	return nil
}

// TopicIncarnation reads the incarnation marker of the topic's directory.
// found is false when the directory has no marker (or does not exist); a
// marker that does not parse is ErrCorrupt.
func TopicIncarnation(dataDir, topic string) (inc uint64, found bool, err error) {
	return topicIncarnation(osFS{}, dataDir, topic)
}

// topicIncarnation is TopicIncarnation on fsys.
func topicIncarnation(fsys FS, dataDir, topic string) (inc uint64, found bool, err error) {
	b, err := readFile(fsys, filepath.Join(TopicPath(dataDir, topic), incarnationFile), readFileMaxBytes)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read incarnation of topic %s: %w", topic, err)
	}
	inc, err = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("incarnation marker of topic %s %q: %w", topic, b, ErrCorrupt)
	}
	return inc, true, nil
}

// MarkerNames reports whether the topic directory's marker names inc, or,
// when absentOK, is absent (a reclaim of a copy whose topic directory lost
// its marker acts on it all the same, rule S6).
func MarkerNames(dataDir, topic string, inc uint64, absentOK bool) (bool, error) {
	got, found, err := TopicIncarnation(dataDir, topic)
	switch {
	case err != nil:
		return false, err
	case !found:
		return absentOK, nil
	}
	return got == inc, nil
}

package storage

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// What a node holds on disk, for the stale-copy sweep: the topic
// directories under topics/ with the partitions in them, and the topic
// directories set aside under StalePath.

// TopicDir is one directory under topics/.
type TopicDir struct {
	Name string
	// Incarnation is what its marker names; Marked is false without one
	// (an orphan, rule S7), and Corrupt when the marker does not parse.
	Incarnation     uint64
	Marked, Corrupt bool
	// Partitions are the partition directories in it (numeric names; a
	// quarantined copy's name is not one).
	Partitions []int
}

// TopicDirs lists the topic directories of a node's data dir.
func TopicDirs(dataDir string) ([]TopicDir, error) {
	root := filepath.Join(dataDir, "topics")
	ents, err := readDirIfAny(osFS{}, root)
	if err != nil {
		return nil, err
	}
	var out []TopicDir
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		td := TopicDir{Name: e.Name()}
		inc, found, err := TopicIncarnation(dataDir, e.Name())
		td.Incarnation, td.Marked, td.Corrupt = inc, found && err == nil, errors.Is(err, ErrCorrupt)
		parts, err := osFS{}.ReadDir(filepath.Join(root, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("list topic dir %s: %w", e.Name(), err)
		}
		for _, p := range parts {
			if n, err := strconv.Atoi(p.Name()); err == nil && p.IsDir() && n >= 0 && strconv.Itoa(n) == p.Name() {
				td.Partitions = append(td.Partitions, n)
			}
		}
		out = append(out, td)
	}
	return out, nil
}

// StaleDir is a topic directory PrepareTopicDir set aside under StalePath.
type StaleDir struct {
	Path  string
	Topic string
	// Incarnation is what its name says; Marked is false for one set aside
	// without a marker (<topic>@unmarked) or with an unreadable one.
	Incarnation uint64
	Marked      bool
}

// StaleDirs lists the topic directories set aside under StalePath.
func StaleDirs(dataDir string) ([]StaleDir, error) {
	ents, err := readDirIfAny(osFS{}, StalePath(dataDir))
	if err != nil {
		return nil, err
	}
	var out []StaleDir
	for _, e := range ents {
		topic, rest, ok := strings.Cut(e.Name(), "@")
		switch {
		case !e.IsDir():
		case e.Name() == longNamesDir:
			long, err := longStaleDirs(dataDir)
			if err != nil {
				return nil, err
			}
			out = append(out, long...)
		case ok:
			out = append(out, staleDirOf(filepath.Join(StalePath(dataDir), e.Name()), topic, rest))
		}
	}
	return out, nil
}

// longStaleDirs lists the set-aside directories of topics whose names are
// too long for the flat form: .stale/@long/<topic>/<incarnation>[.<k>].
func longStaleDirs(dataDir string) ([]StaleDir, error) {
	long := filepath.Join(StalePath(dataDir), longNamesDir)
	topics, err := readDirIfAny(osFS{}, long)
	if err != nil {
		return nil, err
	}
	var out []StaleDir
	for _, t := range topics {
		if !t.IsDir() {
			continue
		}
		ents, err := readDirIfAny(osFS{}, filepath.Join(long, t.Name()))
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if e.IsDir() {
				out = append(out, staleDirOf(filepath.Join(long, t.Name(), e.Name()), t.Name(), e.Name()))
			}
		}
	}
	return out, nil
}

// staleDirOf is the set-aside directory at path of topic, rest being what
// follows the topic in its name: <incarnation>[.<k>] when marked.
func staleDirOf(path, topic, rest string) StaleDir {
	d := StaleDir{Path: path, Topic: topic}
	inc, _, _ := strings.Cut(rest, ".")
	if n, err := strconv.ParseUint(inc, 10, 64); err == nil {
		d.Incarnation, d.Marked = n, true
	}
	return d
}

// HoldsUnexpiredRecords reports whether the closed partition at dir holds
// a record in a segment retention (an age, 0 for none) has not expired.
// Anything it cannot read counts as holding records: nothing is deleted on
// a guess.
func HoldsUnexpiredRecords(dir string, cfg LogConfig, now time.Time, retention time.Duration) bool {
	return holdsUnexpiredRecords(dir, cfg, now, retention)
}

// RemoveDir removes a directory set aside or reclaimed, durably (its
// parent is synced), and returns the bytes it held.
func RemoveDir(dir string) (int64, error) { return removeDir(osFS{}, dir) }

// removeDir is RemoveDir on fsys.
func removeDir(fsys FS, dir string) (int64, error) {
	n, _, err := walkBytes(fsys, dir)
	if err != nil {
		return 0, err
	}
	if err := fsys.RemoveAll(dir); err != nil {
		return 0, fmt.Errorf("remove %s: %w", dir, err)
	}
	return n, (*Faults)(nil).syncDir(fsys, filepath.Dir(dir))
}

// SweepOrphanTopicDir is the startup sweep's act on a topic directory
// without an incarnation marker (rule S7), run before the node accepts
// topic creates: the directory is removed, unless it holds a copy set aside
// (a name with ".quarantine"), which is never deleted: then the directory
// is set aside whole under StalePath as <topic>@unmarked. It returns where
// it went ("" when removed) and the bytes removed.
func SweepOrphanTopicDir(dataDir, topic string) (setAside string, removed int64, err error) {
	return sweepOrphanTopicDir(osFS{}, dataDir, topic)
}

// sweepOrphanTopicDir is SweepOrphanTopicDir on fsys.
func sweepOrphanTopicDir(fsys FS, dataDir, topic string) (setAside string, removed int64, err error) {
	dir := TopicPath(dataDir, topic)
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return "", 0, fmt.Errorf("sweep orphan topic dir %s: %w", topic, err)
	}
	for _, e := range ents {
		if e.Name() == incarnationFile {
			return "", 0, fmt.Errorf("sweep orphan topic dir %s: it has a marker: %w", topic, ErrInvalid)
		}
		if strings.Contains(e.Name(), ".quarantine") {
			to, err := setAsideTopicDir(fsys, dataDir, topic, "unmarked")
			return to, 0, err
		}
	}
	n, err := removeDir(fsys, dir)
	return "", n, err
}

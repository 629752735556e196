package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// CopyKind says what a copy set aside was before it was set aside.
type CopyKind string

const (
	// KindPartition is a partition's directory set aside by an install, a
	// handover or the sweep: topics/<topic>/<N>.quarantine[.<k>].
	KindPartition CopyKind = "partition"
	// KindStaging is a move's staging copy set aside: .moves/<topic>-<N>.quarantine[.<k>]
	// (.moves/@long/<topic>/<N>.quarantine[.<k>] for a long name, names.go).
	KindStaging CopyKind = "staging"
	// KindStaleTopic is a whole topic directory of another incarnation:
	// .stale/<topic>@<incarnation>[.<k>] (.stale/@long/<topic>/<incarnation>[.<k>]).
	KindStaleTopic CopyKind = "stale_topic"
	// KindUnmarkedTopic is a topic directory that held files but no
	// incarnation marker: .stale/<topic>@unmarked[.<k>] (.stale/@long/<topic>/unmarked[.<k>]).
	KindUnmarkedTopic CopyKind = "unmarked_topic"
)

// Where copies are set aside, relative to the data dir.
const (
	topicsDir = "topics"
	movesDir  = ".moves"
	staleDir  = ".stale"
)

// QuarantinedCopy is one copy set aside under a node's data dir: kept
// because it may hold records no other node has, until an operator
// releases it.
type QuarantinedCopy struct {
	// Path is relative to the data dir; ReleaseQuarantined takes it back.
	Path      string
	Kind      CopyKind
	Topic     string
	Partition int // -1 for a topic directory
	// Incarnation is the one a stale topic directory's name carries (0
	// for the other kinds and an unmarked directory).
	Incarnation uint64
	// Bytes sums the sizes of the regular files in the tree.
	Bytes int64
	// Modified is the latest modification time of the directory or of
	// anything in it: the last write into the copy.
	Modified time.Time
}

// Quarantined lists every copy set aside under dataDir, sorted by path.
// A missing data dir or area holds none.
//
// It walks every file of every copy to sum the bytes: one Lstat per file
// set aside, so it costs what the copies hold in files (a partition copy is
// a few segments and sidecars), not in bytes. The node takes it at start and
// the sweep every 30th tick, never on a produce or consume path.
func Quarantined(dataDir string) ([]QuarantinedCopy, error) {
	var rels []string
	topics, err := realDirNames(dataDir, topicsDir)
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		names, err := realDirNames(dataDir, filepath.Join(topicsDir, t))
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			rels = append(rels, filepath.Join(topicsDir, t, name))
		}
	}
	for _, area := range []string{movesDir, staleDir} {
		names, err := realDirNames(dataDir, area)
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			rels = append(rels, filepath.Join(area, name))
		}
		// The copies of topics whose names are too long for the flat
		// form sit one level down (names.go).
		long := filepath.Join(area, longNamesDir)
		topics, err := realDirNames(dataDir, long)
		if err != nil {
			return nil, err
		}
		for _, t := range topics {
			names, err := realDirNames(dataDir, filepath.Join(long, t))
			if err != nil {
				return nil, err
			}
			for _, name := range names {
				rels = append(rels, filepath.Join(long, t, name))
			}
		}
	}
	out := []QuarantinedCopy{}
	for _, rel := range rels {
		c, ok := classify(rel)
		if !ok {
			continue
		}
		c, err := measure(dataDir, c)
		switch {
		case errors.Is(err, ErrNotFound):
			continue // released or reclaimed meanwhile
		case errors.Is(err, ErrInvalid):
			continue // a symlink or a file by a copy's name is not a copy
		case err != nil:
			return nil, err
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b QuarantinedCopy) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// QuarantinedAt is the inventory's entry at rel, measured: ErrInvalid when
// rel is not the path of a copy set aside (a live partition, a staging copy
// in use, anything with .. or a symlink on the way), ErrNotFound when no
// such copy is there.
func QuarantinedAt(dataDir, rel string) (QuarantinedCopy, error) {
	c, ok := classify(rel)
	if !ok {
		return QuarantinedCopy{}, fmt.Errorf("%q is not the path of a copy set aside: %w", rel, ErrInvalid)
	}
	// A symlinked topics/<topic> or .stale would lead the removal out of
	// the data dir: every directory on the way must be a real one.
	parent := dataDir
	for _, part := range strings.Split(filepath.Dir(rel), string(filepath.Separator)) {
		parent = filepath.Join(parent, part)
		fi, err := osFS{}.Lstat(parent)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return QuarantinedCopy{}, fmt.Errorf("copy %s: %w", rel, ErrNotFound)
		case err != nil:
			return QuarantinedCopy{}, fmt.Errorf("copy %s: %w", rel, err)
		case !fi.IsDir():
			return QuarantinedCopy{}, fmt.Errorf("copy %s: %s is not a directory: %w", rel, parent, ErrInvalid)
		}
	}
	return measure(dataDir, c)
}

// ReleaseQuarantined removes the copy set aside at rel (relative to the
// data dir), durably. It refuses anything that is not exactly one of
// Quarantined's entries. The caller holds the topic's guard.
func ReleaseQuarantined(dataDir, rel string) error {
	if _, err := QuarantinedAt(dataDir, rel); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	dir := filepath.Join(dataDir, rel)
	fsys := osFS{}
	if err := fsys.RemoveAll(dir); err != nil {
		return fmt.Errorf("release %s: %w", rel, err)
	}
	return (*Faults)(nil).syncDir(fsys, filepath.Dir(dir))
}

// OrphanTopicDirs lists, sorted, the directories under topics/ that hold
// something but no incarnation marker (rule S7: counted, and removed only
// by the startup sweep). An empty one is left out: PrepareTopicDir creates
// the directory just before its marker.
func OrphanTopicDirs(dataDir string) ([]string, error) {
	topics, err := realDirNames(dataDir, topicsDir)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, t := range topics {
		dir := filepath.Join(dataDir, topicsDir, t)
		fi, err := osFS{}.Lstat(dir)
		if err != nil || !fi.IsDir() {
			continue
		}
		names, err := readDirNames(osFS{}, dir)
		if err != nil {
			return nil, err
		}
		if len(names) > 0 && !slices.Contains(names, incarnationFile) {
			out = append(out, filepath.Join(topicsDir, t))
		}
	}
	return out, nil
}

// DirBytes sums the sizes of the regular files under dir, following no
// symlink; a missing dir holds 0 bytes.
func DirBytes(dir string) (int64, error) {
	n, _, err := walkBytes(osFS{}, dir)
	return n, err
}

// walkBytes sums the regular files' sizes under dir and returns the latest
// modification time of dir and what it holds. Entries removed during the
// walk are skipped.
func walkBytes(fsys FS, dir string) (int64, time.Time, error) {
	fi, err := fsys.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, time.Time{}, nil
	}
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("size of %s: %w", dir, err)
	}
	var total int64
	latest := fi.ModTime()
	if fi.Mode().IsRegular() {
		total = fi.Size()
	}
	var walk func(d string) error
	walk = func(d string) error {
		ents, err := fsys.ReadDir(d)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, e := range ents {
			info, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return err
			}
			if info.ModTime().After(latest) {
				latest = info.ModTime()
			}
			if info.Mode().IsRegular() {
				total += info.Size()
			}
			if e.IsDir() {
				if err := walk(filepath.Join(d, e.Name())); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if fi.IsDir() {
		if err := walk(dir); err != nil {
			return 0, time.Time{}, fmt.Errorf("size of %s: %w", dir, err)
		}
	}
	return total, latest, nil
}

// measure fills in c's bytes and time from the disk: ErrNotFound when
// nothing is at its path, ErrInvalid when what is there is not a
// directory (a symlink included).
func measure(dataDir string, c QuarantinedCopy) (QuarantinedCopy, error) {
	dir := filepath.Join(dataDir, c.Path)
	fi, err := osFS{}.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return c, fmt.Errorf("copy %s: %w", c.Path, ErrNotFound)
	case err != nil:
		return c, fmt.Errorf("copy %s: %w", c.Path, err)
	case !fi.IsDir():
		return c, fmt.Errorf("copy %s is not a directory: %w", c.Path, ErrInvalid)
	}
	c.Bytes, c.Modified, err = walkBytes(osFS{}, dir)
	return c, err
}

// classify tells from its path alone whether rel names a copy set aside,
// and which. It is the one definition of the inventory's paths: whatever
// it accepts, Quarantined lists and ReleaseQuarantined may remove.
func classify(rel string) (QuarantinedCopy, bool) {
	if rel == "" || filepath.Clean(rel) != rel || !filepath.IsLocal(rel) {
		return QuarantinedCopy{}, false
	}
	parts := strings.Split(rel, string(filepath.Separator))
	switch {
	case len(parts) == 3 && parts[0] == topicsDir && topicName(parts[1]):
		// <N>.quarantine[.<k>]
		base, ok := cutQuarantine(parts[2])
		if p, isNum := partitionNumber(base); ok && isNum {
			return QuarantinedCopy{Path: rel, Kind: KindPartition, Topic: parts[1], Partition: p}, true
		}
	case len(parts) == 2 && parts[0] == movesDir:
		// <topic>-<N>.quarantine[.<k>]
		base, ok := cutQuarantine(parts[1])
		i := strings.LastIndexByte(base, '-')
		if !ok || i < 0 || !topicName(base[:i]) {
			break
		}
		if p, isNum := partitionNumber(base[i+1:]); isNum {
			return QuarantinedCopy{Path: rel, Kind: KindStaging, Topic: base[:i], Partition: p}, true
		}
	case len(parts) == 4 && parts[0] == movesDir && parts[1] == longNamesDir && topicName(parts[2]):
		// @long/<topic>/<N>.quarantine[.<k>]
		base, ok := cutQuarantine(parts[3])
		if p, isNum := partitionNumber(base); ok && isNum {
			return QuarantinedCopy{Path: rel, Kind: KindStaging, Topic: parts[2], Partition: p}, true
		}
	case len(parts) == 2 && parts[0] == staleDir:
		// <topic>@<incarnation>[.<k>] or <topic>@unmarked[.<k>]
		topic, rest, ok := strings.Cut(parts[1], "@")
		if ok && topicName(topic) {
			return classifyStale(rel, topic, rest)
		}
	case len(parts) == 4 && parts[0] == staleDir && parts[1] == longNamesDir && topicName(parts[2]):
		// @long/<topic>/<incarnation>[.<k>] or @long/<topic>/unmarked[.<k>]
		return classifyStale(rel, parts[2], parts[3])
	}
	return QuarantinedCopy{}, false
}

// classifyStale tells whether rest, what follows the topic in a set-aside
// topic directory's name, is <incarnation>[.<k>] or unmarked[.<k>].
func classifyStale(rel, topic, rest string) (QuarantinedCopy, bool) {
	if head, k, dotted := strings.Cut(rest, "."); dotted {
		if !suffixNumber(k) {
			return QuarantinedCopy{}, false
		}
		rest = head
	}
	if rest == "unmarked" {
		return QuarantinedCopy{Path: rel, Kind: KindUnmarkedTopic, Topic: topic, Partition: -1}, true
	}
	if inc, err := strconv.ParseUint(rest, 10, 64); err == nil && strconv.FormatUint(inc, 10) == rest {
		return QuarantinedCopy{Path: rel, Kind: KindStaleTopic, Topic: topic, Partition: -1, Incarnation: inc}, true
	}
	return QuarantinedCopy{}, false
}

// cutQuarantine strips ".quarantine" or ".quarantine.<k>" (k ≥ 2, as
// quarantine numbers them) off name.
func cutQuarantine(name string) (string, bool) {
	if base, ok := strings.CutSuffix(name, ".quarantine"); ok {
		return base, true
	}
	i := strings.LastIndex(name, ".quarantine.")
	if i < 0 || !suffixNumber(name[i+len(".quarantine."):]) {
		return "", false
	}
	return name[:i], true
}

// suffixNumber reports whether s is a set-aside name's counter: 2, 3, …
// written without leading zeros.
func suffixNumber(s string) bool {
	k, err := strconv.Atoi(s)
	return err == nil && k >= 2 && strconv.Itoa(k) == s
}

// partitionNumber parses a partition number written as PartitionPath
// writes it.
func partitionNumber(s string) (int, bool) {
	p, err := strconv.Atoi(s)
	return p, err == nil && p >= 0 && strconv.Itoa(p) == s
}

// topicName reports whether s may be a topic's name: ^[A-Za-z0-9._-]{1,255}$
// and neither "." nor "..", as the API accepts them.
func topicName(s string) bool {
	if len(s) == 0 || len(s) > 255 || s == "." || s == ".." {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// realDirNames lists the entry names of dataDir/rel when it is a directory
// and no symlink (what QuarantinedAt accepts on the way to a copy); none
// otherwise.
func realDirNames(dataDir, rel string) ([]string, error) {
	dir := filepath.Join(dataDir, rel)
	fi, err := osFS{}.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("list %s: %w", dir, err)
	case !fi.IsDir():
		return nil, nil
	}
	return readDirNames(osFS{}, dir)
}

// readDirIfAny is os.ReadDir where a missing dir has no entries: the data
// dir's optional folders (topics, the set-aside copies) are made on first
// use.
func readDirIfAny(fsys FS, dir string) ([]os.DirEntry, error) {
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	return ents, nil
}

// readDirNames lists dir's entry names, sorted; a missing dir has none.
func readDirNames(fsys FS, dir string) ([]string, error) {
	ents, err := readDirIfAny(fsys, dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

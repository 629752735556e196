package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// incarnationFile names the topic incarnation a topic directory holds: a
// topic deleted and recreated under the same name is another incarnation,
// and its data must never be served as the new one's.
const incarnationFile = "incarnation"

// TopicDirPrepared says what PrepareTopicDir found at the topic's path.
type TopicDirPrepared struct {
	// SetAside is where a directory of another incarnation (Found), or one
	// without an incarnation marker holding files, was moved; "" when
	// nothing was, or the move failed.
	SetAside string
	// Found is the incarnation the directory set aside named ("" when it
	// had no marker), whether or not setting it aside succeeded.
	Found string
}

// StalePath is where topic directories set aside by PrepareTopicDir go:
// <data>/.stale/<topic>@<incarnation>, or <topic>@unmarked for one without
// a marker, with .2, .3, ... when the name is taken; for a topic name too
// long to carry those, .stale/@long/<topic>/<incarnation> (names.go). A
// topic name never holds '@', so these never collide with a topic.
func StalePath(dataDir string) string { return filepath.Join(dataDir, ".stale") }

// TopicPath is where a topic's partitions live.
func TopicPath(dataDir, topic string) string { return filepath.Join(dataDir, "topics", topic) }

// PrepareTopicDir makes the topic's directory belong to incarnation before
// a partition of it is opened or installed: a directory left by another
// incarnation (this node was down when it was deleted), or one without a
// marker that holds files, is set aside under StalePath, never deleted
// (rule V10: it may be the successor's, if the caller's view is stale, or
// hold records nobody else has); then the directory and its marker are made
// durable. The caller holds the topic's guard (Guards) and has re-read the
// topic record under it, and no partition of the directory is open.
func PrepareTopicDir(dataDir, topic string, incarnation uint64) (TopicDirPrepared, error) {
	return prepareTopicDir(osFS{}, dataDir, topic, incarnation)
}

// prepareTopicDir is PrepareTopicDir on fsys.
func prepareTopicDir(fsys FS, dataDir, topic string, incarnation uint64) (TopicDirPrepared, error) {
	var faults *Faults // a node's topic directories take no injected faults
	dir := TopicPath(dataDir, topic)
	want := strconv.FormatUint(incarnation, 10)
	var out TopicDirPrepared
	b, err := readFile(fsys, filepath.Join(dir, incarnationFile), readFileMaxBytes)
	switch {
	case err == nil && strings.TrimSpace(string(b)) == want:
		return out, nil
	case err == nil || !errors.Is(err, os.ErrNotExist):
		out.Found = strings.TrimSpace(string(b))
		if err != nil {
			out.Found = "unreadable"
		}
		if out.SetAside, err = setAsideTopicDir(fsys, dataDir, topic, out.Found); err != nil {
			return out, err
		}
	default:
		if ents, _ := fsys.ReadDir(dir); len(ents) > 0 {
			if out.SetAside, err = setAsideTopicDir(fsys, dataDir, topic, "unmarked"); err != nil {
				return out, err
			}
		}
	}
	if err := faults.mkdirAllSync(fsys, dir); err != nil {
		return out, fmt.Errorf("create topic dir: %w", err)
	}
	return out, faults.writeFileSync(fsys, filepath.Join(dir, incarnationFile), []byte(want+"\n"))
}

// setAsideTopicDir moves the topic's directory to the first free
// StalePath name for what its marker said, durably.
func setAsideTopicDir(fsys FS, dataDir, topic, found string) (string, error) {
	var faults *Faults
	base := filepath.Join(StalePath(dataDir), staleName(topic, found))
	if err := faults.mkdirAllSync(fsys, filepath.Dir(base)); err != nil {
		return "", fmt.Errorf("set aside topic dir %s: %w", topic, err)
	}
	to := base
	for i := 2; ; i++ {
		_, err := fsys.Lstat(to)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			// Not "taken": a disk that fails every lstat would have
			// this loop count forever.
			return "", fmt.Errorf("set aside topic dir %s: %w", topic, err)
		}
		to = base + "." + strconv.Itoa(i)
	}
	dir := TopicPath(dataDir, topic)
	if err := fsys.Rename(dir, to); err != nil {
		return "", fmt.Errorf("set aside topic dir %s: %w", dir, err)
	}
	if err := faults.syncDir(fsys, filepath.Dir(dir)); err != nil {
		return to, err
	}
	return to, faults.syncDir(fsys, filepath.Dir(base))
}

// PurgePartition removes a deleted topic's partition data, and the topic
// directory once nothing but its marker is left in it.
func PurgePartition(dataDir, topic string, partition int) error {
	fsys := osFS{}
	if err := fsys.RemoveAll(PartitionPath(dataDir, topic, partition)); err != nil {
		return fmt.Errorf("purge partition %s/%d: %w", topic, partition, err)
	}
	dir := TopicPath(dataDir, topic)
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil // nothing left to tidy
	}
	for _, e := range ents {
		if e.Name() != incarnationFile {
			return nil
		}
	}
	if err := fsys.RemoveAll(dir); err != nil {
		return fmt.Errorf("purge topic dir %s: %w", dir, err)
	}
	return nil
}

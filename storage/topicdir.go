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
	// Removed is set when a directory of another incarnation (Found), or
	// one without an incarnation marker holding files, was removed. It
	// stays false when the removal failed.
	Removed bool
	// Found is the incarnation the directory to remove named ("" when it
	// had no marker), whether or not its removal succeeded.
	Found string
}

// TopicPath is where a topic's partitions live.
func TopicPath(dataDir, topic string) string { return filepath.Join(dataDir, "topics", topic) }

// PrepareTopicDir makes the topic's directory belong to incarnation before
// a partition of it is opened or installed: a directory left by a deleted
// incarnation (this node was down when it was deleted), or one without a
// marker, is removed first; then the directory and its marker are made
// durable.
func PrepareTopicDir(dataDir, topic string, incarnation uint64) (TopicDirPrepared, error) {
	dir := TopicPath(dataDir, topic)
	want := strconv.FormatUint(incarnation, 10)
	var out TopicDirPrepared
	b, err := os.ReadFile(filepath.Join(dir, incarnationFile))
	switch {
	case err == nil && strings.TrimSpace(string(b)) == want:
		return out, nil
	case err == nil || !errors.Is(err, os.ErrNotExist):
		out.Found = strings.TrimSpace(string(b))
		if err := os.RemoveAll(dir); err != nil {
			return out, fmt.Errorf("remove stale topic dir %s: %w", dir, err)
		}
		out.Removed = true
	default:
		if ents, _ := os.ReadDir(dir); len(ents) > 0 {
			if err := os.RemoveAll(dir); err != nil {
				return out, fmt.Errorf("remove unmarked topic dir %s: %w", dir, err)
			}
			out.Removed = true
		}
	}
	if err := mkdirAllSync(dir); err != nil {
		return out, fmt.Errorf("create topic dir: %w", err)
	}
	return out, writeFileSync(filepath.Join(dir, incarnationFile), []byte(want+"\n"))
}

// PurgePartition removes a deleted topic's partition data, and the topic
// directory once nothing but its marker is left in it.
func PurgePartition(dataDir, topic string, partition int) error {
	if err := os.RemoveAll(PartitionPath(dataDir, topic, partition)); err != nil {
		return fmt.Errorf("purge partition %s/%d: %w", topic, partition, err)
	}
	dir := TopicPath(dataDir, topic)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil // nothing left to tidy
	}
	for _, e := range ents {
		if e.Name() != incarnationFile {
			return nil
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("purge topic dir %s: %w", dir, err)
	}
	return nil
}

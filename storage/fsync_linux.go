package storage

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes every dirty page and inode of the filesystem holding dir and
// waits for it (syncfs(2)). One call replaces a file and directory fsync per
// file when many small partitions install at once; since Linux 5.8 it also
// reports writeback errors.
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s for syncfs: %w", dir, err)
	}
	defer d.Close()
	if err := unix.Syncfs(int(d.Fd())); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}

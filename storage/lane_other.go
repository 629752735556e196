//go:build !linux

package storage

import (
	"fmt"
	"os"
)

// syncFSFile is never called here: syncFSReportsErrors is false, so the
// lane syncs file by file.
func syncFSFile(*os.File) error {
	return fmt.Errorf("syncfs on this system: %w", ErrInvalid)
}

// datasync is a full fsync where fdatasync is not portable.
func datasync(f *os.File) error { return f.Sync() }

func fileDevice(*os.File) (uint64, error) { return 0, nil }

func syncFSReportsErrors() bool { return false }

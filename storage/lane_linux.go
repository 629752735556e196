package storage

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// syncFSFile is syncfs(2) on the filesystem holding f, through f's own
// descriptor, so the writeback errors it reports are those since f's
// previous syncfs.
func syncFSFile(f *os.File) error {
	return control(f, "syncfs", unix.Syncfs)
}

// datasync is fdatasync(2): the data and the size of an appended file,
// not its times, which recovery never reads.
func datasync(f *os.File) error {
	return control(f, "fdatasync", unix.Fdatasync)
}

// control runs call on f's descriptor while f holds it, so a concurrent
// Close cannot hand the number to another file in between.
func control(f *os.File, name string, call func(int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return fmt.Errorf("%s %s: %w", name, f.Name(), err)
	}
	var callErr error
	if err := rc.Control(func(fd uintptr) { callErr = call(int(fd)) }); err != nil {
		return fmt.Errorf("%s %s: %w", name, f.Name(), err)
	}
	if callErr != nil {
		return fmt.Errorf("%s %s: %w", name, f.Name(), callErr)
	}
	return nil
}

// fileDevice is the device of the filesystem holding f.
func fileDevice(f *os.File) (uint64, error) {
	var st unix.Stat_t
	if err := control(f, "fstat", func(fd int) error { return unix.Fstat(fd, &st) }); err != nil {
		return 0, err
	}
	return st.Dev, nil
}

// syncFSReportsErrors: syncfs returns writeback errors only since Linux 5.8
// (before, it reported success over a failed writeback).
func syncFSReportsErrors() bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 5, 8)
}

// kernelAtLeast parses a release such as "6.18.44-fc-v1045"; one it cannot
// read counts as too old.
func kernelAtLeast(release string, major, minor int) bool {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err := strconv.Atoi(parts[0])
	if err != nil {
		return false
	}
	digits := strings.IndexFunc(parts[1]+".", func(r rune) bool { return r < '0' || r > '9' })
	min, err := strconv.Atoi(parts[1][:digits])
	if err != nil {
		return false
	}
	return maj > major || maj == major && min >= minor
}

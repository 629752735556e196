package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// The Go runtime's soft memory limit (issue 50): past it the collector runs
// as often as it must to stay under, instead of letting the heap grow to
// twice its live size (GOGC=100) before the next collection. A node's live
// heap grows with its partitions (deploy/operate/configuration.md has the
// bytes per partition), and with the default pacing a node whose live heap
// is half its memory would be killed for memory it only holds as garbage.
// The limit is soft: a live heap above it is not refused anything, the
// collector only works harder (the runtime caps that at about half the
// CPU), so a limit too low costs CPU, never data.

// memoryLimitShare is the part of the memory the node may use (its cgroup's
// limit, else the machine's) that the limit gives the Go runtime: the rest
// is what the runtime does not count, the Raft log store's block cache and
// memtables (outside the Go heap), the page cache a cgroup charges for the
// logs' reads and writes, and the kernel's socket buffers.
const memoryLimitShare = 0.8

// minMemoryLimitBytes bounds --memory-limit-bytes from below: an empty node
// holds about 20 MiB of live heap, and a limit under a few times that
// would have the collector run without pause.
const minMemoryLimitBytes = 64 << 20

// The two values of --memory-limit-bytes that are not a size.
const (
	memoryLimitDerived = 0  // from the cgroup's limit, else the machine's memory
	memoryLimitNone    = -1 // the runtime's own: GOMEMLIMIT, or none
)

// errMemoryLimit is a --memory-limit-bytes the node refuses.
var errMemoryLimit = errors.New("bad --memory-limit-bytes")

// checkMemoryLimit refuses a value that is neither one of the two words
// nor a size of at least minMemoryLimitBytes.
func checkMemoryLimit(v int64) error {
	if v == memoryLimitDerived || v == memoryLimitNone || v >= minMemoryLimitBytes {
		return nil
	}
	return fmt.Errorf("%w %d (NARAD_MEMORY_LIMIT_BYTES): want 0 (%.0f%% of the cgroup's memory limit, else of the machine's memory), -1 (no limit, or GOMEMLIMIT's) or at least %d (64 MiB)",
		errMemoryLimit, v, memoryLimitShare*100, minMemoryLimitBytes)
}

// memoryLimit is the limit a node sets and where it came from, for the
// start's log line.
type memoryLimit struct {
	bytes  int64  // 0: none, or GOMEMLIMIT's (source says which)
	source string // flag, cgroup, machine, GOMEMLIMIT, none
	// of is the memory the share was taken of, 0 unless derived.
	of int64
}

// chooseMemoryLimit is the limit of --memory-limit-bytes v: v itself, or
// derived from the cgroup's limit (cgroupBytes, 0 for none) or the
// machine's memory (machineBytes, 0 when unknown). A GOMEMLIMIT in the
// environment (goMemLimitSet) is the operator's choice too, and a derived
// limit leaves it standing.
func chooseMemoryLimit(v int64, goMemLimitSet bool, cgroupBytes, machineBytes int64) memoryLimit {
	switch {
	case v > 0:
		return memoryLimit{bytes: v, source: "flag"}
	case v == memoryLimitNone:
		return memoryLimit{source: "none"}
	case goMemLimitSet:
		return memoryLimit{source: "GOMEMLIMIT"}
	case cgroupBytes > 0:
		return memoryLimit{bytes: share(cgroupBytes), source: "cgroup", of: cgroupBytes}
	case machineBytes > 0:
		return memoryLimit{bytes: share(machineBytes), source: "machine", of: machineBytes}
	}
	return memoryLimit{source: "none"}
}

func share(b int64) int64 { return max(int64(float64(b)*memoryLimitShare), minMemoryLimitBytes) }

// setMemoryLimit sets the runtime's soft limit from --memory-limit-bytes
// and logs what it chose. None is set as none rather than left, so that a
// process that starts nodes more than once (the tests) does not keep an
// earlier node's; GOMEMLIMIT's is left as the runtime read it.
func setMemoryLimit(v int64, log *slog.Logger) {
	_, goMemLimitSet := os.LookupEnv("GOMEMLIMIT")
	var cgroupBytes, machineBytes int64
	if v == memoryLimitDerived && !goMemLimitSet {
		var err error
		if cgroupBytes, err = cgroupMemoryLimit("/sys/fs/cgroup", "/proc/self/cgroup"); err != nil {
			log.Warn("memory limit: the cgroup's limit is unreadable; deriving from the machine's memory", "err", err)
		}
		if machineBytes, err = machineMemory("/proc/meminfo"); err != nil {
			log.Warn("memory limit: the machine's memory is unreadable", "err", err)
		}
	}
	l := chooseMemoryLimit(v, goMemLimitSet, cgroupBytes, machineBytes)
	switch {
	case l.bytes > 0:
		debug.SetMemoryLimit(l.bytes)
	case l.source == "none":
		debug.SetMemoryLimit(math.MaxInt64)
	}
	current := debug.SetMemoryLimit(-1) // -1 reads it
	if current == math.MaxInt64 {
		log.Info("memory limit: none", "source", l.source)
		return
	}
	log.Info("memory limit", "bytes", current, "mib", current>>20, "source", l.source, "of_bytes", l.of)
}

// unlimitedCgroup is where a cgroup v1 limit means none: v1 writes "no
// limit" as the largest page-aligned int64, 9223372036854771712.
const unlimitedCgroup = 1 << 62

// maxCgroupDepth bounds the walk from a cgroup up to the root.
const maxCgroupDepth = 64

// cgroupMemoryLimit reads the memory limit of this process's cgroup under
// root (/sys/fs/cgroup), given the path of /proc/self/cgroup: the lowest
// memory.max of its cgroup v2 and the cgroups above it, else cgroup v1's
// memory.limit_in_bytes. 0 with no error is no limit (none set, or no
// such file: not every machine mounts them); an error is a file that is
// there and does not parse.
func cgroupMemoryLimit(root, selfCgroup string) (int64, error) {
	raw, err := os.ReadFile(selfCgroup)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var limit int64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		// hierarchy-id:controllers:path
		f := strings.SplitN(sc.Text(), ":", 3)
		if len(f) != 3 {
			continue
		}
		var dirs []string
		var file string
		switch {
		case f[0] == "0" && f[1] == "": // v2's unified hierarchy
			dirs, file = cgroupDirs(root, f[2]), "memory.max"
		case hasController(f[1], "memory"):
			dirs, file = cgroupDirs(filepath.Join(root, "memory"), f[2]), "memory.limit_in_bytes"
		default:
			continue
		}
		for _, d := range dirs {
			v, err := readCgroupLimit(filepath.Join(d, file))
			if err != nil {
				return 0, err
			}
			if v > 0 && (limit == 0 || v < limit) {
				limit = v
			}
		}
	}
	return limit, nil
}

// cgroupDirs are the directories of a cgroup path under root, from the
// cgroup itself up to root. In a container the path may name the cgroup
// as the host sees it while root holds the container's own: the walk then
// finds no file until root, whose limit is the container's.
func cgroupDirs(root, path string) []string {
	var dirs []string
	p := filepath.Clean("/" + path)
	for range maxCgroupDepth {
		dirs = append(dirs, filepath.Join(root, p))
		if p == "/" {
			break
		}
		p = filepath.Dir(p)
	}
	return dirs
}

func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// readCgroupLimit reads one limit file: "max" or a number past
// unlimitedCgroup is none (0), as is a file that is not there.
func readCgroupLimit(path string) (int64, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(raw))
	if s == "max" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s: %q is neither max nor a size in bytes", path, s)
	}
	if v >= unlimitedCgroup {
		return 0, nil
	}
	return v, nil
}

// machineMemory reads MemTotal of /proc/meminfo, in bytes.
func machineMemory(meminfo string) (int64, error) {
	raw, err := os.ReadFile(meminfo)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(raw)) {
		rest, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: MemTotal %q: %w", meminfo, strings.TrimSpace(rest), err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%s: no MemTotal", meminfo)
}

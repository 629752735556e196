package main

import (
	"context"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/naradmq/narad/cluster/testnet"
)

// The limit reaches --print-config from the flag, the variable and the
// file; a value that is neither 0, -1 nor 64 MiB or more stops the node
// before anything starts, naming the flag and what it takes.
func TestMemoryLimitFlagVariableAndFileAndTheirRefusals(t *testing.T) {
	t.Setenv("NARAD_MEMORY_LIMIT_BYTES", "")
	os.Unsetenv("NARAD_MEMORY_LIMIT_BYTES")
	if got := printedConfig(t)["memory-limit-bytes"]; got != "0" {
		t.Errorf("default: got %q, want 0 (derived)", got)
	}
	if got := printedConfig(t, "--memory-limit-bytes", "2147483648")["memory-limit-bytes"]; got != "2147483648" {
		t.Errorf("flag: got %q, want 2147483648", got)
	}
	if got := printedConfig(t, "--config", writeConfig(t, "memory-limit-bytes: 1073741824\n"))["memory-limit-bytes"]; got != "1073741824" {
		t.Errorf("file: got %q, want 1073741824", got)
	}
	for _, v := range []string{"1000", "-2", "67108863"} {
		err := runServe(context.Background(), []string{"--memory-limit-bytes", v, "--print-config"}, io.Discard, io.Discard)
		if !errors.Is(err, errMemoryLimit) || !strings.Contains(err.Error(), "at least 67108864") {
			t.Errorf("--memory-limit-bytes %s: got %v, want errMemoryLimit saying what it takes", v, err)
		}
	}
	err := runServe(context.Background(), []string{"--config", writeConfig(t, "memory-limit-bytes: 2GiB\n"), "--print-config"}, io.Discard, io.Discard)
	if !errors.Is(err, errBadConfig) || !strings.Contains(err.Error(), "want a whole number") {
		t.Errorf("file with 2GiB: got %v, want errBadConfig asking for a whole number", err)
	}
	t.Setenv("NARAD_MEMORY_LIMIT_BYTES", "lots")
	err = runServe(context.Background(), []string{"--print-config"}, io.Discard, io.Discard)
	if !errors.Is(err, errBadEnv) || !strings.Contains(err.Error(), "NARAD_MEMORY_LIMIT_BYTES") {
		t.Errorf("NARAD_MEMORY_LIMIT_BYTES=lots: got %v, want errBadEnv naming the variable", err)
	}
}

func TestMemoryLimitIsTheFlagElseAShareOfTheCgroupElseOfTheMachine(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name           string
		flag           int64
		goMemLimit     bool
		cgroup, system int64
		want           memoryLimit
	}{
		{"the flag", 3 * gib, true, 2 * gib, 16 * gib, memoryLimit{bytes: 3 * gib, source: "flag"}},
		{"none asked", -1, false, 2 * gib, 16 * gib, memoryLimit{source: "none"}},
		{"GOMEMLIMIT stands", 0, true, 2 * gib, 16 * gib, memoryLimit{source: "GOMEMLIMIT"}},
		{"the cgroup's", 0, false, 2 * gib, 16 * gib, memoryLimit{bytes: 1_717_986_918, source: "cgroup", of: 2 * gib}},
		{"the machine's", 0, false, 0, 16 * gib, memoryLimit{bytes: 13_743_895_347, source: "machine", of: 16 * gib}},
		{"a tiny cgroup still gets the least", 0, false, 10 << 20, 16 * gib, memoryLimit{bytes: minMemoryLimitBytes, source: "cgroup", of: 10 << 20}},
		{"nothing known", 0, false, 0, 0, memoryLimit{source: "none"}},
	} {
		if got := chooseMemoryLimit(tc.flag, tc.goMemLimit, tc.cgroup, tc.system); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// cgroupTree writes files under a fresh root: path -> content.
func cgroupTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, text := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestCgroupLimitIsTheLowestOnTheWayUpInV2AndV1(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"v2: the parent's limit holds the child", map[string]string{
			"self":                       "0::/pods/narad-0\n",
			"fs/pods/narad-0/memory.max": "max\n",
			"fs/pods/memory.max":         "2147483648\n",
		}, 2 << 30},
		{"v2: the lower of two", map[string]string{
			"self":                       "0::/pods/narad-0\n",
			"fs/pods/narad-0/memory.max": "1073741824\n",
			"fs/pods/memory.max":         "2147483648\n",
		}, 1 << 30},
		{"v2 in a container: the host's path is not there, the root's file is", map[string]string{
			"self":          "0::/kubepods/burstable/pod1234/abcd\n",
			"fs/memory.max": "536870912\n",
		}, 512 << 20},
		{"v2: max everywhere is none", map[string]string{
			"self":          "0::/\n",
			"fs/memory.max": "max\n",
		}, 0},
		{"v1: unlimited is the largest page-aligned int64", map[string]string{
			"self": "4:memory:/process_api/x\n0::/\n",
			"fs/memory/process_api/x/memory.limit_in_bytes": "9223372036854771712\n",
			"fs/memory/memory.limit_in_bytes":               "805306368\n",
		}, 768 << 20},
		{"v1: unlimited alone is none", map[string]string{
			"self":                            "4:memory:/\n",
			"fs/memory/memory.limit_in_bytes": "9223372036854771712\n",
		}, 0},
		{"v1 with other controllers on the line", map[string]string{
			"self":                            "3:cpu,memory:/\n",
			"fs/memory/memory.limit_in_bytes": "805306368\n",
		}, 768 << 20},
		{"no cgroup files at all", map[string]string{"self": "0::/\n"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := cgroupTree(t, tc.files)
			got, err := cgroupMemoryLimit(filepath.Join(root, "fs"), filepath.Join(root, "self"))
			if err != nil || got != tc.want {
				t.Errorf("got %d, %v; want %d, no error", got, err, tc.want)
			}
		})
	}
	root := cgroupTree(t, map[string]string{"self": "0::/\n", "fs/memory.max": "lots\n"})
	if got, err := cgroupMemoryLimit(filepath.Join(root, "fs"), filepath.Join(root, "self")); err == nil || !strings.Contains(err.Error(), `"lots" is neither max nor a size`) {
		t.Errorf("memory.max of lots: got %d, %v; want an error quoting it", got, err)
	}
	if got, err := cgroupMemoryLimit(filepath.Join(root, "fs"), filepath.Join(root, "no-such-file")); got != 0 || err != nil {
		t.Errorf("no /proc/self/cgroup: got %d, %v; want 0 (none), no error", got, err)
	}
}

func TestMachineMemoryIsMemTotal(t *testing.T) {
	root := cgroupTree(t, map[string]string{"meminfo": "MemTotal:       24683772 kB\nMemFree:        1000 kB\n"})
	got, err := machineMemory(filepath.Join(root, "meminfo"))
	if err != nil || got != 24683772<<10 {
		t.Errorf("got %d, %v; want %d", got, err, int64(24683772)<<10)
	}
	root = cgroupTree(t, map[string]string{"meminfo": "MemFree: 1000 kB\n"})
	if _, err := machineMemory(filepath.Join(root, "meminfo")); err == nil {
		t.Error("a meminfo without MemTotal: got no error, want one")
	}
}

// The limit chosen is the runtime's, and none is set as none: a node
// started after another in the same process does not keep the first's.
func TestTheChosenLimitIsTheRuntimes(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	log := testnet.Logger(t)
	setMemoryLimit(256<<20, log)
	if got := debug.SetMemoryLimit(-1); got != 256<<20 {
		t.Errorf("after --memory-limit-bytes 256 MiB: the runtime's is %d, want %d", got, 256<<20)
	}
	setMemoryLimit(memoryLimitNone, log)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("after --memory-limit-bytes -1: the runtime's is %d, want none (MaxInt64)", got)
	}
	setMemoryLimit(memoryLimitDerived, log)
	if got := debug.SetMemoryLimit(-1); got == math.MaxInt64 || got < minMemoryLimitBytes {
		t.Errorf("derived: the runtime's is %d, want a limit of at least %d (this machine has a /proc/meminfo)", got, minMemoryLimitBytes)
	}
}

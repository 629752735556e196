package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/bench/proc"
)

// shortProfile is the run CI makes: 20 s of faults on three nodes. Seed 5
// draws kill n3, stop n1, term n3 (TestTheShortProfileThrowsEveryKind).
var shortProfile = []string{"-seed", "5", "-duration", "20s", "-nodes", "3", "-gap", "1s-2s", "-faults", "kill,term,stop"}

func TestTheShortProfileThrowsEveryKind(t *testing.T) {
	cfg, err := parseFlags(shortProfile, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	s := Schedule(cfg.seed, cfg.plan())
	for _, k := range cfg.kinds {
		if n := len(slices.DeleteFunc(slices.Clone(s), func(f Fault) bool { return f.Kind != k })); n < 1 {
			t.Errorf("%s: got %d in %v, want at least 1", k, n, s)
		}
	}
}

// TestShortProfileLosesNothing runs the short profile on real processes:
// narad built once from this checkout, NATS and three nodes, a kill, a
// term and a stop under load, then the history. A minute or so on two
// cores; skipped with -short and under the race detector.
func TestShortProfileLosesNothing(t *testing.T) {
	runProfile(t, shortProfile)
}

// partitionProfile is the short run of the first kinds past the signals
// that need no more than three nodes and one NATS server: seed 3 draws a
// leader kill, then a cut of n1 (TestThePartitionProfileThrowsACutAndALeader).
var partitionProfile = []string{"-seed", "3", "-duration", "8s", "-nodes", "3", "-gap", "1s-2s", "-faults", "cut,leader"}

func TestThePartitionProfileThrowsACutAndALeader(t *testing.T) {
	cfg, err := parseFlags(partitionProfile, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	var got []Kind
	for _, f := range Schedule(cfg.seed, cfg.plan()) {
		got = append(got, f.Kind)
	}
	if want := []Kind{Leader, Cut}; !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestPartitionProfileLosesNothing runs partitionProfile as the short
// profile runs: a node cut off NATS while it lives, and the metadata
// leader killed, under load. About half a minute here; skipped with -short
// and under the race detector.
func TestPartitionProfileLosesNothing(t *testing.T) {
	runProfile(t, partitionProfile)
}

// netnsProfile cuts Raft while every node lives, pauses the metadata
// leader and fills a disk, a cut and a full disk overlapping on one node:
// seed 11 draws every kind in its first four faults, and some together
// (TestTheNetnsProfileThrowsEveryRaftFault).
var netnsProfile = []string{"-seed", "11", "-duration", "40s", "-nodes", "3", "-gap", "1s-2s", "-netns", "-loop-disks", "-overlap",
	"-faults", "raftcut,raftcut1,leaderpause,diskfull"}

func TestTheNetnsProfileThrowsEveryRaftFault(t *testing.T) {
	cfg, err := parseFlags(netnsProfile, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	s := Schedule(cfg.seed, cfg.plan())
	for _, k := range cfg.kinds {
		if !slices.ContainsFunc(s, func(f Fault) bool { return f.Kind == k }) {
			t.Errorf("%s: got none in %v, want at least one", k, s)
		}
	}
	if !slices.ContainsFunc(s, func(f Fault) bool { return f.With != "" }) {
		t.Errorf("got no two faults together in %v, want some", s)
	}
}

// TestNetnsProfileLosesNothing runs netnsProfile on real processes, each
// node in a network namespace of its own with its data on a disk of its
// own: its Raft cut off the others one way and both ways while it serves
// its clients, the metadata leader paused past the dead timeout, a disk
// full to its last block. About a minute; skipped where this process
// cannot make namespaces (root and iproute2) or loop disks (e2fsprogs),
// with -short and under the race detector.
func TestNetnsProfileLosesNothing(t *testing.T) {
	if err := errors.Join(proc.NetnsAvailable(), proc.LoopDisksAvailable()); err != nil {
		t.Skip(err)
	}
	runProfile(t, netnsProfile)
}

// upgradedFrom is the commit a rolling upgrade starts from: main as it
// was before cluster versions, whose nodes report no version and read
// every format they write.
const upgradedFrom = "4111b80"

// TestARollingUpgradeFromAnEarlierCommitLosesNothing builds narad at
// upgradedFrom from this repository's history (git archive, so the
// checkout is untouched), starts three nodes on it under load, upgrades
// them one by one to this checkout's narad (each hands its partitions off,
// restarts on its data, and every move settles), finalizes the cluster
// version, and checks the history. About a minute and a half; skipped in
// a shallow clone, with -short and under the race detector.
func TestARollingUpgradeFromAnEarlierCommitLosesNothing(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("builds an earlier narad and runs a cluster of processes")
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	repo := strings.TrimSpace(string(top))
	if out, _ := exec.Command("git", "-C", repo, "rev-parse", "--is-shallow-repository").Output(); strings.TrimSpace(string(out)) == "true" {
		t.Skipf("a shallow clone lacks %s: clone with its history to run the upgrade", upgradedFrom)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", `git -C "$1" archive "$2" | tar -x -C "$3"`, "sh", repo, upgradedFrom, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", upgradedFrom, err, out)
	}
	old := filepath.Join(t.TempDir(), "narad-"+upgradedFrom)
	build := exec.Command("go", "build", "-o", old, "./cmd/narad")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build narad at %s: %v\n%s", upgradedFrom, err, out)
	}
	runProfile(t, []string{"-seed", "1", "-duration", "30s", "-nodes", "3", "-gap", "2s", "-upgrade-from", old})
}

// runProfile builds narad, runs a profile's flags on real processes and
// checks the history.
func runProfile(t *testing.T, profile []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("a cluster of processes for about a minute")
	}
	if raceEnabled {
		t.Skip("three nodes under the race detector run several times slower")
	}
	dir, err := os.MkdirTemp("", "narad-chaos-test-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := proc.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseFlags(append([]string{"-bin", bin}, profile...), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := run(ctx, cfg, dir, testWriter{t})
	if err != nil {
		t.Fatalf("run: %v (data and logs kept in %s)", err, dir)
	}
	t.Logf("summary:\n%s", sum)
	if sum.Lost != 0 {
		t.Errorf("lost: got %d, want 0 (%v)", sum.Lost, sum.LostIDs)
	}
	for _, c := range []struct {
		what string
		got  int
	}{{"phantoms", sum.Phantoms}, {"offset conflicts", sum.OffsetConflicts},
		{"deliveries past a high watermark", sum.BeyondWatermark}, {"unreadable bodies", sum.Unreadable}} {
		if c.got != 0 {
			t.Errorf("%s: got %d, want 0", c.what, c.got)
		}
	}
	if sum.Failure != "" {
		t.Errorf("run stopped early: got %q, want nothing", sum.Failure)
	}
	if got, want := len(sum.Ran), len(sum.Schedule); got != want {
		t.Errorf("faults thrown: got %d, want %d", got, want)
	}
	if t.Failed() {
		t.Logf("data and logs kept in %s", dir)
		return
	}
	os.RemoveAll(dir)
}

// testWriter sends the run's progress lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

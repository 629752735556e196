package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/naradmq/narad/bench/proc"
)

func TestFlagsOutOfRangeAreRefused(t *testing.T) {
	for _, args := range [][]string{
		{"-per-topic", "2"},
		{"-per-topic", "109"},
		{"-partitions", "150", "-per-topic", "100"},
		{"-partitions", "0"},
		{"-partitions", "ten"},
		{"-concurrency", "0"},
		{"-ready-timeout", "0s"},
	} {
		if _, err := parseFlags(args, io.Discard); !errors.Is(err, errConfig) {
			t.Errorf("%v: got %v, want errConfig", args, err)
		}
	}
}

func TestAMetricsSeriesMissingIsAnErrorNotAZero(t *testing.T) {
	text := "go_memstats_heap_alloc_bytes{node=\"n1\"} 1.5e+06\n"
	var s sample
	err := s.parseMetrics([]byte(text))
	if err == nil || !strings.Contains(err.Error(), "no ") {
		t.Fatalf("parse of a text without most series: got %v, want an error naming one", err)
	}
}

func TestMetricsAreReadWithTheirLabelsAndHelpLines(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines{node="n1"} 42
go_memstats_heap_alloc_bytes{node="n1"} 1.5e+06
go_memstats_heap_inuse_bytes{node="n1"} 2097152
go_memstats_stack_inuse_bytes{node="n1"} 65536
go_memstats_sys_bytes{node="n1"} 9e+06
narad_partitions_owned{node="n1"} 300
narad_partitions_owned_other 7
`
	var s sample
	if err := s.parseMetrics([]byte(text)); err != nil {
		t.Fatal(err)
	}
	want := sample{HeapLive: 1_500_000, HeapInuse: 2 << 20, StackInuse: 64 << 10, GoSys: 9_000_000, Goroutines: 42, Owned: 300, Resting: -1}
	if s != want {
		t.Errorf("got %+v, want %+v", s, want)
	}
}

func TestPerPartitionIsTheGrowthOverTheEmptyNode(t *testing.T) {
	empty := sample{HeapLive: 10 << 20, RSS: 50 << 20, Goroutines: 100, FDs: 40}
	idle := sample{HeapLive: 20 << 20, RSS: 70 << 20, Goroutines: 1100, FDs: 40}
	got := idle.minus(empty, 1000)
	if got.HeapLive != 10<<20/1000.0 || got.RSS != 20<<20/1000.0 || got.Goroutines != 1 || got.FDs != 0 {
		t.Errorf("got %+v, want heap %.0f B, RSS %.0f B, 1 goroutine and no file per partition", got, 10<<20/1000.0, 20<<20/1000.0)
	}
}

// One real node with a few hundred partitions through every phase: the
// report's fields are filled and hold together. No figure is held to a
// bound here: the bench is what measures them.
func TestAScaleOfAFewHundredPartitionsFillsEveryFigure(t *testing.T) {
	if testing.Short() {
		t.Skip("builds narad and runs a node: not in -short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("RSS and open files are read from Linux's /proc")
	}
	ctx := context.Background()
	dir := t.TempDir()
	bin, err := proc.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseFlags([]string{"-partitions", "300", "-per-topic", "100", "-heap-profile", filepath.Join(dir, "heap")}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r, err := measureScale(ctx, cfg, bin, dir, 300, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]sample{"empty": r.Empty, "idle": r.Idle, "active": r.Active, "restarted": r.Restarted} {
		if s.HeapLive <= 0 || s.HeapInuse < s.HeapLive {
			t.Errorf("%s: heap live %d, in use %d: want live > 0 and in use >= live", name, s.HeapLive, s.HeapInuse)
		}
		if s.RSS <= s.HeapLive || s.GoSys <= s.HeapInuse {
			t.Errorf("%s: RSS %d, Go sys %d, heap live %d, in use %d: want RSS above the live heap, sys above the heap in use", name, s.RSS, s.GoSys, s.HeapLive, s.HeapInuse)
		}
		if s.Goroutines <= 0 || s.FDs <= 0 {
			t.Errorf("%s: %d goroutines, %d open files: want some of each", name, s.Goroutines, s.FDs)
		}
	}
	if r.Empty.Owned != 0 {
		t.Errorf("empty node serves %d partitions, want 0", r.Empty.Owned)
	}
	for name, s := range map[string]sample{"idle": r.Idle, "active": r.Active, "restarted": r.Restarted} {
		if s.Owned != 300 {
			t.Errorf("%s: node serves %d partitions, want 300", name, s.Owned)
		}
	}
	if r.Create <= 0 || r.Ready <= 0 || r.Served < r.Ready {
		t.Errorf("create %v, restart to /readyz %v, to serving all %v: want each > 0 and served no sooner than ready", r.Create, r.Ready, r.Served)
	}
	if fi, err := os.Stat(filepath.Join(dir, "heap", "idle-300.heap.pprof")); err != nil || fi.Size() == 0 {
		t.Errorf("heap profile of the idle sample: %v, want a file with a profile", err)
	}
	out := formatReports([]report{r})
	for _, want := range []string{"per idle partition", "per active partition", "300 partitions on one node"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}

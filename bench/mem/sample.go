package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// sample is one reading of a node's memory and resources.
type sample struct {
	// HeapLive is go_memstats_heap_alloc_bytes right after a forced
	// collection: the bytes the node's objects hold.
	HeapLive int64
	// HeapInuse is go_memstats_heap_inuse_bytes: the spans those objects
	// sit in, fragmentation included.
	HeapInuse int64
	// StackInuse is go_memstats_stack_inuse_bytes: the goroutines' stacks.
	StackInuse int64
	// GoSys is go_memstats_sys_bytes: all the runtime took from the OS.
	GoSys int64
	// RSS is VmRSS of /proc/<pid>/status, in bytes.
	RSS int64
	// Goroutines is go_goroutines.
	Goroutines int64
	// FDs are the entries of /proc/<pid>/fd.
	FDs int64
	// Owned is narad_partitions_owned: the partitions the node serves.
	Owned int64
	// Resting is narad_partitions_resting: those of them at rest, with no
	// actor (-1: a binary from before the gauge).
	Resting int64
}

// metricNames maps the /metrics series a sample reads to its fields.
func (s *sample) metricNames() map[string]*int64 {
	return map[string]*int64{
		"go_memstats_heap_alloc_bytes":  &s.HeapLive,
		"go_memstats_heap_inuse_bytes":  &s.HeapInuse,
		"go_memstats_stack_inuse_bytes": &s.StackInuse,
		"go_memstats_sys_bytes":         &s.GoSys,
		"go_goroutines":                 &s.Goroutines,
		"narad_partitions_owned":        &s.Owned,
	}
}

// maxMetricsBytes bounds a /metrics read: a node's is some hundred KiB.
const maxMetricsBytes = 16 << 20

// parseMetrics fills s's series from a Prometheus text exposition; a
// series missing from it is an error, since a zero would read as a figure.
func (s *sample) parseMetrics(text []byte) error {
	want := s.metricNames()
	want["narad_partitions_resting"] = &s.Resting
	s.Resting = -1
	seen := map[string]bool{}
	for line := range bytes.Lines(text) {
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		f := strings.Fields(string(line))
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(f[0], "{")
		p, ok := want[name]
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return fmt.Errorf("metrics: %s %q: %w", name, f[len(f)-1], err)
		}
		*p = int64(v)
		seen[name] = true
	}
	for name := range want {
		if !seen[name] && name != "narad_partitions_resting" { // optional
			return fmt.Errorf("metrics: no %s", name)
		}
	}
	return nil
}

// readProc fills RSS and FDs from /proc/<pid>.
func (s *sample) readProc(pid int) error {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	found := false
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return fmt.Errorf("VmRSS %q: %w", rest, err)
		}
		s.RSS, found = kb<<10, true
	}
	if !found {
		return fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return err
	}
	s.FDs = int64(len(fds))
	return nil
}

// target is what a sample reads: the node's process, its client API (for
// /metrics) and its --pprof listener (for the forced collection).
type target struct {
	pid        int
	api, pprof string // base URLs
	user, pass string
}

// take forces a collection (saving the heap profile it answers to
// heapPath, when not ""), then reads /metrics and /proc.
func (t target) take(ctx context.Context, heapPath string) (sample, error) {
	var s sample
	prof, err := get(ctx, t.pprof+"/debug/pprof/heap?gc=1", "", "")
	if err != nil {
		return s, fmt.Errorf("forced collection: %w", err)
	}
	if heapPath != "" {
		if err := os.WriteFile(heapPath, prof, 0o644); err != nil {
			return s, err
		}
	}
	text, err := get(ctx, t.api+"/metrics", t.user, t.pass)
	if err != nil {
		return s, err
	}
	if err := s.parseMetrics(text); err != nil {
		return s, err
	}
	return s, s.readProc(t.pid)
}

// owned reads narad_partitions_owned, for the waits.
func (t target) owned(ctx context.Context) (int64, error) {
	text, err := get(ctx, t.api+"/metrics", t.user, t.pass)
	if err != nil {
		return 0, err
	}
	var s sample
	if err := s.parseMetrics(text); err != nil {
		return 0, err
	}
	return s.Owned, nil
}

// settleReadings is how many readings in a row, a second apart, must find
// no fewer goroutines than the one before, and as many partitions resting,
// for the node to count as settled: the mailbox pool's workers end after
// 2 s without a run (actors/mailbox.Idle), so a sample right after a burst
// would count them; and a node that just started surveys its partitions
// (partition.Supervisor.survey), each opening and resting again.
const settleReadings = 3

// settle waits until the node's goroutines stop falling and its resting
// partitions stop changing, at most timeout;
// past it the sample is taken anyway (and says so through logf), since a
// node that never settles is itself a figure.
func (t target) settle(ctx context.Context, timeout time.Duration, logf func(string, ...any)) {
	deadline := time.Now().Add(timeout)
	last, lastResting, steady := int64(-1), int64(-1), 0
	for steady < settleReadings {
		if time.Now().After(deadline) {
			logf("goroutines still falling after %v (%d): sampling anyway", timeout, last)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		text, err := get(ctx, t.api+"/metrics", t.user, t.pass)
		if err != nil {
			continue
		}
		var s sample
		if s.parseMetrics(text) != nil {
			continue
		}
		// The resting count still moving is a survey after a start (or
		// rests) under way: partitions opening and closing.
		if last >= 0 && s.Goroutines >= last && s.Resting == lastResting {
			steady++
		} else {
			steady = 0
		}
		last, lastResting = s.Goroutines, s.Resting
	}
}

// get GETs u (with Basic credentials when user is set) and answers a 200's
// body.
func get(ctx context.Context, u, user, pass string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBytes))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s: %.200s", u, resp.Status, body)
	}
	return body, nil
}

// perPartition is a sample's growth over the empty node's, per partition:
// what each of n partitions costs.
type perPartition struct {
	HeapLive, HeapInuse, StackInuse, GoSys, RSS float64 // bytes
	Goroutines, FDs                             float64
}

func (s sample) minus(base sample, n int) perPartition {
	d := func(a, b int64) float64 { return float64(a-b) / float64(n) }
	return perPartition{
		HeapLive: d(s.HeapLive, base.HeapLive), HeapInuse: d(s.HeapInuse, base.HeapInuse),
		StackInuse: d(s.StackInuse, base.StackInuse), GoSys: d(s.GoSys, base.GoSys), RSS: d(s.RSS, base.RSS),
		Goroutines: d(s.Goroutines, base.Goroutines), FDs: d(s.FDs, base.FDs),
	}
}

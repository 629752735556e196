//go:build linux

package actors

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// fdLimitChild marks the re-executed test binary: setrlimit binds the whole
// process, so the lowered limit lives in a child of its own.
const fdLimitChild = "NARAD_TEST_FD_LIMIT_CHILD"

const (
	fdLimit          = 1024
	fdLimitParts     = 5000
	fdLimitSlotFiles = fdLimit / 2
)

// A node with 5,000 partitions runs under RLIMIT_NOFILE 1,024: produce two
// records to every partition, read each back. Without the bound on active
// segment files the partitions cannot open: run the child alone with
// MaxOpenSegmentFiles at 5,000 to watch it fail,
//
//	go test -c -o /tmp/a.test ./actors && NARAD_TEST_FD_LIMIT_CHILD=unbounded /tmp/a.test -test.run '^TestFiveThousand'
func TestFiveThousandPartitionsUnderADescriptorLimitOf1024(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: 5,000 partitions in a child process")
	}
	if os.Getenv(fdLimitChild) != "" {
		runUnderFDLimit(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFiveThousandPartitionsUnderADescriptorLimitOf1024$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), fdLimitChild+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child under RLIMIT_NOFILE %d: %v\n%s", fdLimit, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "fd-limit:") {
			t.Log(strings.TrimSpace(line))
		}
	}
}

func runUnderFDLimit(t *testing.T) {
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: fdLimit, Max: fdLimit}); err != nil {
		t.Fatalf("setrlimit: %v", err)
	}
	started := time.Now()
	tn := newTestNode(t, func(c *Config) {
		c.TopicMaxPartitions = fdLimitParts
		c.Log.MaxOpenSegmentFiles = fdLimitSlotFiles
		if os.Getenv(fdLimitChild) == "unbounded" {
			c.Log.MaxOpenSegmentFiles = fdLimitParts
		}
	})
	ctx := context.Background()
	if _, err := tn.n.CreateTopic(ctx, messages.CreateTopicRequest{Name: "wide", Partitions: fdLimitParts}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	var peak peakFDs
	stop := peak.sample(t)
	defer stop()
	for round := range 2 {
		produceToEvery(t, tn.n, round)
		readEvery(t, tn.n, int64(round))
		t.Logf("fd-limit: round %d done at %v", round, time.Since(started).Round(time.Millisecond))
	}
	stop()
	st := tn.n.files.Stats()
	t.Logf("fd-limit: %d partitions, RLIMIT_NOFILE %d: peak %d descriptors, %d segment files held (limit %d), %d opens, %d evictions, %d waits, %v",
		fdLimitParts, fdLimit, peak.max(), st.Open, fdLimitSlotFiles, st.Opens, st.Evictions, st.Waits, time.Since(started).Round(time.Millisecond))
	if st.Open > fdLimitSlotFiles {
		t.Fatalf("got %d segment files held, want at most %d", st.Open, fdLimitSlotFiles)
	}
	if st.Evictions == 0 {
		t.Fatalf("got no evictions with %d partitions and %d files, want some", fdLimitParts, fdLimitSlotFiles)
	}
}

// produceToEvery sends one record to each partition, a few at a time.
func produceToEvery(t *testing.T, n *Node, round int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, fdLimitParts)
	parts := make(chan int)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range parts {
				body := []byte(fmt.Sprintf("round-%d-partition-%d", round, p))
				if err := n.Produce(context.Background(), api.Record{Topic: "wide", Partition: p, Body: body, Received: time.Now()}); err != nil {
					errs <- fmt.Errorf("produce to %d: %w", p, err)
				}
			}
		}()
	}
	for p := range fdLimitParts {
		parts <- p
	}
	close(parts)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// readEvery waits until each partition serves its record at offset and
// checks the body.
func readEvery(t *testing.T, n *Node, offset int64) {
	t.Helper()
	missing := make([]int, fdLimitParts)
	for p := range missing {
		missing[p] = p
	}
	deadline := time.Now().Add(60 * time.Second)
	var last error
	for len(missing) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("round %d: %d partitions never served their record; last error %v", offset, len(missing), last)
		}
		var still []int
		for _, p := range missing {
			d, ok, err := n.Replay(context.Background(), "wide", p, offset)
			if err != nil || !ok {
				last = err
				still = append(still, p)
				continue
			}
			if want := fmt.Sprintf("round-%d-partition-%d", offset, p); string(d.Body) != want {
				t.Fatalf("partition %d offset %d: got %q, want %q", p, offset, d.Body, want)
			}
		}
		if missing = still; len(missing) > 0 {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// peakFDs samples the process's open descriptors.
type peakFDs struct {
	mu   sync.Mutex
	peak int
}

func (p *peakFDs) sample(t *testing.T) (stop func()) {
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		for {
			if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
				p.mu.Lock()
				p.peak = max(p.peak, len(ents))
				p.mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-exited }) }
}

func (p *peakFDs) max() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.peak
}

// startupChild marks the re-executed benchmark binary that starts a node on
// a data dir made by its parent and reports what the start cost, in a fresh
// process so that its peak RSS is the start's alone.
const startupChild = "NARAD_BENCH_STARTUP_DIR"

// BenchmarkNodeRestart times a node's start on a data dir holding N
// partitions of one record each, until every partition serves its record,
// and reads the fresh process's VmRSS and VmHWM; partitions=0 is the
// baseline of the same run, files=10000 the same start with every active
// segment held open (no eviction).
//
//	go test ./actors -run '^$' -bench NodeRestart -benchtime 1x
func BenchmarkNodeRestart(b *testing.B) {
	if dir := os.Getenv(startupChild); dir != "" {
		startAndReport(b, dir)
		return
	}
	for _, c := range []struct{ parts, files int }{{0, 2048}, {10_000, 2048}, {10_000, 10_000}} {
		parts := c.parts
		b.Run(fmt.Sprintf("partitions=%d/files=%d", parts, c.files), func(b *testing.B) {
			tn := newTestNode(b, func(c *Config) { c.TopicMaxPartitions = 100 })
			const perTopic = 100
			for i := 0; i < parts/perTopic; i++ {
				topic := fmt.Sprintf("t%03d", i)
				if _, err := tn.n.CreateTopic(context.Background(), messages.CreateTopicRequest{Name: topic, Partitions: perTopic}); err != nil {
					b.Fatalf("create topic: %v", err)
				}
				for p := range perTopic {
					if err := tn.n.Produce(context.Background(), api.Record{Topic: topic, Partition: p, Body: []byte("x"), Received: time.Now()}); err != nil {
						b.Fatalf("produce: %v", err)
					}
				}
			}
			waitServed(b, tn.n, parts, perTopic, 120*time.Second)
			tn.stop()
			var ready, hwm, rss float64
			for range b.N {
				cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkNodeRestart$", "-test.benchtime=1x")
				cmd.Env = append(os.Environ(), startupChild+"="+tn.cfg.DataDir, "NARAD_BENCH_STARTUP_RAFT="+tn.mcfg.RaftAddr,
					fmt.Sprintf("NARAD_BENCH_STARTUP_PARTS=%d", parts), fmt.Sprintf("NARAD_BENCH_STARTUP_FILES=%d", c.files))
				out, err := cmd.CombinedOutput()
				if err != nil {
					b.Fatalf("child: %v\n%s", err, out)
				}
				b.Logf("%s", bytes.TrimSpace(out[bytes.Index(out, []byte("startup:")):]))
				var r, h, s float64
				if _, err := fmt.Sscanf(string(out[strings.Index(string(out), "startup:"):]), "startup: ready %f ms, VmHWM %f MB, VmRSS %f MB", &r, &h, &s); err != nil {
					b.Fatalf("child output: %v\n%s", err, out)
				}
				ready, hwm, rss = ready+r, max(hwm, h), max(rss, s)
			}
			b.ReportMetric(ready/float64(b.N), "ms-to-ready")
			b.ReportMetric(hwm, "MB-VmHWM")
			b.ReportMetric(rss, "MB-VmRSS")
		})
	}
}

func startAndReport(b *testing.B, dir string) {
	var parts int
	fmt.Sscan(os.Getenv("NARAD_BENCH_STARTUP_PARTS"), &parts)
	cfg := DefaultConfig()
	fmt.Sscan(os.Getenv("NARAD_BENCH_STARTUP_FILES"), &cfg.Log.MaxOpenSegmentFiles)
	cfg.DataDir = dir
	cfg.HTTPAddr = "127.0.0.1:0" // nothing calls it; a port picked here could be taken by the listen
	cfg.TopicMaxPartitions = 100
	mcfg := metastoreConfigFor(cfg, os.Getenv("NARAD_BENCH_STARTUP_RAFT"))
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg, mcfg, testLogger(b))
	if err != nil {
		b.Fatalf("start: %v", err)
	}
	defer n.Stop(context.Background())
	waitServed(b, n, parts, 100, 120*time.Second)
	ready := time.Since(began)
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatalf("read status: %v", err)
	}
	fmt.Printf("startup: ready %.1f ms, VmHWM %.1f MB, VmRSS %.1f MB, %d segment files held\n",
		float64(ready)/float64(time.Millisecond), statusMB(status, "VmHWM:"), statusMB(status, "VmRSS:"), n.files.Stats().Open)
}

// statusMB reads a /proc/self/status field given in kB.
func statusMB(status []byte, field string) float64 {
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(rest), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}

// waitServed waits until each of parts partitions (topics t000.. of
// perTopic) serves its record at offset 0.
func waitServed(b testing.TB, n *Node, parts, perTopic int, within time.Duration) {
	b.Helper()
	deadline := time.Now().Add(within)
	for i := 0; i < parts; i++ {
		topic, p := fmt.Sprintf("t%03d", i/perTopic), i%perTopic
		for {
			_, ok, err := n.Replay(context.Background(), topic, p, 0)
			if err == nil && ok {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s/%d never served its record: %v", topic, p, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// metastoreConfigFor is newTestNode's metastore config at a given Raft
// address (a node host keeps the address it was first started with).
func metastoreConfigFor(cfg Config, raft string) metastore.Config {
	return metastore.Config{NodeID: cfg.NodeID, ReplicaID: 1, RaftAddr: raft, RTTMillisecond: 2, ElectionRTT: 20, HeartbeatRTT: 2}
}

// Twelve partitions share two segment files: every commit reopens its
// file and closes another's, and every record produced is served, before
// and after a restart (run it with -race).
func TestTwelvePartitionsShareTwoSegmentFiles(t *testing.T) {
	tn := newTestNode(t, func(c *Config) { c.Log.MaxOpenSegmentFiles = 2 })
	const parts, records = 12, 5
	ctx := context.Background()
	if _, err := tn.n.CreateTopic(ctx, messages.CreateTopicRequest{Name: "narrow", Partitions: parts}); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	for r := range records {
		for p := range parts {
			body := []byte(fmt.Sprintf("%d-%d", p, r))
			if err := tn.n.Produce(ctx, api.Record{Topic: "narrow", Partition: p, Body: body, Received: time.Now()}); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	check := func(when string) {
		for p := range parts {
			for r := range records {
				var d messages.Delivery
				waitFor(t, func() bool {
					var ok bool
					var err error
					d, ok, err = tn.n.Replay(ctx, "narrow", p, int64(r))
					return err == nil && ok
				})
				if want := fmt.Sprintf("%d-%d", p, r); string(d.Body) != want {
					t.Fatalf("%s: partition %d offset %d: got %q, want %q", when, p, r, d.Body, want)
				}
			}
		}
	}
	check("before the restart")
	if st := tn.n.files.Stats(); st.Open > 2 || st.Evictions == 0 {
		t.Fatalf("got %d files held and %d evictions, want at most 2 and some", st.Open, st.Evictions)
	}
	tn.restart()
	check("after the restart")
}

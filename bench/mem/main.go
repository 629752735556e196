// Command mem measures what a partition costs a node in memory (issue 50,
// item 3): one `narad serve` process and `narad nats` on this machine, with
// N partitions on the node, and for each N the node's Go heap, RSS,
// goroutines and open files, idle and after one record went through each
// partition, divided by N; then the node's restart with all of them.
//
//	go run ./bench/mem                                 # 10,000 then 100,000 partitions; minutes
//	go run ./bench/mem -partitions 300 -per-topic 100  # a small run, about half a minute
//
// For each N of -partitions, on a fresh node:
//
//   - empty: the node ready, no topic: the baseline every figure is taken
//     against;
//   - idle: N partitions created (N / -per-topic topics) and served
//     (narad_partitions_owned = N), nothing written;
//   - active: one record produced to each partition, consumed and acked;
//   - restart: SIGTERM (the hand-off off: a node alone has nowhere to hand
//     to), a new process on the same data, exec to /readyz 200 and to
//     narad_partitions_owned = N again, and the same figures after it.
//
// Each sample waits for the node to settle (its goroutines stop falling:
// the mailbox pool's workers end 2 s after their last run; and its
// narad_partitions_resting, the "resting" column, stops changing: a node
// that just started surveys the partitions it started at rest), then forces a
// garbage collection (GET /debug/pprof/heap?gc=1 on the node's --pprof
// listener), so the heap figure is the live heap, not whatever garbage the
// last collection left. A figure per partition is
// (sample - empty) / N. With -heap-profile DIR the heap profile of each
// sample is kept (DIR/<phase>-<N>.heap.pprof): `go tool pprof -top
// -sample_index=inuse_space -diff_base DIR/empty-<N>.heap.pprof
// DIR/idle-<N>.heap.pprof` names what the partitions hold.
//
// Run it from the module root: it builds ./cmd/narad (or runs -bin). It
// stops every process it started, also on error and on Ctrl-C, and removes
// its temp dir unless -keep or a run failed.
//
// Start with run below, then measureScale (scale.go); sample.go reads a
// node's figures, load.go creates and drives the partitions.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/naradmq/narad/bench/proc"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is every flag.
type config struct {
	scales   []int // partitions per node, one fresh node each; a scale listed twice runs twice
	perTopic int
	// conc bounds the requests in flight: creates, produces, consumes.
	conc int

	readyTimeout, createTimeout, activeTimeout time.Duration
	// settleTimeout bounds the wait before each sample for the node's
	// goroutines to stop falling.
	settleTimeout time.Duration

	bin, heapProfileDir string
	keep                bool
}

// errConfig is a flag out of its range.
var errConfig = errors.New("invalid flag")

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("mem", flag.ContinueOnError)
	fs.SetOutput(stderr)
	scales := fs.String("partitions", "10000,100000", "partitions per node, comma-separated: each on a fresh node")
	fs.IntVar(&c.perTopic, "per-topic", 100, "partitions per topic (3..108), a divisor of every -partitions")
	fs.IntVar(&c.conc, "concurrency", 16, "requests in flight (creates, produces, consumes)")
	fs.DurationVar(&c.readyTimeout, "ready-timeout", 5*time.Minute, "bound on a node's start: exec to /readyz 200, and to serving every partition")
	fs.DurationVar(&c.createTimeout, "create-timeout", 15*time.Minute, "bound on creating the partitions until the node serves them all")
	fs.DurationVar(&c.activeTimeout, "active-timeout", 15*time.Minute, "bound on the record through every partition")
	fs.DurationVar(&c.settleTimeout, "settle-timeout", time.Minute, "bound on the wait before each sample for the node's goroutines to stop falling (the mailbox pool's idle workers end)")
	fs.StringVar(&c.bin, "bin", "", "run this narad binary instead of building ./cmd/narad")
	fs.StringVar(&c.heapProfileDir, "heap-profile", "", "keep the heap profile of each sample in this directory (<phase>-<partitions>.heap.pprof)")
	fs.BoolVar(&c.keep, "keep", false, "keep the temp dir (data and logs) and print its path")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	for _, s := range strings.Split(*scales, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return c, fmt.Errorf("-partitions: %q is not a count: %w", s, errConfig)
		}
		c.scales = append(c.scales, n)
	}
	return c, c.validate()
}

func (c config) validate() error {
	if c.perTopic < 3 || c.perTopic > 108 {
		return fmt.Errorf("-per-topic %d: must be within 3..108 (the API's topic bounds): %w", c.perTopic, errConfig)
	}
	if c.conc <= 0 {
		return fmt.Errorf("-concurrency %d: must be positive: %w", c.conc, errConfig)
	}
	for _, n := range c.scales {
		if n <= 0 || n%c.perTopic != 0 {
			return fmt.Errorf("-partitions %d: must be a positive multiple of -per-topic %d: %w", n, c.perTopic, errConfig)
		}
	}
	for name, d := range map[string]time.Duration{"ready-timeout": c.readyTimeout, "create-timeout": c.createTimeout, "active-timeout": c.activeTimeout, "settle-timeout": c.settleTimeout} {
		if d <= 0 {
			return fmt.Errorf("-%s %v: must be positive: %w", name, d, errConfig)
		}
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "mem:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "narad-mem-")
	if err != nil {
		fmt.Fprintln(stderr, "mem:", err)
		return 1
	}
	err = runAll(ctx, cfg, dir, stdout, stderr)
	if err != nil || cfg.keep {
		fmt.Fprintf(stderr, "mem: kept %s\n", dir)
	} else {
		os.RemoveAll(dir)
	}
	if err != nil {
		fmt.Fprintln(stderr, "mem:", err)
		return 1
	}
	return 0
}

// runAll measures every scale and prints the table once all are in (a
// scale that fails prints what the ones before it measured).
func runAll(ctx context.Context, cfg config, dir string, stdout, stderr io.Writer) error {
	bin := cfg.bin
	if bin == "" {
		fmt.Fprintln(stderr, "mem: building ./cmd/narad")
		var err error
		if bin, err = proc.Build(ctx, dir); err != nil {
			return err
		}
	}
	var reports []report
	defer func() { fmt.Fprint(stdout, formatReports(reports)) }()
	for _, n := range cfg.scales {
		r, err := measureScale(ctx, cfg, bin, dir, n, func(format string, args ...any) {
			fmt.Fprintf(stderr, "mem: "+format+"\n", args...)
		})
		if err != nil {
			return fmt.Errorf("%d partitions: %w", n, err)
		}
		reports = append(reports, r)
	}
	return nil
}

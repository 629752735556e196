// Command bulk measures seed 003's figures (issue 12, "Figures") on a real
// cluster of this machine: narad nats and three narad serve processes, each
// with its own data directory under a temp dir.
//
//	go run ./bench/bulk            # 30,000 partitions; minutes
//	go run ./bench/bulk -quick     # 300 partitions, 60 of 1 MB; about a minute per variant
//
// For each variant (-variants on,off: the shutdown hand-off at its default,
// and off through NARAD_SHUTDOWN_HANDOFF_TIMEOUT=0s) it runs two scenarios
// on fresh clusters:
//
//   - stop: create the partitions and write -records-per-partition records to
//     each; a write pass (one record to every partition, until every high
//     watermark moved) with every node up; SIGTERM of n3 (time to its exit,
//     partitions it handed off); the same write pass right after; n3's
//     restart (exec to /readyz, and until it owns its share again within
//     1%); then every acknowledged record is looked for by replaying every
//     partition, and a loss fails the run.
//   - join: partitions of about 1 MB each; n4 joins (until no move is in
//     flight and it owns its share), then is decommissioned (until it has
//     left the member list).
//
// It prints one table (figure | with hand-off | without | seed | goal),
// stops every process it started (also on error and on Ctrl-C) and removes
// its temp dir unless -keep, a run failed, or a wait ran out (keepReason).
// Every wait is bounded by a flag; a figure whose wait ran out prints as
// "timeout after X". Run it from the module root: it
// builds ./cmd/narad. Each child runs in a process group of its own and is
// killed with it; a SIGKILL of this program itself leaves them running (find
// them by the temp dir in their arguments).
//
// Start with run in main.go, then stopScenario and joinScenario
// (scenario.go); cluster.go starts and stops the processes (over
// bench/proc), load.go writes and reads records, table.go prints the
// figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// config is every flag.
type config struct {
	variants []bool // true: the hand-off on

	topics, perTopic, records int
	joinTopics, joinPerTopic  int
	joinPartitionBytes        int
	joinRecordBytes           int

	// Concurrency bounds: topic creates, produces and stats reads in flight.
	createConc, produceConc, readConc int

	pollInterval, rssPoll time.Duration

	readyTimeout, fillTimeout, stopTimeout, passTimeout time.Duration
	restartTimeout, settleTimeout, rebalanceTimeout     time.Duration
	// handoffTimeout is the on variant's hand-off timeout; 0 keeps the
	// nodes' default.
	handoffTimeout time.Duration

	skipStop, skipJoin, keep bool
	// createOnly ends the stop scenario after its creates: their time and,
	// with -profile, their profile.
	createOnly bool
	quick      bool
	// repeat runs every variant's scenarios this many times, each on fresh
	// clusters, and stops at the first run that fails or loses a record.
	repeat int

	// bin is a narad binary to run instead of building ./cmd/narad, so
	// that two revisions are measured by the same bench.
	bin string
	// profileDir, when set, gets a CPU profile of each node that stays up
	// over profileFor from the SIGTERM of the stop scenario.
	profileDir string
	profileFor time.Duration
}

// quickScale is what -quick sets unless a flag says otherwise.
var quickScale = map[string]string{
	"topics": "3", "partitions-per-topic": "100",
	"join-topics": "1", "join-partitions-per-topic": "60",
	"pass-timeout": "20s",
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("bulk", flag.ContinueOnError)
	fs.SetOutput(stderr)
	variants := fs.String("variants", "on,off", "hand-off variants to run, in order: on (default timeout), off (NARAD_SHUTDOWN_HANDOFF_TIMEOUT=0s)")
	fs.BoolVar(&c.quick, "quick", false, "a small run: 3 topics × 100 partitions, 60 partitions of 1 MB, 20 s write-pass bound")
	fs.IntVar(&c.topics, "topics", 300, "topics of the stop scenario")
	fs.IntVar(&c.perTopic, "partitions-per-topic", 100, "partitions per topic (3..108)")
	fs.IntVar(&c.records, "records-per-partition", 3, "records written to each partition before the figures")
	fs.IntVar(&c.joinTopics, "join-topics", 6, "topics of the join scenario")
	fs.IntVar(&c.joinPerTopic, "join-partitions-per-topic", 100, "partitions per topic of the join scenario (3..108)")
	fs.IntVar(&c.joinPartitionBytes, "join-partition-bytes", 1<<20, "bytes written to each partition of the join scenario")
	fs.IntVar(&c.joinRecordBytes, "join-record-bytes", 64<<10, "record size of the join scenario (at most 1 MiB, the broker's body limit)")
	fs.IntVar(&c.createConc, "create-concurrency", 8, "topic creates in flight")
	fs.IntVar(&c.produceConc, "produce-concurrency", 64, "produces in flight")
	fs.IntVar(&c.readConc, "read-concurrency", 16, "stats reads and replays in flight")
	fs.DurationVar(&c.pollInterval, "poll", 250*time.Millisecond, "pause between two reads of what a wait watches")
	fs.DurationVar(&c.rssPoll, "rss-poll", 250*time.Millisecond, "how often each process's VmHWM is read")
	fs.DurationVar(&c.readyTimeout, "ready-timeout", 2*time.Minute, "bound on a node's start (exec to /readyz 200)")
	fs.DurationVar(&c.fillTimeout, "fill-timeout", 10*time.Minute, "bound on creating and filling the partitions, until their high watermarks show it")
	fs.DurationVar(&c.handoffTimeout, "handoff-timeout", 0, "the nodes' shutdown hand-off timeout in the on variant (0: their default; the caller's NARAD_SHUTDOWN_HANDOFF_TIMEOUT never reaches them)")
	fs.DurationVar(&c.stopTimeout, "stop-timeout", time.Minute, "bound on a node's graceful stop; past it the node is killed")
	fs.DurationVar(&c.passTimeout, "pass-timeout", time.Minute, "bound on a write pass")
	fs.DurationVar(&c.restartTimeout, "restart-timeout", 2*time.Minute, "bound on the restarted node owning its share again")
	fs.DurationVar(&c.settleTimeout, "settle-timeout", time.Minute, "bound on every acknowledged record reaching a partition before the loss check")
	fs.DurationVar(&c.rebalanceTimeout, "rebalance-timeout", 2*time.Minute, "bound on the rebalance onto n4 and on its decommission, each")
	fs.BoolVar(&c.skipStop, "skip-stop", false, "skip the stop scenario")
	fs.BoolVar(&c.skipJoin, "skip-join", false, "skip the join scenario")
	fs.BoolVar(&c.createOnly, "create-only", false, "end the stop scenario after its topic creates (with -profile, a profile of the creates)")
	fs.BoolVar(&c.keep, "keep", false, "keep the temp dir (data and logs) and print its path; it is kept anyway when a run fails, loses a record or a wait runs out")
	fs.StringVar(&c.bin, "bin", "", "run this narad binary instead of building ./cmd/narad (an A/B of two revisions under one bench)")
	fs.StringVar(&c.profileDir, "profile", "", "write a CPU profile of each node that stays up, over -profile-for from the SIGTERM of the stop scenario, and of each node's own shutdown (--stop-profile), into this directory (the nodes serve --pprof on loopback)")
	fs.DurationVar(&c.profileFor, "profile-for", 15*time.Second, "how long each -profile CPU profile runs (whole seconds)")
	fs.IntVar(&c.repeat, "repeat", 1, "run the scenarios this many times, each on fresh clusters, stopping at the first failure or loss; a clean run's data is removed before the next")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for name, v := range quickScale {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return c, err
				}
			}
		}
	}
	for _, v := range strings.Split(*variants, ",") {
		switch strings.TrimSpace(v) {
		case "on":
			c.variants = append(c.variants, true)
		case "off":
			c.variants = append(c.variants, false)
		default:
			return c, fmt.Errorf("-variants: %q is neither on nor off: %w", v, errConfig)
		}
	}
	return c, c.validate()
}

// errConfig is a flag out of its range.
var errConfig = errors.New("invalid flag")

func (c config) validate() error {
	positive := map[string]int{"topics": c.topics, "records-per-partition": c.records, "join-topics": c.joinTopics,
		"join-partition-bytes": c.joinPartitionBytes, "join-record-bytes": c.joinRecordBytes,
		"create-concurrency": c.createConc, "produce-concurrency": c.produceConc, "read-concurrency": c.readConc,
		"repeat": c.repeat}
	for name, v := range positive {
		if v <= 0 {
			return fmt.Errorf("-%s %d: must be positive: %w", name, v, errConfig)
		}
	}
	for name, v := range map[string]int{"partitions-per-topic": c.perTopic, "join-partitions-per-topic": c.joinPerTopic} {
		if v < 3 || v > 108 {
			return fmt.Errorf("-%s %d: must be within 3..108 (the API's topic bounds): %w", name, v, errConfig)
		}
	}
	if c.joinRecordBytes > 1<<20-64 {
		return fmt.Errorf("-join-record-bytes %d: a body must stay under 1 MiB with its id: %w", c.joinRecordBytes, errConfig)
	}
	durations := map[string]time.Duration{"poll": c.pollInterval, "rss-poll": c.rssPoll, "ready-timeout": c.readyTimeout,
		"fill-timeout": c.fillTimeout, "stop-timeout": c.stopTimeout, "pass-timeout": c.passTimeout,
		"restart-timeout": c.restartTimeout, "settle-timeout": c.settleTimeout, "rebalance-timeout": c.rebalanceTimeout,
		"profile-for": c.profileFor}
	for name, d := range durations {
		if d <= 0 {
			return fmt.Errorf("-%s %v: must be positive: %w", name, d, errConfig)
		}
	}
	if c.profileFor%time.Second != 0 {
		return fmt.Errorf("-profile-for %v: whole seconds only (the profile endpoint's unit): %w", c.profileFor, errConfig)
	}
	if len(c.variants) == 0 {
		return fmt.Errorf("-variants: none: %w", errConfig)
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "bulk:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "narad-bulk-")
	if err != nil {
		fmt.Fprintln(stderr, "bulk:", err)
		return 1
	}
	r := &runner{cfg: cfg, dir: dir, log: stderr}
	err = r.repeatAll(ctx, stdout)
	if why := keepReason(err, r.failedChecks, r.timeouts, cfg.keep); why != "" {
		fmt.Fprintf(stderr, "bulk: kept %s: %s\n", dir, why)
	} else {
		os.RemoveAll(dir)
	}
	switch {
	case err != nil:
		fmt.Fprintln(stderr, "bulk:", err)
		return 1
	case r.failedChecks > 0:
		return 1
	}
	return 0
}

// keepReason says why the temp dir stays, "" when it goes: the evidence of
// a failed run, or of a wait that ran out (each run's logs, and the data
// of the run where it ran out), is never removed.
func keepReason(err error, failedChecks int, timeouts []string, keep bool) string {
	switch {
	case err != nil || failedChecks > 0:
		return "data directories and logs of the failed run"
	case len(timeouts) > 0:
		return "a wait ran out (" + strings.Join(timeouts, "; ") + "): every run's logs, and the data of the runs where one ran out"
	case keep:
		return "as -keep asked"
	}
	return ""
}

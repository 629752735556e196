// Command chaos is a nemesis run (issue 30): a cluster of real processes on
// this machine (narad nats, or three routed with -nats 3, and -nodes narad
// serve, through bench/proc), producers and consumers on one topic checked
// by bench/history, and a seeded schedule of faults thrown one at a time:
//
//	go run ./bench/chaos                    # 60 s of faults, a seed drawn and printed
//	go run ./bench/chaos -seed 42           # replays seed 42's schedule (same flags)
//	go run ./bench/chaos -faults stop -duration 5m -json
//	go run ./bench/chaos -nats 3 -faults natskill,cut,leader
//	go run ./bench/chaos -nodes 4 -faults decommission,kill
//	go run ./bench/chaos -netns -faults raftcut,raftcut1,leaderpause
//	go run ./bench/chaos -loop-disks -faults diskfull
//	go run ./bench/chaos -netns -loop-disks -overlap  # two at once on a node
//	go run ./bench/chaos -upgrade-from ./narad-old    # a rolling upgrade to this narad
//
// The faults (-faults; every kind the flags allow by default) are kill (SIGKILL,
// then a restart on its data), term (SIGTERM: the node hands its
// partitions off on its way out, then a restart), stop (SIGSTOP held past
// the cluster's dead timeout, then SIGCONT), cut (the node's proxies in
// front of NATS sever and refuse its connections past the dead timeout:
// a partition, the process lives), leader (a kill of the metadata leader
// of the moment), leaderpause (SIGSTOP of the metadata leader of the
// moment past the dead timeout, then SIGCONT), raftcut and raftcut1
// (-netns, each node in a network namespace of its own: every packet
// between the node and the others dropped, both ways or only its own, past
// the dead timeout, while it still reaches NATS and its clients; then
// healed), diskfull (-loop-disks, each node's data on an ext4 image of
// its own: the node's disk filled to the last block, then freed),
// natskill (-nats 3: SIGKILL of one NATS server, then a
// restart), decommission (-nodes 4: a node decommissioned through the
// admin API until it left, then a fresh node joins in its place), and disk
// and clock (fsyncs or writes failing, a clock stepped, on one node
// through narad serve's --debug-faults routes, which the run turns on only
// for them). After each the node comes back and the run waits for its
// /readyz before the next. With -overlap each fault that leaves its node
// alive (stop, cut, raftcut, raftcut1, diskfull) comes with a second such
// kind on the same node, put on and taken off together. With -upgrade-from
// the cluster starts on an older narad and the only faults are a rolling
// upgrade to this one (each node stopped, started on its data with the new
// binary, every move settled), then the cluster version's finalize.
//
// The schedule is a pure function of -seed and the flags, printed before
// the run. Producers produce while faults are thrown; consumers consume and
// ack until every record answered 202 was consumed, or none was for -drain. Then
// everything is stopped and the run prints the seed, the schedule as it ran
// and the history: records produced, lost, phantoms, offset conflicts and
// duplicate deliveries, those counted against the fault whose window they
// fall in. It exits 1 on a record lost, a phantom, a reused offset or a
// delivery past a high watermark (LOST, loudly), or a node that did not
// come back; 2 when the cluster could not be set up. The temp dir (data
// and logs) is removed unless -keep or the run failed.
//
// Start with run in main.go; schedule.go draws the faults (Schedule),
// nemesis.go throws them at the cluster, admin.go those that go through a
// node's HTTP (the metadata leader, decommission, disk and clock),
// workers.go is the producers and consumers, report.go the summary; the
// proxies are bench/proc's Proxy. chaos_test.go is the short profile CI
// runs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/bench/proc"
	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/messages"
)

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// config is every flag.
type config struct {
	bin      string
	seed     uint64
	duration time.Duration
	nodes    int
	// nats is how many NATS servers: 1, or 3 routed as a NATS cluster.
	nats       int
	partitions int
	producers  int
	consumers  int
	kinds      []Kind
	gapMin     time.Duration
	gapMax     time.Duration
	json       bool
	keep       bool
	// netns runs each node in a network namespace of its own (root and
	// iproute2), which the Raft cuts need.
	netns bool
	// loopDisks puts each node's data on an ext4 image of its own (root),
	// which a diskfull needs.
	loopDisks bool
	// overlap throws two faults that impair at once (Plan.Overlap).
	overlap bool
	// upgradeFrom, when set, is an older narad the cluster starts on; the
	// run then upgrades it node by node to bin (UpgradeSchedule) instead
	// of throwing faults, and finalizes the cluster version.
	upgradeFrom string

	// rate bounds the produces per second of all producers together; 0
	// leaves them unbounded.
	rate int
	// drain bounds how long the consumers go on without a delivery once
	// the producers stopped (a backlog that drains slowly is not a loss;
	// one that stops draining is); it is not a bound on the whole drain.
	drain time.Duration
	// deadTimeout and heartbeat are the nodes' --dead-timeout and
	// --heartbeat-interval.
	deadTimeout, heartbeat time.Duration
	// visibility is the topic's lease (visibility_timeout_ms): how soon a
	// delivery whose consumer lost it is delivered again.
	visibility time.Duration
	// password is the run's admin password, drawn by run.
	password string
	// readyTimeout bounds a node's start to /readyz; stopTimeout a term's
	// wait for the exit, past which the node is killed.
	readyTimeout, stopTimeout time.Duration
	// settleTimeout bounds a decommission's leaving and the moves onto
	// the node that takes its place.
	settleTimeout time.Duration
}

// plan is what Schedule draws the faults of cfg for.
func (c config) plan() Plan {
	return Plan{Duration: c.duration, GapMin: c.gapMin, GapMax: c.gapMax, Nodes: c.nodes, NATS: c.nats, Visibility: c.visibility, Kinds: c.kinds,
		DeadTimeout: c.deadTimeout, Heartbeat: c.heartbeat, Overlap: c.overlap}
}

// loopDiskMiB is each node's disk with -loop-disks: a sparse image, so its
// size costs only what the node writes; room for a run's records many
// times over, and small enough that a fill is one allocation.
const loopDiskMiB = 2048

// errConfig is a flag out of its range.
var errConfig = errors.New("invalid flag")

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.bin, "bin", "", "the narad binary to run; built from this checkout into the temp dir when empty")
	fs.Uint64Var(&c.seed, "seed", 0, "the schedule's seed; 0 draws one (printed, so that -seed replays it)")
	fs.DurationVar(&c.duration, "duration", 60*time.Second, "how long faults are thrown (planned: the last starts before it)")
	fs.IntVar(&c.nodes, "nodes", 3, "narad serve processes, all voters (3 to 4)")
	fs.IntVar(&c.nats, "nats", 1, "NATS servers: 1, or 3 routed as a NATS cluster (each node given all three, through its proxies)")
	fs.IntVar(&c.partitions, "partitions", 12, "partitions of the topic")
	fs.IntVar(&c.producers, "producers", 4, "producers")
	fs.IntVar(&c.consumers, "consumers", 4, "consumers")
	faults := fs.String("faults", "", "the faults to throw, a comma list of "+strings.Join(kindNames(), ", ")+"; empty is every kind the flags allow (natskill with -nats 3, decommission with -nodes 4, raftcut and raftcut1 with -netns, diskfull with -loop-disks)")
	gap := fs.String("gap", "2s-5s", "pause before each fault, a duration or a range drawn from the seed")
	fs.BoolVar(&c.json, "json", false, "print the summary as JSON on stdout (the progress stays on stderr)")
	fs.BoolVar(&c.netns, "netns", false, "run each node in a network namespace of its own (root and iproute2's ip), so that raftcut and raftcut1 can cut two nodes' Raft while both live")
	fs.BoolVar(&c.loopDisks, "loop-disks", false, "put each node's data on an ext4 image of its own on a loop device (root and e2fsprogs), so that diskfull can fill one node's disk")
	fs.BoolVar(&c.overlap, "overlap", false, "throw each fault that leaves its node alive (stop, cut, raftcut, raftcut1, diskfull) together with a second such kind of -faults on the same node")
	fs.StringVar(&c.upgradeFrom, "upgrade-from", "", "an older narad binary to start the cluster on; the run upgrades it node by node to -bin under load (no other faults), then finalizes the cluster version")
	fs.BoolVar(&c.keep, "keep", false, "keep the temp dir (data and logs); it is kept anyway when the run fails")
	fs.IntVar(&c.rate, "rate", 1000, "produces per second over all producers; 0 is as fast as they go")
	fs.DurationVar(&c.drain, "drain", 2*time.Minute, "once the producers stopped, the consumers go on while records are delivered, and give up after this long without one delivered")
	fs.DurationVar(&c.deadTimeout, "dead-timeout", 3*time.Second, "the nodes' --dead-timeout, which a stop is held past")
	fs.DurationVar(&c.heartbeat, "heartbeat", 500*time.Millisecond, "the nodes' --heartbeat-interval (at most a third of -dead-timeout)")
	fs.DurationVar(&c.visibility, "visibility", 5*time.Second, "the topic's visibility timeout (lease)")
	fs.DurationVar(&c.readyTimeout, "ready-timeout", 2*time.Minute, "bound on a node's start to /readyz 200")
	fs.DurationVar(&c.settleTimeout, "settle-timeout", 2*time.Minute, "bound on a decommission's leaving, and on the moves onto the node joining in its place")
	fs.DurationVar(&c.stopTimeout, "stop-timeout", time.Minute, "bound on a term's wait for the node's exit; past it the node is killed")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q: %w", fs.Args(), errConfig)
	}
	var err error
	switch {
	case c.upgradeFrom != "" && *faults != "":
		return c, fmt.Errorf("-upgrade-from throws no faults but the upgrade's: drop -faults %s: %w", *faults, errConfig)
	case c.upgradeFrom != "":
		c.kinds = []Kind{Upgrade}
	case *faults == "":
		c.kinds = validKinds(c.nodes, c.nats, c.netns, c.loopDisks)
	default:
		if c.kinds, err = parseKinds(*faults); err != nil {
			return c, err
		}
	}
	if c.gapMin, c.gapMax, err = parseGap(*gap); err != nil {
		return c, err
	}
	return c, c.validate()
}

func (c config) validate() error {
	if c.nodes < 3 || c.nodes > 4 {
		return fmt.Errorf("-nodes %d: want 3 or 4 (one faulted at a time keeps a quorum): %w", c.nodes, errConfig)
	}
	if c.nats != 1 && c.nats != 3 {
		return fmt.Errorf("-nats %d: want 1 or 3: %w", c.nats, errConfig)
	}
	if slices.Contains(c.kinds, Decommission) && c.nodes != 4 {
		return fmt.Errorf("-faults decommission needs -nodes 4 (a decommission never leaves fewer than 3 voters): %w", errConfig)
	}
	if slices.Contains(c.kinds, NATSKill) && c.nats != 3 {
		return fmt.Errorf("-faults natskill needs -nats 3 (a NATS server killed alone takes every node off NATS): %w", errConfig)
	}
	for _, k := range c.kinds {
		if needsNetns(k) && !c.netns {
			return fmt.Errorf("-faults %s needs -netns (two nodes' Raft can be cut apart only in namespaces of their own): %w", k, errConfig)
		}
	}
	if slices.Contains(c.kinds, DiskFull) && !c.loopDisks {
		return fmt.Errorf("-faults diskfull needs -loop-disks (one node's disk fills only on a file system of its own): %w", errConfig)
	}
	for name, v := range map[string]int{"partitions": c.partitions, "producers": c.producers, "consumers": c.consumers} {
		if v <= 0 {
			return fmt.Errorf("-%s %d: must be positive: %w", name, v, errConfig)
		}
	}
	if c.rate < 0 {
		return fmt.Errorf("-rate %d: must be 0 or more: %w", c.rate, errConfig)
	}
	durations := map[string]time.Duration{"duration": c.duration, "drain": c.drain, "dead-timeout": c.deadTimeout,
		"heartbeat": c.heartbeat, "visibility": c.visibility, "ready-timeout": c.readyTimeout, "stop-timeout": c.stopTimeout, "settle-timeout": c.settleTimeout}
	for name, d := range durations {
		if d <= 0 {
			return fmt.Errorf("-%s %v: must be positive: %w", name, d, errConfig)
		}
	}
	if c.heartbeat > c.deadTimeout/3 {
		return fmt.Errorf("-heartbeat %v: at most a third of -dead-timeout %v (the node refuses more): %w", c.heartbeat, c.deadTimeout, errConfig)
	}
	if c.visibility%time.Millisecond != 0 {
		return fmt.Errorf("-visibility %v: whole milliseconds: %w", c.visibility, errConfig)
	}
	return nil
}

// Exit codes: a clean run, a broken promise (or a node that did not come
// back), and a run that could not start.
const (
	exitOK     = 0
	exitFailed = 1
	exitSetup  = 2
)

// cli parses the flags, runs, prints the summary and says how to exit.
func cli(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return exitSetup
	}
	if cfg.seed == 0 {
		cfg.seed = rand.Uint64()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := os.MkdirTemp("", "narad-chaos-")
	if err != nil {
		fmt.Fprintln(stderr, "chaos:", err)
		return exitSetup
	}
	sum, err := run(ctx, cfg, dir, stderr)
	code := exitOK
	switch {
	case errors.Is(err, errSetup):
		fmt.Fprintln(stderr, "chaos:", err)
		code = exitSetup
	case err != nil:
		fmt.Fprintln(stderr, "chaos:", err)
		code = exitFailed
	}
	if sum != nil {
		if !sum.OK() {
			code = exitFailed
		}
		if cfg.json {
			err = sum.writeJSON(stdout)
		} else {
			_, err = io.WriteString(stdout, sum.String())
		}
		if err != nil {
			fmt.Fprintln(stderr, "chaos:", err)
		}
	}
	// The evidence of a failed run (every node's data and log) is what
	// finds the cause: it is never removed.
	switch {
	case code != exitOK:
		fmt.Fprintf(stderr, "chaos: kept %s (data and logs); replay with -seed %d and the same flags\n", dir, cfg.seed)
	case cfg.keep:
		fmt.Fprintln(stderr, "chaos: kept", dir)
	default:
		os.RemoveAll(dir)
	}
	return code
}

// errSetup is a cluster that could not be set up (exit 2).
var errSetup = errors.New("setup failed")

// clientTimeout bounds one request on top of a consume's long poll: a
// stopped node accepts connections and answers nothing.
const clientTimeout = 5 * time.Second

// run sets up the cluster under dir, throws cfg's schedule at it while the
// workers produce and consume, drains, stops everything and judges the
// history. The summary is nil when the run did not get as far as the
// workers (errSetup) or was interrupted.
func run(ctx context.Context, cfg config, dir string, log io.Writer) (*summary, error) {
	logf := func(format string, args ...any) {
		fmt.Fprintf(log, "%s chaos: %s\n", time.Now().Format("15:04:05.0"), fmt.Sprintf(format, args...))
	}
	cfg.password = newPassword()
	schedule := Schedule(cfg.seed, cfg.plan())
	if cfg.upgradeFrom != "" {
		schedule = UpgradeSchedule(cfg.nodes, cfg.gapMin)
	}
	fmt.Fprintf(log, "chaos: seed %d: %d faults planned over %v (replay: %s)\n", cfg.seed, len(schedule), cfg.duration, replay(cfg))
	for _, f := range schedule {
		fmt.Fprintf(log, "  %s\n", f)
	}
	c, bin, proxies, bs, err := setup(ctx, cfg, dir, logf)
	if c != nil {
		defer c.Close()
	}
	for _, ps := range proxies {
		for _, p := range ps {
			defer p.Close()
		}
	}
	for _, b := range bs {
		defer b.Close()
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %w", errSetup, err)
	}

	start := time.Now()
	w := newWorkers(bs, cfg, start)
	stopProducing := make(chan struct{})
	// Consumes get their own context, so that the long polls still open
	// end with the drain; acks keep ctx.
	consumeCtx, stopConsuming := context.WithCancel(ctx)
	defer stopConsuming()
	var producersDone atomic.Bool
	done := func() bool { return producersDone.Load() && w.hist.Outstanding() == 0 }
	var producers, consumers sync.WaitGroup
	for i := range cfg.producers {
		producers.Go(func() { w.producer(ctx, i, stopProducing) })
	}
	for j := range cfg.consumers {
		consumers.Go(func() { w.consumer(ctx, consumeCtx, j, done, stopConsuming) })
	}

	nem := &nemesis{c: c, proxies: proxies, cfg: cfg, start: start, logf: logf, bin: bin}
	thrown, faultErr := nem.throw(ctx, schedule)
	if faultErr == nil && cfg.upgradeFrom != "" {
		faultErr = nem.finalize(ctx)
	}
	if faultErr == nil {
		// Faults that ended early leave the producers the rest of
		// -duration.
		sleep(ctx, time.Until(start.Add(cfg.duration)))
	}
	close(stopProducing)
	producers.Wait()
	producersDone.Store(true)
	stopped := time.Now()
	logf("producers stopped at %s: %d records answered 202 not delivered yet; draining (until none is delivered for %v)",
		seconds(stopped.Sub(start)), w.hist.Outstanding(), cfg.drain)
	drainWatch := make(chan struct{})
	go func() {
		t := time.NewTicker(drainPollInterval)
		defer t.Stop()
		watchDrain(consumeCtx, drainWatch, t.C, w.hist.Outstanding, cfg.drain, logf)
		stopConsuming()
	}()
	consumers.Wait()
	close(drainWatch)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	drained := w.hist.Outstanding() == 0
	drainTook := time.Since(stopped)
	if err := watermarks(ctx, bs, w.hist, cfg.partitions); err != nil {
		logf("high watermarks: %v (deliveries past them go unchecked)", err)
	}
	sum := newSummary(cfg, schedule, thrown, w)
	sum.Drained, sum.DrainTook = drained, drainTook
	if faultErr != nil {
		sum.Failure, _, _ = strings.Cut(faultErr.Error(), "\n")
	}
	if !sum.OK() {
		for _, n := range c.Nodes {
			fmt.Fprintln(log, proc.Tail(n.Proc.LogPath))
		}
	}
	return sum, nil
}

// setup starts NATS and the nodes under dir, each node's NATS connections
// through proxies of its own (proxies[i] are node i's, one per NATS server),
// waits for each node to be ready, and creates the topic. The caller closes
// the cluster, the proxies and the brokers returned, also with an error.
func setup(ctx context.Context, cfg config, dir string, logf func(string, ...any)) (c *proc.Cluster, bin string, proxies [][]*proc.Proxy, bs []*client.Broker, err error) {
	bin = cfg.bin
	if bin == "" {
		logf("building narad into %s", dir)
		if bin, err = proc.Build(ctx, dir); err != nil {
			return nil, "", nil, nil, err
		}
	}
	first := bin
	if cfg.upgradeFrom != "" {
		first = cfg.upgradeFrom
		logf("the cluster starts on %s and is upgraded to %s", first, bin)
	}
	c, err = proc.New(first, dir, cfg.nodes, cfg.nodes)
	if err != nil {
		return nil, "", nil, nil, err
	}
	if cfg.nats > 1 {
		if err := c.UseNATSCluster(cfg.nats); err != nil {
			return c, bin, nil, nil, err
		}
	}
	if cfg.netns {
		if err := c.UseNetns(); err != nil {
			return c, bin, nil, nil, err
		}
	}
	if cfg.loopDisks {
		if err := c.UseLoopDisks(loopDiskMiB); err != nil {
			return c, bin, nil, nil, err
		}
	}
	// Every node talks to every NATS server through a proxy of its own,
	// always: a cut is then a cut of that node alone, and a run without
	// cuts goes the same way as one with them until the first.
	for _, n := range c.Nodes {
		var ps []*proc.Proxy
		var urls []string
		for _, s := range c.NATSServers {
			p, err := proc.NewProxyOn(c.ListenHost(), s.Addr)
			if err != nil {
				return c, bin, proxies, nil, err
			}
			ps = append(ps, p)
			urls = append(urls, p.URL())
		}
		proxies = append(proxies, ps)
		n.NATSURL = strings.Join(urls, ",")
	}
	password := cfg.password
	// The first metadata leader seeds admin with it; the hand-off keeps
	// its default, which a term relies on.
	c.Env = proc.Environ([]string{"NARAD_ADMIN_PASSWORD", "NARAD_SHUTDOWN_HANDOFF_TIMEOUT"}, "NARAD_ADMIN_PASSWORD="+password)
	c.Args = []string{"--dead-timeout", cfg.deadTimeout.String(), "--heartbeat-interval", cfg.heartbeat.String()}
	if slices.Contains(cfg.kinds, Disk) || slices.Contains(cfg.kinds, Clock) {
		// The fault routes exist only on a node that asks for them.
		c.Args = append(c.Args, "--debug-faults")
	}
	if err := c.StartNATS(ctx, cfg.readyTimeout); err != nil {
		return c, bin, proxies, nil, err
	}
	for _, n := range c.Nodes {
		if err := c.StartNode(n); err != nil {
			return c, bin, proxies, nil, err
		}
	}
	for _, n := range c.Nodes {
		if _, err := c.WaitReady(ctx, n, cfg.readyTimeout); err != nil {
			return c, bin, proxies, nil, err
		}
	}
	for _, n := range c.Nodes {
		b, err := client.New(n.URL(), client.Options{Conns: cfg.producers + cfg.consumers, Timeout: clientTimeout, User: "admin", Password: password})
		if err != nil {
			return c, bin, proxies, bs, err
		}
		bs = append(bs, b)
	}
	if err := createTopic(ctx, cfg, bs); err != nil {
		return c, bin, proxies, bs, err
	}
	logf("cluster up: nats %s (each node through proxies of its own), nodes %s..%s, topic %q of %d partitions, logs in %s",
		c.NATSURL, c.Nodes[0].HTTP, c.Nodes[len(c.Nodes)-1].HTTP, topic, cfg.partitions, dir)
	return c, bin, proxies, bs, nil
}

// createTopic creates the topic and waits until every node serves stats of
// all its partitions. Until the metadata leader seeded admin, a node
// answers 401: that is waited out too, within -ready-timeout.
func createTopic(ctx context.Context, cfg config, bs []*client.Broker) error {
	vis := cfg.visibility.Milliseconds()
	req := messages.CreateTopicRequest{Name: topic, Partitions: cfg.partitions, VisibilityTimeoutMs: &vis}
	ctx, cancel := context.WithTimeout(ctx, cfg.readyTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		_, err := bs[0].CreateTopic(ctx, req)
		if err == nil || client.IsStatus(err, 409) {
			break
		}
		if ctx.Err() != nil || !(retryable(err) || client.IsStatus(err, 401)) {
			return err
		}
		client.Sleep(ctx, backoff(attempt))
	}
	for _, b := range bs {
		for attempt := 1; ; attempt++ {
			d, err := b.GetTopic(ctx, topic)
			if err == nil && len(d.PartitionStats) == cfg.partitions {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("topic %s not served by every node: %w (%v)", topic, ctx.Err(), err)
			}
			client.Sleep(ctx, backoff(attempt))
		}
	}
	return nil
}

// watermarks records every partition's high watermark in h, read once the
// run drained (any node answers; one whose owner is unreachable fails and
// the next is asked, for about half a minute).
func watermarks(ctx context.Context, bs []*client.Broker, h *history.History, partitions int) error {
	var err error
	for attempt := 1; attempt <= 30; attempt++ {
		var d messages.TopicDetails
		d, err = bs[attempt%len(bs)].GetTopic(ctx, topic)
		if err == nil && len(d.PartitionStats) == partitions {
			for _, p := range d.PartitionStats {
				h.HighWatermark(topic, p.Index, p.HighWatermark)
			}
			return nil
		}
		if err == nil {
			err = fmt.Errorf("stats of %d partitions of %d", len(d.PartitionStats), partitions)
		}
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
	return err
}

// newPassword is the run's admin password.
func newPassword() string {
	b := make([]byte, 16)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rand.IntN(36)]
	}
	return string(b)
}

// drainPollInterval is how often watchDrain reads what is outstanding.
const drainPollInterval = 200 * time.Millisecond

// watchDrain returns once outstanding() has not gone down for idle, by
// the times tick delivers (a ticker of drainPollInterval), or ctx ends, or
// stop is closed (the consumers finished), logging the backlog every ten
// seconds. The drain goes on for as long as it makes progress: under faults
// the consumers may fall far behind the producers, and a slow drain is not
// a loss.
func watchDrain(ctx context.Context, stop <-chan struct{}, tick <-chan time.Time, outstanding func() int, idle time.Duration, logf func(string, ...any)) {
	var last int
	var moved, logged time.Time
	first := true
	for {
		var now time.Time
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case now = <-tick:
		}
		n := outstanding()
		if first || n < last {
			last, moved = n, now
		}
		if first {
			first, logged = false, now
		}
		if now.Sub(logged) >= 10*time.Second {
			logged = now
			logf("draining: %d records answered 202 not delivered yet", last)
		}
		if last == 0 || now.Sub(moved) >= idle {
			return
		}
	}
}

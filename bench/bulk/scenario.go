package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/naradmq/narad/bench/history"
	"github.com/naradmq/narad/bench/proc"
)

// runner runs the scenarios of every variant and keeps their figures.
type runner struct {
	cfg config
	dir string
	log io.Writer
	bin string
	// runDir is the current run's directory under dir (its clusters' data
	// and logs); a run that fails leaves it in place.
	runDir string
	// failedChecks counts the history checks that failed (a record lost, a
	// phantom, an offset conflict...), over every run; checked counts the
	// acknowledged records the clean ones looked for.
	failedChecks, checked int
	// timeouts names each wait that ran out, over every run ("run 2:
	// pass.down"): a figure, not a failure, but the run's data and logs
	// are kept as the evidence of what held it.
	timeouts []string
	// run is the number of the run under way (1-based).
	run int
	// figures holds each variant's cells by figure key (table.go).
	figures map[bool]map[string]string
	// losses holds the lines naming each record lost, for the report.
	losses []string
}

func variantName(handoff bool) string {
	if handoff {
		return "on"
	}
	return "off"
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s bulk: %s\n", time.Now().Format("15:04:05.0"), fmt.Sprintf(format, args...))
}

func (r *runner) set(handoff bool, key, cell string) {
	if r.figures[handoff] == nil {
		r.figures[handoff] = map[string]string{}
	}
	r.figures[handoff][key] = cell
}

// repeatAll builds narad once, then runs every variant's scenarios
// cfg.repeat times, each run on fresh clusters in a directory of its own,
// printing each run's table. It stops at the first run that fails or loses
// a record and leaves that run's directory in place; a clean run's is
// removed before the next, unless -keep.
func (r *runner) repeatAll(ctx context.Context, stdout io.Writer) error {
	r.bin = r.cfg.bin
	if r.bin == "" {
		r.logf("building narad into %s", r.dir)
		bin, err := proc.Build(ctx, r.dir)
		if err != nil {
			return err
		}
		r.bin = bin
	}
	for i := 1; i <= r.cfg.repeat; i++ {
		r.runDir, r.run = filepath.Join(r.dir, fmt.Sprintf("run-%02d", i)), i
		timedOut := len(r.timeouts)
		r.figures, r.losses = map[bool]map[string]string{}, nil
		err := r.all(ctx)
		if r.cfg.repeat > 1 {
			fmt.Fprintf(stdout, "run %d of %d\n", i, r.cfg.repeat)
		}
		fmt.Fprint(stdout, formatTable(r.rows()))
		for _, l := range r.losses {
			fmt.Fprintln(stdout, l)
		}
		if err != nil || r.failedChecks > 0 {
			fmt.Fprintf(stdout, "run %d failed after %d clean runs in a row (%d acknowledged records checked in those)\n", i, i-1, r.checked)
			return err
		}
		if !r.cfg.keep && len(r.timeouts) == timedOut {
			removeData(r.runDir)
		}
	}
	if r.cfg.repeat > 1 {
		fmt.Fprintf(stdout, "%d runs in a row, every history check clean: %d acknowledged records checked\n", r.cfg.repeat, r.checked)
	}
	return nil
}

// all runs each variant's scenarios in turn, so that both variants are
// measured in one invocation on one binary.
func (r *runner) all(ctx context.Context) error {
	for _, v := range r.cfg.variants {
		if !r.cfg.skipStop {
			if err := r.stopScenario(ctx, v); err != nil {
				return fmt.Errorf("stop scenario, hand-off %s: %w", variantName(v), err)
			}
		}
		if !r.cfg.skipJoin {
			if err := r.joinScenario(ctx, v); err != nil {
				return fmt.Errorf("join scenario, hand-off %s: %w", variantName(v), err)
			}
		}
	}
	return nil
}

// boot starts NATS and the voters of a fresh cluster under dir/name and
// waits until each voter is ready. The caller closes the cluster.
func (r *runner) boot(ctx context.Context, name string, handoff bool, total int) (*cluster, error) {
	dir := filepath.Join(r.runDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	c, err := newCluster(r.bin, dir, 3, total, handoff, r.cfg.handoffTimeout, r.cfg.rssPoll)
	if err != nil {
		return c, err
	}
	if r.cfg.profileDir != "" {
		if err := c.ServePprof(); err != nil {
			return c, err
		}
		c.StopProfiles = filepath.Join(r.cfg.profileDir, name)
	}
	if err := c.StartNATS(ctx, r.cfg.readyTimeout); err != nil {
		return c, err
	}
	for _, n := range c.Nodes[:3] {
		if err := c.StartNode(n); err != nil {
			return c, err
		}
	}
	for _, n := range c.Nodes[:3] {
		if _, err := c.WaitReady(ctx, n, r.cfg.readyTimeout); err != nil {
			return c, err
		}
	}
	if err := c.waitAdmin(ctx, r.cfg.readyTimeout); err != nil {
		return c, err
	}
	r.logf("%s: nats %s, nodes %v up, logs in %s", name, c.NATSURL, c.Nodes[0].HTTP, dir)
	return c, nil
}

// stopScenario measures the stop, the write passes and the restart of one
// variant, then checks that nothing acknowledged was lost.
func (r *runner) stopScenario(ctx context.Context, handoff bool) error {
	cfg := r.cfg
	name := variantName(handoff) + "-stop"
	c, err := r.boot(ctx, name, handoff, 3)
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return err
	}
	all, err := newBrokers(c.Nodes, cfg.produceConc)
	if err != nil {
		return err
	}
	defer all.close()
	h := history.New()
	w := &writer{b: all, h: h}
	l := newLayout("bulk", cfg.topics, cfg.perTopic)

	start := time.Now()
	fctx, cancel := context.WithTimeout(ctx, cfg.fillTimeout)
	defer cancel()
	// With -create-only, -profile covers the first -profile-for of the
	// creates instead of the stop.
	createsProfiled := func() {}
	if cfg.createOnly {
		createsProfiled = r.profile(ctx, name+"-create", c.Nodes)
	}
	if err := createTopics(fctx, all, l, cfg.createConc); err != nil {
		return fmt.Errorf("create %d topics: %w", len(l.topics), err)
	}
	created := time.Since(start)
	r.logf("%s: %d partitions created in %s", name, len(l.parts), seconds(created))
	if cfg.createOnly {
		r.set(handoff, "create", seconds(created))
		createsProfiled()
		return nil
	}
	if err := w.fill(fctx, l, "fill", cfg.records, cfg.produceConc); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	filled := waitHWM(fctx, all, l, map[part]int64{}, int64(cfg.records), cfg.readConc, cfg.pollInterval, cfg.fillTimeout, start)
	if filled.err != nil {
		return fmt.Errorf("fill: %d of %d partitions show their records: %w", filled.moved, filled.total, filled.err)
	}
	r.set(handoff, "create", seconds(created))
	r.set(handoff, "fill", seconds(filled.took))
	r.logf("%s: %d records in each partition after %s", name, cfg.records, seconds(filled.took))

	base, err := hwms(ctx, all, l, cfg.readConc)
	if err != nil {
		return err
	}
	up, err := w.pass(ctx, l, "up", base, cfg.produceConc, cfg.readConc, cfg.pollInterval, cfg.passTimeout)
	if err != nil {
		return err
	}
	if errors.Is(up.wait.err, proc.ErrTimeout) {
		r.timedOut(name, "pass.up")
	}
	r.set(handoff, "pass.up", waitCell(up.wait, cfg.passTimeout))
	r.set(handoff, "pass.up.acked", ackedCell(up, cfg.passTimeout))
	r.logf("%s: write pass, every node up: %s", name, waitCell(up.wait, cfg.passTimeout))

	// The baseline of the pass after the stop is read with every node up,
	// so that every partition has one.
	base, err = hwms(ctx, all, l, cfg.readConc)
	if err != nil {
		return err
	}
	victim, rest := c.Nodes[2], c.Nodes[:2]
	live, err := newBrokers(rest, cfg.produceConc)
	if err != nil {
		return err
	}
	defer live.close()
	before, err := ownedBy(ctx, rest[0], victim.ID)
	if err != nil {
		return err
	}
	profiled := r.profile(ctx, name, rest)
	spentBefore, usageErr := usages(c.Nodes)
	took, err := c.Stop(ctx, victim, cfg.stopTimeout)
	spentAfter, usageErr2 := usages(c.Nodes)
	switch {
	case errors.Is(err, proc.ErrTimeout):
		r.timedOut(name, "stop.exit")
		r.set(handoff, "stop.exit", "timeout after "+seconds(cfg.stopTimeout))
		r.logf("%s: %s killed after %s\n%s", name, victim.ID, seconds(cfg.stopTimeout), proc.Tail(victim.Proc.LogPath))
	case err != nil:
		return err
	default:
		r.set(handoff, "stop.exit", seconds(took))
	}
	after, err := ownedBy(ctx, rest[0], victim.ID)
	if err != nil {
		return err
	}
	r.set(handoff, "stop.handed", fmt.Sprintf("%d of %d", before-after, before))
	if took > 0 {
		r.set(handoff, "stop.rate", fmt.Sprintf("%.0f", float64(before-after)/took.Seconds()))
	}
	r.logf("%s: %s stopped in %s, owned %d before and %d after", name, victim.ID, seconds(took), before, after)
	if err := errors.Join(usageErr, usageErr2); err != nil {
		r.logf("%s: CPU of the stop: %v", name, err)
	} else {
		cpu, calls := stopUsage(spentBefore, spentAfter, before-after)
		r.set(handoff, "stop.cpu", cpu)
		r.set(handoff, "stop.syscalls", calls)
		r.logf("%s: CPU of the stop: %s; system calls of n1+n2: %s", name, cpu, calls)
	}
	phases := phaseTimes{}
	for _, n := range rest {
		if err := readPhases(ctx, n.URL(), phases); err != nil {
			r.logf("%s: move phases of %s: %v", name, n.ID, err)
		}
	}
	r.logf("%s: where the moves onto %d nodes spent their time since the cluster started, by phase:\n%s", name, len(rest), phases)
	r.set(handoff, "stop.frozen", frozenCell(phases))

	w.b = live
	down, err := w.pass(ctx, l, "down", base, cfg.produceConc, cfg.readConc, cfg.pollInterval, cfg.passTimeout)
	if err != nil {
		return err
	}
	w.b = all
	profiled()
	if errors.Is(down.wait.err, proc.ErrTimeout) {
		r.timedOut(name, "pass.down")
	}
	r.set(handoff, "pass.down", waitCell(down.wait, cfg.passTimeout))
	r.set(handoff, "pass.down.acked", ackedCell(down, cfg.passTimeout))
	if up.wait.err == nil && down.wait.err == nil && up.wait.took > 0 {
		r.set(handoff, "pass.ratio", fmt.Sprintf("%.2f", down.wait.took.Seconds()/up.wait.took.Seconds()))
	}
	r.logf("%s: write pass after the stop: %s", name, waitCell(down.wait, cfg.passTimeout))

	if err := c.StartNode(victim); err != nil {
		return err
	}
	ready, err := c.WaitReady(ctx, victim, cfg.readyTimeout)
	if err != nil {
		return err
	}
	r.set(handoff, "restart.ready", seconds(ready))
	share := len(l.parts) / 3
	err = proc.Poll(ctx, cfg.restartTimeout, cfg.pollInterval, victim.Proc, func() bool {
		n, err := ownedBy(ctx, rest[0], victim.ID)
		return err == nil && withinBalance(n, share)
	})
	switch {
	case errors.Is(err, proc.ErrTimeout):
		r.timedOut(name, "restart.share")
		r.set(handoff, "restart.share", "timeout after "+seconds(cfg.restartTimeout))
	case err != nil:
		return err
	default:
		r.set(handoff, "restart.share", seconds(time.Since(victim.Proc.Started)))
	}
	r.logf("%s: %s restarted: ready %s, its share %s", name, victim.ID, seconds(ready), r.figures[handoff]["restart.share"])
	returned := phaseTimes{}
	if err := readPhases(ctx, victim.URL(), returned); err != nil {
		r.logf("%s: move phases of %s: %v", name, victim.ID, err)
	} else {
		r.set(handoff, "restart.frozen", frozenCell(returned))
		r.logf("%s: where the moves back onto %s spent their time, by phase:\n%s", name, victim.ID, returned)
	}

	for i, n := range c.Nodes {
		r.set(handoff, fmt.Sprintf("rss.n%d", i+1), fmt.Sprintf("%d MB", n.PeakRSS()>>10))
	}
	err = r.checkLoss(ctx, handoff, name, all, h, l)
	if lines, serr := logSummary(filepath.Join(r.runDir, name)); serr != nil {
		r.logf("%s: summarise the node logs: %v", name, serr)
	} else if len(lines) > 0 {
		r.logf("%s: warnings and errors in the node logs, by message:\n%s", name, strings.Join(lines, "\n"))
	}
	return err
}

// checkLoss waits until the partitions hold at least as many records as
// were acknowledged (records a node held in its ingress WAL while their
// owner was away reach a partition later), then replays every partition
// and looks for every acknowledged id. A record rerouted to a sibling
// partition is found there.
func (r *runner) checkLoss(ctx context.Context, handoff bool, name string, b *brokers, h *history.History, l layout) error {
	cfg := r.cfg
	want := int64(h.Check().Produced)
	err := proc.Poll(ctx, cfg.settleTimeout, cfg.pollInterval, nil, func() bool {
		marks, err := hwms(ctx, b, l, cfg.readConc)
		if err != nil {
			return false
		}
		var sum int64
		for _, m := range marks {
			sum += m
		}
		return sum >= want
	})
	if err != nil && !errors.Is(err, proc.ErrTimeout) {
		return err
	}
	if err := scan(ctx, b, h, l, cfg.readConc); err != nil {
		return err
	}
	rep := h.Check()
	r.logf("%s: %s", name, rep.String())
	if rep.OK() {
		r.checked += rep.Produced
		r.set(handoff, "history", fmt.Sprintf("ok (%d acked)", rep.Produced))
		return nil
	}
	r.failedChecks++
	r.set(handoff, "history", fmt.Sprintf("FAILED: %d lost", len(rep.Lost)))
	r.losses = append(r.losses, fmt.Sprintf("hand-off %s: %s", variantName(handoff), rep.String()))
	for _, id := range rep.Lost {
		r.losses = append(r.losses, "  lost "+id)
	}
	return nil
}

// joinScenario measures a 4th node joining a cluster of large partitions,
// then its decommission.
func (r *runner) joinScenario(ctx context.Context, handoff bool) error {
	cfg := r.cfg
	name := variantName(handoff) + "-join"
	c, err := r.boot(ctx, name, handoff, 4)
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return err
	}
	b, err := newBrokers(c.Nodes[:3], cfg.produceConc)
	if err != nil {
		return err
	}
	defer b.close()
	l := newLayout("big", cfg.joinTopics, cfg.joinPerTopic)
	records := (cfg.joinPartitionBytes + cfg.joinRecordBytes - 1) / cfg.joinRecordBytes
	// The body is the id's JSON around the padding; a few dozen bytes.
	w := &writer{b: b, h: history.New(), pad: max(cfg.joinRecordBytes-64, 0)}
	start := time.Now()
	fctx, cancel := context.WithTimeout(ctx, cfg.fillTimeout)
	defer cancel()
	if err := createTopics(fctx, b, l, cfg.createConc); err != nil {
		return fmt.Errorf("create %d topics: %w", len(l.topics), err)
	}
	// Large records: fewer in flight, so that the ingress WALs stay short.
	if err := w.fill(fctx, l, "big", records, max(cfg.produceConc/4, 1)); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	filled := waitHWM(fctx, b, l, map[part]int64{}, int64(records), cfg.readConc, cfg.pollInterval, cfg.fillTimeout, start)
	if filled.err != nil {
		return fmt.Errorf("fill: %d of %d partitions show their records: %w", filled.moved, filled.total, filled.err)
	}
	r.logf("%s: %d partitions of %d records of %d bytes in %s", name, len(l.parts), records, cfg.joinRecordBytes, seconds(filled.took))

	n4, first := c.Nodes[3], c.Nodes[0]
	if err := c.StartNode(n4); err != nil {
		return err
	}
	share := len(l.parts) / 4
	err = proc.Poll(ctx, cfg.rebalanceTimeout, cfg.pollInterval, n4.Proc, func() bool {
		owned, err := ownedBy(ctx, first, n4.ID)
		if err != nil || !withinBalance(owned, share) {
			return false
		}
		moving, err := movesInFlight(ctx, first.URL())
		return err == nil && moving == 0
	})
	switch {
	case errors.Is(err, proc.ErrTimeout):
		r.timedOut(name, "join.rebalance")
		r.set(handoff, "join.rebalance", "timeout after "+seconds(cfg.rebalanceTimeout))
	case err != nil:
		return fmt.Errorf("rebalance onto %s: %w\n%s", n4.ID, err, proc.Tail(n4.Proc.LogPath))
	default:
		r.set(handoff, "join.rebalance", seconds(time.Since(n4.Proc.Started)))
	}
	r.logf("%s: rebalance onto %s: %s", name, n4.ID, r.figures[handoff]["join.rebalance"])

	if err := decommission(ctx, first.URL(), n4.ID); err != nil {
		return err
	}
	start = time.Now()
	// n4 may exit by itself once it left, so it is not watched here.
	err = proc.Poll(ctx, cfg.rebalanceTimeout, cfg.pollInterval, nil, func() bool {
		ms, err := members(ctx, first.URL())
		if err != nil {
			return false
		}
		_, present := ms[n4.ID]
		return !present
	})
	switch {
	case errors.Is(err, proc.ErrTimeout):
		r.timedOut(name, "join.decommission")
		r.set(handoff, "join.decommission", "timeout after "+seconds(cfg.rebalanceTimeout))
	case err != nil:
		return err
	default:
		r.set(handoff, "join.decommission", seconds(time.Since(start)))
	}
	r.logf("%s: decommission of %s: %s", name, n4.ID, r.figures[handoff]["join.decommission"])
	return nil
}

// ownedBy reads how many partitions member id owns, as node at sees it.
func ownedBy(ctx context.Context, at *proc.Node, id string) (int, error) {
	ms, err := members(ctx, at.URL())
	if err != nil {
		return 0, err
	}
	m, ok := ms[id]
	if !ok {
		return 0, fmt.Errorf("%s is not in %s's member list", id, at.ID)
	}
	return m.OwnedPartitions, nil
}

// withinBalance reports whether owned is share within 1% (at least one
// partition either way): "within the balance" of the issue.
func withinBalance(owned, share int) bool {
	tol := max(1, (share+99)/100)
	return owned >= share-tol && owned <= share+tol
}

// timedOut records that a wait of scenario name ran out in this run.
func (r *runner) timedOut(name, figure string) {
	r.timeouts = append(r.timeouts, fmt.Sprintf("run %d: %s %s", r.run, name, figure))
}

// usages reads what each node has spent so far, in c.Nodes' order.
func usages(nodes []*proc.Node) ([]proc.Usage, error) {
	out := make([]proc.Usage, len(nodes))
	for i, n := range nodes {
		u, err := n.Proc.Usage()
		if err != nil {
			return nil, err
		}
		out[i] = u
	}
	return out, nil
}

// stopUsage prints the stop's CPU (the stopping node, the last of the
// three, and the two that stay) and the system calls of the two that stay,
// each also per partition handed off when any was.
func stopUsage(before, after []proc.Usage, handed int) (cpu, calls string) {
	victim := after[2].CPU - before[2].CPU
	var rest time.Duration
	var restCalls int64
	for i := range 2 {
		rest += after[i].CPU - before[i].CPU
		restCalls += after[i].Syscalls - before[i].Syscalls
	}
	cpu = fmt.Sprintf("n3 %.1f s, n1+n2 %.1f s", victim.Seconds(), rest.Seconds())
	calls = fmt.Sprintf("%d", restCalls)
	if handed > 0 {
		cpu += fmt.Sprintf(" (%.2f ms a move)", float64((victim+rest).Microseconds())/1000/float64(handed))
		calls += fmt.Sprintf(" (%.0f a move)", float64(restCalls)/float64(handed))
	}
	return cpu, calls
}

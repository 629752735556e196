package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/naradmq/narad/bench/proc"
)

// requestTimeout bounds one request of the bench; a forced collection of a
// large heap and a /metrics read both answer well within it.
const requestTimeout = 60 * time.Second

var httpClient = &http.Client{Timeout: requestTimeout}

// report is one scale's figures.
type report struct {
	Partitions int
	// Empty, Idle, Active and Restarted are the samples of the phases.
	Empty, Idle, Active, Restarted sample
	// Create is the topic creates until the node served every partition.
	Create time.Duration
	// Ready is the restart's exec to /readyz 200, Served its exec to
	// serving every partition again.
	Ready, Served time.Duration
}

// The node's root user: seeded with a password made for the run.
const benchUser = "admin"

// newPassword is a password for one run's admin.
func newPassword() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// startNode starts NATS and one node under dir, serving --pprof on
// loopback, and waits until it is ready and its admin can log in. The
// caller closes the cluster, also on error.
func startNode(ctx context.Context, bin, dir, password string, readyTimeout time.Duration) (*proc.Cluster, target, error) {
	c, err := proc.New(bin, dir, 1, 1)
	if err != nil {
		return nil, target{}, err
	}
	// A node alone has nowhere to hand its partitions to: its stop skips
	// the hand-off rather than wait out its timeout.
	c.Env = proc.Environ([]string{"NARAD_ADMIN_PASSWORD", "NARAD_SHUTDOWN_HANDOFF_TIMEOUT"},
		"NARAD_ADMIN_PASSWORD="+password, "NARAD_SHUTDOWN_HANDOFF_TIMEOUT=0s")
	if err := c.ServePprof(); err != nil {
		return c, target{}, err
	}
	if err := c.StartNATS(ctx, readyTimeout); err != nil {
		return c, target{}, err
	}
	n := c.Nodes[0]
	if err := c.StartNode(n); err != nil {
		return c, target{}, err
	}
	if _, err := c.WaitReady(ctx, n, readyTimeout); err != nil {
		return c, target{}, err
	}
	t := target{pid: n.Proc.Cmd.Process.Pid, api: n.URL(), pprof: "http://" + n.Pprof, user: benchUser, pass: password}
	err = proc.Poll(ctx, readyTimeout, 100*time.Millisecond, n.Proc, func() bool {
		_, err := get(ctx, t.api+"/v1/users", t.user, t.pass)
		return err == nil
	})
	if err != nil {
		return c, t, fmt.Errorf("admin cannot log in: %w", err)
	}
	return c, t, nil
}

// waitServed waits until the node serves n partitions.
func waitServed(ctx context.Context, t target, p *proc.Proc, n int, timeout time.Duration) error {
	var last int64
	err := proc.Poll(ctx, timeout, 200*time.Millisecond, p, func() bool {
		got, err := t.owned(ctx)
		last = got
		return err == nil && got >= int64(n)
	})
	if err != nil {
		return fmt.Errorf("serving %d of %d partitions: %w", last, n, err)
	}
	return nil
}

// measureScale runs the phases of one scale on a fresh node.
func measureScale(ctx context.Context, cfg config, bin, dir string, n int, logf func(string, ...any)) (report, error) {
	r := report{Partitions: n}
	// A directory of its own: a scale may be listed more than once (rounds).
	dir, err := os.MkdirTemp(dir, fmt.Sprintf("p%d-", n))
	if err != nil {
		return r, err
	}
	password := newPassword()
	c, t, err := startNode(ctx, bin, dir, password, cfg.readyTimeout)
	if c != nil {
		defer c.Close()
	}
	if err != nil {
		return r, err
	}
	node := c.Nodes[0]
	logf("%d: node %s up (logs in %s)", n, node.HTTP, dir)
	heapPath := func(phase string) string { return "" }
	if cfg.heapProfileDir != "" {
		if err := os.MkdirAll(cfg.heapProfileDir, 0o755); err != nil {
			return r, err
		}
		heapPath = func(phase string) string {
			return filepath.Join(cfg.heapProfileDir, fmt.Sprintf("%s-%d.heap.pprof", phase, n))
		}
	}
	t.settle(ctx, cfg.settleTimeout, logf)
	if r.Empty, err = t.take(ctx, heapPath("empty")); err != nil {
		return r, fmt.Errorf("empty: %w", err)
	}

	b, err := newBroker(node.URL(), password, cfg.conc)
	if err != nil {
		return r, err
	}
	defer b.Close()
	l := newLayout(n, cfg.perTopic)
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, cfg.createTimeout)
	defer cancel()
	if err := createTopics(cctx, b, l, cfg.conc); err != nil {
		return r, err
	}
	if err := waitServed(ctx, t, node.Proc, n, cfg.createTimeout); err != nil {
		return r, err
	}
	r.Create = time.Since(start)
	logf("%d: created and served in %.1f s", n, r.Create.Seconds())
	t.settle(ctx, cfg.settleTimeout, logf)
	if r.Idle, err = t.take(ctx, heapPath("idle")); err != nil {
		return r, fmt.Errorf("idle: %w", err)
	}

	actx, cancel2 := context.WithTimeout(ctx, cfg.activeTimeout)
	defer cancel2()
	if err := throughEach(actx, b, l, cfg.conc); err != nil {
		return r, fmt.Errorf("active: %w", err)
	}
	t.settle(ctx, cfg.settleTimeout, logf)
	if r.Active, err = t.take(ctx, heapPath("active")); err != nil {
		return r, fmt.Errorf("active: %w", err)
	}
	logf("%d: a record through each partition", n)

	if _, err := c.Stop(ctx, node, cfg.readyTimeout); err != nil {
		return r, fmt.Errorf("stop: %w", err)
	}
	if err := c.StartNode(node); err != nil {
		return r, err
	}
	if r.Ready, err = c.WaitReady(ctx, node, cfg.readyTimeout); err != nil {
		return r, fmt.Errorf("restart: %w", err)
	}
	t.pid = node.Proc.Cmd.Process.Pid
	if err := waitServed(ctx, t, node.Proc, n, cfg.readyTimeout); err != nil {
		return r, fmt.Errorf("restart: %w", err)
	}
	r.Served = time.Since(node.Proc.Started)
	t.settle(ctx, cfg.settleTimeout, logf)
	if r.Restarted, err = t.take(ctx, heapPath("restarted")); err != nil {
		return r, fmt.Errorf("restarted: %w", err)
	}
	logf("%d: restarted: /readyz after %.2f s, every partition served after %.2f s", n, r.Ready.Seconds(), r.Served.Seconds())
	return r, nil
}

// formatReports prints each scale's samples and their cost per partition.
func formatReports(rs []report) string {
	var b strings.Builder
	mib := func(v int64) string { return fmt.Sprintf("%.1f MiB", float64(v)/(1<<20)) }
	for _, r := range rs {
		fmt.Fprintf(&b, "\n%d partitions on one node: created and served in %.1f s; restart: /readyz after %.2f s, all served after %.2f s\n",
			r.Partitions, r.Create.Seconds(), r.Ready.Seconds(), r.Served.Seconds())
		rows := [][]string{{"phase", "heap live", "heap in use", "stacks", "Go sys", "RSS", "goroutines", "open files", "served", "resting"}}
		for _, p := range []struct {
			name string
			s    sample
		}{{"empty", r.Empty}, {"idle", r.Idle}, {"active", r.Active}, {"restarted", r.Restarted}} {
			rows = append(rows, []string{p.name, mib(p.s.HeapLive), mib(p.s.HeapInuse), mib(p.s.StackInuse), mib(p.s.GoSys), mib(p.s.RSS),
				fmt.Sprint(p.s.Goroutines), fmt.Sprint(p.s.FDs), fmt.Sprint(p.s.Owned), resting(p.s.Resting)})
		}
		for _, p := range []struct {
			name string
			s    sample
		}{{"per idle partition", r.Idle}, {"per active partition", r.Active}, {"per partition, restarted", r.Restarted}} {
			d := p.s.minus(r.Empty, r.Partitions)
			rows = append(rows, []string{p.name, fmt.Sprintf("%.0f B", d.HeapLive), fmt.Sprintf("%.0f B", d.HeapInuse), fmt.Sprintf("%.0f B", d.StackInuse),
				fmt.Sprintf("%.0f B", d.GoSys), fmt.Sprintf("%.0f B", d.RSS), fmt.Sprintf("%.2f", d.Goroutines), fmt.Sprintf("%.3f", d.FDs), "", ""})
		}
		b.WriteString(formatTable(rows))
	}
	return b.String()
}

// resting is a sample's resting count, "-" from a binary without the gauge.
func resting(n int64) string {
	if n < 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// formatTable lays rows out in columns between pipes, the first row as the
// header: a Markdown table.
func formatTable(rows [][]string) string {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	var b strings.Builder
	line := func(r []string) {
		b.WriteString("|")
		for i, c := range r {
			fmt.Fprintf(&b, " %-*s |", widths[i], c)
		}
		b.WriteString("\n")
	}
	line(rows[0])
	rule := make([]string, len(widths))
	for i, w := range widths {
		rule[i] = strings.Repeat("-", w)
	}
	line(rule)
	for _, r := range rows[1:] {
		line(r)
	}
	return b.String()
}

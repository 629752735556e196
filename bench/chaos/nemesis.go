package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/naradmq/narad/bench/proc"
)

// errNodeLost is a node that did not come back after its fault, or exited
// while no fault was on it: the run stops throwing faults.
var errNodeLost = errors.New("node lost")

// ran is one fault as the run threw it; times are from the start.
type ran struct {
	Fault
	// Target is what the fault hit: the node's id, or a NATS server's name.
	Target string `json:"target"`
	// Fired is when its signal was sent.
	Fired time.Duration `json:"fired_ns"`
	// Exit is a term's time from SIGTERM to the exit, a decommission's
	// from the request to the node's exit after it left.
	Exit time.Duration `json:"exit_ns,omitempty"`
	// Back is when its node answered /readyz 200 again; 0 if it did not.
	Back time.Duration `json:"back_ns,omitempty"`
	// Note says what went wrong: a term past -stop-timeout (killed), or
	// why the node did not come back.
	Note string `json:"note,omitempty"`
}

func (r ran) String() string {
	back, exit := "never", "-"
	if r.Back > 0 {
		back = seconds(r.Back)
	}
	if r.Kind == Term || r.Kind == Decommission {
		exit = seconds(r.Exit)
	}
	s := fmt.Sprintf("%7s %7s  %-12s %-5s %7s %7s %7s%s", seconds(r.At), seconds(r.Fired), r.Kind, r.Target, seconds(r.Hold), exit, back, r.detail())
	if r.Note != "" {
		s += "  " + r.Note
	}
	return s
}

// ranHeader heads the lines of ran.String.
const ranHeader = "planned   fired  kind         node     hold    exit   ready"

// nemesis throws a schedule's faults at a cluster, one node at a time.
type nemesis struct {
	c *proc.Cluster
	// proxies[i] are node i's proxies in front of NATS, one per server.
	proxies [][]*proc.Proxy
	cfg     config
	start   time.Time
	logf    func(format string, args ...any)
	// bin is the run's own narad, which an Upgrade starts its node on.
	bin string
}

// throw throws every fault of schedule in turn: each at its planned time,
// or its gap after the node of the one before is ready again when that is
// later. It returns the faults thrown, and errNodeLost (or ctx's error)
// when a fault's node did not come back: no further fault is thrown then,
// since a second node down could take the quorum.
func (n *nemesis) throw(ctx context.Context, schedule []Fault) ([]ran, error) {
	var out []ran
	var back time.Duration
	for _, f := range schedule {
		at := max(f.At, back+f.Gap)
		if !sleep(ctx, time.Until(n.start.Add(at))) {
			return out, ctx.Err()
		}
		if err := n.allRunning(); err != nil {
			return out, err
		}
		idx, err := n.resolve(ctx, f)
		if err != nil {
			return out, err
		}
		r := ran{Fault: f, Target: f.NodeID(), Fired: time.Since(n.start)}
		if idx >= 0 {
			r.Target = n.c.Nodes[idx].ID
		}
		n.logf("fault %s: %s %s, hold %s", seconds(r.Fired), f.Kind, r.Target, seconds(f.Hold))
		err = n.fault(ctx, f, idx, &r)
		if err == nil {
			r.Back = time.Since(n.start)
			back = r.Back
			back := r.Target
			if r.Kind == Decommission {
				// The slot's node now, not the one that left.
				back = n.c.Nodes[idx].ID
			}
			n.logf("fault %s: %s ready again after %s", seconds(r.Back), back, seconds(r.Back-r.Fired))
		} else {
			if r.Note == "" {
				r.Note = err.Error()
			}
			n.logf("fault %s: %v", seconds(time.Since(n.start)), err)
		}
		out = append(out, r)
		if err != nil {
			return out, err
		}
	}
	return out, n.allRunning()
}

// natsKill kills NATS server f.Node, starts it again after f.Hold and waits
// until every node is ready and relays through its proxies again.
func (n *nemesis) natsKill(ctx context.Context, f Fault, r *ran) error {
	s := n.c.NATSServers[f.Node]
	if err := s.Proc.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-s.Proc.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	if !sleep(ctx, f.Hold-(time.Since(n.start)-r.Fired)) {
		return ctx.Err()
	}
	if err := n.c.StartNATSServer(ctx, f.Node, n.cfg.readyTimeout); err != nil {
		return fmt.Errorf("%s after a kill: %w: %w", s.Name, errNodeLost, err)
	}
	for i, node := range n.c.Nodes {
		err := proc.Poll(ctx, n.cfg.readyTimeout, 50*time.Millisecond, node.Proc, func() bool {
			conns := 0
			for _, px := range n.proxies[i] {
				conns += px.Conns()
			}
			return conns > 0
		})
		if err != nil {
			return fmt.Errorf("%s reconnecting to NATS after %s's kill: %w: %w", node.ID, s.Name, errNodeLost, err)
		}
		if err := n.waitReady(ctx, node); err != nil {
			return fmt.Errorf("%s after %s's kill: %w: %w", node.ID, s.Name, errNodeLost, err)
		}
	}
	return nil
}

// othersEvery is how often waitReady looks at the other processes.
const othersEvery = 200 * time.Millisecond

// waitReady waits for node's /readyz within -ready-timeout, and gives up
// at once when another node or a NATS server exits meanwhile: that exit is
// the finding, and a wait for the node would only hide it behind a
// timeout (a node that panicked while another came back went unseen for
// the two minutes of that wait).
func (n *nemesis) waitReady(ctx context.Context, node *proc.Node) error {
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var watcher sync.WaitGroup
	defer watcher.Wait()
	watcher.Go(func() {
		t := time.NewTicker(othersEvery)
		defer t.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-t.C:
			}
			if err := n.allRunning(node); err != nil {
				cancel(err)
				return
			}
		}
	})
	_, err := n.c.WaitReady(wctx, node, n.cfg.readyTimeout)
	if cause := context.Cause(wctx); err != nil && cause != nil && ctx.Err() == nil {
		return fmt.Errorf("waiting for %s: %w", node.ID, cause)
	}
	cancel(nil)
	return err
}

// allRunning checks that no node and no NATS server exited while no fault
// was on it; except, when given, is a node a fault is on.
func (n *nemesis) allRunning(except ...*proc.Node) error {
	for _, s := range n.c.NATSServers {
		if !s.Proc.Running() {
			return fmt.Errorf("%s exited by itself (%v): %w\n%s", s.Name, s.Proc.ExitErr(), errNodeLost, proc.Tail(s.Proc.LogPath))
		}
	}
	for _, node := range n.c.Nodes {
		if !node.Proc.Running() && !slices.Contains(except, node) {
			return fmt.Errorf("%s exited by itself (%v): %w\n%s", node.ID, node.Proc.ExitErr(), errNodeLost, proc.Tail(node.Proc.LogPath))
		}
	}
	return nil
}

// resolve is the index of the node f is thrown at: its own, or for a
// leader the node that leads the metadata shard now.
func (n *nemesis) resolve(ctx context.Context, f Fault) (int, error) {
	switch f.Kind {
	case NATSKill:
		return -1, nil
	case Leader, LeaderPause:
	default:
		return f.Node, nil
	}
	var idx int
	var last error
	// A leader may be moving (the last fault's node just came back):
	// asked again until exactly one node claims it.
	err := proc.Poll(ctx, n.cfg.readyTimeout, 100*time.Millisecond, nil, func() bool {
		idx, last = metaLeader(ctx, n.c.Nodes)
		return last == nil
	})
	if err != nil {
		return 0, fmt.Errorf("finding the metadata leader: %w (%v)", err, last)
	}
	return idx, nil
}

// fault throws f at node idx and brings it back: started again on its data
// (kill, leader, term), resumed (stop) or reconnected (cut), then ready.
func (n *nemesis) fault(ctx context.Context, f Fault, idx int, r *ran) error {
	switch f.Kind {
	case NATSKill:
		return n.natsKill(ctx, f, r)
	case Decommission:
		return n.decommission(ctx, f, idx, r)
	case Disk, Clock:
		return n.debugFault(ctx, f, idx, r)
	case Upgrade:
		return n.upgrade(ctx, idx, r)
	}
	if impairs(f.Kind) || f.Kind == LeaderPause {
		return n.impaired(ctx, f, idx, r)
	}
	node := n.c.Nodes[idx]
	p := node.Proc
	switch f.Kind {
	case Kill, Leader:
		if err := p.Signal(syscall.SIGKILL); err != nil {
			return err
		}
		select {
		case <-p.Done():
		case <-ctx.Done():
			return ctx.Err()
		}
		// The hold counts from the signal.
		if !sleep(ctx, f.Hold-(time.Since(n.start)-r.Fired)) {
			return ctx.Err()
		}
		if err := n.c.StartNode(node); err != nil {
			return err
		}
	case Term:
		took, err := n.c.Stop(ctx, node, n.cfg.stopTimeout)
		r.Exit = took
		switch {
		case errors.Is(err, proc.ErrTimeout):
			// Killed past the bound: a finding, printed; the node
			// comes back as after a kill.
			r.Note = fmt.Sprintf("no exit within %s of SIGTERM: killed", seconds(n.cfg.stopTimeout))
			r.Exit = n.cfg.stopTimeout
		case err != nil:
			return err
		}
		if !sleep(ctx, f.Hold) {
			return ctx.Err()
		}
		if err := n.c.StartNode(node); err != nil {
			return err
		}
	}
	if err := n.waitReady(ctx, node); err != nil {
		return fmt.Errorf("%s after %s: %w: %w", node.ID, f.Kind, errNodeLost, err)
	}
	return nil
}

// impaired throws the faults that impair (stop, cut, raftcut, raftcut1,
// diskfull) and a leader's pause: f's kind and f.With (when set) put on node idx, held for
// f.Hold, taken off in the reverse order (also when the run is
// interrupted, so that the cleanup finds a cluster whose nodes can talk
// and processes that exit). A node that exited meanwhile is a finding,
// but under a full disk, after which it is started again on its data;
// then the run waits until it is ready (and, after a cut, relays through
// its proxies again).
func (n *nemesis) impaired(ctx context.Context, f Fault, idx int, r *ran) error {
	node := n.c.Nodes[idx]
	kinds := []Kind{f.Kind}
	if f.With != "" {
		kinds = append(kinds, f.With)
	}
	var offs []func() error
	var err error
	for _, k := range kinds {
		var off func() error
		if off, err = n.impair(k, node, idx); err != nil {
			break
		}
		offs = append(offs, off)
	}
	if err == nil && !sleep(ctx, f.Hold) {
		err = ctx.Err()
	}
	for i := len(offs) - 1; i >= 0; i-- {
		err = errors.Join(err, offs[i]())
	}
	if err != nil {
		return err
	}
	switch {
	case node.Proc.Running():
	case slices.Contains(kinds, DiskFull):
		// A node may stop itself on a full disk: it is started again
		// on its data once the disk has room.
		r.Note = fmt.Sprintf("exited under %s (%v): started again", strings.Join(kindStrings(kinds), "+"), node.Proc.ExitErr())
		n.logf("%s exited under the fault (%v); starting it again on its data", node.ID, node.Proc.ExitErr())
		if err := n.c.StartNode(node); err != nil {
			return err
		}
	default:
		// Paused or cut off, a node has no reason to exit.
		return fmt.Errorf("%s exited under %s (%v): %w\n%s", node.ID, strings.Join(kindStrings(kinds), "+"), node.Proc.ExitErr(), errNodeLost, proc.Tail(node.Proc.LogPath))
	}
	if slices.Contains(kinds, Cut) {
		// /readyz may never have gone down; back is the node relaying
		// through its proxies again.
		err := proc.Poll(ctx, n.cfg.readyTimeout, 50*time.Millisecond, node.Proc, func() bool {
			conns := 0
			for _, px := range n.proxies[idx] {
				conns += px.Conns()
			}
			return conns > 0
		})
		if err != nil {
			return fmt.Errorf("%s reconnecting to NATS after a cut: %w: %w", node.ID, errNodeLost, err)
		}
	}
	if err := n.waitReady(ctx, node); err != nil {
		return fmt.Errorf("%s after %s: %w: %w", node.ID, f.Kind, errNodeLost, err)
	}
	return nil
}

// impair puts kind k (one that impairs) on node, in slot idx, and returns
// what takes it off.
func (n *nemesis) impair(k Kind, node *proc.Node, idx int) (func() error, error) {
	switch k {
	case Stop, LeaderPause:
		p := node.Proc
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return nil, err
		}
		n.logf("stop: %s paused", node.ID)
		return func() error { return p.Signal(syscall.SIGCONT) }, nil
	case Cut:
		severed := 0
		for _, px := range n.proxies[idx] {
			severed += px.Cut()
		}
		n.logf("cut: %s off NATS, %d connections severed, new ones refused", node.ID, severed)
		return func() error {
			for _, px := range n.proxies[idx] {
				px.Restore()
			}
			return nil
		}, nil
	case RaftCut, RaftCutOneWay:
		type link struct{ from, to *proc.Node }
		var cut []link
		for _, o := range n.c.Nodes {
			if o == node {
				continue
			}
			cut = append(cut, link{node, o})
			if k == RaftCut {
				cut = append(cut, link{o, node})
			}
		}
		undo := func(links []link) error {
			var errs []error
			for _, l := range links {
				errs = append(errs, n.c.Undrop(l.from, l.to))
			}
			return errors.Join(errs...)
		}
		for i, l := range cut {
			if err := n.c.Drop(l.from, l.to); err != nil {
				return nil, errors.Join(err, undo(cut[:i]))
			}
		}
		n.logf("%s: %s's packets dropped on %d links", k, node.ID, len(cut))
		return func() error { return undo(cut) }, nil
	case DiskFull:
		size, err := n.c.FillDisk(node)
		if err != nil {
			return nil, errors.Join(err, n.c.FreeDisk(node))
		}
		n.logf("diskfull: %s's disk filled with %d MiB", node.ID, size>>20)
		return func() error { return n.c.FreeDisk(node) }, nil
	}
	return nil, fmt.Errorf("%s does not impair: %w", k, errConfig)
}

// kindStrings is ks as strings.
func kindStrings(ks []Kind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

// sleep waits d (nothing when d <= 0) and reports whether ctx is still
// live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
	return ctx.Err() == nil
}

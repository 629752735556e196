package main

import (
	"context"
	"errors"
	"fmt"
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
	// Fired is when its signal was sent.
	Fired time.Duration `json:"fired_ns"`
	// Exit is a term's time from SIGTERM to the exit.
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
	if r.Kind == Term {
		exit = seconds(r.Exit)
	}
	s := fmt.Sprintf("%7s %7s  %-4s %-3s %7s %7s %7s", seconds(r.At), seconds(r.Fired), r.Kind, r.NodeID(), seconds(r.Hold), exit, back)
	if r.Note != "" {
		s += "  " + r.Note
	}
	return s
}

// ranHeader heads the lines of ran.String.
const ranHeader = "planned   fired  kind node   hold    exit   ready"

// nemesis throws a schedule's faults at a cluster, one node at a time.
type nemesis struct {
	c     *proc.Cluster
	cfg   config
	start time.Time
	logf  func(format string, args ...any)
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
		r := ran{Fault: f, Fired: time.Since(n.start)}
		n.logf("fault %s: %s %s, hold %s", seconds(r.Fired), f.Kind, f.NodeID(), seconds(f.Hold))
		err := n.fault(ctx, f, &r)
		if err == nil {
			r.Back = time.Since(n.start)
			back = r.Back
			n.logf("fault %s: %s ready again after %s", seconds(r.Back), f.NodeID(), seconds(r.Back-r.Fired))
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

// allRunning checks that no node exited while no fault was on it.
func (n *nemesis) allRunning() error {
	for _, node := range n.c.Nodes {
		if !node.Proc.Running() {
			return fmt.Errorf("%s exited by itself (%v): %w\n%s", node.ID, node.Proc.ExitErr(), errNodeLost, proc.Tail(node.Proc.LogPath))
		}
	}
	return nil
}

// fault throws f and brings its node back: started again on its data
// (kill, term) or resumed (stop), then ready.
func (n *nemesis) fault(ctx context.Context, f Fault, r *ran) error {
	node := n.c.Nodes[f.Node]
	p := node.Proc
	switch f.Kind {
	case Kill:
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
	case Stop:
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			return err
		}
		held := sleep(ctx, f.Hold)
		// Resumed even when the run is interrupted, so the cleanup's
		// SIGKILL finds a process that exits.
		if err := p.Signal(syscall.SIGCONT); err != nil {
			return err
		}
		if !held {
			return ctx.Err()
		}
	}
	if _, err := n.c.WaitReady(ctx, node, n.cfg.readyTimeout); err != nil {
		return fmt.Errorf("%s after %s: %w: %w", node.ID, f.Kind, errNodeLost, err)
	}
	return nil
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

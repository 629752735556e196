package sim

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/actors/mover"
	"github.com/naradmq/narad/messages"
)

// The move runner and its workers on a destination, as actors/mover's
// runner.go and worker.go run them: the runner starts a worker for every
// partition its replica targets here and stops the ones no longer
// targeted; a worker runs move.Step, and the node's own effect code
// (mover.Effects) carries out its effects through the worker's ports onto
// the simulated source, metastore and disk.

var moveCfg = func() move.Config {
	c := move.DefaultConfig()
	c.CatchUpStopBytes = catchUpStopBytes
	return c
}()

type worker struct {
	n      *node
	p      int
	source string
	// since is the target's TargetSince: the flip names the move.
	since uint64
	born  time.Duration
	state move.State
	// fx carries out Step's effects: the production code, with this
	// worker as its edge and ports.
	fx *mover.Effects
	// gone: stopped by the runner or lost in a crash; its effects' answers
	// are dropped.
	gone bool
	// lastRearm is when the freeze was last armed or re-armed by this
	// worker (rule F7's check).
	lastRearm time.Duration
	// installsOut counts this worker's installs not yet landed.
	installsOut int
	// laneCancel ends the staging lane's current effect when the next one
	// starts, as the mover's runStaging does: an effect Step moved on from
	// changes the copy no more (a pass's fill that lands late would cut
	// a copy placed at the path back to its stale listing).
	laneCancel context.CancelFunc
}

// runMoves is the runner's tick.
func (n *node) runMoves() {
	w := n.w
	want := map[int]messages.Assignment{}
	for p := range w.cfg.Partitions {
		if a, ok := n.replica.Get(incarnation, p); ok && a.Target == n.id {
			want[p] = a
		}
	}
	for _, p := range sortedKeys(n.workers) {
		wk := n.workers[p]
		if a, ok := want[p]; !ok || a.Owner != wk.source {
			wk.stop()
		}
	}
	for _, p := range sortedKeys(want) {
		if _, running := n.workers[p]; running {
			continue
		}
		if s := n.staging[p]; s != nil && s.installed {
			// An earlier worker's copy, renamed to the path: a new
			// worker opens the staging directory afresh (issue 46).
			n.staging[p] = &plog{}
		}
		wk := &worker{n: n, p: p, source: want[p].Owner, since: want[p].TargetSince, born: w.now, state: move.New()}
		wk.fx = &mover.Effects{Key: messages.PartitionKey{Topic: topic, Incarnation: incarnation, Partition: p},
			NodeID: n.id, Source: wk.source, Since: wk.since, DeadTimeout: deadTimeout, RequestTimeout: requestTimeout,
			Logger: quiet, Knobs: mover.Knobs{TrustFence: w.cfg.Breaks.F9}, Edge: wk, Peer: wk, Meta: wk, Copy: wk}
		n.workers[p] = wk
		w.stats.MovesStarted++
		w.notef("worker start", []int64{int64(n.index), int64(p)}, "%s starts moving partition %d from %s", n.id, p, wk.source)
		// An earlier worker of this move left its install at the path (a
		// crash): the mover's worker finds it by its staging name.
		d := n.disk[p]
		found := d != nil && d.installed && d.move == wk.moveName()
		if found {
			w.stats.InstallsFound++
		}
		wk.step(move.Start{InstalledAtPath: found})
		w.every(moveTick, func() bool {
			if wk.gone {
				return false
			}
			w.aimAtPromote(wk)
			wk.watchSource()
			return true
		})
	}
}

func sortedKeys[V any](m map[int]V) []int {
	ks := make([]int, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (wk *worker) now() time.Duration { return wk.n.w.now - wk.born }
func (wk *worker) alive() bool        { return !wk.gone }

// stop is the runner stopping the worker: it lifts a freeze it holds
// unless a flip may have committed, and drops a copy of a move that is
// gone (move.ReleaseOnStop, move.Gone).
func (wk *worker) stop() {
	n := wk.n
	wk.gone = true
	delete(n.workers, wk.p)
	a, found := n.replica.Get(incarnation, wk.p)
	if wk.state.Phase != move.Done && move.ReleaseOnStop(wk.state.Installed, found, a.Owner, a.Target, n.id) {
		wk.release()
	}
	if wk.state.Placed && !wk.state.Installed && wk.state.Phase != move.Done && !(found && a.Owner == n.id) {
		// Installed before its freeze, never sealed: back to staging, as
		// the mover's worker does (issue 46).
		wk.RenameBack()
		wk.state.Placed = false
	}
	if !wk.state.Installed && wk.state.Phase != move.Done && move.Gone(found, a.Owner, a.Target, n.id) {
		n.staging[wk.p] = &plog{}
		delete(n.stagingCursor, wk.p)
	}
	n.w.notef("worker stop", []int64{int64(n.index), int64(wk.p)}, "%s stops the move of partition %d in %s", n.id, wk.p, wk.state.Phase)
}

// quiet is the effect code's logger here: the trace notes what counts.
var quiet = slog.New(slog.DiscardHandler)

func (wk *worker) release() { wk.fx.Release(wk.state.Token) }

// moveName is the move's staging name, as the mover's worker names it.
func (wk *worker) moveName() string {
	return fmt.Sprintf("%s>%s since %d", wk.source, wk.n.id, wk.since)
}

// watchSource feeds the source's liveness from the local replica (rule P2).
func (wk *worker) watchSource() {
	m := wk.n.members[wk.source]
	var beats uint64
	if m != nil {
		beats = m.heartbeats
	}
	leader := false
	if wk.n.w.cfg.Breaks.P2 {
		// the fix reverted: the replica's record is taken as the leader's,
		// and its counter is not looked at
		beats, leader = 0, true
	}
	wk.step(move.Watched(wk.state, wk.now(), m == nil || m.status == messages.MemberDead, beats, leader, deadTimeout))
}

// step runs move.Step and carries out its effects in order.
func (wk *worker) step(ev any) {
	if wk.gone {
		return
	}
	w := wk.n.w
	ev = wk.breakP4(wk.breakStale(wk.fx.Absorb(wk.state, ev)))
	before, promote, frozen := wk.state.Phase, wk.state.Promote, wk.state.Frozen
	var fx []any
	wk.state, fx = move.Step(moveCfg, wk.state, wk.now(), ev)
	if wk.state.Frozen && !frozen {
		wk.lastRearm = w.now
	}
	if wk.state.Promote && !promote {
		w.checkPromote(wk)
	}
	if wk.state.Phase != before {
		if wk.state.Phase == move.Freezing && before != move.CatchUp {
			w.stats.Refreezes++
		}
		w.notef("phase", []int64{int64(wk.n.index), int64(wk.p), int64(wk.state.Phase)}, "%s partition %d: %s -> %s", wk.n.id, wk.p, before, wk.state.Phase)
	}
	for _, f := range fx {
		wk.fx.Do(wk.state, f)
	}
	switch wk.state.Phase {
	case move.Done:
		wk.finish()
	case move.Ended:
		wk.release()
		wk.finish()
	}
}

// finish is the worker telling the runner it is over; the runner stops it
// and scans again on its next tick.
func (wk *worker) finish() {
	if wk.gone {
		return
	}
	wk.stop()
}

// breakP4 reverts the P4 fix when asked: only a pass that copied
// everything counts its listing, and PrepareHandoff's HWM is ignored.
func (wk *worker) breakP4(ev any) any {
	if !wk.n.w.cfg.Breaks.P4 {
		return ev
	}
	switch e := ev.(type) {
	case move.PassDone:
		if e.Err != nil {
			e.Listed, e.HWM = false, 0
		}
		return e
	case move.Frozen:
		e.HWM = 0
		return e
	}
	return ev
}

// breakStale reverts issue 26's fix when asked: every answer and timer is
// taken as the current request's, as the worker did before requests were
// numbered, so an answer the move moved on from is acted on again.
func (wk *worker) breakStale(ev any) any {
	if !wk.n.w.cfg.Breaks.Stale {
		return ev
	}
	a, tok := wk.state.Attempt, wk.state.Token
	switch e := ev.(type) {
	case move.PassDone:
		e.Attempt = a
		return e
	case move.Frozen:
		e.Attempt = a
		return e
	case move.Fenced:
		e.Attempt = a
		return e
	case move.Verified:
		e.Attempt = a
		return e
	case move.Installed:
		e.Attempt = a
		return e
	case move.FlipAnswered:
		e.Attempt = a
		return e
	case move.LeaderRead:
		e.Attempt = a
		return e
	case move.Retry:
		e.Attempt = a
		return e
	case move.RearmDue:
		e.Token = tok
		return e
	case move.Rearmed:
		e.Token = tok
		return e
	}
	return ev
}

func (wk *worker) src() *node { return wk.n.w.byID[wk.source] }

// after runs ev through step d from now, if the worker still runs.
func (wk *worker) after(d time.Duration, ev any) {
	wk.n.w.at(d, func() { wk.step(ev) })
}

type simError string

func (e simError) Error() string { return string(e) }

const errNoAnswer = simError("no answer")

// pendingFlip is a flip waiting in its node's batch, and whom to answer.
type pendingFlip struct {
	flip messages.Flip
	done func(res messages.AssignResult, ok bool)
}

// flipWindow is how long the node's flip batcher gathers flips after the
// first (the node's FlipBatchWindow).
const flipWindow = time.Second

// queueFlip adds a flip to the node's batch; the batch is proposed as one
// entry of flips (messages.Flips, as Store.FlipMany proposes) flipWindow
// after its first flip, and each flip's own result goes to its worker. A
// lost entry is an unknown outcome for every flip in it.
func (n *node) queueFlip(f messages.Flip, done func(messages.AssignResult, bool)) {
	w := n.w
	n.flips = append(n.flips, pendingFlip{flip: f, done: done})
	if len(n.flips) > 1 {
		return
	}
	epoch := n.epoch
	alive := func() bool { return n.up && n.epoch == epoch }
	w.at(flipWindow, func() {
		if !alive() {
			return
		}
		batch := n.flips
		n.flips = nil
		flips := make([]messages.Flip, len(batch))
		for i, pf := range batch {
			flips[i] = pf.flip
		}
		w.stats.FlipBatches++
		if len(batch) > 1 {
			w.stats.SharedFlips += len(batch)
		}
		w.meta.propose(n, alive, entry{assign: &messages.AssignCommand{Version: messages.CommandVersion, Flips: &messages.Flips{Flips: flips}}}, func(ans any, ok bool) {
			res, _ := ans.(messages.AssignResult)
			if ok && len(res.Flips) != len(batch) {
				w.failf("a batch of %d flips answered %d results", len(batch), len(res.Flips))
				return
			}
			for i, pf := range batch {
				var r messages.AssignResult
				if ok {
					r = res.Flips[i]
				}
				pf.done(r, ok)
			}
		})
	})
}

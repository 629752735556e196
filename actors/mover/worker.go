package mover

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// worker moves one partition onto this node. Its decisions are
// move.Step's; Effects (effects.go), the effect code the simulator runs
// too, carries out the effects Step returns and feeds their outcomes back
// as events. The worker is its edge: each I/O effect runs on a goroutine
// of its own, so a re-arm or a fence runs beside a long pass; the actor
// itself touches the state one message at a time, and stop waits for
// every such goroutine.
type worker struct {
	d     Deps
	store Store
	// peer reaches the partition's owner, which is the move's source.
	peer   Source
	key    messages.PartitionKey
	source string
	// since is the target's TargetSince when the worker started: its flip
	// is for this move only.
	since uint64
	// fx carries out Step's effects (effects.go) through the worker as
	// its Edge, the source and the metastore as its ports, and the copy
	// on disk (diskCopy) as its LocalCopy.
	fx *Effects

	state move.State
	// clock is Deps.Clock; born is when the worker started on it: the
	// worker's monotonic time is measured from there.
	clock   clock.Clock
	born    time.Time
	staging *storage.Staging
	// self and root let the effects' goroutines and timers send the
	// worker their events.
	self     *actor.PID
	root     *actor.RootContext
	frozenAt time.Time
	// phaseSince is when the move entered its phase (zero: at born).
	phaseSince time.Time
	blocked    map[string]bool
	// stopping is cancelled when the worker stops, and with it the
	// effect in flight; io lets stop wait for it.
	stopping   context.Context
	stopAll    context.CancelFunc
	io         sync.WaitGroup
	ended      bool
	installDir string
	// installed is the directory this worker's install put at the
	// partition's path (a rename back moves only that one).
	installed os.FileInfo
	// tookInstallOff: a rename back took this worker's install off the
	// path (rule X6 keeps the copy then, if this node owns the partition).
	tookInstallOff bool
	// prepareWarned: the refused preparation was logged (once per move).
	prepareWarned bool
	// installFailed is the last failed install's error text, so that each
	// new reason is logged once, not every retry.
	installFailed string
	// lane is the staging copy's I/O under way, the latest of a pass, a
	// verify or an install (runStaging); nil once the actor waited for it.
	lane *stagingRun
	// carried is the V4 count the parent (the runner) keeps for this
	// move across the worker's restarts and respawns: asked for as the
	// worker starts (carryAsk; awaitingCarry until it comes), told at each
	// change (carryUpdate).
	carried       int
	awaitingCarry bool
}

// workerTick is the worker's own timer: it watches the source's
// liveness for the force-promote gate.
type workerTick struct{}

// moveIO is an effect's outcome arriving back at the worker.
type moveIO struct{ event any }

func newWorker(d Deps, k messages.PartitionKey, source string, since uint64) *worker {
	w := &worker{d: d, store: d.Store, peer: d.Source, key: k, source: source, since: since, state: move.New(), blocked: map[string]bool{},
		clock: clock.Or(d.Clock), installDir: storage.PartitionPath(d.DataDir, k.Topic, k.Partition)}
	w.fx = &Effects{Key: k, NodeID: d.NodeID, Source: source, Since: since, DeadTimeout: d.DeadTimeout, RequestTimeout: d.RequestTimeout,
		Logger: d.Logger, Knobs: d.Knobs, Edge: w,
		Peer: sourcePort{peer: d.Source, key: k, source: source, timeout: d.RequestTimeout, inline: d.Config.InlineBytes},
		Meta: metaPort{store: d.Store, key: k, timeout: d.RequestTimeout}, Copy: diskCopy{w}}
	return w
}

func (w *worker) Receive(ctx actor.Context) {
	defer supervise.LogPanic(w.d.Logger, "move "+keyString(w.key))
	switch m := ctx.Message().(type) {
	case *actor.Started:
		w.born = w.clock.Now()
		w.self, w.root = ctx.Self(), ctx.ActorSystem().Root
		w.stopping, w.stopAll = context.WithCancel(context.Background())
		// rule V4: a restarted or respawned worker keeps the count, which
		// its parent holds; it starts once it has it.
		w.awaitingCarry = true
		ctx.Request(ctx.Parent(), carryAsk{key: w.key})
	case workerCarry:
		w.begin(ctx, m)
	case *actor.Stopping, *actor.Restarting:
		// A restart gets a fresh worker that resumes from the staging
		// copy: this one's I/O must be over first.
		w.stop()
	case moveIO:
		if !w.awaitingCarry { // before it, an earlier instance's
			w.step(ctx, w.fx.Absorb(w.state, m.event))
		}
	case workerTick:
		if !w.awaitingCarry { // before it, an earlier instance's timer
			w.watchSource(ctx)
			w.scheduleTick()
		}
	}
}

// begin starts the move with the count its parent carried.
func (w *worker) begin(ctx actor.Context, c workerCarry) {
	if !w.awaitingCarry {
		return
	}
	w.awaitingCarry = false
	w.carried = c.verifyFailures
	w.state.VerifyFailures = c.verifyFailures
	w.step(ctx, w.startEvent())
	w.scheduleTick()
}

// startEvent is the move's Start: with InstalledAtPath when the
// partition's path holds a copy this very move installed (its staging name
// travels with it), left by a worker before this one.
func (w *worker) startEvent() move.Start {
	name, err := storage.StagedMove(w.installDir)
	if err != nil || name != w.moveName() {
		return move.Start{}
	}
	info, err := os.Stat(w.installDir)
	if err != nil {
		return move.Start{}
	}
	w.installed = info
	w.d.Logger.Info("move: an earlier worker of this move left its copy installed at the partition's path; asking the leader whether its flip may be pending", "partition", keyString(w.key))
	return move.Start{InstalledAtPath: true}
}

func (w *worker) scheduleTick() {
	if w.ended {
		return
	}
	self, root := w.self, w.root
	w.clock.AfterFunc(w.d.Tick, func() { root.Send(self, workerTick{}) })
}

// watchSource feeds the source's liveness, as the leader stamps it and
// this node's replica has it, to the force-promote gate (rule P2).
func (w *worker) watchSource(ctx actor.Context) {
	m, ok := w.store.Member(w.source)
	w.step(ctx, move.Watched(w.state, w.Now(), !ok || m.Status == messages.MemberDead, m.Heartbeats, false, w.d.DeadTimeout))
}

// step runs the transition and carries out its effects in order.
func (w *worker) step(ctx actor.Context, ev any) {
	before := w.state.Phase
	var fx []any
	w.state, fx = move.Step(w.d.Move, w.state, w.Now(), ev)
	if w.state.VerifyFailures != w.carried {
		w.carried = w.state.VerifyFailures
		ctx.Send(ctx.Parent(), carryUpdate{key: w.key, verifyFailures: w.carried})
	}
	for _, f := range fx {
		w.fx.Do(w.state, f)
	}
	if w.state.Phase != before {
		w.d.Logger.Debug("move phase", "partition", keyString(w.key), "from", before, "to", w.state.Phase)
		if w.phaseSince.IsZero() {
			w.phaseSince = w.born
		}
		now := w.clock.Now()
		w.d.Metrics.PhaseSeconds[before].Update(now.Sub(w.phaseSince).Seconds())
		w.phaseSince = now
		if w.state.Phase == move.Finalize && before == move.Freezing {
			w.frozenAt = now
		}
	}
	switch w.state.Phase {
	case move.Done:
		w.finish(ctx, true)
	case move.Ended:
		w.finish(ctx, false)
	default:
		w.report(ctx)
	}
}

// report sends the worker's progress to the runner.
func (w *worker) report(ctx actor.Context) {
	p := messages.MoveProgress{Topic: w.key.Topic, Partition: w.key.Partition, From: w.source, Phase: w.state.Phase.String(),
		Pass: w.state.Pass, BytesCopied: w.fx.Copied(), BytesListed: w.fx.Listed(), ElapsedMs: w.Now().Milliseconds()}
	if w.state.Frozen && !w.frozenAt.IsZero() {
		p.FrozenMs = w.clock.Now().Sub(w.frozenAt).Milliseconds()
	}
	for r := range w.blocked {
		p.Blocked = append(p.Blocked, r)
	}
	ctx.Send(ctx.Parent(), moveProgressUpdate{key: w.key, progress: p})
}

func (w *worker) finish(ctx actor.Context, flipped bool) {
	if w.ended {
		return
	}
	w.ended = true
	if flipped {
		w.recordDone()
	} else {
		w.d.Logger.Warn("move ended without a flip", "partition", keyString(w.key), "from", w.source)
		w.fx.Release(w.state.Token)
	}
	ctx.Send(ctx.Parent(), moveEnded{key: w.key, flipped: flipped})
}

// recordDone counts a move that flipped and logs it.
func (w *worker) recordDone() {
	took := w.Now()
	w.d.Metrics.Seconds.Update(took.Seconds())
	if !w.frozenAt.IsZero() {
		frozen := w.clock.Now().Sub(w.frozenAt).Seconds()
		w.d.Metrics.FreezeSeconds.Update(frozen)
		w.d.Metrics.LastFreeze.Set(frozen)
	}
	w.d.Metrics.Passes.Update(float64(w.state.Pass))
	w.d.Logger.Info("move done", "partition", keyString(w.key), "from", w.source, "passes", w.state.Pass,
		"non_converged", w.state.NonConverged, "force_promoted", w.state.Promote, "took", took)
}

// stop ends the worker: it waits for the effect in flight, lifts a freeze
// it still holds, and leaves the staging copy for a later attempt while the
// move still targets this node; a move gone, or one whose partition this
// node owns by now, decides the copy's fate as a refused one does (rules
// X6, X9). An install whose flip is unconfirmed stays where it is for the
// stale-copy sweep to judge.
func (w *worker) stop() {
	if w.stopAll != nil {
		w.stopAll()
	}
	w.io.Wait()
	a, found := w.assignment()
	if w.state.Phase != move.Done && releaseOnStop(w.state.Installed, a, found, w.d.NodeID) {
		w.fx.Release(w.state.Token)
	}
	ownsIt := found && a.Owner == w.d.NodeID
	if (w.state.Placed || w.placedHere()) && !w.state.Installed && !ownsIt && w.state.Phase != move.Done {
		// Installed before its freeze and never sealed under one, so no
		// flip was proposed on it: it goes back to staging, to resume from
		// or to be judged as any staging copy is (issue 46). Left at the
		// path, the stale-copy sweep would judge it as an install whose
		// flip may have committed.
		diskCopy{w}.RenameBack()
		w.state.Placed = false
	}
	if ownsIt && w.state.Installed && !w.ended {
		// The runner saw this worker's flip in the replica before the
		// flip's answer (slow, or lost as an unknown outcome) reached the
		// worker, and stopped it: the move is done all the same, and its
		// figures (the freeze's length among them) are this worker's.
		w.ended = true
		w.recordDone()
	}
	switch {
	case w.state.Installed || w.state.Phase == move.Done || w.state.Phase == move.Ended:
		if w.staging != nil {
			w.staging.Close()
		}
	case moveGone(a, found, w.d.NodeID) || ownsIt:
		w.endCopy(a, found)
	case w.staging != nil:
		w.staging.Close()
	}
	for reason := range w.blocked {
		w.d.Metrics.Blocked(reason, -1)
	}
}

// releaseOnStop and moveGone are move.ReleaseOnStop and move.Gone on the
// local replica's assignment.
func releaseOnStop(installed bool, a messages.Assignment, found bool, self string) bool {
	return move.ReleaseOnStop(installed, found, a.Owner, a.Target, self)
}

func moveGone(a messages.Assignment, found bool, self string) bool {
	return move.Gone(found, a.Owner, a.Target, self)
}

// noteInstallFailure logs a failed install once per reason: the worker
// retries it every RetryAfter, and a move stuck at its install must not be
// silent. A copy the path does not hold whole after its install is an
// invariant broken: logged at error and counted.
func (w *worker) noteInstallFailure(o InstallOutcome) {
	if o.Err == nil || o.PrepareRefused || o.Err.Error() == w.installFailed {
		return
	}
	w.installFailed = o.Err.Error()
	if errors.Is(o.Err, errInvariant) {
		w.d.Metrics.InstallNotWhole.Inc()
		w.d.Logger.Error("move: the install did not leave the copy whole at the partition's path; not flipping, and not freezing the source again", "partition", keyString(w.key), "err", o.Err)
		return
	}
	w.d.Logger.Warn("move: install failed; retrying", "partition", keyString(w.key), "err", o.Err)
}

// The worker is its Effects' Edge: work runs on goroutines of its own,
// events come back through the mailbox (moveIO), time is Deps.Clock's.

// Now is the time since the worker started (Edge).
func (w *worker) Now() time.Duration { return w.clock.Now().Sub(w.born) }

// Time is the clock's time of day (Edge).
func (w *worker) Time() time.Time { return w.clock.Now() }

// After sends ev to the worker once d has passed (Edge).
func (w *worker) After(d time.Duration, ev any) {
	self, root := w.self, w.root
	w.clock.AfterFunc(d, func() { root.Send(self, moveIO{event: ev}) })
}

// Go runs work on a goroutine of its own, on the staging lane when lane
// (Edge). The node's ports answer before they return, so the work has
// its event when it returns.
func (w *worker) Go(lane bool, work func(context.Context, func(any))) {
	fn := func(c context.Context) (ev any, ok bool) {
		work(c, func(e any) {
			if !ok {
				ev, ok = e, true
			}
		})
		if !ok {
			// A port broke its word: the move waits for an answer that
			// will not come, until the runner's scan or a restart.
			w.d.Logger.Error("move: an effect's work ended without its outcome", "partition", keyString(w.key))
		}
		return ev, ok
	}
	if lane {
		w.runStaging(fn)
	} else {
		w.run(fn)
	}
}

// Note carries out an effect that only tells (Edge).
func (w *worker) Note(effect any) {
	switch e := effect.(type) {
	case move.Log:
		if e.Level == "error" {
			w.d.Logger.Error(e.Msg, "partition", keyString(w.key), "from", w.source)
		} else {
			w.d.Logger.Warn(e.Msg, "partition", keyString(w.key), "from", w.source)
			if w.state.NonConverged && w.state.Phase == move.Staging {
				w.d.Metrics.NonConverged.Inc()
			}
		}
	case move.Block:
		if !w.blocked[e.Reason] {
			w.blocked[e.Reason] = true
			w.d.Metrics.Blocked(e.Reason, 1)
		}
	case move.Unblock:
		if w.blocked[e.Reason] {
			delete(w.blocked, e.Reason)
			w.d.Metrics.Blocked(e.Reason, -1)
		}
	}
}

// run carries out fn on a goroutine and sends its event back; the worker
// waits for it when it stops.
func (w *worker) run(fn func(context.Context) (any, bool)) {
	self, root := w.self, w.root
	ioCtx, cancel := context.WithCancel(w.stopping)
	w.io.Go(func() {
		defer cancel()
		if ev, ok := fn(ioCtx); ok {
			root.Send(self, moveIO{event: ev})
		}
	})
}

// stagingRun is one effect that uses the staging copy, on its goroutine:
// cancel asks it to end early, done is closed once it has.
type stagingRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// runStaging carries out fn, an effect that uses the staging copy (a pass,
// a verify, an install), on a goroutine of its own, once the one before it
// has ended: a storage.Staging is not safe for concurrent use. The one
// before is superseded (Step acts only on the current request's outcome),
// so it is cancelled first; an install ignores that and runs to its end.
func (w *worker) runStaging(fn func(context.Context) (any, bool)) {
	self, root, prev := w.self, w.root, w.lane
	ioCtx, cancel := context.WithCancel(w.stopping)
	run := &stagingRun{cancel: cancel, done: make(chan struct{})}
	w.lane = run
	if prev != nil {
		prev.cancel()
	}
	w.io.Go(func() {
		defer cancel()
		if prev != nil {
			<-prev.done
		}
		ev, ok := fn(ioCtx)
		close(run.done)
		if ok {
			root.Send(self, moveIO{event: ev})
		}
	})
}

// endStaging cancels the staging copy's I/O under way and waits for it to
// end, before the actor uses the copy itself (a discard, a rename back, a
// removal). Step orders those after the outcome of the last staging effect
// it acts on, so what is still under way here is a pass it moved on from.
func (w *worker) endStaging() {
	if w.lane == nil {
		return
	}
	w.lane.cancel()
	<-w.lane.done
	w.lane = nil
}

// assignment is the partition's assignment in the local replica.
func (w *worker) assignment() (messages.Assignment, bool) {
	t, ok := w.store.Topic(w.key.Topic)
	if !ok || t.Incarnation != w.key.Incarnation {
		return messages.Assignment{}, false
	}
	return w.store.Assignment(t.Incarnation, w.key.Partition)
}

package mover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/actors/sweeper"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// worker moves one partition onto this node. Its decisions are
// move.Step's; it carries out the effects Step returns and feeds their
// outcomes back as events. Each I/O effect runs on a goroutine of its own,
// so a re-arm or a fence runs beside a long pass; the actor itself touches
// the state one message at a time, and stop waits for every such goroutine.
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

	state   move.State
	born    time.Time // the worker's monotonic clock starts here
	staging *storage.Staging
	// position is the consumer position of the listing the copy ends at:
	// the handoff's, or the last pass's for a force-promote.
	position messages.ConsumerPosition
	lastList *messages.PartitionListing
	listedAt time.Time
	frozenAt time.Time
	// phaseSince is when the move entered its phase (zero: at born).
	phaseSince time.Time
	// frozenList is the listing the last prepare answered with, for the
	// final pass under that freeze; nil once a pass took it.
	frozenList *frozenListing
	blocked    map[string]bool
	// stopping is cancelled when the worker stops, and with it the
	// effect in flight; io lets stop wait for it.
	stopping   context.Context
	stopAll    context.CancelFunc
	io         sync.WaitGroup
	ended      bool
	installDir string
	// copied and listed are the bytes copied so far and the size of the
	// last listing, for the progress report.
	copied, listed int64
	// released: the source's freeze was lifted (release).
	released bool
	// installed is the directory this worker's install put at the
	// partition's path (a rename back moves only that one).
	installed os.FileInfo
	// tookInstallOff: a rename back took this worker's install off the
	// path (rule X6 keeps the copy then, if this node owns the partition).
	tookInstallOff bool
	// prepareWarned: the refused preparation was logged (once per move).
	prepareWarned bool
	// droppedEarly: a stage dropped an earlier ownership's state (rule
	// K7's drop before the install), so the install under the freeze
	// drops only after it.
	droppedEarly bool
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

// frozenListing is a prepare's listing, read under the freeze token names.
type frozenListing struct {
	token   string
	listing *messages.PartitionListing
	at      time.Time
}

// fetched is a pass's outcome with the listing it copied to; the worker
// keeps the listing (its own fields are only touched on its goroutine).
type fetched struct {
	pass    move.PassDone
	listing *messages.PartitionListing
	at      time.Time
	final   bool
}

// prepared is PrepareHandoff's outcome with the frontier it reported and
// the listing read under the freeze, when it arrived.
type prepared struct {
	frozen   move.Frozen
	position messages.ConsumerPosition
	listing  *messages.PartitionListing
	at       time.Time
}

func newWorker(d Deps, k messages.PartitionKey, source string, since uint64) *worker {
	return &worker{d: d, store: d.Store, peer: d.Source, key: k, source: source, since: since, state: move.New(), blocked: map[string]bool{},
		installDir: storage.PartitionPath(d.DataDir, k.Topic, k.Partition)}
}

func (w *worker) Receive(ctx actor.Context) {
	defer supervise.LogPanic(w.d.Logger, "move "+keyString(w.key))
	switch m := ctx.Message().(type) {
	case *actor.Started:
		w.born = time.Now()
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
			w.outcome(ctx, m.event)
		}
	case workerTick:
		if !w.awaitingCarry { // before it, an earlier instance's timer
			w.watchSource(ctx)
			w.scheduleTick(ctx)
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
	w.step(ctx, move.Start{})
	w.scheduleTick(ctx)
}

// outcome keeps what an effect's outcome carries beyond its event, then
// steps with the event.
func (w *worker) outcome(ctx actor.Context, ev any) {
	switch e := ev.(type) {
	case fetched:
		w.copied += e.pass.Copied
		if e.listing != nil && e.pass.Attempt == w.state.Attempt {
			w.listed = toStorageListing(e.listing).Bytes()
			w.lastList, w.listedAt = e.listing, e.at
			if !e.final {
				w.position = e.listing.Position // a force-promote installs the last pass's (rule P5)
			}
		}
		ev = e.pass
	case prepared:
		if e.frozen.Err == nil && e.frozen.Attempt == w.state.Attempt {
			w.position = e.position // rule F4: the in-memory frontier
			if e.listing.Status == messages.StatusOK {
				w.frozenList = &frozenListing{token: e.frozen.Token, listing: e.listing, at: e.at}
			}
		}
		ev = e.frozen
	case stageDone:
		if e.dropped {
			w.droppedEarly = true
		}
		ev = e.Staged
	case installDone:
		if e.Err == nil {
			w.staging = nil // renamed into place: the copy is the partition now
			w.installed = e.installed
		}
		w.noteInstallFailure(e)
		if e.prepareRefused && !w.prepareWarned {
			w.prepareWarned = true
			w.d.Logger.Warn("move: the topic directory's preparation was refused; retrying until the replica catches up or the move is re-planned",
				"partition", keyString(w.key), "err", e.Err)
		}
		e.Installed.NotWhole = errors.Is(e.Err, errInvariant)
		ev = e.Installed
	case sourceConfirmed:
		dead := !e.found || e.member.Status == messages.MemberDead
		ev = move.Watched(w.state, w.now(), dead, e.member.Heartbeats, true, w.d.DeadTimeout)
	}
	w.step(ctx, ev)
}

func (w *worker) now() time.Duration { return time.Since(w.born) }

func (w *worker) scheduleTick(ctx actor.Context) {
	if w.ended {
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(w.d.Tick, func() { root.Send(self, workerTick{}) })
}

// watchSource feeds the source's liveness, as the leader stamps it and
// this node's replica has it, to the force-promote gate (rule P2).
func (w *worker) watchSource(ctx actor.Context) {
	m, ok := w.store.Member(w.source)
	w.step(ctx, move.Watched(w.state, w.now(), !ok || m.Status == messages.MemberDead, m.Heartbeats, false, w.d.DeadTimeout))
}

// sourceConfirmed is the source's member record read through the leader
// (move.ConfirmSource); found false: it is no member.
type sourceConfirmed struct {
	member messages.Member
	found  bool
}

// confirmSource reads the members through the leader: the gate passed on
// this node's replica, which a cut-off or lagging node may hold stale.
// No answer, no promote: SourceUnknown lets the next tick ask again.
func (w *worker) confirmSource(c context.Context) any {
	c, cancel := context.WithTimeout(c, w.d.RequestTimeout)
	defer cancel()
	ms, err := w.store.LeaderMembers(c)
	if err != nil {
		w.d.Logger.Warn("move: confirm the source's death with the leader", "partition", keyString(w.key), "source", w.source, "err", err)
		return move.SourceUnknown{}
	}
	for _, m := range ms {
		if m.ID == w.source {
			return sourceConfirmed{member: m, found: true}
		}
	}
	return sourceConfirmed{}
}

// step runs the transition and carries out its effects in order.
func (w *worker) step(ctx actor.Context, ev any) {
	before := w.state.Phase
	var fx []any
	w.state, fx = move.Step(w.d.Move, w.state, w.now(), ev)
	if w.state.VerifyFailures != w.carried {
		w.carried = w.state.VerifyFailures
		ctx.Send(ctx.Parent(), carryUpdate{key: w.key, verifyFailures: w.carried})
	}
	for _, f := range fx {
		w.effect(ctx, f)
	}
	if w.state.Phase != before {
		w.d.Logger.Debug("move phase", "partition", keyString(w.key), "from", before, "to", w.state.Phase)
		if w.phaseSince.IsZero() {
			w.phaseSince = w.born
		}
		w.d.Metrics.PhaseSeconds[before].UpdateDuration(w.phaseSince)
		w.phaseSince = time.Now()
		if w.state.Phase == move.Finalize && before == move.Freezing {
			w.frozenAt = time.Now()
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
		Pass: w.state.Pass, BytesCopied: w.copied, BytesListed: w.listed, ElapsedMs: time.Since(w.born).Milliseconds()}
	if w.state.Frozen && !w.frozenAt.IsZero() {
		p.FrozenMs = time.Since(w.frozenAt).Milliseconds()
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
		w.release()
	}
	ctx.Send(ctx.Parent(), moveEnded{key: w.key, flipped: flipped})
}

// recordDone counts a move that flipped and logs it.
func (w *worker) recordDone() {
	w.d.Metrics.Seconds.UpdateDuration(w.born)
	if !w.frozenAt.IsZero() {
		w.d.Metrics.FreezeSeconds.UpdateDuration(w.frozenAt)
		w.d.Metrics.LastFreeze.Set(time.Since(w.frozenAt).Seconds())
	}
	w.d.Metrics.Passes.Update(float64(w.state.Pass))
	w.d.Logger.Info("move done", "partition", keyString(w.key), "from", w.source, "passes", w.state.Pass,
		"non_converged", w.state.NonConverged, "force_promoted", w.state.Promote, "took", time.Since(w.born))
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
		w.release()
	}
	ownsIt := found && a.Owner == w.d.NodeID
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

// release lifts the source's freeze of a move that will not flip, so the
// partition takes commits and serves consumes at once rather than when the
// TTL runs out. A freeze that lapsed or was replaced ignores it.
func (w *worker) release() {
	if w.state.Token == "" || w.released {
		return
	}
	w.released = true
	ctx, cancel := context.WithTimeout(context.Background(), w.d.RequestTimeout)
	defer cancel()
	if _, err := w.peer.Ask(ctx, w.key, &messages.Handoff{Op: messages.HandoffRelease, Token: w.state.Token}); err != nil {
		w.d.Logger.Warn("move: release the source's freeze; it lapses on its TTL", "partition", keyString(w.key), "err", err)
	}
}

// noteInstallFailure logs a failed install once per reason: the worker
// retries it every RetryAfter, and a move stuck at its install must not be
// silent. A copy the path does not hold whole after its install is an
// invariant broken: logged at error and counted.
func (w *worker) noteInstallFailure(e installDone) {
	if e.Err == nil || e.prepareRefused || e.Err.Error() == w.installFailed {
		return
	}
	w.installFailed = e.Err.Error()
	if errors.Is(e.Err, errInvariant) {
		w.d.Metrics.InstallNotWhole.Inc()
		w.d.Logger.Error("move: the install did not leave the copy whole at the partition's path; not flipping, and not freezing the source again", "partition", keyString(w.key), "err", e.Err)
		return
	}
	w.d.Logger.Warn("move: install failed; retrying", "partition", keyString(w.key), "err", e.Err)
}

// run carries out fn on a goroutine and sends its event back; the worker
// waits for it when it stops.
func (w *worker) run(ctx actor.Context, fn func(context.Context) any) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	ioCtx, cancel := context.WithCancel(w.stopping)
	w.io.Go(func() {
		defer cancel()
		root.Send(self, moveIO{event: fn(ioCtx)})
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
func (w *worker) runStaging(ctx actor.Context, fn func(context.Context) any) {
	self, root, prev := ctx.Self(), ctx.ActorSystem().Root, w.lane
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
		ev := fn(ioCtx)
		close(run.done)
		root.Send(self, moveIO{event: ev})
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

func (w *worker) after(ctx actor.Context, d time.Duration, ev any) {
	self, root := ctx.Self(), ctx.ActorSystem().Root
	time.AfterFunc(d, func() { root.Send(self, moveIO{event: ev}) })
}

func (w *worker) effect(ctx actor.Context, f any) {
	switch e := f.(type) {
	case move.Fetch:
		s, err := w.openStaging()
		// The first final pass copies to the listing the prepare answered
		// with, read under the same freeze (the HWM it pins, rules F3, F4),
		// so it asks for none: a round trip less inside every freeze. Once
		// only: rule F8's second quiet pass and a retried pass ask again.
		var given *frozenListing
		if e.Final && w.frozenList != nil && w.frozenList.token == w.state.Token {
			given = w.frozenList
		}
		w.frozenList = nil
		w.runStaging(ctx, func(c context.Context) any { return w.fetch(c, s, err, e.Final, e.Attempt, given) })
	case move.PrepareHandoff:
		// The freeze requests carry when they were sent, taken before the
		// request goes out: the source's freeze holds at least TTL past it
		// (rules F7, F9).
		sent := w.now()
		w.run(ctx, func(c context.Context) any { return w.prepare(c, sent, e.Attempt) })
	case move.ScheduleRearm:
		w.after(ctx, e.After, move.RearmDue{Token: e.Token})
	case move.Rearm:
		sent := w.now()
		w.run(ctx, func(c context.Context) any {
			r, err := w.handoff(c, messages.Handoff{Op: messages.HandoffRearm, Token: e.Token})
			return move.Rearmed{Token: e.Token, Lapsed: err == nil && r.Status == messages.StatusGone, SentAt: sent, Err: err}
		})
	case move.Fence:
		sent := w.now()
		w.run(ctx, func(c context.Context) any {
			r, err := w.handoff(alone(c), messages.Handoff{Op: messages.HandoffFence, Token: e.Token, HWM: e.HWM})
			if err == nil && r.Status == messages.StatusGone {
				w.d.Logger.Warn("move: fence refused; freezing and draining again", "partition", keyString(w.key), "why", r.Err)
			}
			return move.Fenced{Refused: err == nil && r.Status == messages.StatusGone, SentAt: sent, Err: err, Attempt: e.Attempt}
		})
	case move.Verify:
		s, err := w.openStaging()
		w.runStaging(ctx, func(context.Context) any { return w.verify(s, err, e.HWM, e.Attempt) })
	case move.Stage:
		in, err := w.installInput(ctx, e.HWM, false)
		w.runStaging(ctx, func(context.Context) any {
			done := w.stage(in, err)
			done.Attempt = e.Attempt
			return done
		})
	case move.DiscardCopy:
		w.endStaging()
		w.discard()
	case move.Install:
		in, err := w.installInput(ctx, e.HWM, e.Force)
		w.runStaging(ctx, func(context.Context) any {
			if err != nil {
				return installDone{Installed: move.Installed{Err: err, Attempt: e.Attempt}}
			}
			done := w.install(in)
			done.Attempt = e.Attempt
			return done
		})
	case move.ProposeFlip:
		hwm := w.state.FinalHWM
		w.run(ctx, func(c context.Context) any { return w.flip(c, hwm, e.Attempt) })
	case move.ReadLeader:
		w.run(ctx, func(c context.Context) any { return w.readLeader(c, e.Attempt) })
	case move.RenameBack:
		w.endStaging()
		if err := w.d.Dirs.RenameBack(w.key, w.installed); err != nil {
			// Left in place: such a copy can confirm a flip, never undo
			// one; refused by the guard, it went with its incarnation's
			// directory and the sweep judges it (rule V9).
			w.d.Logger.Error("move: rename the install back to staging", "partition", keyString(w.key), "err", err)
		} else {
			w.tookInstallOff = true
		}
		w.staging, w.installed = nil, nil
	case move.RemoveStaging:
		w.endStaging()
		a, found := w.assignment()
		w.endCopy(a, found)
	case move.ScheduleRetry:
		w.after(ctx, e.After, move.Retry{Attempt: e.Attempt})
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
	case move.ConfirmSource:
		w.run(ctx, w.confirmSource)
	case move.Unblock:
		if w.blocked[e.Reason] {
			delete(w.blocked, e.Reason)
			w.d.Metrics.Blocked(e.Reason, -1)
		}
	default:
		panic(fmt.Sprintf("move worker: unknown effect %T", f))
	}
}

// openStaging opens (or resumes) this partition's staging copy. Only the
// actor calls it: an effect's goroutine is handed the copy, and the
// worker's fields stay the actor's own.
func (w *worker) openStaging() (*storage.Staging, error) {
	if w.staging != nil {
		return w.staging, nil
	}
	s, cleared, err := storage.OpenStaging(storage.StagingPath(w.d.DataDir, w.key.Topic, w.key.Partition), w.d.LogConfig, w.moveName())
	if cleared {
		// rule T2: an earlier move's copy (its target cleared while this
		// node was away) is never resumed.
		w.d.Logger.Info("move: cleared the staging copy an earlier move left", "partition", keyString(w.key), "move", w.moveName())
	}
	if err != nil {
		return nil, err
	}
	w.staging = s
	return s, nil
}

// moveName names this move in its staging copy: a restart of the same move
// resumes the copy, another move of the partition clears it (rule T2). The
// target's TargetSince tells two moves from the same source apart.
func (w *worker) moveName() string {
	return fmt.Sprintf("%d/%d %s>%s since %d", w.key.Incarnation, w.key.Partition, w.source, w.d.NodeID, w.since)
}

func (w *worker) discard() {
	s, err := w.openStaging()
	if err == nil {
		err = s.Remove()
	}
	if err != nil {
		w.d.Logger.Error("move: remove the staging copy", "partition", keyString(w.key), "err", err)
	}
	w.staging = nil
}

// fetch is one copy pass: a listing from the source, then every byte the
// copy lacks, in chunks (rules C1, C4, C6). stagingErr is the failure to
// open the copy: the listing is still asked for, since its HWM counts
// (rule P4) even when nothing can be copied.
func (w *worker) fetch(ctx context.Context, s *storage.Staging, stagingErr error, final bool, attempt uint64, given *frozenListing) any {
	failed := func(pass move.PassDone) fetched {
		pass.Attempt = attempt
		return fetched{pass: pass}
	}
	if f := w.d.Knobs.Pass; f != nil {
		if err := f(ctx, w.key, final); err != nil {
			return failed(move.PassDone{Err: err})
		}
	}
	var ls *messages.PartitionListing
	var at time.Time
	if given != nil {
		ls, at = given.listing, given.at
	} else {
		if final {
			ctx = alone(ctx) // under the freeze: no wait for a group
		}
		res, err := w.askSource(ctx, &messages.ListPartition{InlineBytes: w.d.Config.InlineBytes})
		if err != nil {
			return failed(move.PassDone{Err: err})
		}
		var ok bool
		ls, ok = res.(*messages.PartitionListing)
		if !ok || ls.Status != messages.StatusOK {
			return failed(move.PassDone{Err: fmt.Errorf("list %s at %s: %v", keyString(w.key), w.source, messages.Describe(res))})
		}
		at = time.Now()
	}
	if f := w.d.Knobs.Listed; f != nil {
		f(ctx, w.key, ls.HWM)
	}
	if err := checkSidecars(w.key, w.source, ls); err != nil {
		// rule K8: the pass fails and is retried; its HWM still counts
		// (rule P4).
		return failed(move.PassDone{Listed: true, HWM: ls.HWM, Err: err})
	}
	var copied int64
	err := stagingErr
	if err == nil {
		copied, err = w.copyListed(ctx, s, ls)
	}
	if err != nil {
		// The listing still counts: the copy must reach its HWM before
		// any force-promote (rule P4).
		return failed(move.PassDone{Listed: true, HWM: ls.HWM, Err: err})
	}
	return fetched{pass: move.PassDone{Copied: copied, HWM: ls.HWM, CopiedTo: ls.HWM, Attempt: attempt}, listing: ls, at: at, final: final}
}

// copyListed brings the staging copy to the listing: reconcile, then each
// missing range through copyRange; a sealed segment is synced as it
// completes (rule V6). The active one is left to the stage before the
// freeze, which syncs it with the copy's other files in a batch, or to
// the install when a tail was written to it under the freeze.
func (w *worker) copyListed(ctx context.Context, s *storage.Staging, ls *messages.PartitionListing) (int64, error) {
	listing := toStorageListing(ls)
	if err := s.Reconcile(listing); err != nil {
		return 0, err
	}
	var copied int64
	last := ""
	if n := len(ls.Segments); n > 0 {
		last = ls.Segments[n-1].Name
	}
	inline := inlineData(ls)
	for _, r := range s.Missing() {
		n, err := w.copyInline(s, inline, r)
		if n == 0 && err == nil {
			n, err = w.copyRange(ctx, s, r)
		}
		copied += n
		if err != nil {
			return copied, err
		}
		if r.Name != last {
			if err := s.SealSegment(r.Name); err != nil {
				return copied, err
			}
		}
	}
	return copied, nil
}

// inlineData maps each segment the listing carried the bytes of to its
// segment; nil when it carried none (a partition past InlineBytes), so a
// large partition's pass looks nothing up per range.
func inlineData(ls *messages.PartitionListing) map[string]messages.SegmentInfo {
	var out map[string]messages.SegmentInfo
	for _, sg := range ls.Segments {
		if sg.Data == nil {
			continue
		}
		if out == nil {
			out = map[string]messages.SegmentInfo{}
		}
		out[sg.Name] = sg
	}
	return out
}

// copyInline writes r from the bytes the listing carried for its segment
// (ListPartition.InlineBytes); 0 and no error when it carried none, and
// the range is read in chunks.
func (w *worker) copyInline(s *storage.Staging, inline map[string]messages.SegmentInfo, r storage.SegmentRange) (int64, error) {
	sg, ok := inline[r.Name]
	if !ok {
		return 0, nil
	}
	if int64(len(sg.Data)) != sg.Size || r.From < 0 || r.To > sg.Size || r.From >= r.To {
		return 0, fmt.Errorf("listing of %s at %s: %d bytes inline for segment %s of %d, range %d..%d", keyString(w.key), w.source, len(sg.Data), sg.Name, sg.Size, r.From, r.To)
	}
	if err := s.WriteChunk(r.Name, r.From, sg.Data[r.From:r.To]); err != nil {
		return 0, err
	}
	w.d.Metrics.Bytes.Add(int(r.To - r.From))
	return r.To - r.From, nil
}

// chunkRead is one chunk read in flight; done is closed once data and err
// are set.
type chunkRead struct {
	req  messages.ReadChunk
	data []byte
	err  error
	done chan struct{}
}

// copyRange copies one missing range, asking again from where a short
// chunk ended.
func (w *worker) copyRange(ctx context.Context, s *storage.Staging, r storage.SegmentRange) (int64, error) {
	var copied int64
	for r.From < r.To {
		n, err := w.copyWindowed(ctx, s, r)
		copied += n
		if err != nil {
			return copied, err
		}
		r.From += n
	}
	return copied, nil
}

// copyWindowed copies r with up to MoveChunkWindow reads in flight at all
// times: a read is issued as soon as the oldest one is written, so the
// round trips overlap each other and the writes. Chunks are written in
// order (a staged segment never has a hole). It stops after a short chunk:
// the reads queued behind it start past a gap.
func (w *worker) copyWindowed(ctx context.Context, s *storage.Staging, r storage.SegmentRange) (int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	var reads sync.WaitGroup
	defer reads.Wait() // every read ends: cancelled first, or answered
	defer cancel()
	size := int64(w.d.ChunkBytes)
	var queue []*chunkRead
	next, pos := r.From, r.From
	for pos < r.To {
		for len(queue) < w.d.Config.ChunkWindow && next < r.To {
			c := &chunkRead{req: messages.ReadChunk{Segment: r.Name, Pos: next, Max: int(min(size, r.To-next))}, done: make(chan struct{})}
			reads.Go(func() {
				defer close(c.done)
				c.data, c.err = w.peer.ReadChunk(ctx, w.key, c.req)
			})
			queue = append(queue, c)
			next += int64(c.req.Max)
		}
		c := queue[0]
		queue = queue[1:]
		<-c.done
		switch {
		case c.err != nil:
			return pos - r.From, c.err
		case len(c.data) == 0:
			return pos - r.From, fmt.Errorf("read %s@%d of %s: no data below the listed size %d", r.Name, c.req.Pos, keyString(w.key), r.To)
		case len(c.data) > c.req.Max:
			return pos - r.From, fmt.Errorf("read %s@%d of %s: %d bytes, more than the %d asked", r.Name, c.req.Pos, keyString(w.key), len(c.data), c.req.Max)
		}
		if err := s.WriteChunk(r.Name, pos, c.data); err != nil {
			return pos - r.From, err
		}
		pos += int64(len(c.data))
		w.d.Metrics.Bytes.Add(len(c.data))
		if len(c.data) < c.req.Max {
			break
		}
	}
	return pos - r.From, nil
}

func (w *worker) prepare(ctx context.Context, sent time.Duration, attempt uint64) any {
	r, err := w.handoff(ctx, messages.Handoff{Op: messages.HandoffPrepare, From: w.d.NodeID})
	switch {
	case err != nil:
		return move.Frozen{Err: err, Attempt: attempt}
	case r.Status != messages.StatusOK || r.Listing == nil:
		return move.Frozen{Err: fmt.Errorf("prepare handoff of %s at %s: %s", keyString(w.key), w.source, r.Err), Attempt: attempt}
	}
	return prepared{frozen: move.Frozen{Token: r.Token, HWM: r.Listing.HWM, SentAt: sent, Attempt: attempt}, position: r.Listing.Position,
		listing: r.Listing, at: time.Now()}
}

func (w *worker) handoff(ctx context.Context, h messages.Handoff) (*messages.HandoffResult, error) {
	res, err := w.askSource(ctx, &h)
	if err != nil {
		return nil, err
	}
	r, ok := res.(*messages.HandoffResult)
	if !ok {
		return nil, fmt.Errorf("handoff of %s at %s: %v", keyString(w.key), w.source, messages.Describe(res))
	}
	if r.Status == messages.StatusUnavailable {
		return nil, fmt.Errorf("handoff of %s at %s: %s: %w", keyString(w.key), w.source, r.Err, errs.ErrUnavailable)
	}
	return r, nil
}

// askSource sends a move request to the source. Routing goes to the
// partition's owner, which is the source for as long as the move runs. A
// request whose ctx is marked alone never waits for a group (Source).
func (w *worker) askSource(ctx context.Context, msg any) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, w.d.RequestTimeout)
	defer cancel()
	if ctx.Value(aloneKey{}) != nil {
		return w.peer.AskAlone(ctx, w.key, msg)
	}
	return w.peer.Ask(ctx, w.key, msg)
}

// aloneKey marks a context whose request goes alone, never waiting for a
// group: the final listing and the fence of a freeze, which every write to
// the partition waits for (a group answers when its slowest item does,
// and the hand-off's measured freeze grew by a fifth in groups). A prepare
// never travels in a group either: the source's Ask keeps it out.
type aloneKey struct{}

// alone marks ctx's request to go alone (aloneKey).
func alone(ctx context.Context) context.Context { return context.WithValue(ctx, aloneKey{}, true) }

func (w *worker) verify(s *storage.Staging, err error, hwm int64, attempt uint64) any {
	if err == nil {
		if at, ok := s.StagedHWM(); ok && at == hwm {
			// Staged at this HWM right after a Verify at it (stage), and
			// untouched since: the same bytes, already verified; the
			// install reads the copy back once more (installedWhole).
			if f := w.d.Knobs.Verify; f != nil {
				f(w.key, hwm, false)
			}
			return move.Verified{OK: true, Attempt: attempt}
		}
		if f := w.d.Knobs.Verify; f != nil {
			f(w.key, hwm, true)
		}
		err = s.Verify(hwm)
	}
	if err != nil {
		w.d.Logger.Warn("move: staged copy failed verification", "partition", keyString(w.key), "hwm", hwm, "err", err)
		return move.Verified{OK: false, Attempt: attempt}
	}
	return move.Verified{OK: true, Attempt: attempt}
}

// installInput is what an install needs of the worker, read on the actor
// before the install runs on its own goroutine.
type installInput struct {
	staging  *storage.Staging
	hwm      int64
	force    bool
	position messages.ConsumerPosition
	lastList *messages.PartitionListing
	listedAt time.Time
	topic    messages.Topic
	// dropEarlier asks the partitions supervisor to drop an earlier
	// ownership's state (rule K7); droppedEarly: a stage of this copy did
	// so already, before the install.
	dropEarlier  func() error
	droppedEarly bool
}

func (w *worker) installInput(ctx actor.Context, hwm int64, force bool) (installInput, error) {
	s, err := w.openStaging()
	t, _ := w.store.Topic(w.key.Topic)
	return installInput{staging: s, hwm: hwm, force: force, position: w.position,
		lastList: w.lastList, listedAt: w.listedAt, topic: t, dropEarlier: w.dropper(ctx), droppedEarly: w.droppedEarly}, err
}

// dropper is the install's request to the partitions supervisor (rule
// K7), made from the install's goroutine; without a supervisor (a rig)
// there is no state to drop.
func (w *worker) dropper(ctx actor.Context) func() error {
	parts, root, k, timeout, running := w.d.Partitions, ctx.ActorSystem().Root, w.key, w.d.RequestTimeout, w.d.Running
	return func() error {
		if parts == nil || (running != nil && !running.Has(k)) {
			return nil // no actor runs for k: no state of any ownership to drop
		}
		res, err := root.RequestFuture(parts, messages.DropEarlier{Key: k}, timeout).Result()
		if err != nil {
			return fmt.Errorf("drop an earlier ownership's state of %s: %w", keyString(k), err)
		}
		if d, ok := res.(messages.DroppedEarlier); ok && d.Stopped {
			w.d.Logger.Info("move: stopped an earlier ownership's partition actor before the install", "partition", keyString(k))
		}
		return nil
	}
}

// writeCopyState writes the consumer position and the fan-out cursors
// clamped to the HWM into the copy (rules K6, K8) and stamps its segment
// ages, for a stage or an install. Written through the Staging, the same
// position and cursors again are no write, so a staged copy stays staged;
// a staged copy's ages are not stamped again (a later listing's arrival
// would move them by its round trip, and take the copy out of its stage).
func (w *worker) writeCopyState(in installInput) error {
	s := in.staging
	st := storage.ConsumerState{Frontier: in.position.Frontier, AckedAhead: in.position.AckedAhead}
	if st.Frontier < -1 {
		st = storage.EmptyConsumerState()
	}
	// The clamped state is installed whether or not the frontier moved:
	// acked-ahead offsets at or past the HWM are dropped silently.
	c, clamped := storage.ClampConsumerState(st, in.hwm)
	if clamped {
		w.d.Logger.Warn("move: consumer position past the copy's high watermark; clamped", "partition", keyString(w.key), "frontier", st.Frontier, "hwm", in.hwm)
	}
	// Unsynced here: Stage and Install sync every file of the copy and the
	// staging directory before they write the marker.
	if err := s.SaveConsumerState(c); err != nil {
		return err
	}
	// rules K8, K6: the cursors last, after the final segment pass, from
	// the listing the copy ends at, clamped to its HWM; unsynced like the
	// position.
	if err := installSidecars(s, in.lastList, in.hwm); err != nil {
		return err
	}
	if in.lastList != nil && !s.Durable() {
		if err := s.StampAges(toStorageListing(in.lastList), in.listedAt, time.Now()); err != nil {
			w.d.Logger.Warn("move: stamp segment ages", "partition", keyString(w.key), "err", err)
		}
	}
	return nil
}

// stageDone is a stage's outcome; dropped: it dropped an earlier
// ownership's state (rule K7).
type stageDone struct {
	move.Staged
	dropped bool
}

// stage verifies the caught-up copy at in.hwm and makes it durable as the
// install would, with its position, cursors and marker, before the freeze
// (issue 46). It also drops an earlier ownership's state, rule K7's drop
// before the install. A copy that fails here is not a verify failure
// (rules V3, V4 count those under the freeze): the move freezes all the
// same, and its install does the whole work.
func (w *worker) stage(in installInput, err error) stageDone {
	if err == nil {
		err = in.staging.Verify(in.hwm)
	}
	if err == nil {
		err = w.writeCopyState(in)
	}
	dropped := false
	if err == nil {
		if err = in.dropEarlier(); err == nil {
			dropped = true
		}
	}
	if err == nil {
		w.reclaimEarlier(in)
	}
	if err == nil {
		err = w.d.Installs.stage(in.staging, storage.Marker{PromotedHWM: in.hwm, SourceNode: w.source, Children: markerChildren(in.topic, w.key)}, time.Now())
	}
	if err != nil {
		w.d.Logger.Debug("move: stage before the freeze", "partition", keyString(w.key), "hwm", in.hwm, "err", err)
		return stageDone{dropped: dropped}
	}
	return stageDone{Staged: move.Staged{OK: true}, dropped: dropped}
}

// reclaimEarlier clears the partition's path, before the freeze, of a copy
// an earlier ownership left on this node, when the source's last listing
// vouches for it as the sweep would (storage.ReclaimEarlierCopy): the
// install under the freeze then meets an empty path. What it leaves, or
// cannot do, the install judges as before (V8); K7's drop ran just before.
func (w *worker) reclaimEarlier(in installInput) {
	retention := time.Duration(in.topic.RetentionMs) * time.Millisecond
	removed, err := w.d.Dirs.Reclaim(w.key, func(path string) (bool, error) {
		return storage.ReclaimEarlierCopy(path, w.source, w.d.LogConfig, time.Now(), retention,
			sweeper.VouchedBy(in.lastList, w.d.NodeID, w.d.LogConfig, retention, w.d.Logger))
	})
	switch {
	case err != nil:
		w.d.Logger.Debug("move: reclaim an earlier copy before the freeze", "partition", keyString(w.key), "err", err)
	case removed:
		w.d.Logger.Info("move: removed an earlier copy at the partition's path, which the source vouches for, before the freeze", "partition", keyString(w.key))
	}
}

// install writes the consumer position and the fan-out cursors clamped to
// the HWM (rules K6, K8), stamps segment ages, prepares the topic directory
// for the incarnation (rule V10) and installs the copy with its marker,
// which names the topic's child links (rules V6-V8). A copy staged before
// the freeze and untouched since is only renamed into place.
func (w *worker) install(in installInput) installDone {
	s := in.staging
	if err := w.writeCopyState(in); err != nil {
		return installDone{Installed: move.Installed{Err: err}}
	}
	// rule K7: no state of an earlier ownership of this partition on this
	// node survives into the install, before it (here, or at the stage)
	// and again after it.
	if !in.droppedEarly {
		if err := in.dropEarlier(); err != nil {
			return installDone{Installed: move.Installed{Err: err}}
		}
	}
	if err := w.d.Dirs.Prepare(w.key); err != nil {
		return installDone{Installed: move.Installed{Err: err}, prepareRefused: true}
	}
	res, err := w.d.Installs.install(w.d, w.key, s, storage.InstallOptions{
		Marker: storage.Marker{PromotedHWM: in.hwm, ForcePromoted: in.force, SourceNode: w.source, Children: markerChildren(in.topic, w.key)},
		Now:    time.Now(), RetentionAge: time.Duration(in.topic.RetentionMs) * time.Millisecond,
		Vouched: sweeper.VouchedBy(in.lastList, w.d.NodeID, w.d.LogConfig, time.Duration(in.topic.RetentionMs)*time.Millisecond, w.d.Logger)})
	if err != nil {
		return installDone{Installed: move.Installed{Err: err}}
	}
	if res.Quarantined != "" {
		w.d.Logger.Error("move: an earlier copy at the partition's path held unexpired records; set aside", "partition", keyString(w.key), "quarantine", res.Quarantined)
	}
	if err := in.dropEarlier(); err != nil {
		// The copy is installed; an actor started since (it cannot own
		// the partition before the flip) is stopped by the reconcile.
		w.d.Logger.Warn("move: drop an earlier ownership's state after the install", "partition", keyString(w.key), "err", err)
	}
	// What the path names now: a rename back moves only this directory.
	info, err := os.Stat(w.installDir)
	if err != nil {
		w.d.Logger.Error("move: stat the install", "partition", keyString(w.key), "err", err)
	}
	return installDone{installed: info}
}

// installDone is an install's outcome with the directory it put at the
// partition's path (nil when it failed), and whether the topic directory's
// preparation refused it (rule V10: warned once per move).
type installDone struct {
	move.Installed
	installed      os.FileInfo
	prepareRefused bool
}

// flip proposes the ownership change, naming the HWM the copy ends at so
// the source can check its own against it as it lets the partition go.
func (w *worker) flip(ctx context.Context, hwm int64, attempt uint64) any {
	if f := w.d.Knobs.Flip; f != nil {
		f(ctx, w.key)
	}
	ctx, cancel := context.WithTimeout(ctx, w.d.RequestTimeout)
	defer cancel()
	r, err := w.store.Flip(ctx, messages.Flip{Incarnation: w.key.Incarnation, Partition: w.key.Partition, From: w.source, To: w.d.NodeID, HWM: &hwm, TargetSince: w.since})
	if err != nil {
		return move.FlipAnswered{Err: err, Attempt: attempt}
	}
	switch r.Code {
	case messages.ResultOK:
		return move.FlipAnswered{Code: move.FlipOK, Attempt: attempt}
	case messages.ResultNotFound:
		return move.FlipAnswered{Code: move.FlipNotFound, Attempt: attempt}
	default:
		return move.FlipAnswered{Code: move.FlipRefused, Attempt: attempt}
	}
}

// readLeader reads the assignment linearizably (rule X2: a ReadIndex
// through the leader) and names its nodes as Step knows them.
func (w *worker) readLeader(ctx context.Context, attempt uint64) any {
	started := w.now()
	ctx, cancel := context.WithTimeout(ctx, w.d.RequestTimeout)
	defer cancel()
	a, found, err := w.store.LeaderAssignment(ctx, w.key.Incarnation, w.key.Partition)
	if err != nil {
		return move.LeaderRead{StartedAt: started, Err: err, Attempt: attempt}
	}
	return move.LeaderRead{StartedAt: started, Found: found, Attempt: attempt,
		Owner: move.Named(a.Owner, w.d.NodeID, w.source), Target: move.Named(a.Target, w.d.NodeID, w.source)}
}

func toStorageListing(ls *messages.PartitionListing) storage.Listing {
	out := storage.Listing{HWM: ls.HWM, Clock: ls.Clock, Segments: make([]storage.SegmentInfo, len(ls.Segments))}
	for i, s := range ls.Segments {
		out.Segments[i] = storage.SegmentInfo{Name: s.Name, Base: s.Base, Size: s.Size, ModTime: s.ModTime}
	}
	return out
}

// assignment is the partition's assignment in the local replica.
func (w *worker) assignment() (messages.Assignment, bool) {
	t, ok := w.store.Topic(w.key.Topic)
	if !ok || t.Incarnation != w.key.Incarnation {
		return messages.Assignment{}, false
	}
	return w.store.Assignment(t.Incarnation, w.key.Partition)
}

// endCopy decides what becomes of the staging copy of a move that ends
// without its flip (move.EndCopy, rules X6, X9) and carries it out: it
// removes the copy, or sets it aside as a quarantine and logs it at error
// when it may hold the only copy of its records.
//
// a and found are the partition's assignment in the local replica.
func (w *worker) endCopy(a messages.Assignment, found bool) {
	if _, err := os.Stat(storage.StagingPath(w.d.DataDir, w.key.Topic, w.key.Partition)); errors.Is(err, os.ErrNotExist) && w.staging == nil {
		return // nothing staged
	}
	s, err := w.openStaging()
	if err != nil {
		w.d.Logger.Error("move: open the staging copy of a move that ended", "partition", keyString(w.key), "err", err)
		return
	}
	w.staging = nil
	owner := w.source
	if found {
		owner = a.Owner
	}
	m, member := w.store.Member(owner)
	c := move.CopyEnd{OwnsIt: found && a.Owner == w.d.NodeID, TookInstallOff: w.tookInstallOff,
		OwnerDeadOrGone: !member || m.Status == messages.MemberDead}
	if mk, err := storage.ReadMarker(w.installDir); err == nil && mk.SourceNode == w.source {
		c.PathHoldsSourceInstall = true
	}
	for _, size := range s.Staged() {
		c.HoldsRecords = c.HoldsRecords || size > 0
	}
	fate, why := move.EndCopy(c)
	if fate == move.SetAsideCopy {
		dir, err := s.Quarantine()
		w.d.Metrics.StagingSetAside.Inc()
		w.d.Logger.Error("move ended without its flip, and its staging copy may hold the only copy of its records; set aside for an operator",
			"partition", keyString(w.key), "owner", owner, "why", why, "quarantine", dir, "err", err)
		return
	}
	if err := s.Remove(); err != nil {
		w.d.Logger.Error("move: remove the staging copy of a move that ended", "partition", keyString(w.key), "why", why, "err", err)
	}
}

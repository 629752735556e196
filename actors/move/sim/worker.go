package sim

import (
	"slices"
	"time"

	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/messages"
)

// The move runner and its workers on a destination, as actors/mover's
// runner.go and worker.go run them: the runner starts a worker for every
// partition its replica targets here and stops the ones no longer
// targeted; a worker runs move.Step and carries out its effects against
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
	// gone: stopped by the runner or lost in a crash; its effects' answers
	// are dropped.
	gone, released bool
	// lastRearm is when the freeze was last armed or re-armed by this
	// worker (rule F7's check).
	lastRearm time.Duration
	// installsOut counts this worker's installs not yet landed.
	installsOut int
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
		wk := &worker{n: n, p: p, source: want[p].Owner, since: want[p].TargetSince, born: w.now, state: move.New()}
		n.workers[p] = wk
		w.stats.MovesStarted++
		w.notef("worker start", []int64{int64(n.index), int64(p)}, "%s starts moving partition %d from %s", n.id, p, wk.source)
		wk.step(move.Start{})
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
	if !wk.state.Installed && wk.state.Phase != move.Done && move.Gone(found, a.Owner, a.Target, n.id) {
		n.staging[wk.p] = &plog{}
		delete(n.stagingCursor, wk.p)
	}
	n.w.notef("worker stop", []int64{int64(n.index), int64(wk.p)}, "%s stops the move of partition %d in %s", n.id, wk.p, wk.state.Phase)
}

func (wk *worker) release() {
	if wk.state.Token == "" || wk.released {
		return
	}
	wk.released = true
	n, tok := wk.n, wk.state.Token
	src := n.w.byID[wk.source]
	n.w.groupCall(n, src, func() bool { return true }, func(reply func(any)) {
		src.serveHandoff(wk.p, freeze.Release{Token: tok}, reply)
	}, func(any, bool) {})
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
	ev = wk.breakP4(wk.breakStale(ev))
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
		wk.effect(f)
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

func (wk *worker) effect(f any) {
	w, n := wk.n.w, wk.n
	switch e := f.(type) {
	case move.Fetch:
		wk.pass(e.Attempt, e.Final)
	case move.PrepareHandoff:
		sent := wk.now()
		src := wk.src()
		w.call(n, src, wk.alive, func(reply func(any)) {
			from := n.id
			if w.cfg.Breaks.Holder {
				from = ""
			}
			src.serveHandoff(wk.p, freeze.Prepare{From: from}, reply)
		}, func(ans any, ok bool) {
			a, _ := ans.(handoffAnswer)
			if !ok || !a.ok {
				wk.step(move.Frozen{Err: errNoAnswer, Attempt: e.Attempt})
				return
			}
			w.truth.reported(wk.p, n.id, a.hwm)
			wk.step(move.Frozen{Token: a.token, HWM: a.hwm, SentAt: sent, Attempt: e.Attempt})
		})
	case move.ScheduleRearm:
		w.note("schedule rearm", int64(n.index), int64(wk.p), int64(e.After))
		if !w.cfg.Breaks.F7 {
			wk.after(e.After, move.RearmDue{Token: e.Token})
		}
	case move.Rearm:
		wk.lastRearm = w.now
		w.note("rearm", int64(n.index), int64(wk.p))
		sent, src := wk.now(), wk.src()
		w.groupCall(n, src, wk.alive, func(reply func(any)) {
			src.serveHandoff(wk.p, freeze.Rearm{Token: e.Token}, reply)
		}, func(ans any, ok bool) {
			a, _ := ans.(handoffAnswer)
			wk.step(move.Rearmed{Token: e.Token, Lapsed: ok && a.gone, SentAt: sent, Err: answerErr(ok, a)})
		})
	case move.Fence:
		sent, src := wk.now(), wk.src()
		w.call(n, src, wk.alive, func(reply func(any)) { // under the freeze: alone, as the real client sends it
			src.serveHandoff(wk.p, freeze.Fence{Token: e.Token, HWM: e.HWM}, reply)
		}, func(ans any, ok bool) {
			a, _ := ans.(handoffAnswer)
			if ok && a.gone {
				w.stats.FencesRefused++
			}
			wk.step(move.Fenced{Refused: ok && a.gone, SentAt: sent, Err: answerErr(ok, a), Attempt: e.Attempt})
		})
	case move.Verify:
		w.at(w.between(time.Millisecond, 5*time.Millisecond), func() {
			if wk.gone {
				return
			}
			s := n.stagingOf(wk.p)
			ok := s.hwm() >= e.HWM
			if ok && s.hwm() > e.HWM {
				s.recs = s.recs[:e.HWM]
				s.touch()
			}
			wk.step(move.Verified{OK: ok, Attempt: e.Attempt})
		})
	case move.Stage:
		// mover's worker.stage: verify at the HWM the pre-copy reached,
		// then make the copy durable, in the node's batch of stages.
		epoch, s := n.epoch, n.stagingOf(wk.p)
		w.at(w.between(time.Millisecond, 10*time.Millisecond)+w.batchWait(), func() {
			if wk.gone || n.epoch != epoch {
				return
			}
			if s.installed || s.hwm() < e.HWM || (w.faulty && w.chance(0.02)) {
				wk.step(move.Staged{Attempt: e.Attempt})
				return
			}
			if s.hwm() > e.HWM {
				s.recs = s.recs[:e.HWM]
			}
			s.staged, s.clean = slices.Clone(s.recs), true
			w.stats.Staged++
			wk.step(move.Staged{OK: true, Attempt: e.Attempt})
		})
	case move.DiscardCopy, move.RemoveStaging:
		n.staging[wk.p] = &plog{}
		delete(n.stagingCursor, wk.p)
	case move.Install:
		// The staging copy is the one the worker holds when it asks, as
		// the mover's worker.installInput takes it on the actor. A second install
		// of it while the first is out goes into the node's same install
		// batch (storage.InstallBatch), where, before issue 26's guard,
		// it met the first one's copy at the path and set it aside.
		epoch, s := n.epoch, n.stagingOf(wk.p)
		if wk.installsOut > 0 {
			w.failf("%s asked a second install of partition %d's staging copy while one is out (issue 26)", n.id, wk.p)
			return
		}
		wk.installsOut++
		took := w.between(time.Millisecond, 20*time.Millisecond) + w.batchWait()
		if s.clean && s.hwm() == e.HWM {
			// Staged and untouched since: the install only renames it,
			// but still in the node's install batch, which may wait for
			// the batches ahead of it.
			took = w.between(time.Millisecond, 3*time.Millisecond) + w.batchWait()
			w.stats.StagedInstalls++
		}
		w.at(took, func() {
			wk.installsOut--
			if wk.gone || n.epoch != epoch {
				return
			}
			if w.faulty && w.chance(0.02) {
				wk.step(move.Installed{Err: errNoAnswer, Attempt: e.Attempt})
				return
			}
			if s.installed || s.hwm() < e.HWM {
				// Renamed away by an earlier install (storage.ErrClosed),
				// or short of the HWM: nothing at the path changes.
				wk.step(move.Installed{Err: errNoAnswer, Attempt: e.Attempt})
				return
			}
			recs := s.recs[:e.HWM]
			if w.cfg.Breaks.Stage && s.staged != nil {
				// The stage taken for good whatever was written after it:
				// the install renames what the stage made durable.
				recs = s.staged
			}
			w.checkInstall(wk, recs, e.HWM, e.Force)
			n.disk[wk.p] = &plog{recs: slices.Clone(recs)}
			s.installed = true
			n.staging[wk.p] = &plog{}
			n.installCursor(wk.p, e.HWM)
			wk.step(move.Installed{Attempt: e.Attempt})
		})
	case move.ProposeFlip:
		hwm := wk.state.FinalHWM
		flip := &messages.Flip{Incarnation: incarnation, Partition: wk.p, From: wk.source, To: n.id, HWM: &hwm, TargetSince: wk.since}
		if w.cfg.Breaks.ABA {
			flip.TargetSince = 0
		}
		w.notef("propose flip", []int64{int64(n.index), int64(wk.p), hwm}, "%s proposes the flip of partition %d at hwm %d (force %v)", n.id, wk.p, hwm, wk.state.Promote)
		w.aimAtFlip(n, wk.src(), wk.p)
		n.queueFlip(*flip, func(res messages.AssignResult, ok bool) {
			if !ok {
				w.stats.UnknownFlips++
				wk.step(move.FlipAnswered{Err: errNoAnswer, Attempt: e.Attempt})
				return
			}
			switch res.Code {
			case messages.ResultOK:
				wk.step(move.FlipAnswered{Code: move.FlipOK, Attempt: e.Attempt})
			case messages.ResultNotFound:
				wk.step(move.FlipAnswered{Code: move.FlipNotFound, Attempt: e.Attempt})
			default:
				wk.step(move.FlipAnswered{Code: move.FlipRefused, Attempt: e.Attempt})
			}
		})
	case move.ReadLeader:
		started := wk.now()
		w.meta.leaderRead(n, wk.alive, wk.p, func(a messages.Assignment, found, ok bool) {
			if !ok {
				wk.step(move.LeaderRead{StartedAt: started, Err: errNoAnswer, Attempt: e.Attempt})
				return
			}
			wk.step(move.LeaderRead{StartedAt: started, Found: found, Owner: wk.name(a.Owner), Target: wk.name(a.Target), Attempt: e.Attempt})
		})
	case move.RenameBack:
		if d := n.disk[wk.p]; d != nil {
			n.staging[wk.p] = d
			delete(n.disk, wk.p)
			if c, ok := n.cursorDisk[wk.p]; ok {
				n.stagingCursor[wk.p] = c
				delete(n.cursorDisk, wk.p)
			}
		}
	case move.ScheduleRetry:
		wk.after(e.After, move.Retry{Attempt: e.Attempt})
	case move.Log:
		w.notef("worker log", []int64{int64(n.index), int64(wk.p)}, "%s partition %d %s: %s", n.id, wk.p, e.Level, e.Msg)
	case move.ConfirmSource:
		w.meta.leaderMember(n, wk.alive, wk.source, func(m member, ok bool) {
			if !ok {
				wk.step(move.SourceUnknown{})
				return
			}
			wk.step(move.Watched(wk.state, wk.now(), m.status == messages.MemberDead, m.heartbeats, true, deadTimeout))
		})
	case move.Block, move.Unblock:
		w.notef("worker block", []int64{int64(n.index), int64(wk.p)}, "%s partition %d %T", n.id, wk.p, e)
	default:
		panic("sim: move effect not carried out")
	}
}

func (wk *worker) name(id string) string { return move.Named(id, wk.n.id, wk.source) }

func (n *node) stagingOf(p int) *plog {
	s := n.staging[p]
	if s == nil {
		s = &plog{}
		n.staging[p] = s
	}
	return s
}

// pass is one copy pass: a listing, then each missing range in chunks, in
// order; a failure after the listing still reports it (rule P4).
func (wk *worker) pass(attempt uint64, final bool) {
	w, n, src := wk.n.w, wk.n, wk.src()
	send := w.groupCall
	if final {
		send = w.call // under the freeze: alone, as the real client sends it
	}
	send(n, src, wk.alive, func(reply func(any)) { src.serveList(wk.p, reply) }, func(ans any, ok bool) {
		ls, _ := ans.(listing)
		if !ok || !ls.ok {
			wk.step(move.PassDone{Err: errNoAnswer, Attempt: attempt})
			return
		}
		w.truth.reported(wk.p, n.id, ls.hwm)
		w.checkListing(wk.p, ls)
		if ls.hasCursor {
			n.stagingCursor[wk.p] = ls.cursor
		} else {
			delete(n.stagingCursor, wk.p)
		}
		s := n.stagingOf(wk.p)
		if s.hwm() > ls.hwm {
			s.recs = s.recs[:ls.hwm] // reconcile: nothing past the listing
			s.touch()
		}
		var copied int64
		var next func()
		next = func() {
			from := s.hwm()
			if from >= ls.hwm {
				wk.step(move.PassDone{Copied: copied, HWM: ls.hwm, CopiedTo: ls.hwm, Listed: true, Attempt: attempt})
				return
			}
			to := min(from+chunkRecords, ls.hwm)
			w.call(n, src, wk.alive, func(reply func(any)) { src.serveChunk(wk.p, from, to, reply) }, func(ans any, ok bool) {
				c, _ := ans.(chunk)
				if !ok || !c.ok || s.hwm() != from {
					wk.step(move.PassDone{Listed: true, HWM: ls.hwm, Err: errNoAnswer, Attempt: attempt})
					return
				}
				w.checkChunk(wk, from, c.recs)
				s.recs = append(s.recs, c.recs...)
				s.touch()
				for _, r := range c.recs {
					copied += r.size
				}
				next()
			})
		}
		next()
	})
}

type simError string

func (e simError) Error() string { return string(e) }

const errNoAnswer = simError("no answer")

func answerErr(ok bool, a handoffAnswer) error {
	if !ok || (!a.ok && !a.gone) {
		return errNoAnswer
	}
	return nil
}

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

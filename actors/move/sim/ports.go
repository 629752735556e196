package sim

import (
	"context"
	"slices"
	"time"

	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/actors/mover"
	"github.com/naradmq/narad/messages"
)

// The worker's effects are carried out by the node's own effect code
// (mover.Effects): the worker is its Edge and its ports, over the
// simulated network, metastore and disk. What follows is only how each
// port reaches the model; which port an effect calls, in what order, and
// what event the answer becomes are the production code's.

// simEpoch is the simulated world's time of day at its start.
var simEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Now is the worker's time since it started (mover.Edge).
func (wk *worker) Now() time.Duration { return wk.now() }

// Time is the simulated time of day (mover.Edge).
func (wk *worker) Time() time.Time { return simEpoch.Add(wk.n.w.now) }

// After runs ev through step d from now (mover.Edge). Breaks.F7 drops
// the re-arm timer, as if its line were deleted from the executor.
func (wk *worker) After(d time.Duration, ev any) {
	if _, ok := ev.(move.RearmDue); ok {
		wk.n.w.note("schedule rearm", int64(wk.n.index), int64(wk.p), int64(d))
		if wk.n.w.cfg.Breaks.F7 {
			return
		}
	}
	wk.after(d, ev)
}

// Go runs work now, on the simulator's one thread (mover.Edge); its
// ports answer from the scheduler, and an answer handed back before Go
// returns (a break's) is stepped right after the step that asked. Work on
// the staging lane cancels the lane's work before it (laneCancel).
func (wk *worker) Go(lane bool, work func(context.Context, func(any))) {
	inside := true
	ctx := context.Background()
	if lane {
		if wk.laneCancel != nil {
			wk.laneCancel()
		}
		ctx, wk.laneCancel = context.WithCancel(ctx)
	}
	work(ctx, func(ev any) {
		if inside {
			wk.n.w.at(0, func() { wk.step(ev) })
			return
		}
		wk.step(ev)
	})
	inside = false
}

// Note notes an effect that only tells (mover.Edge).
func (wk *worker) Note(effect any) {
	w, n := wk.n.w, wk.n
	switch e := effect.(type) {
	case move.Log:
		w.notef("worker log", []int64{int64(n.index), int64(wk.p)}, "%s partition %d %s: %s", n.id, wk.p, e.Level, e.Msg)
	default:
		w.notef("worker block", []int64{int64(n.index), int64(wk.p)}, "%s partition %d %T", n.id, wk.p, e)
	}
}

// Handoff serves a prepare, re-arm, fence or release at the source's
// freeze (mover.SourcePort): a prepare and a fence alone, a re-arm and a
// release in the move group to the source, as the node's router sends
// them.
func (wk *worker) Handoff(_ context.Context, h messages.Handoff, _ bool, done func(*messages.HandoffResult, error)) {
	w, n, src := wk.n.w, wk.n, wk.src()
	switch h.Op {
	case messages.HandoffPrepare:
		from := h.From
		if w.cfg.Breaks.Holder {
			from = ""
		}
		w.call(n, src, wk.alive, func(reply func(any)) {
			src.serveHandoff(wk.p, freeze.Prepare{From: from}, reply)
		}, func(ans any, ok bool) {
			r, err := handoffResult(ans, ok)
			if err == nil && r.Status == messages.StatusOK {
				w.truth.reported(wk.p, n.id, r.Listing.HWM)
			}
			done(r, err)
		})
	case messages.HandoffRearm:
		wk.lastRearm = w.now
		w.note("rearm", int64(n.index), int64(wk.p))
		w.groupCall(n, src, wk.alive, func(reply func(any)) {
			src.serveHandoff(wk.p, freeze.Rearm{Token: h.Token}, reply)
		}, func(ans any, ok bool) { done(handoffResult(ans, ok)) })
	case messages.HandoffFence:
		w.call(n, src, wk.alive, func(reply func(any)) {
			src.serveHandoff(wk.p, freeze.Fence{Token: h.Token, HWM: h.HWM}, reply)
		}, func(ans any, ok bool) {
			r, err := handoffResult(ans, ok)
			if err == nil && r.Status == messages.StatusGone {
				w.stats.FencesRefused++
			}
			done(r, err)
		})
	case messages.HandoffRelease:
		w.groupCall(n, src, func() bool { return true }, func(reply func(any)) {
			src.serveHandoff(wk.p, freeze.Release{Token: h.Token}, reply)
		}, func(ans any, ok bool) { done(handoffResult(ans, ok)) })
	default:
		panic("sim: handoff op not served")
	}
}

// handoffResult is the freeze's answer as the source's partition actor
// answers it: gone (409), granted, or no answer. The simulated source's
// prepare carries no listing to copy by (its Listing says unavailable,
// with the HWM): the final pass asks for a listing of its own.
func handoffResult(ans any, ok bool) (*messages.HandoffResult, error) {
	a, _ := ans.(handoffAnswer)
	switch {
	case ok && a.gone:
		return &messages.HandoffResult{Status: messages.StatusGone}, nil
	case !ok || !a.ok:
		return nil, errNoAnswer
	}
	return &messages.HandoffResult{Status: messages.StatusOK, Token: a.token,
		Listing: &messages.PartitionListing{Status: messages.StatusUnavailable, HWM: a.hwm}}, nil
}

// List asks the source for its listing (mover.SourcePort), in the move
// group to it unless alone (under the freeze).
func (wk *worker) List(_ context.Context, alone bool, done func(*messages.PartitionListing, error)) {
	w, n, src := wk.n.w, wk.n, wk.src()
	send := w.groupCall
	if alone {
		send = w.call
	}
	send(n, src, wk.alive, func(reply func(any)) { src.serveList(wk.p, reply) }, func(ans any, ok bool) {
		ls, _ := ans.(listing)
		if !ok || !ls.ok {
			done(nil, errNoAnswer)
			return
		}
		w.truth.reported(wk.p, n.id, ls.hwm)
		w.checkListing(wk.p, ls)
		if ls.hasCursor {
			n.stagingCursor[wk.p] = ls.cursor
		} else {
			delete(n.stagingCursor, wk.p)
		}
		done(&messages.PartitionListing{Status: messages.StatusOK, HWM: ls.hwm}, nil)
	})
}

// Flip queues the flip in the node's batch (mover.MetaPort); a lost entry
// is an unknown outcome. Breaks.ABA proposes it without the move's name.
func (wk *worker) Flip(_ context.Context, f messages.Flip, done func(messages.AssignResult, error)) {
	w, n := wk.n.w, wk.n
	if w.cfg.Breaks.ABA {
		f.TargetSince = 0
	}
	w.notef("propose flip", []int64{int64(n.index), int64(wk.p), *f.HWM}, "%s proposes the flip of partition %d at hwm %d (force %v)", n.id, wk.p, *f.HWM, wk.state.Promote)
	w.aimAtFlip(n, wk.src(), wk.p)
	n.queueFlip(f, func(res messages.AssignResult, ok bool) {
		if !ok {
			w.stats.UnknownFlips++
			done(res, errNoAnswer)
			return
		}
		done(res, nil)
	})
}

// LeaderAssignment reads the assignment through the leader
// (mover.MetaPort).
func (wk *worker) LeaderAssignment(_ context.Context, done func(messages.Assignment, bool, error)) {
	wk.n.w.meta.leaderRead(wk.n, wk.alive, wk.p, func(a messages.Assignment, found, ok bool) {
		if !ok {
			done(messages.Assignment{}, false, errNoAnswer)
			return
		}
		done(a, found, nil)
	})
}

// LeaderMember reads a member's record through the leader
// (mover.MetaPort).
func (wk *worker) LeaderMember(_ context.Context, id string, done func(messages.Member, bool, error)) {
	wk.n.w.meta.leaderMember(wk.n, wk.alive, id, func(m member, ok bool) {
		if !ok {
			done(messages.Member{}, false, errNoAnswer)
			return
		}
		done(messages.Member{ID: id, Status: m.status, Heartbeats: m.heartbeats}, true, nil)
	})
}

// Fill brings the staging copy to the listing (mover.LocalCopy):
// reconcile, then each missing range in chunks of records, in order.
func (wk *worker) Fill() func(context.Context, *messages.PartitionListing, func(int64, error)) {
	return func(ctx context.Context, ls *messages.PartitionListing, done func(int64, error)) {
		w, n, src := wk.n.w, wk.n, wk.src()
		if ctx.Err() != nil {
			done(0, ctx.Err()) // superseded on the lane: the copy is not this pass's now
			return
		}
		s := n.stagingOf(wk.p)
		if s.hwm() > ls.HWM {
			s.recs = s.recs[:ls.HWM] // reconcile: nothing past the listing
			s.touch()
		}
		var copied int64
		var next func()
		next = func() {
			from := s.hwm()
			if from >= ls.HWM {
				done(copied, nil)
				return
			}
			to := min(from+chunkRecords, ls.HWM)
			w.call(n, src, wk.alive, func(reply func(any)) { src.serveChunk(wk.p, from, to, reply) }, func(ans any, ok bool) {
				c, _ := ans.(chunk)
				if !ok || !c.ok || s.hwm() != from || ctx.Err() != nil {
					done(copied, errNoAnswer)
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
	}
}

// Verify checks the copy reaches hwm and cuts what lies past it
// (mover.LocalCopy).
func (wk *worker) Verify(hwm int64) func(context.Context, func(bool)) {
	return func(ctx context.Context, done func(bool)) {
		w, n := wk.n.w, wk.n
		w.at(w.between(time.Millisecond, 5*time.Millisecond), func() {
			if wk.gone || ctx.Err() != nil {
				return
			}
			s := n.stagingOf(wk.p)
			ok := s.hwm() >= hwm
			if ok && s.hwm() > hwm {
				s.recs = s.recs[:hwm]
				s.touch()
			}
			done(ok)
		})
	}
}

// Stage verifies the copy at the HWM the pre-copy reached, then makes it
// durable, in the node's batch of stages (mover.LocalCopy).
func (wk *worker) Stage(hwm int64) func(context.Context, func(mover.StageOutcome)) {
	w, n := wk.n.w, wk.n
	epoch, s := n.epoch, n.stagingOf(wk.p)
	return func(ctx context.Context, done func(mover.StageOutcome)) {
		w.at(w.between(time.Millisecond, 10*time.Millisecond)+w.batchWait(), func() {
			if wk.gone || n.epoch != epoch || ctx.Err() != nil {
				return
			}
			if s.installed || s.hwm() < hwm || (w.faulty && w.chance(0.02)) {
				done(mover.StageOutcome{})
				return
			}
			if s.hwm() > hwm {
				s.recs = s.recs[:hwm]
			}
			s.staged, s.clean = slices.Clone(s.recs), true
			w.stats.Staged++
			done(mover.StageOutcome{OK: true})
		})
	}
}

// Install renames the copy into place in the node's install batch
// (mover.LocalCopy). The staging copy is the one the worker holds when it
// asks, as the mover's installInput takes it on the actor. A second
// install of it while the first is out goes into the node's same install
// batch (storage.InstallBatch), where, before issue 26's guard, it met
// the first one's copy at the path and set it aside.
func (wk *worker) Install(hwm int64, force bool) func(context.Context, func(mover.InstallOutcome)) {
	w, n := wk.n.w, wk.n
	epoch, s := n.epoch, n.stagingOf(wk.p)
	if wk.installsOut > 0 {
		w.failf("%s asked a second install of partition %d's staging copy while one is out (issue 26)", n.id, wk.p)
		return func(context.Context, func(mover.InstallOutcome)) {}
	}
	return func(_ context.Context, done func(mover.InstallOutcome)) {
		wk.installsOut++
		took := w.between(time.Millisecond, 20*time.Millisecond) + w.batchWait()
		if s.clean && s.hwm() == hwm {
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
				done(mover.InstallOutcome{Err: errNoAnswer})
				return
			}
			if s.hwm() < hwm || (s.installed && n.disk[wk.p] != s) {
				// Short of the HWM, or renamed away and no longer at the
				// path (storage.ErrClosed): nothing at the path changes.
				done(mover.InstallOutcome{Err: errNoAnswer})
				return
			}
			recs := s.recs[:hwm]
			if w.cfg.Breaks.Stage && s.staged != nil {
				// The stage taken for good whatever was written after it:
				// the install renames, or seals in place, what the stage
				// made durable.
				recs = s.staged
			}
			if s.installed {
				// Installed before the freeze (issue 46): the tail was
				// written into it at the path, and this install seals it
				// there. From here it is the partition's copy, as after a
				// rename.
				w.checkInstall(wk, recs, hwm, force)
				n.disk[wk.p] = &plog{recs: slices.Clone(recs), installed: true, move: wk.moveName()}
				n.staging[wk.p] = &plog{}
				n.installCursor(wk.p, hwm)
				done(mover.InstallOutcome{})
				return
			}
			w.checkInstall(wk, recs, hwm, force)
			s.recs = slices.Clone(recs)
			// Renamed into place, and still this move's copy: what the
			// worker writes to it now lands at the path (storage.Staging
			// stays open at its target).
			s.installed, s.move = true, wk.moveName()
			n.disk[wk.p] = s
			n.installCursor(wk.p, hwm)
			done(mover.InstallOutcome{})
		})
	}
}

// Installed keeps nothing: the model's install needs no bookkeeping
// (mover.LocalCopy).
func (wk *worker) Installed(mover.InstallOutcome) {}

// Discard and Remove drop the staging copy (mover.LocalCopy).
func (wk *worker) Discard() { wk.dropStaging() }
func (wk *worker) Remove()  { wk.dropStaging() }

func (wk *worker) dropStaging() {
	wk.n.staging[wk.p] = &plog{}
	delete(wk.n.stagingCursor, wk.p)
}

// RenameBack takes the install off the partition's path back to staging
// (mover.LocalCopy).
func (wk *worker) RenameBack() {
	n := wk.n
	if d := n.disk[wk.p]; d != nil {
		d.installed = false
		n.staging[wk.p] = d
		delete(n.disk, wk.p)
		if c, ok := n.cursorDisk[wk.p]; ok {
			n.stagingCursor[wk.p] = c
			delete(n.cursorDisk, wk.p)
		}
	}
}

func (n *node) stagingOf(p int) *plog {
	s := n.staging[p]
	if s == nil {
		s = &plog{}
		n.staging[p] = s
	}
	return s
}

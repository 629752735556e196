// Package sim is a deterministic simulation of partition moves: the real
// pure code of both sides of a move (move.Step on the destination,
// freeze.Step on the source), the assignment shard's state machine
// (metastore.AssignMachine), the planner and the liveness tracker, run on
// a seeded scheduler with simulated time, network, disks, crashes and
// operators, with the invariants of seed 000 checked after every step.
// Start with Run; the world's pieces are in net.go (the network), meta.go
// (the metastore, its leader changes and the controller), node.go (a
// node's partitions, dispatcher and consumers), worker.go (the move runner
// and its workers, whose effects the node's own effect code carries out,
// mover.Effects), ports.go (the ports it reaches this model through) and
// check.go (the invariants).
//
// One seed is one world: the same seed gives the same run, step for step
// (Result.Hash is the hash of the trace), so a failing seed replays:
//
//	go run ./cmd/narad-sim -seed N -trace
//
// Every decision is the production code's, and so is the move worker's
// effect code (which request each effect sends, in what order, and what
// event its answer becomes): only the ports it reaches the model through,
// and the source's side of the effects, are the simulator's own.
package sim

import (
	"container/heap"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Config is one run. The zero value of every field but Seed takes its
// default (see withDefaults).
type Config struct {
	Seed uint64
	// Nodes and Partitions size the world (3-5 nodes, 1-4 partitions of
	// one topic when zero: drawn from the seed).
	Nodes, Partitions int
	// FaultsFor is how long faults, operators and producers act; after it
	// the network heals, every node comes back and the world must settle
	// within SettleWithin (every move ended, every ingress WAL handed over).
	FaultsFor, SettleWithin time.Duration
	// Breaks reverts a fix or breaks a rule, to show the simulator finds
	// the hole (sim_test.go keeps a seed for each).
	Breaks Breaks
	// Trace, when set, receives one readable line per step.
	Trace io.Writer
	// Aim adds faults aimed at the protocol's narrowest windows, drawn
	// from a stream of their own so that a run without Aim is unchanged:
	// the source cut off just as a flip is proposed, and a long-dead
	// source restarted just as a force-promote comes due.
	Aim bool
	// Fanout gives every partition one child link whose cursor moves with
	// the partition (fanout.go); off, a run is what it was without it.
	Fanout bool
}

// Breaks are deliberate defects, each named by the rule it breaks.
type Breaks struct {
	// Holder: destinations do not name themselves in a prepare, so a
	// prepare of an aborted move (its destination cut off, unaware) takes
	// over the freeze that a fenced move's flip in flight counts on, and
	// releases it (the fix of freeze.Hold.Holder reverted).
	Holder bool
	// F3: the source reports its HWM without waiting for the batches
	// already written, and publishes past the HWM it reported (the F3 fix
	// and its assertion reverted).
	F3 bool
	// P4: the worker counts only the listings of passes that copied
	// everything, and not PrepareHandoff's (the P4 fix reverted).
	P4 bool
	// T1: the controller clears a dead destination's target as soon as it
	// reads dead, not after DeadTargetAbortAfter.
	T1 bool
	// F2: the source reports with leases out before their drain deadline.
	F2 bool
	// F7: the worker's re-arm timer is not armed (ScheduleRearm dropped,
	// as if deleted from the executor).
	F7 bool
	// ABA: a flip does not name the move it was proposed for, so one that
	// reaches the log late commits for a re-planned move to the same
	// target (the fix of Assignment.TargetSince reverted).
	ABA bool
	// P2: the worker promotes on its replica's member record, stale when
	// the destination is cut off, without reading it through the leader
	// or looking at its heartbeat counter (that fix reverted).
	P2 bool
	// Reopen: a partition opened while a move targets it starts unfrozen
	// (the fix of freeze.Reopen reverted).
	Reopen bool
	// Confirm: a source whose reported freeze lapsed takes commits again
	// without a leader read (the fix of freeze.Gate.Unconfirmed reverted).
	Confirm bool
	// GateClock: the gate keeps time of its own, lapsing a freeze a TTL
	// after the Close it took, while re-arms and fences renew only the
	// freeze actor's TTL: the design the freeze's two mailboxes rule out
	// (actors/freeze's package doc).
	GateClock bool
	// CursorAfterHWM: the listing reads the fan-out cursor after the HWM,
	// and the destination installs it unlowered (rules K8 and K6).
	CursorAfterHWM bool
	// CursorAtTail: the destination anchors the fan-out cursor at the
	// installed HWM instead of the shipped sidecar (rule K8).
	CursorAtTail bool
	// MissingCursorAtTail: a partition whose cursor file is missing or
	// torn resumes its fan-out at the HWM, not the oldest offset (rule K9).
	MissingCursorAtTail bool
	// Stale: the worker acts on every answer and timer as the current
	// request's, as it did before its requests were numbered (issue 26's
	// fix reverted): an answer to a pass of a lapsed freeze counts under
	// the new one, and a retry scheduled before the move went on asks for
	// a second install of its copy.
	Stale bool
	// Stage: an install of a copy staged before its freeze puts what the
	// stage made durable at the path, whatever was written to the copy
	// after it (storage.Staging's check that nothing was reverted).
	Stage bool
	// F9: the worker takes its fence as accepted as soon as it is sent
	// and installs and flips without the source's answer. Unlike the
	// breaks above, this one is in the production code: the mover's
	// effect code (mover.Knobs.TrustFence), which the simulator runs.
	F9 bool
}

func (c Config) withDefaults(rng *rand.Rand) Config {
	if c.Nodes == 0 {
		c.Nodes = 3 + rng.IntN(3)
	}
	if c.Partitions == 0 {
		c.Partitions = 1 + rng.IntN(4)
	}
	if c.FaultsFor == 0 {
		c.FaultsFor = time.Duration(60+rng.IntN(300)) * time.Second
	}
	if c.SettleWithin == 0 {
		c.SettleWithin = 15 * time.Minute
	}
	return c
}

// Result is what one run found.
type Result struct {
	Seed uint64
	// Steps is the number of events run; SimTime the simulated time.
	Steps   int
	SimTime time.Duration
	// Hash is the FNV-1a hash of the trace: equal seeds, equal hashes.
	Hash uint64
	// Counts of what happened, for a summary and to see that the faults
	// reach the paths they should.
	Stats Stats
	// Err is the first invariant broken (with the step and time), nil when
	// the run was clean.
	Err error
}

// Stats counts what a run did.
type Stats struct {
	Accepted, Committed, Published   int
	MovesStarted, Flips, Promotes    int
	TargetsCleared, Refreezes        int
	Crashes, CutOffs, LeaderChanges  int
	FencesRefused, UnknownFlips      int
	PublishesRefused, CommitsRefused int
	Forfeited                        int
	// Held counts prepares the source's pacing held (rule B5); FlipBatches
	// the batched flip entries proposed, SharedFlips the flips proposed in
	// an entry with another.
	Held, FlipBatches, SharedFlips int
	// Groups counts the move groups sent (net.go: groupCall), SharedGroups
	// those that carried more than one request.
	Groups, SharedGroups int
	// FanoutCopies counts parent records copied to the child (with
	// repeats); CursorsInstalled the cursor sidecars a move installed.
	FanoutCopies, CursorsInstalled int
	// CursorsTorn counts cursor files a crash tore.
	CursorsTorn int
	// Staged counts copies staged before their freeze (issue 46);
	// StagedInstalls the installs that found theirs untouched and only
	// renamed it.
	Staged, StagedInstalls int
	// InstallsFound counts workers that started on their own move's
	// install left at the path by an earlier worker (a crash).
	InstallsFound int
}

// the simulation's constants, as the node's defaults have them where the
// node has one.
const (
	requestTimeout       = 10 * time.Second
	moveTick             = time.Second
	rebalanceInterval    = time.Second
	heartbeatInterval    = 2 * time.Second
	deadTimeout          = 30 * time.Second
	deadTargetAbortAfter = 2 * time.Minute
	leaseDrainTimeout    = 500 * time.Millisecond
	leaseDrainPoll       = 10 * time.Millisecond
	maxInFlightMoves     = 4
	// catchUpStopBytes is small so that pre-copy takes several passes at
	// the simulated produce rates.
	catchUpStopBytes = 2000
	chunkRecords     = 16
	// lateCommitMax bounds how long after a leader change a proposal the
	// old leader appended may still commit: inside the worker's
	// UnknownSettle (15 s), as Raft's election timeouts keep it.
	lateCommitMax = 8 * time.Second
)

// base is the wall-clock reading of simulated time zero, for the pieces
// that take a time.Time (the freeze gate, the liveness tracker).
var base = time.Unix(1_700_000_000, 0)

type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type queue []*event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// world is one simulation.
type world struct {
	cfg Config
	rng *rand.Rand
	// aim draws the aimed faults (Config.Aim).
	aim *rand.Rand
	// batches draws how long an install waits in its node's batcher: a
	// stream of its own, so the other draws of a seed are as they were.
	batches *rand.Rand
	now     time.Duration
	q       queue
	seq     uint64
	steps   int

	nodes []*node
	byID  map[string]*node
	meta  *meta
	truth truth
	stats Stats

	// faulty is false once FaultsFor has passed: the network heals and
	// every node is brought back.
	faulty bool
	// childDownUntil is, per partition, when the child's partition its
	// fan-out copies to is back (Config.Fanout).
	childDownUntil map[int]time.Duration
	// forming is the move groups gathering requests (net.go).
	forming map[groupKey][]groupItem
	hash    uint64
	trace   io.Writer
	err     error
}

// maxSteps bounds a run whatever it does: a world that never settles
// fails on the liveness check long before.
const maxSteps = 5_000_000

// Run runs one world to the end and checks it.
func Run(cfg Config) Result {
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	cfg = cfg.withDefaults(rng)
	w := &world{cfg: cfg, rng: rng, byID: map[string]*node{}, faulty: true, trace: cfg.Trace, childDownUntil: map[int]time.Duration{}, forming: map[groupKey][]groupItem{},
		aim: rand.New(rand.NewPCG(cfg.Seed^0x5bd1e995, cfg.Seed)), batches: rand.New(rand.NewPCG(cfg.Seed^0x2545f491, cfg.Seed))}
	h := fnv.New64a()
	w.hash = h.Sum64()
	w.truth.init()
	w.build()
	w.note("world", int64(cfg.Nodes), int64(cfg.Partitions), int64(cfg.FaultsFor/time.Second))
	w.at(cfg.FaultsFor, w.heal)
	for w.q.Len() > 0 && w.err == nil && w.steps < maxSteps {
		e := heap.Pop(&w.q).(*event)
		w.now = e.at
		w.steps++
		e.fn()
		if w.err == nil {
			w.checkStep()
		}
		if !w.faulty && w.settled() {
			break
		}
		if !w.faulty && w.now > cfg.FaultsFor+cfg.SettleWithin && w.err == nil {
			w.failf("liveness: not settled %s after the faults stopped: %s", cfg.SettleWithin, w.unsettled())
		}
	}
	if w.err == nil && w.steps >= maxSteps {
		w.failf("liveness: %d steps without settling: %s", w.steps, w.unsettled())
	}
	if w.err == nil {
		w.checkFinal()
	}
	return Result{Seed: cfg.Seed, Steps: w.steps, SimTime: w.now, Hash: w.hash, Stats: w.stats, Err: w.err}
}

// at schedules fn d from now.
func (w *world) at(d time.Duration, fn func()) {
	w.seq++
	heap.Push(&w.q, &event{at: w.now + d, seq: w.seq, fn: fn})
}

// every runs fn every d (jittered by up to a tenth) while keep says so.
func (w *world) every(d time.Duration, fn func() (keep bool)) {
	var tick func()
	tick = func() {
		if fn() {
			w.at(d+w.jitter(d/10), tick)
		}
	}
	w.at(w.jitter(d), tick)
}

func (w *world) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(w.rng.Int64N(int64(d)))
}

func (w *world) chance(p float64) bool { return w.rng.Float64() < p }

// between draws a duration in [lo, hi).
func (w *world) between(lo, hi time.Duration) time.Duration { return lo + w.jitter(hi-lo) }

// batchWait is how long an install waits for its node's install batch
// beyond its own syncs: nothing, mostly, and now and then the second or
// more a copy queues behind the batches of a bulk move (installsInFlight
// out, each waiting for its syncfs barriers). While it waits, the worker
// goes on stepping its timers.
func (w *world) batchWait() time.Duration {
	if w.batches.Float64() >= 0.2 {
		return 0
	}
	return 200*time.Millisecond + time.Duration(w.batches.Int64N(int64(3*time.Second)))
}

// note adds one step to the trace: its hash always, its line when tracing.
func (w *world) note(what string, args ...int64) {
	h := w.hash
	mix := func(b byte) { h ^= uint64(b); h *= 1099511628211 }
	for i := 0; i < len(what); i++ {
		mix(what[i])
	}
	for _, a := range append([]int64{int64(w.now)}, args...) {
		for k := 0; k < 8; k++ {
			mix(byte(a >> (8 * k)))
		}
	}
	w.hash = h
	if w.trace != nil {
		parts := make([]string, len(args))
		for i, a := range args {
			parts[i] = strconv.FormatInt(a, 10)
		}
		fmt.Fprintf(w.trace, "%12s  %s %v\n", w.now.Round(time.Microsecond), what, parts)
	}
}

// notef is note with a readable line; the line is formatted only when
// tracing, the hash takes what and args.
func (w *world) notef(what string, args []int64, format string, a ...any) {
	tr := w.trace
	w.trace = nil
	w.note(what, args...)
	w.trace = tr
	if tr != nil {
		fmt.Fprintf(tr, "%12s  %s: %s\n", w.now.Round(time.Microsecond), what, fmt.Sprintf(format, a...))
	}
}

// failf records the first broken invariant.
func (w *world) failf(format string, a ...any) {
	if w.err != nil {
		return
	}
	w.err = fmt.Errorf("seed %d, step %d, t=%s: %s", w.cfg.Seed, w.steps, w.now, fmt.Sprintf(format, a...))
	if w.trace != nil {
		fmt.Fprintf(w.trace, "%12s  VIOLATION: %s\n", w.now, fmt.Sprintf(format, a...))
	}
}

func (w *world) build() {
	w.meta = newMeta(w)
	for i := range w.cfg.Nodes {
		n := newNode(w, fmt.Sprintf("n%d", i+1))
		w.nodes = append(w.nodes, n)
		w.byID[n.id] = n
	}
	w.meta.create(w.cfg.Partitions)
	for _, n := range w.nodes {
		n.boot()
	}
	w.meta.start()
	w.produce()
	w.faults()
}

// heal ends the faults: no more loss, duplicates, latency spikes, slow
// disks or leader changes; a node down or cut off comes back when its own
// outage ends (at most five minutes), so that a promote of a long-dead
// source can still happen while the world settles.
func (w *world) heal() {
	w.faulty = false
	w.note("heal")
	for _, n := range w.nodes {
		n.slowDiskUntil = 0
	}
	w.meta.electingUntil = 0
	w.meta.undrainAll()
}

// produce accepts records into the ingress WAL of a live node throughout
// the faults: 202 once the WAL has it (rule K1: a node that is up always
// accepts).
func (w *world) produce() {
	w.every(150*time.Millisecond, func() bool {
		if !w.faulty {
			return false
		}
		up := make([]*node, 0, len(w.nodes))
		for _, n := range w.nodes {
			if n.up {
				up = append(up, n)
			}
		}
		if len(up) == 0 {
			return true
		}
		n := up[w.rng.IntN(len(up))]
		p := w.rng.IntN(w.cfg.Partitions)
		id := w.truth.accept(p)
		n.wal[p] = append(n.wal[p], rec{id: id, size: int64(50 + w.rng.IntN(400))})
		w.stats.Accepted++
		w.note("accept", int64(n.index), int64(p), id)
		return true
	})
}

// faults injects one fault or operator action every few seconds until
// FaultsFor.
func (w *world) faults() {
	var next func()
	next = func() {
		if !w.faulty {
			return
		}
		w.fault()
		w.at(w.between(time.Second, 12*time.Second), next)
	}
	w.at(w.between(time.Second, 5*time.Second), next)
}

func (w *world) impaired() int {
	k := 0
	for _, n := range w.nodes {
		if !n.up || n.cutUntil > w.now {
			k++
		}
	}
	return k
}

func (w *world) fault() {
	n := w.nodes[w.rng.IntN(len(w.nodes))]
	if mv := w.meta.state.Moving(); len(mv) > 0 && w.chance(0.5) {
		// Most of what goes wrong matters only while a move runs: aim at
		// its source or its destination.
		a := mv[w.rng.IntN(len(mv))]
		n = w.byID[a.Owner]
		if w.chance(0.4) {
			n = w.byID[a.Target]
		}
	}
	long := w.chance(0.3)
	switch r := w.rng.IntN(100); {
	case r < 16:
		if n.up && w.impaired() < 2 {
			d := w.between(time.Second, 40*time.Second)
			if long {
				d = w.between(3*time.Minute, 5*time.Minute)
			}
			n.crash()
			w.at(d, func() {
				if !n.up {
					n.restart()
				}
			})
		}
	case r < 28:
		if n.up && n.cutUntil <= w.now && w.impaired() < 2 {
			d := w.between(time.Second, 40*time.Second)
			if long {
				d = w.between(3*time.Minute, 4*time.Minute)
			}
			n.cutUntil = w.now + d
			w.stats.CutOffs++
			w.note("cut", int64(n.index), int64(d))
		}
	case r < 36:
		w.meta.leaderChange(w.between(100*time.Millisecond, 5*time.Second))
	case r < 50:
		w.meta.operatorMove()
	case r < 56:
		w.meta.operatorAbort()
	case r < 64:
		w.meta.toggleDrain(n)
	case r < 82:
		n.slowDiskUntil = w.now + w.between(2*time.Second, 20*time.Second)
		w.note("slow disk", int64(n.index), int64(n.slowDiskUntil))
	case r < 90 && w.cfg.Fanout:
		w.childOutage()
	default:
		// a quiet spell
	}
}

// aimAtFlip strikes just as a flip is proposed (Config.Aim), one of:
//   - the source is cut off: if the flip commits, its replica may not see
//     it before its freeze lapses;
//   - the proposal is slow and the source crashes and is back a moment
//     later, its freeze gone, before the flip commits;
//   - the proposal is slow, and the move is aborted and planned again to
//     the same destination before it lands.
func (w *world) aimAtFlip(dest, src *node, p int) {
	if !w.cfg.Aim || !w.faulty || w.aim.Float64() >= 0.3 || !src.up || src.cutUntil > w.now || w.impaired() >= 2 {
		return
	}
	slow := time.Second + time.Duration(w.aim.Int64N(int64(4*time.Second)))
	switch w.aim.IntN(3) {
	case 0:
		after := time.Duration(w.aim.Int64N(int64(20 * time.Millisecond)))
		d := 3*time.Second + time.Duration(w.aim.Int64N(int64(60*time.Second)))
		w.at(after, func() {
			if src.up && src.cutUntil <= w.now {
				src.cutUntil = w.now + d
				w.stats.CutOffs++
				w.note("aimed cut", int64(src.index), int64(d))
			}
		})
	case 1:
		dest.slowNext = slow
		w.note("aimed crash", int64(src.index))
		src.crash()
		w.at(time.Duration(w.aim.Int64N(int64(slow))), func() {
			if !src.up {
				src.restart()
			}
		})
	case 2:
		dest.slowNext = slow
		w.note("aimed abort and re-plan", int64(p))
		w.at(time.Duration(w.aim.Int64N(int64(slow/2))), func() {
			a, _ := w.meta.state.Get(incarnation, p)
			if a.Target == dest.id && !w.meta.electing() && w.meta.setTarget(p, a.Owner, a.Target, "", "aimed abort") {
				w.meta.setTarget(p, a.Owner, "", dest.id, "aimed re-plan")
			}
		})
	}
}

// aimAtPromote restarts a crashed source just as a worker's force-promote
// of it comes due: its first answers race the promote (Config.Aim).
func (w *world) aimAtPromote(wk *worker) {
	src := w.byID[wk.source]
	if !w.cfg.Aim || !w.faulty || src.up || !wk.state.SourceDead {
		return
	}
	if dead := wk.now() - wk.state.SourceDeadSince; dead < moveCfg.ForcePromoteAfter-3*time.Second || w.aim.Float64() >= 0.2 {
		return
	}
	w.note("aimed restart", int64(src.index))
	src.restart()
}

// settled: faults over, every node up, every WAL handed over, no move in
// flight, nothing of a move left running.
func (w *world) settled() bool { return w.unsettled() == "" }

func (w *world) unsettled() string {
	for _, n := range w.nodes {
		if !n.up || n.cutUntil > w.now {
			return n.id + " is down or cut off"
		}
		for p, recs := range n.wal {
			if len(recs) > 0 {
				return fmt.Sprintf("%s has %d records of partition %d in its WAL", n.id, len(recs), p)
			}
		}
		if len(n.workers) > 0 {
			ps := make([]int, 0, len(n.workers))
			for p := range n.workers {
				ps = append(ps, p)
			}
			slices.Sort(ps)
			return fmt.Sprintf("%s runs move workers for partitions %v (phase %s)", n.id, ps, n.workers[ps[0]].state.Phase)
		}
	}
	if mv := w.meta.state.Moving(); len(mv) > 0 {
		return fmt.Sprintf("partition %d still targets %s (owner %s)", mv[0].Partition, mv[0].Target, mv[0].Owner)
	}
	for _, n := range w.nodes {
		if n.applied < uint64(len(w.meta.log)) {
			return n.id + "'s replica is behind"
		}
	}
	return w.fanoutUnsettled()
}

func (s *Stats) add(o Stats) {
	s.Accepted += o.Accepted
	s.Staged += o.Staged
	s.StagedInstalls += o.StagedInstalls
	s.InstallsFound += o.InstallsFound
	s.Committed += o.Committed
	s.Published += o.Published
	s.MovesStarted += o.MovesStarted
	s.Flips += o.Flips
	s.Promotes += o.Promotes
	s.TargetsCleared += o.TargetsCleared
	s.Refreezes += o.Refreezes
	s.Crashes += o.Crashes
	s.CutOffs += o.CutOffs
	s.LeaderChanges += o.LeaderChanges
	s.FencesRefused += o.FencesRefused
	s.UnknownFlips += o.UnknownFlips
	s.PublishesRefused += o.PublishesRefused
	s.CommitsRefused += o.CommitsRefused
	s.Held += o.Held
	s.FlipBatches += o.FlipBatches
	s.SharedFlips += o.SharedFlips
	s.Groups += o.Groups
	s.SharedGroups += o.SharedGroups
	s.Forfeited += o.Forfeited
	s.FanoutCopies += o.FanoutCopies
	s.CursorsInstalled += o.CursorsInstalled
	s.CursorsTorn += o.CursorsTorn
}

package mover

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/supervise"
	"github.com/naradmq/narad/actors/sweeper"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// The move runner (seed 000 "Owner and target", rules R1-R4): on each node
// it looks every MoveTick for partitions targeted at the node and starts
// one worker actor per partition (worker.go); a worker whose partition is
// no longer targeted here (aborted, re-planned, flipped) is stopped.

// Name is the runner's name under the node's root.
const Name = "mover"

// GetProgress asks the runner for the progress of every move it runs; the
// answer is a []messages.MoveProgress.
type GetProgress struct{}

// moverTick is the runner's own timer.
type moverTick struct{}

// moveEnded is a worker telling the runner it finished (flipped, or ended
// without a flip): the next tick scans whatever the version says (rule R3).
type moveEnded struct {
	key     messages.PartitionKey
	flipped bool
}

// moveProgressUpdate is a worker's latest progress.
type moveProgressUpdate struct {
	key      messages.PartitionKey
	progress messages.MoveProgress
}

// moverChanged is the replica having changed: a target set here starts
// its worker now, not at the next tick.
type moverChanged struct{}

// replicaSettled is the runner's first catch-up barrier answering (rule
// B7): until one succeeds, the runner starts no move.
type replicaSettled struct{ err error }

// Runner is the move runner: the parent of this node's move workers,
// which keeps what they must not forget across their restarts. Spawn it
// with New, supervising its children with the node's worker strategy
// (Config.WorkerMaxRestarts...); the node stops it, which stops every
// worker.
type Runner struct {
	d Deps
	// progress is each running worker's latest report.
	progress map[messages.PartitionKey]messages.MoveProgress
	// workers are the running workers by partition.
	workers map[messages.PartitionKey]*actor.PID
	// lastVersion and lastScan gate the scan (rules R2, R3); rescan forces
	// the next one.
	lastVersion uint64
	lastScan    time.Time
	rescan      bool
	stopped     bool
	// settled: the local replica caught up with the leaders once since the
	// runner started (rule B7); settling: that barrier is on its way.
	settled, settling bool
	// endSettle cancels the barrier on its way and settleDone closes when
	// its goroutine ended: the runner waits for it as it stops, so the
	// read never outlives the metastore the node closes after the runner
	// (Dragonboat's read of a state machine that closes under it is a
	// data race the race detector found there).
	endSettle  context.CancelFunc
	settleDone chan struct{}
	// carries keep what a move's worker must not forget across its
	// restarts and respawns (its verify count, rule V4), by partition.
	carries map[messages.PartitionKey]workerCarry
	// ticks counts the ticks for the sweep's turn (rule R5), skipped
	// scans or not.
	ticks int
	// changes turns the replica's changes into moverChanged; stop ends it.
	changes metastore.ChangeWatch
	stop    chan struct{}
}

// New is the runner of d's node.
func New(d Deps) *Runner {
	return &Runner{d: d, workers: map[messages.PartitionKey]*actor.PID{},
		progress: map[messages.PartitionKey]messages.MoveProgress{}, carries: map[messages.PartitionKey]workerCarry{}}
}

func (m *Runner) Receive(ctx actor.Context) {
	defer supervise.LogPanic(m.d.Logger, Name)
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		m.rescan = true
		m.settle(ctx)
		m.watch(ctx)
		m.schedule(ctx)
	case *actor.Stopping:
		m.stopped = true
		m.endWatch()
		m.waitSettle()
	case *actor.Restarting:
		m.endWatch() // the restarted instance starts its own
		m.waitSettle()
	case moverTick:
		m.countTick(ctx)
		m.tick(ctx)
		m.schedule(ctx)
	case moverChanged:
		m.changes.Handled()
		m.tick(ctx)
	case replicaSettled:
		m.settledAnswer(ctx, msg)
	case moveEnded:
		m.ended(ctx, msg)
	case carryAsk:
		ctx.Respond(m.carries[msg.key])
	case carryUpdate:
		m.carryUpdated(msg)
	case moveProgressUpdate:
		if _, running := m.workers[msg.key]; running {
			m.progress[msg.key] = msg.progress
		}
	case GetProgress:
		out := make([]messages.MoveProgress, 0, len(m.progress))
		for _, p := range m.progress {
			out = append(out, p)
		}
		ctx.Respond(out)
	case *actor.Terminated:
		for k, pid := range m.workers {
			if pid.Equal(msg.Who) {
				delete(m.workers, k)
				delete(m.progress, k)
				m.rescan = true
			}
		}
	}
}

func (m *Runner) schedule(ctx actor.Context) {
	if m.stopped {
		return
	}
	self, root := ctx.Self(), ctx.ActorSystem().Root
	clock.Or(m.d.Clock).AfterFunc(m.d.Tick, func() { root.Send(self, moverTick{}) })
}

// watch sends moverChanged at the replica's changes (coalesced: one at a
// time), so a target set here starts its worker at once; the tick stays
// as the catch-all scan. The goroutine ends when the runner stops.
func (m *Runner) watch(ctx actor.Context) {
	m.stop = make(chan struct{})
	self, root := ctx.Self(), ctx.ActorSystem().Root
	m.changes.Start(m.d.Store, m.stop, func() { root.Send(self, moverChanged{}) })
}

// endWatch ends the watch goroutine.
func (m *Runner) endWatch() {
	if m.stop != nil {
		close(m.stop)
		m.stop = nil
	}
}

// settle runs the catch-up barrier that lets the runner take moves (rule
// B7): a node whose replica lags would start workers for targets already
// cleared, or miss ones already set. The goroutine ends with the
// barrier's timeout, or when the runner stops (waitSettle).
func (m *Runner) settle(ctx actor.Context) {
	if m.settled || m.settling {
		return
	}
	m.settling = true
	self, root, store := ctx.Self(), ctx.ActorSystem().Root, m.d.Store
	c, cancel := context.WithTimeout(context.Background(), m.d.RequestTimeout)
	done := make(chan struct{})
	m.endSettle, m.settleDone = cancel, done
	go func() {
		defer close(done)
		defer cancel()
		root.Send(self, replicaSettled{err: store.CatchUp(c)})
	}()
}

// waitSettle cancels the barrier on its way, if one is, and waits for its
// goroutine to end.
func (m *Runner) waitSettle() {
	if m.settleDone == nil {
		return
	}
	m.endSettle()
	<-m.settleDone
	m.endSettle, m.settleDone = nil, nil
}

func (m *Runner) settledAnswer(ctx actor.Context, r replicaSettled) {
	m.settling = false
	if r.err != nil {
		m.d.Logger.Warn("move runner: the replica has not caught up; no move starts yet", "err", r.err)
		return // the next tick asks again
	}
	m.settled, m.rescan = true, true
	m.tick(ctx)
}

// countTick counts the runner's ticks for the stale-copy sweep, which runs
// every SweepEveryTicks'th whatever the tick does (rule R5): a tick that
// skips its scan, or comes before the replica settled, counts all the same.
func (m *Runner) countTick(ctx actor.Context) {
	m.ticks++
	if sweepTurn(m.ticks, m.d.Config.SweepEveryTicks) && m.d.Sweeper != nil {
		ctx.Send(m.d.Sweeper, sweeper.Due{})
	}
}

// sweepTurn reports whether the tick'th tick is a sweep's (rule R5).
func sweepTurn(tick, every int) bool { return tick%every == 0 }

// tick scans the partitions targeted here unless nothing changed since the
// last scan (rule R2); it scans anyway after a worker ended and at least
// every MoveFullScanEvery (rule R3). Before the replica settled (rule B7)
// it scans nothing.
func (m *Runner) tick(ctx actor.Context) {
	if !m.settled {
		m.settle(ctx)
		return
	}
	v, now := m.d.Store.AssignmentsVersion(), clock.Or(m.d.Clock).Now()
	if !scanDue(m.rescan, v, m.lastVersion, now.Sub(m.lastScan), m.d.Config.FullScanEvery) {
		return
	}
	m.rescan, m.lastVersion, m.lastScan = false, v, now
	want := map[messages.PartitionKey]messages.Assignment{}
	topics := metastore.TopicKeys{Topics: m.d.Store}
	for _, a := range m.d.Store.TargetedAt(m.d.NodeID) {
		if k, ok := topics.Key(a); ok {
			want[k] = a
		}
	}
	for k, pid := range m.workers {
		if _, ok := want[k]; !ok {
			// Aborted, re-planned or flipped: the worker's own state
			// decides what becomes of its copy as it stops. A flip seen
			// here first (its answer still on the way to the worker) is a
			// move done all the same.
			ctx.Stop(pid)
			delete(m.workers, k)
			delete(m.progress, k)
			delete(m.carries, k)
			if a, ok := m.d.Store.Assignment(k.Incarnation, k.Partition); ok && a.Owner == m.d.NodeID {
				m.d.Metrics.Done.Inc()
			}
		}
	}
	// A leaving node is never a target (rule B11): the controller clears
	// the targets aimed at it, and until its replica shows that, it starts
	// none of them.
	me, _ := m.d.Store.Member(m.d.NodeID)
	for k, a := range want {
		if _, running := m.workers[k]; running || me.Leaving {
			continue
		}
		d, owner, since := m.d, a.Owner, a.TargetSince
		if d.Flips != nil {
			d.Store = batchedFlips{Store: d.Store, flips: d.Flips}
		}
		if c, ok := m.carries[k]; !ok || c.since != since || c.source != owner {
			m.carries[k] = workerCarry{since: since, source: owner}
		}
		props := actor.PropsFromProducer(func() actor.Actor { return newWorker(d, k, owner, since) })
		pid, err := ctx.SpawnNamed(props, workerName(k))
		if err != nil {
			m.d.Logger.Error("start move worker", "partition", k, "err", err)
			m.rescan = true
			continue
		}
		ctx.Watch(pid)
		m.workers[k] = pid
		m.d.Logger.Info("move started", "topic", k.Topic, "partition", k.Partition, "from", owner, "to", m.d.NodeID)
	}
	m.d.Metrics.InFlight.Set(float64(len(m.workers)))
}

// workerCarry is what a move's worker keeps across its restarts (the
// supervision's fresh instance) and respawns (after it was given up on):
// the verify failures of rule V4, so that a copy that cannot be verified
// never freezes the source more than twice whatever the worker's fate.
// The runner keeps it, for the move of a target since and a source; each
// worker instance asks for it as it starts (carryAsk, answered with the
// workerCarry) and tells each change (carryUpdate). A worker's messages
// reach the runner in order, so an instance that crashed after an update
// is followed by one that asks after it.
type workerCarry struct {
	since          uint64
	source         string
	verifyFailures int
}

// carryUpdated keeps a worker's V4 count for its move, while the runner
// keeps that move (a move ended or re-planned forgets it).
func (m *Runner) carryUpdated(u carryUpdate) {
	if c, ok := m.carries[u.key]; ok {
		c.verifyFailures = u.verifyFailures
		m.carries[u.key] = c
	}
}

// carryAsk is a move worker starting: the answer is its move's
// workerCarry.
type carryAsk struct{ key messages.PartitionKey }

// carryUpdate is a move worker's V4 count changing.
type carryUpdate struct {
	key            messages.PartitionKey
	verifyFailures int
}

// scanDue decides whether a runner tick reads the metastore: only when the
// assignment shards applied something since the last scan (rule R2), or a
// rescan was asked for (a worker ended, a pass failed), or the last scan is
// fullEvery old (rule R3).
func scanDue(rescan bool, version, lastVersion uint64, sinceScan, fullEvery time.Duration) bool {
	return rescan || version != lastVersion || sinceScan >= fullEvery
}

func (m *Runner) ended(ctx actor.Context, e moveEnded) {
	pid, running := m.workers[e.key]
	if running {
		ctx.Stop(pid)
		delete(m.workers, e.key)
	}
	delete(m.progress, e.key)
	delete(m.carries, e.key)
	m.rescan = true
	m.d.Metrics.InFlight.Set(float64(len(m.workers)))
	if e.flipped && running { // a tick that saw the flip first counted it
		m.d.Metrics.Done.Inc()
	}
}

// workerName is a worker's name under the runner: the partition's name
// under the partitions supervisor, which holds the incarnation, not the
// topic name, after "move-".
func workerName(k messages.PartitionKey) string {
	return "move-p:" + strconv.FormatUint(k.Incarnation, 10) + ":" + strconv.Itoa(k.Partition)
}

// keyString names a partition in logs and errors.
func keyString(k messages.PartitionKey) string {
	return fmt.Sprintf("%s/%d", k.Topic, k.Partition)
}

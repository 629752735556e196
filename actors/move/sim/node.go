package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/naradmq/narad/actors/freeze"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// A simulated node: its metastore replica, its disk (partition logs,
// staging copies, the ingress WAL), and the actors that run on it: a
// partition actor per partition it owns (the source side of a move, with
// the real freeze gate), the dispatcher that hands the WAL's records to
// their owners, consumers, heartbeats and the move runner with its
// workers (worker.go). A crash loses everything not on its disk; the disk
// keeps what was made durable.

// rec is one record: id names it in the truth; written is when its
// segment was written on the node that first took it (segment ages must
// survive a move).
type rec struct {
	id      int64
	size    int64
	written time.Duration
}

// plog is a partition's log on a disk: every record in it is durable and
// was visible (the simulator's pipeline only appends once synced).
type plog struct {
	recs []rec
	// installed: a staging copy an install renamed into place; it is no
	// staging copy any more.
	installed bool
	// move names the move that installed it (its staging name: source,
	// target, since), which a later worker of the same move recognises.
	move string
	// staged is what a Stage made durable before the freeze (issue 46);
	// clean: nothing was written to the copy since, so its install only
	// renames it.
	staged []rec
	clean  bool
}

// touch records a write to a staging copy after its stage.
func (l *plog) touch() { l.clean = false }

func (l *plog) hwm() int64 { return int64(len(l.recs)) }

type node struct {
	w     *world
	id    string
	index int
	up    bool
	// started: its actors run (after the replica caught up at boot).
	started bool
	// epoch counts boots: what a crash loses is what was keyed to it.
	epoch int
	// cutUntil: cut off from every other node and the metastore.
	cutUntil time.Duration
	// slowNext, when set, is added to the latency of this node's next
	// message to the metastore (an aimed fault, Config.Aim).
	slowNext time.Duration
	// slowDiskUntil: fsyncs take seconds (a batch stays in flight through
	// a freeze, the path of rule F3).
	slowDiskUntil time.Duration

	// The replica: the log applied up to applied, as the node's own
	// state machines have it.
	replica *metastore.AssignMachine
	members members
	applied uint64

	disk    map[int]*plog
	staging map[int]*plog
	wal     map[int][]rec

	parts   map[int]*partActor
	workers map[int]*worker
	// pacer paces the freezes this node arms as a source (rule B5), the
	// node's own freeze.Pacer; a crash forgets it with the freezes.
	pacer *freeze.Pacer[int]
	// flips gathers the workers' flips for one batched entry (the node's
	// flip batcher), proposed flipWindow after the first.
	flips []pendingFlip
	// committing: a dispatcher commit is in flight for the partition.
	committing map[int]bool
	// nonce makes freeze tokens unique across boots.
	nonce uint64
	// installForce: the copy at the partition's path was installed by a
	// force-promote (its marker says so).
	installForce map[int]bool
	// cursorDisk is each partition's fan-out cursor file as written;
	// stagingCursor the sidecar of a move's last listing, kept with the
	// staging copy until it is installed (Config.Fanout).
	cursorDisk, stagingCursor map[int]int64
}

func newNode(w *world, id string) *node {
	return &node{w: w, id: id, index: len(w.nodes) + 1, replica: metastore.NewAssignMachine(), members: members{},
		disk: map[int]*plog{}, staging: map[int]*plog{}, wal: map[int][]rec{}, installForce: map[int]bool{},
		cursorDisk: map[int]int64{}, stagingCursor: map[int]int64{}}
}

// boot starts the node: like Node.Start, it waits until its replica has
// caught up with the leader (a ReadIndex read on every shard, WaitReady)
// before any actor starts, so a restarted node never serves a partition
// its stale replica still names it the owner of.
func (n *node) boot() {
	w := n.w
	n.up = true
	n.epoch++
	n.pacer, n.flips = freeze.NewPacer[int](paceCfg), nil
	epoch := n.epoch
	var wait func()
	wait = func() {
		if !n.up || n.epoch != epoch {
			return
		}
		if !w.reachable(nil, n) || w.meta.electing() {
			w.at(w.between(100*time.Millisecond, 500*time.Millisecond), wait)
			return
		}
		n.replicate(len(w.meta.log))
		n.start()
	}
	wait()
}

// start starts the node's actors and loops.
func (n *node) start() {
	w := n.w
	n.started = true
	n.nonce = uint64(n.index)<<32 | uint64(n.epoch)
	n.parts, n.workers, n.committing = map[int]*partActor{}, map[int]*worker{}, map[int]bool{}
	for id := range w.meta.members {
		if n.members[id] == nil {
			n.members[id] = &member{status: messages.MemberAlive}
		}
	}
	epoch := n.epoch
	live := func() bool { return n.up && n.epoch == epoch }
	w.note("started", int64(n.index), int64(n.applied))
	w.every(heartbeatInterval, func() bool {
		if live() {
			w.meta.propose(n, live, entry{member: &memberCmd{id: n.id, heartbeat: true}}, func(any, bool) {})
		}
		return live()
	})
	w.every(time.Second, func() bool {
		if live() {
			w.deliver(nil, n, func() { n.replicate(len(w.meta.log)) })
		}
		return live()
	})
	w.every(moveTick, func() bool {
		if live() {
			n.runMoves()
		}
		return live()
	})
	w.every(200*time.Millisecond, func() bool {
		if live() {
			n.dispatch()
		}
		return live()
	})
	w.every(300*time.Millisecond, func() bool {
		if live() {
			n.consume()
		}
		return live()
	})
	n.supervise()
}

// crash loses the node's memory: partition actors with their freezes and
// unsynced batches, workers, and staging bytes not yet synced.
func (n *node) crash() {
	w := n.w
	w.stats.Crashes++
	w.note("crash", int64(n.index))
	n.tearCursors()
	for _, p := range sortedKeys(n.parts) {
		n.closePart(p, "crash")
	}
	for _, wk := range n.workers {
		wk.gone = true
	}
	n.workers = map[int]*worker{}
	n.flips = nil // their workers are gone: their outcomes are unknown to nobody
	for p, s := range n.staging {
		if s.installed {
			// Renamed to the partition's path before its freeze: the
			// staging directory is gone, and a worker after the restart
			// copies into a new one; the copy at the path keeps what was
			// synced of it (issue 46).
			n.staging[p] = &plog{}
			continue
		}
		if n := min(len(s.recs), s.synced()); n < len(s.recs) {
			s.recs = s.recs[:n]
			s.touch()
		}
	}
	n.up, n.started = false, false
	n.epoch++
}

func (n *node) restart() {
	n.w.note("restart", int64(n.index))
	n.boot()
}

// synced is how much of a staging copy survives a crash: the copy syncs
// each chunk as it lands (sealed segments on completion, the rest before
// the marker), so the simulator keeps all but a torn last record.
func (l *plog) synced() int {
	if len(l.recs) == 0 {
		return 0
	}
	return len(l.recs) - 1
}

// replicate applies the log up to upTo on the replica, then lets the
// supervisor and the runner look.
func (n *node) replicate(upTo int) {
	w := n.w
	if !n.up {
		return
	}
	changed := false
	for n.applied < uint64(upTo) {
		e := w.meta.log[n.applied]
		n.applied++
		changed = true
		if e.member != nil {
			if n.members[e.member.id] == nil {
				n.members[e.member.id] = &member{status: messages.MemberAlive}
			}
			n.members.apply(e.member)
			continue
		}
		if _, err := n.replica.Apply(*e.assign, n.applied); err != nil {
			w.failf("%s's replica refused entry %d: %v", n.id, n.applied, err)
		}
	}
	if changed && n.started {
		n.supervise()
	}
}

// owner is the partition's owner as this node's replica has it.
func (n *node) owner(p int) string {
	a, _ := n.replica.Get(incarnation, p)
	return a.Owner
}

// supervise opens the partitions the replica says this node owns and
// closes the others, telling a closing one the HWM its successor's copy
// ends at.
func (n *node) supervise() {
	for p := range n.w.cfg.Partitions {
		a, _ := n.replica.Get(incarnation, p)
		_, open := n.parts[p]
		switch {
		case a.Owner == n.id && !open:
			n.openPart(p)
		case a.Owner != n.id && open:
			n.handOver(p, a)
		}
	}
}

// partActor is the partition actor of a partition this node owns: the
// commit pipeline (stash, a written batch being synced), the leases out,
// and the real freeze gate in front of it all.
type partActor struct {
	n    *node
	p    int
	log  *plog
	gate freeze.Gate
	// fz is the partition's freeze actor, its child: it lives and dies
	// with the partition actor, and every message between the two goes
	// through a mailbox (mailbox.go).
	fz *fzActor
	// gateInbox is the freeze actor's messages to this one.
	gateInbox mailbox
	// stash holds commits that passed the gate and wait to be written;
	// batch is the write being synced.
	stash []*commit
	batch []*commit
	// leases out to consumers, each with its own id.
	leases map[int]bool
	nextID int
	closed bool
	// cursor is the link's fan-out cursor (the next offset to copy), ahead
	// of its file until the write lands; fanBusy: a copy is in flight.
	cursor  int64
	fanBusy bool
	// cursorWrites counts cursor file writes in flight.
	cursorWrites int
}

// commit is one dispatcher commit: records, and the answer.
type commit struct {
	recs  []rec
	reply func(any)
}

type commitAnswer struct {
	ok      bool
	offsets []int64
}

var gateCfg = freeze.Config{FreezeTTL: 30 * time.Second, LeaseDrainTimeout: leaseDrainTimeout, LeaseDrainPoll: leaseDrainPoll, ConfirmRetry: time.Second}

// paceCfg paces a source's freezes (rule B5) far tighter than a node's
// defaults (4 a tick, 128 frozen), so that with a handful of partitions
// the pacing holds moves and they keep their turn.
var paceCfg = freeze.PaceConfig{Tick: 100 * time.Millisecond, PerTick: 1, MaxFrozen: 1, FreezeTTL: gateCfg.FreezeTTL,
	KeepTurnFor: 3 * time.Second, MaxLine: 64}

func (n *node) openPart(p int) {
	l := n.disk[p]
	if l == nil {
		l = &plog{}
		n.disk[p] = l
	}
	n.nonce++
	pa := &partActor{n: n, p: p, log: l, leases: map[int]bool{}}
	pa.fz = &fzActor{pa: pa, nonce: n.nonce}
	n.parts[p] = pa
	n.w.note("open", int64(n.index), int64(p), l.hwm())
	if a, _ := n.replica.Get(incarnation, p); a.Target != "" && !n.w.cfg.Breaks.Reopen {
		pa.step(freeze.Reopen{HWM: l.hwm(), Nonce: n.nonce})
	}
	pa.openCursor()
}

// handOver closes a partition whose ownership moved away. Records past the
// HWM the flip named were never copied: the real node sets them aside, and
// any of them a dispatcher was told is committed is lost to consumers.
func (n *node) handOver(p int, a messages.Assignment) {
	pa := n.parts[p]
	if a.FlippedFrom == n.id && pa.log.hwm() > a.FlippedAtHWM {
		n.w.truth.setAside(n, p, a.FlippedAtHWM, pa.log.recs[a.FlippedAtHWM:])
	}
	if n.w.truth.promotedAway[p] == n.id {
		delete(n.w.truth.promotedAway, p)
	}
	n.closePart(p, "handed over")
}

func (n *node) closePart(p int, why string) {
	pa := n.parts[p]
	pa.closed = true
	n.pacer.Thaw(p)
	for _, c := range append(pa.stash, pa.batch...) {
		c.reply(commitAnswer{})
	}
	delete(n.parts, p)
	n.w.notef("close", []int64{int64(n.index), int64(p)}, "%s closes partition %d (%s) at hwm %d", n.id, p, why, pa.log.hwm())
}

// step feeds one event to the gate and carries out its effects; it
// reports whether the gate refused what the event asked for.
func (pa *partActor) step(ev any) (refused bool) {
	w := pa.n.w
	var fx []any
	pa.gate, fx = freeze.GateStep(gateCfg, pa.gate, base.Add(w.now), ev)
	for _, f := range fx {
		switch f := f.(type) {
		case freeze.RefuseStash:
			for _, c := range pa.stash {
				w.stats.CommitsRefused++
				c.reply(commitAnswer{})
			}
			pa.stash = nil
		case freeze.RefuseCommit, freeze.PauseConsume, freeze.RefusePublish:
			refused = true
		case freeze.SchedulePoll:
			tok := f.Token
			w.at(f.After, func() {
				if !pa.closed {
					pa.step(freeze.Poll{Token: tok, Partition: pa.pipeline()})
				}
			})
		case freeze.Report:
			w.checkReport(pa)
			hwm := pa.log.hwm()
			pa.step(freeze.Reported{Token: f.Token, HWM: hwm, OK: true})
			f.Asker.(func(any))(handoffAnswer{ok: true, token: f.Token, hwm: hwm})
			w.notef("report", []int64{int64(pa.n.index), int64(pa.p), hwm}, "%s reports partition %d at hwm %d under %s", pa.n.id, pa.p, hwm, f.Token)
		case freeze.NotifyConsumers:
		case freeze.ConfirmOwner:
			pa.confirmOwner(f.After)
		case freeze.Pinned, freeze.Reopened:
			pa.toFreeze(func() { pa.fz.step(nil, f) })
		default:
			panic(fmt.Sprintf("sim: freeze effect %T not carried out", f))
		}
	}
	return refused
}

// confirmOwner is the gate's leader read after a reported freeze lapsed;
// the read brings the replica up to it, so a flip it missed hands the
// partition over before the answer is stepped.
func (pa *partActor) confirmOwner(after time.Duration) {
	n, w := pa.n, pa.n.w
	if w.cfg.Breaks.Confirm {
		w.at(after, func() {
			if !pa.closed {
				pa.step(freeze.OwnerConfirmed{Owner: true})
			}
		})
		return
	}
	w.at(after, func() {
		if pa.closed {
			return
		}
		w.meta.leaderRead(n, func() bool { return !pa.closed }, pa.p, func(a messages.Assignment, found, ok bool) {
			if pa.closed {
				return
			}
			pa.step(freeze.OwnerConfirmed{Owner: ok && found && a.Owner == n.id, Err: !ok})
		})
	})
}

// pipeline is what the gate must know of the pipeline and the leases.
func (pa *partActor) pipeline() freeze.Partition {
	settling := len(pa.batch) > 0
	if pa.n.w.cfg.Breaks.F3 {
		settling = false
	}
	leases := len(pa.leases)
	if pa.n.w.cfg.Breaks.F2 {
		leases = 0
	}
	return freeze.Partition{Settling: settling, LeasesOut: leases}
}

// receive is a dispatcher's commit arriving.
func (pa *partActor) receive(c *commit) {
	if pa.step(freeze.Commit{}) {
		pa.n.w.stats.CommitsRefused++
		c.reply(commitAnswer{})
		return
	}
	pa.stash = append(pa.stash, c)
	pa.kick()
}

// kick writes the stash once no batch is being synced.
func (pa *partActor) kick() {
	w := pa.n.w
	if len(pa.batch) > 0 || len(pa.stash) == 0 || pa.closed {
		return
	}
	pa.step(freeze.Write{})
	if len(pa.stash) == 0 {
		return // refused under the gate
	}
	pa.batch, pa.stash = pa.stash, nil
	d := w.between(100*time.Microsecond, 2*time.Millisecond)
	if pa.n.slowDiskUntil > w.now {
		d = w.between(200*time.Millisecond, 3*time.Second)
	}
	epoch := pa.n.epoch
	w.at(d, func() {
		if pa.closed || pa.n.epoch != epoch {
			return // lost with the boot, or failed at close
		}
		pa.synced()
	})
}

// synced publishes the batch: its records become visible at the HWM,
// unless the gate pins the HWM where a freeze reported it.
func (pa *partActor) synced() {
	w := pa.n.w
	batch := pa.batch
	pa.batch = nil
	refused := pa.step(freeze.Publish{Awaiting: true})
	if refused && !w.cfg.Breaks.F3 {
		w.stats.PublishesRefused++
		for _, c := range batch {
			c.reply(commitAnswer{})
		}
	} else {
		for _, c := range batch {
			offs := make([]int64, len(c.recs))
			for i, r := range c.recs {
				r.written = w.now
				offs[i] = pa.log.hwm()
				pa.log.recs = append(pa.log.recs, r)
				w.truth.publish(pa.n, pa.p, offs[i], r)
			}
			c.reply(commitAnswer{ok: true, offsets: offs})
		}
	}
	pa.step(freeze.Settled{Partition: pa.pipeline()})
	pa.kick()
	pa.fanout()
}

// dispatch hands each partition's WAL records to the owner the replica
// names, one commit in flight per partition; a refused or lost commit is
// retried (at least once: a commit whose answer was lost is sent again).
func (n *node) dispatch() {
	w := n.w
	for p := range w.cfg.Partitions {
		if n.committing[p] || len(n.wal[p]) == 0 {
			continue
		}
		to := w.byID[n.owner(p)]
		if to == nil {
			continue
		}
		recs := slices.Clone(n.wal[p][:min(len(n.wal[p]), 8)])
		n.committing[p] = true
		epoch := n.epoch
		w.call(n, to, func() bool { return n.epoch == epoch }, func(reply func(any)) {
			pa := to.parts[p]
			if pa == nil {
				reply(commitAnswer{})
				return
			}
			pa.receive(&commit{recs: recs, reply: reply})
		}, func(ans any, ok bool) {
			n.committing[p] = false
			if a, _ := ans.(commitAnswer); ok && a.ok {
				n.wal[p] = slices.DeleteFunc(n.wal[p], func(r rec) bool {
					return slices.ContainsFunc(recs, func(c rec) bool { return c.id == r.id })
				})
				w.stats.Committed += len(recs)
			}
		})
	}
}

// consume takes a lease on each partition this node owns now and then;
// the lease is acked after a while (rule F2's leases out).
func (n *node) consume() {
	w := n.w
	for _, p := range sortedKeys(n.parts) {
		pa := n.parts[p]
		if pa.log.hwm() == 0 || !w.chance(0.3) {
			continue
		}
		if pa.step(freeze.Reserve{}) {
			continue // paused under the freeze (rule F1)
		}
		id := pa.nextID
		pa.nextID++
		pa.leases[id] = true
		w.at(w.between(time.Millisecond, 900*time.Millisecond), func() {
			delete(pa.leases, id)
		})
	}
}

// The source's answers to a move's requests.
type (
	listing struct {
		ok  bool
		hwm int64
		// cursor is the fan-out cursor sidecar, when the source has one.
		cursor    int64
		hasCursor bool
	}
	chunk struct {
		ok   bool
		recs []rec
	}
	handoffAnswer struct {
		ok, gone bool
		token    string
		hwm      int64
	}
)

// serveList answers a listing, or not-owner when the partition is not
// open here.
func (n *node) serveList(p int, reply func(any)) {
	pa := n.parts[p]
	if pa == nil {
		reply(listing{})
		return
	}
	if n.w.cfg.Fanout {
		n.listCursor(pa, reply)
		return
	}
	reply(listing{ok: true, hwm: pa.log.hwm()})
}

// serveChunk reads records [from, to) below the HWM.
func (n *node) serveChunk(p int, from, to int64, reply func(any)) {
	pa := n.parts[p]
	if pa == nil || to > pa.log.hwm() || from > to {
		reply(chunk{})
		return
	}
	reply(chunk{ok: true, recs: slices.Clone(pa.log.recs[from:to])})
}

// serveHandoff takes a prepare, re-arm, fence or release at the partition
// actor, which forwards it to its freeze actor (a fence with the HWM as the
// partition has it now); the freeze actor answers it.
func (n *node) serveHandoff(p int, ev any, reply func(any)) {
	pa := n.parts[p]
	if pa == nil {
		reply(handoffAnswer{})
		return
	}
	if f, ok := ev.(freeze.Fence); ok {
		f.LogHWM = pa.log.hwm()
		ev = f
	}
	pa.toFreeze(func() { pa.fz.request(ev, reply) })
}

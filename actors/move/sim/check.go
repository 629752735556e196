package sim

import (
	"slices"
	"time"

	"github.com/naradmq/narad/messages"
)

// The invariants. Each is checked where it can break, as the step that
// could break it runs, and the final ones once the world has settled:
//
//   - one committer: a node publishes a record only while the metastore
//     names it the partition's owner (publish);
//   - no reused offset: an offset once published holds that record for
//     good, unless a force-promote forfeited it (publish, checkFinal);
//   - a flip commits only at the source's HWM under a freeze that holds,
//     or as a force-promote of a source dead ForcePromoteAfter at no less
//     than every HWM the source reported to the move (checkFlip);
//   - a copy never holds a record the source did not have at that offset,
//     and is installed at no more than the source's HWM (checkChunk,
//     checkInstall);
//   - a prepare reports with leases out only after its drain deadline
//     (checkReport, rule F2);
//   - a dead destination's target is cleared only after it has been
//     silent DeadTargetAbortAfter (checkTargetCleared, rule T1);
//   - once the faults stop, the world settles within SettleWithin (Run),
//     and then every record accepted is readable on its partition's owner
//     at the offset it was published at, with the segment age it was
//     written with (checkFinal).

// pub is one publish: the record and the node that made it visible.
type pub struct {
	r    rec
	node string
}

// truth is what happened, as no node sees it.
type truth struct {
	nextID int64
	partOf map[int64]int
	// published is each partition's offsets as made visible.
	published map[int]map[int64]pub
	// forfeited offsets were published on a source a force-promote left
	// behind: the accepted cost of promoting a dead node's partition.
	forfeited map[int]map[int64]bool
	// forfeitedIDs are the records published at those offsets then, or
	// by the source after the promote.
	forfeitedIDs map[int64]bool
	// promotedAway names, per partition, the source a force-promote
	// flipped away from, until it lets the partition go.
	promotedAway map[int]string
	// reportedTo is the highest HWM a source reported to a destination's
	// listings and prepares, per partition, since its move was planned.
	reportedTo map[int]map[string]int64
	// copied are the records the fan-out copied to the child (Config.Fanout).
	copied map[int64]bool
}

func (t *truth) init() {
	t.partOf = map[int64]int{}
	t.published = map[int]map[int64]pub{}
	t.forfeited = map[int]map[int64]bool{}
	t.forfeitedIDs = map[int64]bool{}
	t.promotedAway = map[int]string{}
	t.reportedTo = map[int]map[string]int64{}
	t.copied = map[int64]bool{}
}

func (t *truth) accept(p int) int64 {
	t.nextID++
	t.partOf[t.nextID] = p
	return t.nextID
}

func (t *truth) reported(p int, dest string, hwm int64) {
	m := t.reportedTo[p]
	if m == nil {
		m = map[string]int64{}
		t.reportedTo[p] = m
	}
	m[dest] = max(m[dest], hwm)
}

// publish checks one record becoming visible at off on n.
func (t *truth) publish(n *node, p int, off int64, r rec) {
	w := n.w
	w.stats.Published++
	if a, _ := w.meta.state.Get(incarnation, p); a.Owner != n.id {
		if t.promotedAway[p] == n.id {
			// A source promoted away from while it was cut off or just
			// back keeps serving until its replica has the flip; what it
			// publishes meanwhile is set aside at the handover (seed 000,
			// force-promote): the accepted cost, counted.
			t.forfeitedIDs[r.id] = true
			w.stats.Forfeited++
			return
		}
		w.failf("two committers: %s published record %d at offset %d of partition %d, but the metastore's owner is %s (target %q)", n.id, r.id, off, p, a.Owner, a.Target)
		return
	}
	m := t.published[p]
	if m == nil {
		m = map[int64]pub{}
		t.published[p] = m
	}
	if old, ok := m[off]; ok && old.r.id != r.id && !t.forfeited[p][off] {
		w.failf("offset reused: %s published record %d at offset %d of partition %d, where %s had published record %d", n.id, r.id, off, p, old.node, old.r.id)
		return
	}
	m[off] = pub{r: r, node: n.id}
}

// setAside is the old owner finding records past the HWM the flip named
// as it lets the partition go: fine only for offsets a force-promote
// forfeited.
func (t *truth) setAside(n *node, p int, hwm int64, recs []rec) {
	for i := range recs {
		off := hwm + int64(i)
		if !t.forfeited[p][off] && !t.forfeitedIDs[recs[i].id] {
			n.w.failf("lost on handover: %s holds record %d at offset %d of partition %d past the flip's HWM %d; it was published and never copied", n.id, recs[i].id, off, p, hwm)
			return
		}
	}
}

// checkFlip judges a flip as the state machine commits it (before is the
// assignment it changed).
func (w *world) checkFlip(before messages.Assignment, f messages.Flip) {
	w.stats.Flips++
	p, hwm := f.Partition, int64(-1)
	if f.HWM != nil {
		hwm = *f.HWM
	}
	dest, src := w.byID[f.To], w.byID[f.From]
	force := dest.installForce[p]
	w.notef("flip", []int64{int64(p), hwm, b2i(force)}, "partition %d flips %s -> %s at hwm %d (force %v)", p, f.From, f.To, hwm, force)
	if !force {
		pa := src.parts[p]
		switch {
		case !src.up || !src.started:
			// Its freeze died with it; what it might commit after its
			// restart is judged by publish.
		case pa == nil:
			w.failf("flip of partition %d from %s, which has it closed", p, src.id)
		case !pa.gate.Closed() || pa.fz.lapsedOrDue(pa.gate.Token, base.Add(w.now)):
			// Both sides: the partition actor's gate, which alone refuses
			// commits, closed; and the freeze actor's promise (the TTL) for
			// that freeze not broken. The hold may not have heard of a
			// freeze the gate opened under (Reopened on its way): that
			// breaks no promise.
			w.failf("flip of partition %d at hwm %d while %s's freeze does not hold (until %s, gate closed %v)", p, hwm, src.id, pa.fz.h.Until.Sub(base), pa.gate.Closed())
		case pa.log.hwm() != hwm:
			w.failf("flip of partition %d at hwm %d while %s's hwm is %d", p, hwm, src.id, pa.log.hwm())
		}
		return
	}
	w.stats.Promotes++
	w.truth.promotedAway[p] = src.id
	if r := w.truth.reportedTo[p][dest.id]; hwm < r {
		w.failf("force-promote of partition %d at hwm %d, below the hwm %d %s reported to this move (rule P4)", p, hwm, r, src.id)
		return
	}
	// Whatever the dead source published from hwm on is forfeited.
	fo := w.truth.forfeited[p]
	if fo == nil {
		fo = map[int64]bool{}
		w.truth.forfeited[p] = fo
	}
	for off, pb := range w.truth.published[p] {
		if off >= hwm && pb.node == src.id {
			fo[off] = true
			w.truth.forfeitedIDs[pb.r.id] = true
			w.stats.Forfeited++
		}
	}
}

// checkPromote judges a worker's decision to force-promote (rule P2).
func (w *world) checkPromote(wk *worker) {
	if !w.silentFor(wk.source, moveCfg.ForcePromoteAfter) {
		w.failf("force-promote of partition %d from %s, whose heartbeats stopped only %s before (rule P2)", wk.p, wk.source, w.now-w.meta.lastBeat[wk.source])
	}
}

// silentFor reports whether id's heartbeats have stopped for at least d,
// or did until a moment ago: the leader marks a returning member alive on
// its next liveness pass, and a replica learns it a little later, so a
// verdict of dead may still stand that long after the first heartbeat.
func (w *world) silentFor(id string, d time.Duration) bool {
	last, prev := w.meta.lastBeat[id], w.meta.prevBeat[id]
	const returning = heartbeatInterval + 2*time.Second
	return w.now-last >= d || (w.now-last <= returning && last-prev >= d)
}

// checkChunk: a chunk holds the source's records at those offsets.
func (w *world) checkChunk(wk *worker, from int64, recs []rec) {
	for i, r := range recs {
		off := from + int64(i)
		if pb, ok := w.truth.published[wk.p][off]; !ok || pb.r != r {
			w.failf("copy diverged: partition %d offset %d copied as record %d, published as %d", wk.p, off, r.id, pb.r.id)
			return
		}
	}
}

// checkInstall: the copy put at the path holds exactly the source's
// records below hwm, no more than the source had, and none fewer: a flip
// at hwm hands the partition to it.
func (w *world) checkInstall(wk *worker, recs []rec, hwm int64, force bool) {
	src := w.byID[wk.source]
	wk.n.installForce[wk.p] = force
	if d := src.disk[wk.p]; d == nil || hwm > d.hwm() {
		w.failf("install of partition %d at hwm %d past the source's hwm", wk.p, hwm)
		return
	}
	if int64(len(recs)) != hwm {
		w.failf("install of partition %d at hwm %d puts a copy of %d records at the path: a tail written after its stage is not in it", wk.p, hwm, len(recs))
		return
	}
	for off := range hwm {
		if recs[off] != src.disk[wk.p].recs[off] {
			w.failf("install of partition %d: offset %d differs from the source's", wk.p, off)
			return
		}
	}
}

// checkReport: rule F2, leases out are waited for until the deadline.
func (w *world) checkReport(pa *partActor) {
	if len(pa.leases) > 0 && base.Add(w.now).Before(pa.gate.Deadline) {
		w.failf("partition %d on %s reported with %d leases out before its drain deadline (rule F2)", pa.p, pa.n.id, len(pa.leases))
	}
}

// checkTargetCleared: rule T1, only after DeadTargetAbortAfter of silence.
func (w *world) checkTargetCleared(a messages.Assignment) {
	if _, member := w.meta.members[a.Target]; !member {
		return
	}
	if !w.silentFor(a.Target, deadTargetAbortAfter) {
		w.failf("target %s of partition %d cleared after %s of silence, under DeadTargetAbortAfter (rule T1)", a.Target, a.Partition, w.now-w.meta.lastBeat[a.Target])
	}
}

// checkStep runs after every step: what must hold at any instant.
func (w *world) checkStep() {
	// rule F7: a worker holding a fenceable freeze re-arms it every
	// TTL/4, whatever its passes and requests take.
	for _, n := range w.nodes {
		if len(n.workers) == 0 {
			continue
		}
		for p := range w.cfg.Partitions {
			wk := n.workers[p]
			if wk != nil && wk.state.Frozen && wk.state.Fenceable && w.now-wk.lastRearm > moveCfg.FreezeTTL/4+time.Millisecond {
				w.failf("rule F7: %s holds the freeze of partition %d in %s and last re-armed it %s ago, past FreezeTTL/4", n.id, p, wk.state.Phase, w.now-wk.lastRearm)
				return
			}
		}
	}
	for p := range w.cfg.Partitions {
		a, ok := w.meta.state.Get(incarnation, p)
		if !ok || a.Owner == "" {
			w.failf("partition %d has no owner", p)
			return
		}
	}
}

// checkFinal runs once the world settled: every accepted record is on its
// owner, each published offset holds its record.
func (w *world) checkFinal() {
	for p := range w.cfg.Partitions {
		a, _ := w.meta.state.Get(incarnation, p)
		owner := w.byID[a.Owner]
		l := owner.disk[p]
		if l == nil {
			l = &plog{}
		}
		pubs := w.truth.published[p]
		offs := make([]int64, 0, len(pubs))
		for off := range pubs {
			offs = append(offs, off)
		}
		slices.Sort(offs)
		for _, off := range offs {
			pb := pubs[off]
			if w.truth.forfeited[p][off] {
				continue
			}
			if off >= l.hwm() {
				w.failf("lost: record %d published at offset %d of partition %d by %s; the owner %s ends at %d", pb.r.id, off, p, pb.node, owner.id, l.hwm())
				return
			}
			if got := l.recs[off]; got != pb.r {
				w.failf("lost: partition %d offset %d holds record %d (written %s) on %s, published as %d (written %s)", p, off, got.id, got.written, owner.id, pb.r.id, pb.r.written)
				return
			}
		}
	}
	onOwner := map[int64]bool{}
	for p := range w.cfg.Partitions {
		a, _ := w.meta.state.Get(incarnation, p)
		if l := w.byID[a.Owner].disk[p]; l != nil {
			for _, r := range l.recs {
				onOwner[r.id] = true
			}
		}
	}
	forfeitedIDs := w.truth.forfeitedIDs
	for id := int64(1); id <= w.truth.nextID; id++ {
		if !onOwner[id] && !forfeitedIDs[id] {
			w.failf("lost: record %d accepted for partition %d is not on its owner", id, w.truth.partOf[id])
			return
		}
	}
	w.checkFanoutFinal()
}

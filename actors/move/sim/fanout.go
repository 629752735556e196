package sim

import (
	"fmt"
	"time"
)

// The fan-out of each partition to one child link (Config.Fanout), as
// actors/fanout.go and the cursor sidecars of a move run it: the owner's
// fan-out copies committed records from its cursor to the child and moves
// the cursor on only once the child committed the copy; the partition
// actor writes the cursor file after that, and a crash keeps only what was
// written (the file), never an advance past it. The listing ships the
// file as a sidecar, read before the HWM (rule K8); the destination keeps
// the sidecar of its last listing with the staging copy and installs it
// last, lowered to the installed HWM (rule K6); a partition opened with no
// cursor file, or a torn one, resumes from the oldest retained offset, 0
// here (rule K9: the marker names the link, there being one from the start).
// The child itself is not simulated: the truth records which parent
// records it got.

const (
	// fanBatchRecords bounds the records of one link in flight to the
	// child, as the engine's per-link bound does.
	fanBatchRecords = 16
	// fanRetry is the back-off after a copy the child did not commit.
	fanRetryMin, fanRetryMax = 100 * time.Millisecond, time.Second
	// listReadMax bounds how long the source takes to read a listing's
	// sidecars and its HWM: the window a sidecar read after the HWM can
	// overtake (rule K8).
	listReadMax = 30 * time.Millisecond
	// tornCursor is the chance that a crash with a cursor write in flight
	// tears the file (it is overwritten in place), so that it never
	// verifies again and the partition opens without a cursor: the path
	// of rule K9.
	tornCursor = 0.5
)

// openCursor is the partition actor loading its link's cursor as it opens.
func (pa *partActor) openCursor() {
	n := pa.n
	if !n.w.cfg.Fanout {
		return
	}
	c, ok := n.cursorDisk[pa.p]
	switch {
	case ok:
	case n.w.cfg.Breaks.MissingCursorAtTail:
		c = pa.log.hwm()
	default:
		c = 0 // rule K9: the oldest retained offset, never the tail
	}
	pa.cursor = c
	n.w.note("cursor open", int64(n.index), int64(pa.p), c, b2i(ok))
	n.w.checkCursor(n, pa.p, pa.log, 0, c, "opened")
	pa.fanout()
}

// fanout copies the next records below the HWM to the child, one batch of
// the link in flight at a time.
func (pa *partActor) fanout() {
	n, w := pa.n, pa.n.w
	if !w.cfg.Fanout || pa.closed || pa.fanBusy || pa.cursor >= pa.log.hwm() {
		return
	}
	from := pa.cursor
	to := min(from+fanBatchRecords, pa.log.hwm())
	ids := make([]int64, 0, to-from)
	for _, r := range pa.log.recs[from:to] {
		ids = append(ids, r.id)
	}
	pa.fanBusy = true
	epoch := n.epoch
	w.at(w.between(time.Millisecond, 5*time.Millisecond), func() {
		if pa.closed || n.epoch != epoch {
			return // lost with the boot: its copy may or may not have landed
		}
		pa.fanBusy = false
		if n.cutUntil > w.now || w.childDownUntil[pa.p] > w.now || (w.faulty && w.chance(0.05)) {
			w.at(w.between(fanRetryMin, fanRetryMax), pa.fanout)
			return
		}
		for _, id := range ids {
			w.truth.copied[id] = true
		}
		w.stats.FanoutCopies += len(ids)
		pa.cursor = to
		w.note("fanout", int64(n.index), int64(pa.p), from, to)
		w.checkCursor(n, pa.p, pa.log, from, to, "advanced")
		pa.writeCursor()
		pa.fanout()
	})
}

// childOutage makes the child's partition of one parent partition
// unavailable for a while: its fan-out falls behind, and a move in the
// meantime ships a cursor below the HWM.
func (w *world) childOutage() {
	p := w.rng.IntN(w.cfg.Partitions)
	w.childDownUntil[p] = w.now + w.between(time.Second, 30*time.Second)
	w.note("child down", int64(p), int64(w.childDownUntil[p]))
}

// writeCursor is the partition actor writing the cursor file; until it
// lands, a crash falls back to the file's last value, or tears it.
func (pa *partActor) writeCursor() {
	n, w := pa.n, pa.n.w
	d := w.between(time.Millisecond, 5*time.Millisecond)
	if n.slowDiskUntil > w.now {
		d = w.between(200*time.Millisecond, 3*time.Second)
	}
	epoch := n.epoch
	pa.cursorWrites++
	w.at(d, func() {
		if !pa.closed && n.epoch == epoch {
			pa.cursorWrites--
			n.cursorDisk[pa.p] = pa.cursor
		}
	})
}

// tearCursors is a crash catching cursor writes half done.
func (n *node) tearCursors() {
	w := n.w
	if !w.cfg.Fanout {
		return
	}
	for _, p := range sortedKeys(n.parts) {
		if n.parts[p].cursorWrites > 0 && w.chance(tornCursor) {
			delete(n.cursorDisk, p)
			w.stats.CursorsTorn++
			w.note("cursor torn", int64(n.index), int64(p))
		}
	}
}

// listCursor reads the cursor sidecar and the HWM of a listing, the
// sidecar first (rule K8; Breaks.CursorAfterHWM reads it after), the two
// reads listReadMax apart at most.
func (n *node) listCursor(pa *partActor, reply func(any)) {
	w := n.w
	epoch := n.epoch
	first := listing{ok: true}
	readCursor := func(l *listing) { l.cursor, l.hasCursor = n.cursorDisk[pa.p] }
	readHWM := func(l *listing) { l.hwm = pa.log.hwm() }
	a, b := readCursor, readHWM
	if w.cfg.Breaks.CursorAfterHWM {
		a, b = readHWM, readCursor
	}
	a(&first)
	w.at(w.between(0, listReadMax), func() {
		if pa.closed || n.epoch != epoch {
			reply(listing{})
			return
		}
		b(&first)
		reply(first)
	})
}

// installCursor writes the last listing's sidecar after the copy's records
// (rule K8), lowered to the installed HWM (rule K6).
func (n *node) installCursor(p int, hwm int64) {
	w := n.w
	if !w.cfg.Fanout {
		return
	}
	c, ok := n.stagingCursor[p]
	delete(n.stagingCursor, p)
	switch {
	case w.cfg.Breaks.CursorAtTail:
		c, ok = hwm, true
	case !ok:
		delete(n.cursorDisk, p) // missing: the partition resumes from 0 (rule K9)
		w.note("cursor install", int64(n.index), int64(p), -1)
		return
	case c > hwm && !w.cfg.Breaks.CursorAfterHWM:
		c = hwm
	}
	if c > hwm {
		w.failf("installed fan-out cursor %d of partition %d on %s past the installed hwm %d (rule K6)", c, p, n.id, hwm)
		return
	}
	n.cursorDisk[p] = c
	w.stats.CursorsInstalled++
	w.note("cursor install", int64(n.index), int64(p), c)
	w.checkCursor(n, p, n.disk[p], 0, c, "installed")
}

// checkCursor: no gap. Every record of l in [from, to), below a cursor
// just set to to, was copied to the child, by this owner or an earlier
// one.
func (w *world) checkCursor(n *node, p int, l *plog, from, to int64, how string) {
	for off := from; off < min(to, l.hwm()); off++ {
		if id := l.recs[off].id; !w.truth.copied[id] {
			w.failf("gap: %s's fan-out cursor of partition %d %s at %d, past offset %d (record %d), never copied to the child", n.id, p, how, to, off, id)
			return
		}
	}
}

// checkListing: a listing never carries a position past what it copies
// (rule K8).
func (w *world) checkListing(p int, ls listing) {
	if ls.hasCursor && ls.cursor > ls.hwm {
		w.failf("listing of partition %d carries fan-out cursor %d past its hwm %d (rule K8)", p, ls.cursor, ls.hwm)
	}
}

// fanoutUnsettled names a partition whose owner has not fanned out all it
// holds.
func (w *world) fanoutUnsettled() string {
	if !w.cfg.Fanout {
		return ""
	}
	for p := range w.cfg.Partitions {
		a, _ := w.meta.state.Get(incarnation, p)
		pa := w.byID[a.Owner].parts[p]
		if pa == nil {
			return fmt.Sprintf("partition %d is not open on its owner %s", p, a.Owner)
		}
		if pa.cursor < pa.log.hwm() {
			return fmt.Sprintf("the fan-out of partition %d on %s is at %d of %d", p, a.Owner, pa.cursor, pa.log.hwm())
		}
	}
	return ""
}

// checkFanoutFinal: at the end of a settled run, every record on every
// owner was copied to the child at least once.
func (w *world) checkFanoutFinal() {
	if !w.cfg.Fanout {
		return
	}
	for p := range w.cfg.Partitions {
		a, _ := w.meta.state.Get(incarnation, p)
		l := w.byID[a.Owner].disk[p]
		if l == nil {
			continue
		}
		for off, r := range l.recs {
			if !w.truth.copied[r.id] {
				w.failf("not fanned out: record %d at offset %d of partition %d on its owner %s never reached the child", r.id, off, p, a.Owner)
				return
			}
		}
	}
}

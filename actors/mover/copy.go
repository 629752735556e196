package mover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/naradmq/narad/actors/move"
	"github.com/naradmq/narad/actors/sweeper"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// diskCopy is the worker's LocalCopy: its staging copy on disk
// (storage.Staging) and the partition's path under its topic's guard.
// Its methods run on the actor; the work Fill, Verify, Stage and Install
// return runs on the staging lane with what they read of the worker.
type diskCopy struct{ w *worker }

func (c diskCopy) Fill() func(context.Context, *messages.PartitionListing, func(int64, error)) {
	w := c.w
	s, err := w.openStaging()
	return func(ctx context.Context, ls *messages.PartitionListing, done func(int64, error)) {
		// Failing to open the copy fails the pass after its listing
		// arrived: its HWM still counts (rule P4).
		if err != nil {
			done(0, err)
			return
		}
		done(w.copyListed(ctx, s, ls))
	}
}

func (c diskCopy) Verify(hwm int64) func(context.Context, func(bool)) {
	w := c.w
	s, err := w.openStaging()
	return func(_ context.Context, done func(bool)) { done(w.verify(s, err, hwm)) }
}

func (c diskCopy) Stage(hwm int64) func(context.Context, func(StageOutcome)) {
	w := c.w
	in, err := w.installInput(hwm, false)
	return func(_ context.Context, done func(StageOutcome)) { done(w.stage(in, err)) }
}

func (c diskCopy) Install(hwm int64, force bool) func(context.Context, func(InstallOutcome)) {
	w := c.w
	in, err := w.installInput(hwm, force)
	return func(_ context.Context, done func(InstallOutcome)) {
		if err != nil {
			done(InstallOutcome{Err: err})
			return
		}
		done(w.install(in))
	}
}

func (c diskCopy) Installed(o InstallOutcome) {
	w := c.w
	switch {
	case o.Err == nil:
		// The copy is at the partition's path, and w.staging (when the
		// install had it open) goes on writing there: the tail of a copy
		// installed before its freeze is copied into it in place, and the
		// install under the freeze seals it there (issue 46).
		w.installed = o.Dir
	case w.installed == nil && w.placedHere():
		// Renamed, then failed (a directory's sync): the path holds this
		// copy all the same, and a rename back must find it.
		if info, err := os.Stat(w.installDir); err == nil {
			w.installed = info
		}
	}
	w.noteInstallFailure(o)
	if o.PrepareRefused && !w.prepareWarned {
		w.prepareWarned = true
		w.d.Logger.Warn("move: the topic directory's preparation was refused; retrying until the replica catches up or the move is re-planned",
			"partition", keyString(w.key), "err", o.Err)
	}
}

func (c diskCopy) Discard() {
	c.w.endStaging()
	c.w.discard()
}

func (c diskCopy) RenameBack() {
	w := c.w
	w.endStaging()
	if w.staging != nil {
		w.staging.Close() // open at the path it is taken off
	}
	if err := w.d.Dirs.RenameBack(w.key, w.installed); err != nil {
		// Left in place: such a copy can confirm a flip, never undo
		// one; refused by the guard, it went with its incarnation's
		// directory and the sweep judges it (rule V9).
		w.d.Logger.Error("move: rename the install back to staging", "partition", keyString(w.key), "err", err)
	} else {
		w.tookInstallOff = true
	}
	w.staging, w.installed = nil, nil
}

func (c diskCopy) Remove() {
	c.w.endStaging()
	if c.w.placedHere() {
		// A move that ends without its flip takes a copy it installed
		// off the path first (an install that failed after its rename
		// left one that Step does not count as placed).
		c.RenameBack()
	}
	a, found := c.w.assignment()
	c.w.endCopy(a, found)
}

// placedHere reports whether this worker's copy is at the partition's
// path, renamed there by one of its installs (storage.Staging.Installed).
func (w *worker) placedHere() bool { return w.staging != nil && w.staging.Installed() }

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

// verify reads the staged copy back at hwm (rule V1), unless it was
// staged at hwm and is untouched since.
func (w *worker) verify(s *storage.Staging, err error, hwm int64) bool {
	if err == nil {
		if at, ok := s.StagedHWM(); ok && at == hwm {
			// Staged at this HWM right after a Verify at it (stage), and
			// untouched since: the same bytes, already verified; the
			// install reads the copy back once more (installedWhole).
			if f := w.d.Knobs.Verify; f != nil {
				f(w.key, hwm, false)
			}
			return true
		}
		if f := w.d.Knobs.Verify; f != nil {
			f(w.key, hwm, true)
		}
		err = s.Verify(hwm)
	}
	if err != nil {
		w.d.Logger.Warn("move: staged copy failed verification", "partition", keyString(w.key), "hwm", hwm, "err", err)
		return false
	}
	return true
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
	// placed is the directory the install before the freeze put at the
	// partition's path (nil: none).
	placed os.FileInfo
}

func (w *worker) installInput(hwm int64, force bool) (installInput, error) {
	s, err := w.openStaging()
	t, _ := w.store.Topic(w.key.Topic)
	return installInput{staging: s, hwm: hwm, force: force, position: w.fx.position,
		lastList: w.fx.lastList, listedAt: w.fx.listedAt, topic: t, dropEarlier: w.dropper(), droppedEarly: w.fx.droppedEarly,
		placed: w.installed}, err
}

// dropper is the install's request to the partitions supervisor (rule
// K7), made from the install's goroutine; without a supervisor (a rig)
// there is no state to drop.
func (w *worker) dropper() func() error {
	parts, root, k, timeout, running := w.d.Partitions, w.root, w.key, w.d.RequestTimeout, w.d.Running
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
		if err := s.StampAges(toStorageListing(in.lastList), in.listedAt, w.clock.Now()); err != nil {
			w.d.Logger.Warn("move: stamp segment ages", "partition", keyString(w.key), "err", err)
		}
	}
	return nil
}

// stage verifies the caught-up copy at in.hwm and makes it durable as the
// install would, with its position, cursors and marker, before the freeze
// (issue 46). It also drops an earlier ownership's state, rule K7's drop
// before the install. A copy that fails here is not a verify failure
// (rules V3, V4 count those under the freeze): the move freezes all the
// same, and its install does the whole work.
func (w *worker) stage(in installInput, err error) StageOutcome {
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
		err = w.d.Installs.stage(in.staging, storage.Marker{PromotedHWM: in.hwm, SourceNode: w.source, Children: markerChildren(in.topic, w.key)}, w.clock.Now())
	}
	if err != nil {
		w.d.Logger.Debug("move: stage before the freeze", "partition", keyString(w.key), "hwm", in.hwm, "err", err)
		return StageOutcome{Dropped: dropped}
	}
	return StageOutcome{OK: true, Dropped: dropped}
}

// reclaimEarlier clears the partition's path, before the freeze, of a copy
// an earlier ownership left on this node, when the source's last listing
// vouches for it as the sweep would (storage.ReclaimEarlierCopy): the
// install under the freeze then meets an empty path. What it leaves, or
// cannot do, the install judges as before (V8); K7's drop ran just before.
func (w *worker) reclaimEarlier(in installInput) {
	retention := time.Duration(in.topic.RetentionMs) * time.Millisecond
	removed, err := w.d.Dirs.Reclaim(w.key, func(path string) (bool, error) {
		return storage.ReclaimEarlierCopy(path, w.source, w.d.LogConfig, w.clock.Now(), retention,
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
func (w *worker) install(in installInput) InstallOutcome {
	s := in.staging
	if err := w.writeCopyState(in); err != nil {
		return InstallOutcome{Err: err}
	}
	marker := storage.Marker{PromotedHWM: in.hwm, ForcePromoted: in.force, SourceNode: w.source, Children: markerChildren(in.topic, w.key)}
	if s.SealedAs(marker) && in.placed != nil {
		// Placed before the freeze, read back whole there under the
		// topic's guard, durable with this very marker, and nothing
		// written to it since (issue 46): the install under the freeze
		// has nothing to do. The flip checks the topic's incarnation.
		return InstallOutcome{Dir: in.placed}
	}
	// rule K7: no state of an earlier ownership of this partition on this
	// node survives into the install, before it (here, or at the stage)
	// and again after it.
	if !in.droppedEarly {
		if err := in.dropEarlier(); err != nil {
			return InstallOutcome{Err: err}
		}
	}
	if err := w.d.Dirs.Prepare(w.key); err != nil {
		return InstallOutcome{Err: err, PrepareRefused: true}
	}
	res, err := w.d.Installs.install(w.d, w.key, s, storage.InstallOptions{
		Marker: marker,
		Now:    w.clock.Now(), RetentionAge: time.Duration(in.topic.RetentionMs) * time.Millisecond,
		Vouched: sweeper.VouchedBy(in.lastList, w.d.NodeID, w.d.LogConfig, time.Duration(in.topic.RetentionMs)*time.Millisecond, w.d.Logger)})
	if err != nil {
		return InstallOutcome{Err: err}
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
	return InstallOutcome{Dir: info}
}

// flip proposes the ownership change, naming the HWM the copy ends at so

func toStorageListing(ls *messages.PartitionListing) storage.Listing {
	out := storage.Listing{HWM: ls.HWM, Clock: ls.Clock, Segments: make([]storage.SegmentInfo, len(ls.Segments))}
	for i, s := range ls.Segments {
		out.Segments[i] = storage.SegmentInfo{Name: s.Name, Base: s.Base, Size: s.Size, ModTime: s.ModTime}
	}
	return out
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

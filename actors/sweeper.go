package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/naradmq/narad/actors/sweep"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// The stale-copy sweep (seed 000 "Stale copies", rules R5, S1-S8, P6): a
// partition moved off this node leaves its copy on this node's disk. Every
// SweepEveryTicks runner ticks the sweeper judges each such copy: it asks
// the partition's owner for its listing and move marker, lets sweep.Judge
// decide, and carries the verdict out under the topic's guard, where it
// re-checks everything the verdict relied on. It also removes a deleted
// topic's directory once the leader confirms the incarnation gone (S7).
// The pass runs on a goroutine of its own, one at a time; the actor only
// starts it and takes its report, then walks for the inventory of copies
// set aside, whose book it owns (sweeper_book.go). Node.Stop stops the
// actor, which cancels a pass or walk under way and waits for it.

// sweepDue is the move runner telling the sweeper its tick count came
// round (rule R5).
type sweepDue struct{}

// sweepDone is a pass's report.
type sweepDone struct{ report sweepReport }

// sweepReport is what one pass did.
type sweepReport struct {
	// judged counts the copies judged, by verdict.
	judged map[sweep.Action]int
	// reclaimedBytes is what the pass removed (copies and deleted topics).
	reclaimedBytes int64
	// quarantined counts the copies it set aside.
	quarantined int
	// deletedTopics counts the deleted incarnations' directories removed.
	deletedTopics int
	// orphans counts topic directories without a marker (rule S7).
	orphans int
	// more: copies were left for the next pass (MaxSweepCopiesPerPass).
	more bool
	// next is where the next pass starts in the list of copies.
	next int
}

// sweeperStore is what the sweeper reads of the metastore.
type sweeperStore interface {
	routeReader
	LeaderTopic(ctx context.Context, name string) (messages.Topic, bool, error)
	// CatchUp returns once the local replica applied everything the
	// leaders had committed when it was called.
	CatchUp(ctx context.Context) error
}

// ownerAsker reaches a partition's owner (*router).
type ownerAsker interface {
	ask(ctx context.Context, k messages.PartitionKey, msg any) (any, error)
}

type sweeperActor struct {
	deps
	store  sweeperStore
	owners ownerAsker
	// book is the node's inventory of copies set aside (its gauges, rule
	// S8), this actor's alone: walked again after each pass, each fresh
	// listing and each release (sweeper_book.go).
	book *quarantineBook
	// walking: a walk is under way, for the asks in thisWalk; nextWalk
	// wait for the one after it, as does a pass's end (walkWanted).
	// releasing counts the releases under way.
	walking, walkWanted bool
	thisWalk, nextWalk  []bookWaiter
	releasing           int
	// running: a pass is under way; stop cancels it, io waits for it and
	// for the walks and releases.
	running bool
	stop    chan struct{}
	io      sync.WaitGroup
	// next is where the next pass starts, so that a node holding more
	// copies than a pass judges gets to all of them in turn.
	next int
}

const sweeperName = "sweeper"

func (s *sweeperActor) Receive(ctx actor.Context) {
	defer logPanic(s.deps.log, sweeperName)
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.stop = make(chan struct{})
	case *actor.Stopping, *actor.Restarting:
		close(s.stop)
		s.io.Wait()
	case sweepDue:
		s.start(ctx)
	case sweepDone:
		s.done(ctx, m.report)
	case quarantineAsk:
		s.askQuarantine(ctx, m)
	case quarantineRelease:
		s.release(ctx, m)
	case releaseDone:
		s.released(ctx, m)
	case inventoryTaken:
		s.walked(ctx, m)
	}
}

// start runs a pass unless one is under way (a slow pass skips a turn).
func (s *sweeperActor) start(ctx actor.Context) {
	if s.running {
		return
	}
	s.running = true
	self, root, stop, from := ctx.Self(), ctx.ActorSystem().Root, s.stop, s.next
	s.io.Go(func() {
		c, cancel := untilClosed(stop)
		defer cancel()
		root.Send(self, sweepDone{report: s.pass(c, from)})
	})
}

// done takes a pass's report and walks for the inventory it changed.
func (s *sweeperActor) done(ctx actor.Context, r sweepReport) {
	s.record(r)
	s.walkWanted = true
	s.walk(ctx)
}

// record counts what a pass did.
func (s *sweeperActor) record(r sweepReport) {
	s.running = false
	s.next = r.next
	s.book.reclaimed(r.reclaimedBytes)
	for a, n := range r.judged {
		sweepJudged(s.metrics, a).Add(n)
	}
	if r.reclaimedBytes > 0 || r.quarantined > 0 || r.deletedTopics > 0 {
		s.deps.log.Info("stale-copy sweep", "judged", r.judged, "reclaimed_bytes", r.reclaimedBytes,
			"quarantined", r.quarantined, "deleted_topics", r.deletedTopics, "more", r.more)
	}
}

// copyToJudge is one local copy of a partition owned elsewhere.
type copyToJudge struct {
	key   messages.PartitionKey
	owner string
	// retention is the topic's age retention (0: none).
	retention time.Duration
}

// pass is one sweep, on the pass goroutine: it touches no actor state.
func (s *sweeperActor) pass(ctx context.Context, from int) sweepReport {
	r := sweepReport{judged: map[sweep.Action]int{}, next: from}
	// The pass judges on a replica at least as new as the leaders were
	// when it started: a lagging one could name the old owner of a
	// partition flipped to this node, whose copy here is then the live
	// one (its actor not yet started). A flip committed later needs a
	// target here, which the pass skips.
	bctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	err := s.store.CatchUp(bctx)
	cancel()
	if err != nil {
		s.deps.log.Warn("stale-copy sweep: the replica has not caught up; no sweep this turn", "err", err)
		return r
	}
	dirs, err := storage.TopicDirs(s.cfg.DataDir)
	if err != nil {
		s.deps.log.Error("stale-copy sweep: list the topic directories", "err", err)
		return r
	}
	var copies []copyToJudge
	for _, td := range dirs {
		if !td.Marked {
			r.orphans++
			continue
		}
		// The incarnation is read before the ownership (rule S6): read
		// after, a delete and recreate in between would pair the deleted
		// incarnation's assignment with the successor's directory.
		t, ok := s.store.Topic(td.Name)
		if !ok || t.Incarnation != td.Incarnation {
			if n, ok := s.removeDeletedTopic(ctx, td.Name, td.Incarnation, storage.TopicPath(s.cfg.DataDir, td.Name), true); ok {
				r.deletedTopics++
				r.reclaimedBytes += n
			}
			continue
		}
		for _, p := range td.Partitions {
			k := messages.PartitionKey{Topic: td.Name, Incarnation: t.Incarnation, Partition: p}
			if a, ok := s.judgeable(k, t); ok {
				copies = append(copies, copyToJudge{key: k, owner: a.Owner, retention: msDuration(t.RetentionMs)})
			}
		}
	}
	stale, err := storage.StaleDirs(s.cfg.DataDir)
	if err != nil {
		s.deps.log.Error("stale-copy sweep: list the set-aside topic directories", "err", err)
	}
	for _, d := range stale {
		if !d.Marked {
			continue
		}
		if n, ok := s.removeDeletedTopic(ctx, d.Topic, d.Incarnation, d.Path, false); ok {
			r.deletedTopics++
			r.reclaimedBytes += n
		}
	}
	s.judgeAll(ctx, copies, from, &r)
	return r
}

// sweepJudged counts the copies the sweep judged, by verdict.
func sweepJudged(m *nodeMetrics, a sweep.Action) *metrics.Counter {
	return m.set.GetOrCreateCounter(fmt.Sprintf(`narad_sweep_copies_judged_total{node=%q,verdict=%q}`, m.node, a))
}

// judgeable reports whether k's local copy is one the sweep judges, with
// its assignment: a partition owned elsewhere, not targeted back here (the
// install deals with that copy), and with no log open at its path.
func (s *sweeperActor) judgeable(k messages.PartitionKey, t messages.Topic) (messages.Assignment, bool) {
	if k.Partition >= t.Partitions {
		return messages.Assignment{}, false
	}
	a, ok := s.store.Assignment(k.Incarnation, k.Partition)
	if !ok || a.Owner == "" || a.Owner == s.cfg.NodeID || a.Target == s.cfg.NodeID {
		return a, false
	}
	return a, !s.guards.PartitionOpen(k.Topic, k.Partition)
}

// judgeAll judges up to MaxSweepCopiesPerPass copies from the from'th on,
// SweepParallelAsks at a time.
func (s *sweeperActor) judgeAll(ctx context.Context, copies []copyToJudge, from int, r *sweepReport) {
	if len(copies) == 0 {
		return
	}
	if from >= len(copies) {
		from = 0
	}
	n := min(len(copies), s.cfg.MaxSweepCopiesPerPass)
	r.more = n < len(copies)
	r.next = (from + n) % len(copies)
	var mu sync.Mutex
	sem := make(chan struct{}, s.cfg.SweepParallelAsks)
	var wg sync.WaitGroup
	for i := range n {
		c := copies[(from+i)%len(copies)]
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			v, bytes, set := s.judge(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			r.judged[v.Action]++
			r.reclaimedBytes += bytes
			if set {
				r.quarantined++
			}
		})
	}
	wg.Wait()
}

// judge asks the owner, judges the copy and carries the verdict out. It
// returns the verdict, the bytes reclaimed and whether it set the copy
// aside.
func (s *sweeperActor) judge(ctx context.Context, c copyToJudge) (sweep.Verdict, int64, bool) {
	dir := storage.PartitionPath(s.cfg.DataDir, c.key.Topic, c.key.Partition)
	in := sweep.Copy{Self: s.cfg.NodeID}
	if err := localSide(dir, s.cfg.Log, c.retention, &in); err != nil {
		s.deps.log.Warn("stale-copy sweep: list the local copy", "dir", dir, "err", err)
	}
	ownerSide(s.askOwner(ctx, c), &in)
	v := sweep.Judge(in)
	switch v.Action {
	case sweep.Reclaim, sweep.Quarantine:
		bytes, set, err := s.carryOut(c, v, dir)
		if err != nil {
			s.deps.log.Warn("stale-copy sweep: the verdict was not carried out; judged again next time", "partition", partitionKeyString(c.key), "verdict", v.Action, "reason", v.Reason, "err", err)
			return sweep.Verdict{Action: sweep.Defer, Reason: "refused"}, 0, false
		}
		return v, bytes, set
	}
	s.deps.log.Debug("stale-copy sweep", "partition", partitionKeyString(c.key), "verdict", v.Action, "reason", v.Reason)
	return v, 0, false
}

// localSide fills in the local copy's side of a judgement: Listed stays
// false when the copy cannot be listed (the error says why).
func localSide(dir string, cfg storage.LogConfig, retention time.Duration, in *sweep.Copy) error {
	now := time.Now()
	ls, err := storage.ListClosed(dir, cfg, now)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		// No segments: nothing of the partition's records is here.
		in.Listed = true
		in.HoldsUnexpired = storage.HoldsUnexpiredRecords(dir, cfg, now, retention)
		return nil
	case err != nil:
		return err
	}
	in.Listed, in.HWM = true, ls.HWM
	in.HoldsUnexpired = storage.HoldsUnexpiredRecords(dir, cfg, now, retention)
	in.Segments = sweepSegments(ls.Segments, func(i int) (string, int64, int64) {
		return ls.Segments[i].Name, ls.Segments[i].Base, ls.Segments[i].Size
	})
	return nil
}

// askOwner asks the partition's owner for its listing and move marker
// (S1); nil when it cannot be asked or does not answer.
func (s *sweeperActor) askOwner(ctx context.Context, c copyToJudge) *messages.PartitionListing {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	res, err := s.owners.ask(ctx, c.key, &messages.ListPartition{})
	ls, ok := res.(*messages.PartitionListing)
	if err != nil || !ok || ls.Status != messages.StatusOK {
		return nil
	}
	return ls
}

// ownerSide fills in the owner's side of a judgement from its listing;
// nil leaves the owner unanswered (the verdict defers, S3).
func ownerSide(ls *messages.PartitionListing, in *sweep.Copy) {
	if ls == nil || ls.Status != messages.StatusOK {
		return
	}
	in.OwnerAnswered, in.OwnerHWM = true, ls.HWM
	in.OwnerSegments = sweepSegments(ls.Segments, func(i int) (string, int64, int64) {
		return ls.Segments[i].Name, ls.Segments[i].Base, ls.Segments[i].Size
	})
	if m := ls.Marker; m != nil {
		in.OwnerMarker = &sweep.Marker{PromotedHWM: m.PromotedHWM, ForcePromoted: m.ForcePromoted, SourceNode: m.SourceNode,
			Durable: m.Durable, InstallAge: time.Duration(m.InstallAgeMs) * time.Millisecond}
	}
}

// vouchedBy is an install's question about the copy it meets at the
// partition's path (storage.InstallOptions.Vouched): this node's own copy
// from an earlier ownership, which the sweep has not judged yet because
// the partition was planned back first. The move's source is the owner
// the sweep would ask, and its listing, taken under the freeze (or by the
// last pass of a force-promote), is the answer it would get; the copy is
// removed only on the verdict that would reclaim it, and quarantined on
// every other (a copy left past a force-promote, one the owner lacks
// segments of). Without it, every partition a node takes back after a
// hand-off would be quarantined.
func vouchedBy(owner *messages.PartitionListing, self string, cfg storage.LogConfig, retention time.Duration, log *slog.Logger) func(dir string) bool {
	return func(dir string) bool {
		in := sweep.Copy{Self: self}
		if err := localSide(dir, cfg, retention, &in); err != nil {
			return false
		}
		ownerSide(owner, &in)
		v := sweep.Judge(in)
		log.Info("move: the copy at the partition's path, judged as the sweep would", "dir", dir, "verdict", v.Action, "reason", v.Reason, "vouched", v.Vouched)
		return v.Action == sweep.Reclaim
	}
}

// sweepSegments turns a listing of n segments into the judge's, the last
// one unsealed.
func sweepSegments[T any](segs []T, at func(i int) (name string, base, size int64)) []sweep.Segment {
	out := make([]sweep.Segment, len(segs))
	for i := range segs {
		name, base, size := at(i)
		out[i] = sweep.Segment{Name: name, Base: base, Size: size, Sealed: i < len(segs)-1}
	}
	return out
}

// carryOut reclaims or quarantines the copy under the topic's guard (rule
// S6), only while the topic directory's marker is absent or names the
// incarnation the sweep read, no log is open at the path, the partition is
// still owned elsewhere and not targeted here, and, for a reclaim, the copy
// is still what the verdict judged: at or below the vouched position, or
// holding no unexpired records. A reclaim whose copy changed is refused.
func (s *sweeperActor) carryOut(c copyToJudge, v sweep.Verdict, dir string) (int64, bool, error) {
	unlock := s.guards.Lock(c.key.Topic)
	defer unlock()
	if err := pathFree(s.deps, c.key, true); err != nil {
		return 0, false, err
	}
	if a, ok := s.store.Assignment(c.key.Incarnation, c.key.Partition); !ok || a.Owner == s.cfg.NodeID || a.Target == s.cfg.NodeID {
		return 0, false, fmt.Errorf("partition %s is no longer owned elsewhere: %w", partitionKeyString(c.key), errGuardRefused)
	}
	if v.Action == sweep.Quarantine {
		q, err := storage.Quarantine(dir)
		s.deps.log.Error("stale-copy sweep: set a copy aside that may hold records nobody else has; an operator decides",
			"partition", partitionKeyString(c.key), "owner", c.owner, "reason", v.Reason, "vouched", v.Vouched, "quarantine", q, "err", err)
		return 0, err == nil, err
	}
	if err := s.stillAsJudged(c, v, dir); err != nil {
		return 0, false, err
	}
	n, err := storage.RemoveDir(dir)
	return n, false, err
}

// stillAsJudged re-checks, under the guard, the copy a reclaim removes.
func (s *sweeperActor) stillAsJudged(c copyToJudge, v sweep.Verdict, dir string) error {
	now := time.Now()
	if v.Reason == sweep.ReasonNoUnexpiredRecords {
		if storage.HoldsUnexpiredRecords(dir, s.cfg.Log, now, c.retention) {
			return fmt.Errorf("the copy of %s holds unexpired records now: %w", partitionKeyString(c.key), errGuardRefused)
		}
		return nil
	}
	ls, err := storage.ListClosed(dir, s.cfg.Log, now)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if ls.HWM > v.Vouched {
		return fmt.Errorf("the copy of %s reaches %d, past the vouched %d: %w", partitionKeyString(c.key), ls.HWM, v.Vouched, errGuardRefused)
	}
	return nil
}

// removeDeletedTopic removes a deleted incarnation's topic directory (rule
// S7): once the leader confirms the incarnation is not the topic's, and
// re-checked under the guard, where the local record must still not name
// it, its marker must be unchanged (underTopics: the directory at the
// topic's path) and no partition of it may be open. It returns the bytes
// removed.
func (s *sweeperActor) removeDeletedTopic(ctx context.Context, topic string, inc uint64, dir string, underTopics bool) (int64, bool) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	t, found, err := s.store.LeaderTopic(ctx, topic)
	if err != nil || (found && t.Incarnation == inc) {
		return 0, false // not confirmed gone: the replica may lag
	}
	unlock := s.guards.Lock(topic)
	defer unlock()
	if t, ok := s.store.Topic(topic); ok && t.Incarnation == inc {
		return 0, false
	}
	if underTopics {
		if ok, err := storage.MarkerNames(s.cfg.DataDir, topic, inc, false); err != nil || !ok {
			return 0, false
		}
	}
	if underTopics && s.guards.TopicOpen(topic) {
		// Some partition of the name is open: only a live incarnation's
		// can be (a partition opens under its own marker), so the
		// directory is not a deleted one's after all.
		return 0, false
	}
	n, err := storage.RemoveDir(dir)
	if err != nil {
		s.deps.log.Error("stale-copy sweep: remove a deleted topic's directory", "topic", topic, "incarnation", inc, "dir", dir, "err", err)
		return 0, false
	}
	s.deps.log.Info("stale-copy sweep: removed a deleted topic's directory", "topic", topic, "incarnation", inc, "dir", dir, "bytes", n)
	return n, true
}

// sweepOrphansAtStart is the startup sweep (rule S7): before the node
// serves, so before it accepts a topic create that could claim the name,
// every topic directory without an incarnation marker is removed, or set
// aside when it holds a copy set aside (storage.SweepOrphanTopicDir).
func sweepOrphansAtStart(log *slog.Logger, dataDir string) {
	orphans, err := storage.OrphanTopicDirs(dataDir)
	if err != nil {
		log.Error("startup sweep: list the topic directories without a marker", "err", err)
		return
	}
	for _, rel := range orphans {
		topic := filepath.Base(rel)
		to, n, err := storage.SweepOrphanTopicDir(dataDir, topic)
		switch {
		case err != nil:
			log.Error("startup sweep: a topic directory without a marker", "topic", topic, "err", err)
		case to != "":
			log.Error("startup sweep: a topic directory without a marker holds copies set aside; set aside whole", "topic", topic, "to", to)
		default:
			log.Warn("startup sweep: removed a topic directory without a marker", "topic", topic, "bytes", n)
		}
	}
}

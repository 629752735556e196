package sweeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/sweep"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// report is what one pass did.
type report struct {
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
	// more: copies were left for the next pass (Config.MaxCopiesPerPass).
	more bool
	// next is where the next pass starts in the list of copies.
	next int
}

// copyToJudge is one local copy of a partition owned elsewhere.
type copyToJudge struct {
	key   messages.PartitionKey
	owner string
	// retention is the topic's age retention (0: none).
	retention time.Duration
}

// pass is one sweep, on the pass goroutine: it touches no actor state.
func (s *Actor) pass(ctx context.Context, from int) report {
	r := report{judged: map[sweep.Action]int{}, next: from}
	// The pass judges on a replica at least as new as the leaders were
	// when it started: a lagging one could name the old owner of a
	// partition flipped to this node, whose copy here is then the live
	// one (its actor not yet started). A flip committed later needs a
	// target here, which the pass skips.
	bctx, cancel := context.WithTimeout(ctx, s.d.RequestTimeout)
	err := s.d.Store.CatchUp(bctx)
	cancel()
	if err != nil {
		s.d.Logger.Warn("stale-copy sweep: the replica has not caught up; no sweep this turn", "err", err)
		return r
	}
	dirs, err := storage.TopicDirs(s.d.DataDir)
	if err != nil {
		s.d.Logger.Error("stale-copy sweep: list the topic directories", "err", err)
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
		t, ok := s.d.Store.Topic(td.Name)
		if !ok || t.Incarnation != td.Incarnation {
			if n, ok := s.removeDeletedTopic(ctx, td.Name, td.Incarnation, storage.TopicPath(s.d.DataDir, td.Name), true); ok {
				r.deletedTopics++
				r.reclaimedBytes += n
			}
			continue
		}
		for _, p := range td.Partitions {
			k := messages.PartitionKey{Topic: td.Name, Incarnation: t.Incarnation, Partition: p}
			if a, ok := s.judgeable(k, t); ok {
				copies = append(copies, copyToJudge{key: k, owner: a.Owner, retention: time.Duration(t.RetentionMs) * time.Millisecond})
			}
		}
	}
	stale, err := storage.StaleDirs(s.d.DataDir)
	if err != nil {
		s.d.Logger.Error("stale-copy sweep: list the set-aside topic directories", "err", err)
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

// judgeable reports whether k's local copy is one the sweep judges, with
// its assignment: a partition owned elsewhere, not targeted back here (the
// install deals with that copy), and with no log open at its path.
func (s *Actor) judgeable(k messages.PartitionKey, t messages.Topic) (messages.Assignment, bool) {
	if k.Partition >= t.Partitions {
		return messages.Assignment{}, false
	}
	a, ok := s.d.Store.Assignment(k.Incarnation, k.Partition)
	if !ok || a.Owner == "" || a.Owner == s.d.NodeID || a.Target == s.d.NodeID {
		return a, false
	}
	return a, !s.d.Guards.PartitionOpen(k.Topic, k.Partition)
}

// judgeAll judges up to Config.MaxCopiesPerPass copies from the from'th
// on, Config.ParallelAsks at a time.
func (s *Actor) judgeAll(ctx context.Context, copies []copyToJudge, from int, r *report) {
	if len(copies) == 0 {
		return
	}
	if from >= len(copies) {
		from = 0
	}
	n := min(len(copies), s.d.Config.MaxCopiesPerPass)
	r.more = n < len(copies)
	r.next = (from + n) % len(copies)
	var mu sync.Mutex
	sem := make(chan struct{}, s.d.Config.ParallelAsks)
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
func (s *Actor) judge(ctx context.Context, c copyToJudge) (sweep.Verdict, int64, bool) {
	dir := storage.PartitionPath(s.d.DataDir, c.key.Topic, c.key.Partition)
	in := sweep.Copy{Self: s.d.NodeID}
	if err := localSide(dir, s.d.LogConfig, c.retention, &in); err != nil {
		s.d.Logger.Warn("stale-copy sweep: list the local copy", "dir", dir, "err", err)
	}
	ownerSide(s.askOwner(ctx, c), &in)
	v := sweep.Judge(in)
	switch v.Action {
	case sweep.Reclaim, sweep.Quarantine:
		bytes, set, err := s.carryOut(c, v, dir)
		if err != nil {
			s.d.Logger.Warn("stale-copy sweep: the verdict was not carried out; judged again next time", "partition", keyString(c.key), "verdict", v.Action, "reason", v.Reason, "err", err)
			return sweep.Verdict{Action: sweep.Defer, Reason: "refused"}, 0, false
		}
		return v, bytes, set
	}
	s.d.Logger.Debug("stale-copy sweep", "partition", keyString(c.key), "verdict", v.Action, "reason", v.Reason)
	return v, 0, false
}

// askOwner asks the partition's owner for its listing and move marker
// (S1); nil when it cannot be asked or does not answer.
func (s *Actor) askOwner(ctx context.Context, c copyToJudge) *messages.PartitionListing {
	ctx, cancel := context.WithTimeout(ctx, s.d.RequestTimeout)
	defer cancel()
	res, err := s.d.Owners.Ask(ctx, c.key, &messages.ListPartition{})
	ls, ok := res.(*messages.PartitionListing)
	if err != nil || !ok || ls.Status != messages.StatusOK {
		return nil
	}
	return ls
}

// carryOut reclaims or quarantines the copy under the topic's guard (rule
// S6), only while the topic directory's marker is absent or names the
// incarnation the sweep read, no log is open at the path, the partition is
// still owned elsewhere and not targeted here, and, for a reclaim, the copy
// is still what the verdict judged: at or below the vouched position, or
// holding no unexpired records. A reclaim whose copy changed is refused.
func (s *Actor) carryOut(c copyToJudge, v sweep.Verdict, dir string) (int64, bool, error) {
	unlock := s.d.Guards.Lock(c.key.Topic)
	defer unlock()
	if err := s.d.Guards.PathFree(s.d.DataDir, c.key.Topic, c.key.Incarnation, c.key.Partition, true); err != nil {
		return 0, false, err
	}
	if a, ok := s.d.Store.Assignment(c.key.Incarnation, c.key.Partition); !ok || a.Owner == s.d.NodeID || a.Target == s.d.NodeID {
		return 0, false, fmt.Errorf("partition %s is no longer owned elsewhere: %w", keyString(c.key), storage.ErrGuardRefused)
	}
	if v.Action == sweep.Quarantine {
		q, err := storage.Quarantine(dir)
		s.d.Logger.Error("stale-copy sweep: set a copy aside that may hold records nobody else has; an operator decides",
			"partition", keyString(c.key), "owner", c.owner, "reason", v.Reason, "vouched", v.Vouched, "quarantine", q, "err", err)
		return 0, err == nil, err
	}
	if err := s.stillAsJudged(c, v, dir); err != nil {
		return 0, false, err
	}
	n, err := storage.RemoveDir(dir)
	return n, false, err
}

// stillAsJudged re-checks, under the guard, the copy a reclaim removes.
func (s *Actor) stillAsJudged(c copyToJudge, v sweep.Verdict, dir string) error {
	now := clock.Or(s.d.LogConfig.Clock).Now() // the log's clock: its segment times
	if v.Reason == sweep.ReasonNoUnexpiredRecords {
		if storage.HoldsUnexpiredRecords(dir, s.d.LogConfig, now, c.retention) {
			return fmt.Errorf("the copy of %s holds unexpired records now: %w", keyString(c.key), storage.ErrGuardRefused)
		}
		return nil
	}
	ls, err := storage.ListClosed(dir, s.d.LogConfig, now)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if ls.HWM > v.Vouched {
		return fmt.Errorf("the copy of %s reaches %d, past the vouched %d: %w", keyString(c.key), ls.HWM, v.Vouched, storage.ErrGuardRefused)
	}
	return nil
}

// removeDeletedTopic removes a deleted incarnation's topic directory (rule
// S7): once the leader confirms the incarnation is not the topic's, and
// re-checked under the guard, where the local record must still not name
// it, its marker must be unchanged (underTopics: the directory at the
// topic's path) and no partition of it may be open. It returns the bytes
// removed.
func (s *Actor) removeDeletedTopic(ctx context.Context, topic string, inc uint64, dir string, underTopics bool) (int64, bool) {
	ctx, cancel := context.WithTimeout(ctx, s.d.RequestTimeout)
	defer cancel()
	t, found, err := s.d.Store.LeaderTopic(ctx, topic)
	if err != nil || (found && t.Incarnation == inc) {
		return 0, false // not confirmed gone: the replica may lag
	}
	unlock := s.d.Guards.Lock(topic)
	defer unlock()
	if t, ok := s.d.Store.Topic(topic); ok && t.Incarnation == inc {
		return 0, false
	}
	if underTopics {
		if ok, err := storage.MarkerNames(s.d.DataDir, topic, inc, false); err != nil || !ok {
			return 0, false
		}
	}
	if underTopics && s.d.Guards.TopicOpen(topic) {
		// Some partition of the name is open: only a live incarnation's
		// can be (a partition opens under its own marker), so the
		// directory is not a deleted one's after all.
		return 0, false
	}
	n, err := storage.RemoveDir(dir)
	if err != nil {
		s.d.Logger.Error("stale-copy sweep: remove a deleted topic's directory", "topic", topic, "incarnation", inc, "dir", dir, "err", err)
		return 0, false
	}
	s.d.Logger.Info("stale-copy sweep: removed a deleted topic's directory", "topic", topic, "incarnation", inc, "dir", dir, "bytes", n)
	return n, true
}

package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/naradmq/narad/cluster/transport"
	"github.com/naradmq/narad/messages"
	"github.com/naradmq/narad/storage"
)

// quarantineBook is a node's last inventory of the copies it set aside
// (storage.Quarantined) and of its topic directories without a marker,
// behind the gauges of rules S7 and S8. The node takes the first at start,
// before the sweeper runs; from then on it belongs to the sweeper actor,
// which alone changes it (after each pass, each "quarantine" listing and
// each release) and answers every read of it by message (sweeper_book.go),
// so it has no lock. The walks that fill it run off the actor
// (takeInventory).
type quarantineBook struct {
	metrics *nodeMetrics
	last    quarantineSnapshot
}

// quarantineSnapshot is one inventory; taken is false until the first.
type quarantineSnapshot struct {
	taken   bool
	copies  []storage.QuarantinedCopy
	orphans []string
	bytes   int64
}

func newQuarantineBook(m *nodeMetrics) *quarantineBook { return &quarantineBook{metrics: m} }

// takeInventory walks dataDir for the copies set aside and the orphan
// topic directories. It only reads, so walks may overlap.
func takeInventory(dataDir string) (quarantineSnapshot, error) {
	copies, err := storage.Quarantined(dataDir)
	if err != nil {
		return quarantineSnapshot{}, fmt.Errorf("inventory of copies set aside: %w", err)
	}
	orphans, err := storage.OrphanTopicDirs(dataDir)
	if err != nil {
		return quarantineSnapshot{}, fmt.Errorf("inventory of orphan topic dirs: %w", err)
	}
	s := quarantineSnapshot{taken: true, copies: copies, orphans: orphans}
	for _, c := range copies {
		s.bytes += c.Bytes
	}
	return s, nil
}

// apply makes s the book's inventory and sets the gauges from it.
func (b *quarantineBook) apply(s quarantineSnapshot) {
	b.last = s
	b.metrics.quarantinedCopies.Set(float64(len(s.copies)))
	b.metrics.quarantinedBytes.Set(float64(s.bytes))
	b.metrics.orphanTopicDirs.Set(float64(len(s.orphans)))
}

// refresh takes the inventory of dataDir and applies it; a walk that
// fails leaves the last inventory in place. It walks on the caller's
// goroutine: for the start and for tests, never the sweeper's mailbox.
func (b *quarantineBook) refresh(dataDir string) error {
	s, err := takeInventory(dataDir)
	if err != nil {
		return err
	}
	b.apply(s)
	return nil
}

// snapshot is the last inventory. Its slices are never written again (an
// inventory replaces them), so an answer may carry them.
func (b *quarantineBook) snapshot() quarantineSnapshot { return b.last }

// reclaimed counts n bytes the stale-copy sweep removed.
func (b *quarantineBook) reclaimed(n int64) { b.metrics.sweepReclaimed.AddInt64(n) }

// reclaimedBytes is what the sweep reclaimed since the node started.
func (b *quarantineBook) reclaimedBytes() int64 { return int64(b.metrics.sweepReclaimed.Get()) }

// takeQuarantineAtStart takes the node's first inventory and lists every
// copy set aside at error, one line each, then one summary line (rule S8):
// each may hold the only copy of some records, and nobody else will say so.
func takeQuarantineAtStart(log *slog.Logger, dataDir string, m *nodeMetrics) *quarantineBook {
	b := newQuarantineBook(m)
	if err := b.refresh(dataDir); err != nil {
		log.Error("copies set aside: no inventory at start; the quarantine gauges read 0 until the sweep takes one", "err", err)
		return b
	}
	s := b.snapshot()
	now := time.Now()
	for _, c := range s.copies {
		log.Error("copy set aside: it may hold the only copy of its records; release it once it is not needed",
			"path", c.Path, "kind", c.Kind, "topic", c.Topic, "partition", c.Partition, "bytes", c.Bytes,
			"age", now.Sub(c.Modified).Round(time.Second))
	}
	switch {
	case len(s.copies) > 0:
		log.Error("copies set aside at start: list them with `narad cluster quarantine`, release one with `narad cluster quarantine release`",
			"copies", len(s.copies), "bytes", s.bytes, "orphan_topic_dirs", len(s.orphans))
	case len(s.orphans) > 0:
		log.Warn("no copy set aside at start; topic directories without an incarnation marker", "orphan_topic_dirs", s.orphans)
	default:
		log.Info("no copy set aside at start")
	}
	return b
}

// nodeQuarantineOf is one node's listing from its inventory: at most limit
// copies and orphan directories, totals over all of them, ages at now.
func nodeQuarantineOf(node string, s quarantineSnapshot, reclaimed int64, limit int, now time.Time) messages.NodeQuarantine {
	out := messages.NodeQuarantine{Node: node, Copies: []messages.QuarantinedCopy{}, TotalCopies: len(s.copies), TotalBytes: s.bytes,
		ReclaimedBytes: reclaimed}
	for _, c := range s.copies[:min(len(s.copies), limit)] {
		out.Copies = append(out.Copies, copyInfo(c, now))
	}
	for _, o := range s.orphans[:min(len(s.orphans), limit)] {
		out.OrphanTopicDirs = append(out.OrphanTopicDirs, filepath.ToSlash(o))
	}
	return out
}

func copyInfo(c storage.QuarantinedCopy, now time.Time) messages.QuarantinedCopy {
	return messages.QuarantinedCopy{Path: filepath.ToSlash(c.Path), Kind: string(c.Kind), Topic: c.Topic, Partition: c.Partition,
		Incarnation: c.Incarnation, Bytes: c.Bytes, ModifiedMs: c.Modified.UnixMilli(), AgeMs: max(0, now.Sub(c.Modified).Milliseconds())}
}

// The node services the "quarantine" verbs and the members listing gather
// from: each member answers for its own data dir.
const (
	quarantineCountsService  = "quarantine-counts"
	quarantineListService    = "quarantine-list"
	quarantineReleaseService = "quarantine-release"
)

func (n *Node) serveQuarantine() error {
	return errors.Join(
		transport.HandleJSON(n.nats, quarantineCountsService, func(ctx context.Context, _ string, _ struct{}) (messages.QuarantineCounts, error) {
			c, _ := n.quarantineCounts(ctx)
			return c, nil
		}),
		transport.HandleJSON(n.nats, quarantineListService, func(ctx context.Context, _ string, _ struct{}) (messages.NodeQuarantine, error) {
			return n.localQuarantine(ctx)
		}),
		transport.HandleJSON(n.nats, quarantineReleaseService, func(ctx context.Context, _ string, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
			return n.releaseLocal(ctx, in)
		}),
	)
}

// quarantineCounts is this node's share of the members listing, from the
// sweeper's last inventory; false before it took one, or when the sweeper
// did not answer.
func (n *Node) quarantineCounts(ctx context.Context) (messages.QuarantineCounts, bool) {
	res, err := n.request(ctx, n.sweeper, quarantineAsk{})
	a, ok := res.(quarantineCountsAnswer)
	if err != nil || !ok {
		return messages.QuarantineCounts{}, false
	}
	return a.counts, a.taken
}

// localQuarantine lists this node's copies set aside from a fresh
// inventory: an operator asked, and the last one may be a sweep old.
func (n *Node) localQuarantine(ctx context.Context) (messages.NodeQuarantine, error) {
	res, err := n.request(ctx, n.sweeper, quarantineAsk{fresh: true})
	if err != nil {
		return messages.NodeQuarantine{}, transport.Errorf(transport.StatusUnavailable, "%s: the sweeper did not answer: %v", n.cfg.NodeID, err)
	}
	a := res.(quarantineListAnswer)
	return a.list, a.err
}

// releaseLocal removes one copy set aside in this node's data dir, or
// says what it would remove (a dry run): the sweeper does it (releaseCopy)
// and answers once its inventory no longer lists the copy.
func (n *Node) releaseLocal(ctx context.Context, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	res, err := n.request(ctx, n.sweeper, quarantineRelease{req: in})
	if err != nil {
		return messages.QuarantineReleaseReply{Node: n.cfg.NodeID, Path: in.Path, DryRun: in.DryRun},
			transport.Errorf(transport.StatusTimeout, "release on %s: the sweeper did not answer: %v; list its copies to see whether it happened", n.cfg.NodeID, err)
	}
	a := res.(quarantineReleaseAnswer)
	return a.reply, a.err
}

// releaseCopy removes one copy set aside in dataDir, or says what it would
// remove (a dry run), under the topic's guard so that no install, sweep or
// set-aside of that topic runs meanwhile. Audited. It runs off the
// sweeper's mailbox.
func releaseCopy(d deps, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	out := messages.QuarantineReleaseReply{Node: d.cfg.NodeID, Path: in.Path, DryRun: in.DryRun}
	rel := filepath.FromSlash(in.Path)
	c, err := storage.QuarantinedAt(d.cfg.DataDir, rel)
	if err != nil {
		return out, releaseRefusal(d.cfg.NodeID, in.Path, err)
	}
	unlock := d.guards.Lock(c.Topic)
	defer unlock()
	if c, err = storage.QuarantinedAt(d.cfg.DataDir, rel); err != nil {
		return out, releaseRefusal(d.cfg.NodeID, in.Path, err)
	}
	out.Kind, out.Bytes = string(c.Kind), c.Bytes
	if in.DryRun {
		return out, nil
	}
	if err := storage.ReleaseQuarantined(d.cfg.DataDir, rel); err != nil {
		return out, releaseRefusal(d.cfg.NodeID, in.Path, err)
	}
	out.Released = true
	d.log.Warn("audit cluster.quarantine.release", "path", in.Path, "kind", c.Kind, "topic", c.Topic, "partition", c.Partition, "bytes", c.Bytes)
	return out, nil
}

// releaseRefusal is a refused release as the caller should see it: 400
// for a path that is no copy set aside, 404 for one not there.
func releaseRefusal(node, path string, err error) error {
	switch {
	case errors.Is(err, storage.ErrInvalid):
		return transport.Errorf(400, "%q is not the path of a copy set aside on %s (as `narad cluster quarantine` lists them)", path, node)
	case errors.Is(err, storage.ErrNotFound):
		return transport.Errorf(404, "no copy set aside at %q on %s", path, node)
	}
	return transport.Errorf(transport.StatusInternal, "release %q on %s: %v", path, node, err)
}

// adminQuarantine answers the "quarantine" verb: one member's listing, or
// every member's not marked dead, asked at once within the caller's
// budget; a member that gives none is named in Errors.
func (n *Node) adminQuarantine(ctx context.Context, _ string, in messages.QuarantineRequest) (messages.QuarantineList, error) {
	var ids []string
	if in.Node != "" {
		if _, ok := n.store.Member(in.Node); !ok {
			return messages.QuarantineList{}, transport.Errorf(404, "member %s not found", in.Node)
		}
		ids = []string{in.Node}
	} else {
		for _, m := range n.store.Members() {
			if m.ID == n.cfg.NodeID || m.Status != messages.MemberDead {
				ids = append(ids, m.ID)
			}
		}
	}
	out := messages.QuarantineList{Nodes: []messages.NodeQuarantine{}}
	var others []string
	for _, id := range ids {
		if id != n.cfg.NodeID {
			others = append(others, id)
			continue
		}
		l, err := n.localQuarantine(ctx)
		if err != nil {
			out.Errors = map[string]string{id: err.Error()}
			continue
		}
		out.Nodes = append(out.Nodes, l)
	}
	answers, errs := askMembers[messages.NodeQuarantine](ctx, n.nats, others, quarantineListService, struct{}{}, n.fanOutBudget(ctx))
	for _, id := range others {
		if l, ok := answers[id]; ok {
			out.Nodes = append(out.Nodes, l)
			continue
		}
		if out.Errors == nil {
			out.Errors = map[string]string{}
		}
		out.Errors[id] = errs[id].Error()
	}
	slices.SortFunc(out.Nodes, func(a, b messages.NodeQuarantine) int { return strings.Compare(a.Node, b.Node) })
	if in.Node != "" && len(out.Nodes) == 0 {
		return out, transport.Errorf(transport.StatusUnavailable, "no listing from %s: %s", in.Node, out.Errors[in.Node])
	}
	return out, nil
}

// adminQuarantineRelease answers the "quarantine-release" verb: the
// member named removes the copy (or says what it would remove) itself.
func (n *Node) adminQuarantineRelease(ctx context.Context, _ string, in messages.QuarantineReleaseRequest) (messages.QuarantineReleaseReply, error) {
	switch {
	case in.Node == "" || in.Path == "":
		return messages.QuarantineReleaseReply{}, transport.Errorf(400, "a release needs node and path")
	case in.Node == n.cfg.NodeID:
		return n.releaseLocal(ctx, in)
	}
	if _, ok := n.store.Member(in.Node); !ok {
		return messages.QuarantineReleaseReply{}, transport.Errorf(404, "member %s not found", in.Node)
	}
	if n.nats == nil {
		return messages.QuarantineReleaseReply{}, transport.Errorf(transport.StatusUnavailable, "%s cannot reach %s without NATS", n.cfg.NodeID, in.Node)
	}
	var out messages.QuarantineReleaseReply
	err := transport.RequestJSON(ctx, n.nats, in.Node, quarantineReleaseService, in, &out)
	if re, ok := errors.AsType[*transport.RemoteError](err); ok {
		return out, re // the member's own refusal, status and words
	}
	if err != nil {
		// The outcome is unknown on a timeout: the operator lists again.
		return out, transport.Errorf(transport.StatusTimeout, "release on %s: %v; list its copies to see whether it happened", in.Node, err)
	}
	return out, nil
}

// fanOutBudget is how long a request to every member may take: half of
// what is left of the caller's budget, at most RequestTimeout, so that a
// member that hangs costs the answer its share, not the answer.
func (n *Node) fanOutBudget(ctx context.Context) time.Duration {
	budget := n.cfg.RequestTimeout
	if dl, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(dl)/2)
	}
	return budget
}

// askMembers sends in to service on each of ids at once and waits for
// them all, for at most budget: the answers of those that answered, and
// why each other did not.
func askMembers[Out any](ctx context.Context, t *transport.Transport, ids []string, service string, in any, budget time.Duration) (map[string]Out, map[string]error) {
	answers, errs := map[string]Out{}, map[string]error{}
	if len(ids) == 0 {
		return answers, errs
	}
	if t == nil {
		for _, id := range ids {
			errs[id] = fmt.Errorf("%s: no NATS to ask it over", id)
		}
		return answers, errs
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	type answer struct {
		id  string
		out Out
		err error
	}
	// One request per member, each ending with ctx at the latest.
	ch := make(chan answer, len(ids))
	for _, id := range ids {
		go func() {
			var out Out
			err := transport.RequestJSON(ctx, t, id, service, in, &out)
			ch <- answer{id, out, err}
		}()
	}
	for range ids {
		a := <-ch
		if a.err != nil {
			errs[a.id] = a.err
			continue
		}
		answers[a.id] = a.out
	}
	return answers, errs
}

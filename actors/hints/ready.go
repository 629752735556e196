package hints

import (
	"sync"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/messages"
)

// TopicIncarnation names one life of a topic: the ready book and the
// commit notices are kept per life.
type TopicIncarnation struct {
	Topic       string
	Incarnation uint64
}

// Book is what this node believes about which partitions of each
// topic have a record to deliver, so that a queue-mode consume asks an
// owner that has one first (Plan) instead of every partition in
// turn, one NATS round trip each. It learns from commit notices (its own
// partitions' and its peers', Notifier) and from every answer to a
// reserve it routes. It is a hint: a partition believed empty is still
// asked by the long poll's periodic full scan, so a belief that is wrong
// costs latency, never a record.
type Book struct {
	mu     sync.Mutex
	topics map[TopicIncarnation]*readyTopic
	clock  clock.Clock
	// marks counts the marks so far. An answer to a reserve asked before
	// the latest mark of its partition may predate the commit that mark
	// announced (the notice overtook the answer), so it does not make the
	// partition read empty: otherwise the record would wait for the next
	// commit there or the full scan.
	marks uint64
}

// readyTopic is the belief about one topic incarnation's partitions.
type readyTopic struct {
	parts []Partition
	// scanned is when a consume here last asked every partition; the long
	// polls of every consumer of the topic share it (fullScanDue).
	scanned time.Time
}

// Partition is the belief about one partition.
type Partition struct {
	// ready: a record was deliverable when last heard of.
	Ready bool
	// since is when the partition last became ready or was last served
	// through this node.
	Since time.Time
	// expires is when a lease out expires and its record becomes
	// deliverable again; zero when none is known.
	Expires time.Time
	// marked is the book's marks count at this partition's latest mark.
	marked uint64
}

// maxReadyTopics bounds the topic incarnations the book remembers (an
// entry is 56 bytes a partition: at most about 24 MiB at 108 partitions
// each); past it the book starts over, every partition then reading ready
// (a full scan), so a node consuming from more topics than this only asks
// more partitions. Entries of deleted topics go the same way.
const maxReadyTopics = 4096

// NewBook is an empty book that stamps what it learns on c (nil: the
// wall clock).
func NewBook(c clock.Clock) *Book {
	return &Book{topics: map[TopicIncarnation]*readyTopic{}, clock: clock.Or(c)}
}

// topic returns the entry of ti with n partitions, made with every
// partition ready (nothing is known yet) when it is new or its partition
// count changed. The caller holds mu.
func (b *Book) topic(ti TopicIncarnation, n int, now time.Time) *readyTopic {
	t, ok := b.topics[ti]
	if ok && len(t.parts) == n {
		return t
	}
	if len(b.topics) >= maxReadyTopics {
		clear(b.topics)
	}
	t = &readyTopic{parts: make([]Partition, n), scanned: now}
	for i := range t.parts {
		t.parts[i] = Partition{Ready: true, Since: now}
	}
	b.topics[ti] = t
	return t
}

// mark is a partition that may have a record to deliver. A topic no consume
// here asked about yet is not recorded: its first consume finds every
// partition ready anyway.
func (b *Book) mark(k messages.PartitionKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.topics[TopicIncarnation{k.Topic, k.Incarnation}]
	if !ok || k.Partition < 0 || k.Partition >= len(t.parts) {
		return
	}
	b.marks++
	p := &t.parts[k.Partition]
	p.marked = b.marks
	if !p.Ready {
		p.Ready, p.Since = true, b.clock.Now()
	}
}

// Seq is the book's marks count when a consume began asking; observe
// takes it back with each answer.
type Seq uint64

// snapshot copies the belief about ti's n partitions, for Plan,
// with the marks count to pass observe with the answers of the asks it
// plans.
func (b *Book) Snapshot(ti TopicIncarnation, n int) ([]Partition, time.Time, Seq) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	return append([]Partition(nil), b.topic(ti, n, now).parts...), now, Seq(b.marks)
}

// asking is the marks count for a consume that asks without a snapshot
// (one partition named).
func (b *Book) Asking() Seq {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Seq(b.marks)
}

// fullScanDue reports whether the last full scan of ti is every or longer
// ago, and if so counts one as begun now: however short each long poll is,
// the topic's consumers here ask every partition about once per every.
func (b *Book) FullScanDue(ti TopicIncarnation, n int, every time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	t := b.topic(ti, n, now)
	if now.Sub(t.scanned) < every {
		return false
	}
	t.scanned = now
	return true
}

// observe learns from a partition's answer to a reserve asked at asked:
// leased (ready again only if it said More, or a mark came after the ask)
// or empty (the same), with when a lease out expires.
func (b *Book) Observe(ti TopicIncarnation, n, partition int, asked Seq, leased, more bool, expiresIn time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	t := b.topic(ti, n, now)
	if partition < 0 || partition >= n {
		return
	}
	p := &t.parts[partition]
	p.Ready = leased && more || p.marked > uint64(asked)
	if leased {
		p.Since = now
	}
	p.Expires = time.Time{}
	if expiresIn > 0 {
		p.Expires = now.Add(expiresIn)
	}
}

// AskGroup is the partitions of one owner that one consume asks, in order:
// a single ReserveAny request when the owner is a peer.
type AskGroup struct {
	Owner string
	Parts []int
}

// Plan orders the asks of one queue-mode consume: the partitions
// believed to have a record (all of them when full), from start in
// rotation, grouped by owner in the order their first partition comes.
// With localFirst the local group goes first, so that a consume and its ack
// stay on this node while it has records; without, the rotation decides,
// which the caller does for one consume in Config.ConsumeRotateEvery, so
// that a consumer talking to one node only still drains every partition.
// owners[p] is p's owner ("" for none: not asked); self is this node. Pure:
// the caller takes the snapshot.
func Plan(parts []Partition, owners []string, self string, start int, now time.Time, full, localFirst bool) []AskGroup {
	n := len(parts)
	var groups []AskGroup
	at := map[string]int{}
	for i := 0; i < n; i++ {
		p := (start + i) % n
		st, owner := parts[p], owners[p]
		deliverable := st.Ready || (!st.Expires.IsZero() && !now.Before(st.Expires))
		if owner == "" || !(full || deliverable) {
			continue
		}
		g, ok := at[owner]
		if !ok {
			g = len(groups)
			at[owner] = g
			groups = append(groups, AskGroup{Owner: owner})
		}
		groups[g].Parts = append(groups[g].Parts, p)
	}
	if g, ok := at[self]; ok && localFirst && g > 0 {
		local := groups[g]
		copy(groups[1:g+1], groups[:g])
		groups[0] = local
	}
	return groups
}

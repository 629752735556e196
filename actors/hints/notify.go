package hints

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/messages"
)

// Notifier wakes long polls when a partition of their topic may have
// a record to deliver (a commit, a nack, the end of a freeze, a slot freed
// under max_in_flight), marks that partition ready in the node's Book,
// and tells the other nodes the same through commit notices, so that a long
// poll on any node wakes on a commit at any owner, and a consume there asks
// an owner that has records rather than every partition in turn.
//
// It is the one piece of memory the API's goroutines and the partition
// actors share. Notices are hints: one lost costs a consumer at most the
// long poll's rescan (Config.ConsumeRescanInterval), never a record.
//
// Only a node that serves consumes reads its peers' notices, so a node
// sends them only while a peer said lately that it does (interest): a
// node that serves a consume tells the peers so at most once every
// interestEvery, and a word of interest keeps its peers' notices coming
// for interestFor. Under a load of produces alone (issue 45) a notice went
// out every millisecond from every node and was read by every other, for
// nobody: 7% of what a record cost through three nodes at 2,500 a second.
type Notifier struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
	Ready *Book
	// pending are the partitions committed here since the last notice was
	// sent, at most maxPendingNotices (beyond that they are dropped: the
	// peers' rescans find them); kick has a value when pending is not empty.
	pending map[messages.PartitionKey]struct{}
	kick    chan struct{}
	// peersConsume is when a peer last said it serves consumes, and
	// announced when this node last said so (unix nanoseconds). announce
	// has a value when the peers are due that word.
	peersConsume, announced atomic.Int64
	announce                chan struct{}
	// clock stamps the peers' interest and paces the notices.
	clock clock.Clock
}

// interestEvery is how often at most a node that serves consumes says so;
// interestFor is how long its peers send notices after they heard it,
// enough for two words to be lost.
const (
	interestEvery = time.Second
	interestFor   = 3 * interestEvery
)

// maxPendingNotices bounds the partitions one node remembers to announce:
// one notice carries at most this many, and more between two sends are
// dropped (a hint, see Notifier).
const maxPendingNotices = 4096

// NewNotifier is a node's notifier, its book and its notices on c: the
// node's steady clock (actors/clock), as notices and words of interest
// pace the cluster. Nil is the wall clock.
func NewNotifier(c clock.Clock) *Notifier {
	c = clock.Or(c)
	n := &Notifier{chans: map[string]chan struct{}{}, Ready: NewBook(c), clock: c,
		pending: map[messages.PartitionKey]struct{}{}, kick: make(chan struct{}, 1), announce: make(chan struct{}, 1)}
	// A node that starts does not know whether its peers serve consumes:
	// it sends its notices for interestFor, within which a peer that does
	// says so again.
	n.peersConsume.Store(c.Now().UnixNano())
	return n
}

// consuming records that this node serves a consume now, and has the
// notice loop tell the peers so when it has not told them for
// interestEvery.
func (n *Notifier) Consuming(now time.Time) {
	t := now.UnixNano()
	last := n.announced.Load()
	if t-last < int64(interestEvery) || !n.announced.CompareAndSwap(last, t) {
		return
	}
	select {
	case n.announce <- struct{}{}:
	default:
	}
}

// heardInterest is a peer's word that it serves consumes.
func (n *Notifier) HeardInterest(now time.Time) { n.peersConsume.Store(now.UnixNano()) }

// peersRead reports whether a peer said within interestFor that it serves
// consumes: only then do notices go out.
func (n *Notifier) peersRead(now time.Time) bool {
	return now.UnixNano()-n.peersConsume.Load() < int64(interestFor)
}

// wait returns a channel closed at the next notify or heard of topic.
func (n *Notifier) Wait(topic string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	c, ok := n.chans[topic]
	if !ok {
		c = make(chan struct{})
		n.chans[topic] = c
	}
	return c
}

// notify is a partition served here that may have a record to deliver: its
// topic's waiters wake, it is marked ready, and the peers are told.
func (n *Notifier) Notify(k messages.PartitionKey) {
	n.mu.Lock()
	if len(n.pending) < maxPendingNotices {
		n.pending[k] = struct{}{}
	}
	n.mu.Unlock()
	select {
	case n.kick <- struct{}{}:
	default:
	}
	n.heard(k)
}

// heard is a partition that may have a record to deliver, announced here or
// by a peer: mark it ready and wake its topic's waiters. Topics nobody
// waits on cost a map lookup.
func (n *Notifier) heard(k messages.PartitionKey) {
	n.Ready.mark(k)
	n.mu.Lock()
	c, ok := n.chans[k.Topic]
	delete(n.chans, k.Topic)
	n.mu.Unlock()
	if ok {
		close(c)
	}
}

// take empties pending into a notice.
func (n *Notifier) take() commitNotice {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) == 0 {
		return nil
	}
	by := map[TopicIncarnation]int{}
	var out commitNotice
	for k := range n.pending {
		ti := TopicIncarnation{k.Topic, k.Incarnation}
		i, ok := by[ti]
		if !ok {
			i = len(out)
			by[ti] = i
			out = append(out, noticeTopic{Topic: k.Topic, Incarnation: k.Incarnation})
		}
		out[i].Partitions = append(out[i].Partitions, k.Partition)
	}
	clear(n.pending)
	return out
}

// commitNotice is what one node tells the others of the partitions it
// serves that may have records: JSON, since it carries no record bytes.
type commitNotice []noticeTopic

type noticeTopic struct {
	Topic       string `json:"t"`
	Incarnation uint64 `json:"i"`
	Partitions  []int  `json:"p"`
}

// NoticeService is the transport service of commit notices, and
// InterestService of a node's word that it serves consumes: each node
// publishes on its own subjects and watches every node's.
const (
	NoticeService   = "commits"
	InterestService = "interest"
)

// Publisher is how the notice loop sends (the transport).
type Publisher interface {
	Publish(service string, data []byte) error
}

// sendNotices publishes pending notices until ctx ends, at most one every
// interval: a busy node sends one notice per interval naming every
// partition committed meanwhile, an idle one sends nothing, and neither
// while no peer reads them (peersRead). It also tells the peers when this
// node serves consumes (consuming).
func (n *Notifier) SendNotices(ctx context.Context, pub Publisher, interval time.Duration, failed func(error)) {
	// One alarm re-armed after each notice, not one made every interval:
	// a busy node sends a notice every millisecond.
	pause := clock.NewAlarm(n.clock, interval)
	pause.Stop()
	defer pause.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.announce:
			if err := pub.Publish(InterestService, nil); err != nil {
				failed(err)
			}
			continue
		case <-n.kick:
		}
		if notice := n.take(); notice != nil && n.peersRead(n.clock.Now()) {
			body, err := json.Marshal(notice)
			if err == nil {
				err = pub.Publish(NoticeService, body)
			}
			if err != nil {
				failed(err)
			}
		}
		pause.Reset(interval)
		select {
		case <-pause.C:
		case <-ctx.Done():
			return
		}
	}
}

// heardNotice applies a peer's notice; a malformed one is dropped (a hint).
func (n *Notifier) HeardNotice(body []byte) error {
	var notice commitNotice
	if err := json.Unmarshal(body, &notice); err != nil {
		return err
	}
	for _, nt := range notice {
		for _, p := range nt.Partitions {
			n.heard(messages.PartitionKey{Topic: nt.Topic, Incarnation: nt.Incarnation, Partition: p})
		}
	}
	return nil
}

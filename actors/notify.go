package actors

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/naradmq/narad/messages"
)

// commitNotifier wakes long polls when a partition of their topic may have
// a record to deliver (a commit, a nack, the end of a freeze, a slot freed
// under max_in_flight), marks that partition ready in the node's readyBook,
// and tells the other nodes the same through commit notices, so that a long
// poll on any node wakes on a commit at any owner, and a consume there asks
// an owner that has records rather than every partition in turn.
//
// It is the one piece of memory the API's goroutines and the partition
// actors share. Notices are hints: one lost costs a consumer at most the
// long poll's rescan (Config.ConsumeRescanInterval), never a record.
type commitNotifier struct {
	mu    sync.Mutex
	chans map[string]chan struct{}
	ready *readyBook
	// pending are the partitions committed here since the last notice was
	// sent, at most maxPendingNotices (beyond that they are dropped: the
	// peers' rescans find them); kick has a value when pending is not empty.
	pending map[messages.PartitionKey]struct{}
	kick    chan struct{}
}

// maxPendingNotices bounds the partitions one node remembers to announce:
// one notice carries at most this many, and more between two sends are
// dropped (a hint, see commitNotifier).
const maxPendingNotices = 4096

func newCommitNotifier() *commitNotifier {
	return &commitNotifier{chans: map[string]chan struct{}{}, ready: newReadyBook(),
		pending: map[messages.PartitionKey]struct{}{}, kick: make(chan struct{}, 1)}
}

// wait returns a channel closed at the next notify or heard of topic.
func (n *commitNotifier) wait(topic string) <-chan struct{} {
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
func (n *commitNotifier) notify(k messages.PartitionKey) {
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
func (n *commitNotifier) heard(k messages.PartitionKey) {
	n.ready.mark(k)
	n.mu.Lock()
	c, ok := n.chans[k.Topic]
	delete(n.chans, k.Topic)
	n.mu.Unlock()
	if ok {
		close(c)
	}
}

// take empties pending into a notice.
func (n *commitNotifier) take() commitNotice {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) == 0 {
		return nil
	}
	by := map[topicIncarnation]int{}
	var out commitNotice
	for k := range n.pending {
		ti := topicIncarnation{k.Topic, k.Incarnation}
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

// noticeService is the transport service of commit notices: each node
// publishes on its own subject and watches every node's.
const noticeService = "commits"

// noticePublisher is how the notice loop sends (the transport).
type noticePublisher interface {
	Publish(service string, data []byte) error
}

// sendNotices publishes pending notices until ctx ends, at most one every
// interval: a busy node sends one notice per interval naming every
// partition committed meanwhile, an idle one sends nothing.
func (n *commitNotifier) sendNotices(ctx context.Context, pub noticePublisher, interval time.Duration, failed func(error)) {
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.kick:
		}
		if notice := n.take(); notice != nil {
			body, err := json.Marshal(notice)
			if err == nil {
				err = pub.Publish(noticeService, body)
			}
			if err != nil {
				failed(err)
			}
		}
		t.Reset(interval)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// heardNotice applies a peer's notice; a malformed one is dropped (a hint).
func (n *commitNotifier) heardNotice(body []byte) error {
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

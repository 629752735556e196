package metastore

import (
	"sync/atomic"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/messages"
)

// What the node's actors that pass over the replica share: the partitions
// supervisor, the move runner and the controller each run a pass at a
// change, and each names the partitions of the assignments it reads.

// ChangeWatch turns the replica's changes into one notice at a time to an
// actor: a change that arrives while the last notice is still unhandled
// (the actor has not called Handled) sends nothing more, since the actor's
// next pass reads the latest state anyway. A bulk move applies thousands of
// changes a second; without this, each would queue a full pass behind the
// others. The zero value is ready.
type ChangeWatch struct {
	pending atomic.Bool
	// Clock spaces the passes; nil is the wall clock. The owner sets it
	// before Start.
	Clock clock.Clock
}

// ChangePassEvery spaces the passes a ChangeWatch asks for: a pass reads and
// sorts every assignment the node owns or is targeted with (10,000 at seed
// 003's scale). 20 ms adds that much to a handover or a move's start and
// caps the passes at 50 a second.
const ChangePassEvery = 20 * time.Millisecond

// Start calls send at each change of changes after Start was called, at
// most every ChangePassEvery, until stop is closed, on a goroutine that
// ends with stop. Start takes the first change's channel before it
// returns: the caller's first pass, which reads the state after Start,
// cannot miss a change that lands before the goroutine runs (a supervisor
// whose goroutine took the channel late never learned of a topic put in
// between, with nothing after it to wake it).
//
// The next change's channel is taken as soon as one fired, before the send
// and the pause: a change during them closes it, so none is missed.
func (w *ChangeWatch) Start(changes interface{ Changed() <-chan struct{} }, stop <-chan struct{}, send func()) {
	next := changes.Changed()
	go w.run(changes, next, stop, send)
}

func (w *ChangeWatch) run(changes interface{ Changed() <-chan struct{} }, next <-chan struct{}, stop <-chan struct{}, send func()) {
	for {
		select {
		case <-next:
		case <-stop:
			return
		}
		next = changes.Changed()
		if !w.pending.Swap(true) {
			send()
		}
		pause := clock.NewAlarm(clock.Or(w.Clock), ChangePassEvery)
		select {
		case <-pause.C:
		case <-stop:
			pause.Stop()
			return
		}
	}
}

// Handled is the actor starting the pass a notice asked for: the next
// change sends again.
func (w *ChangeWatch) Handled() { w.pending.Store(false) }

// TopicKeys names the partition of an assignment (Key) when it belongs to
// the topic's current incarnation and partition count; an assignment of a
// deleted incarnation, or past a count not yet grown here, is no partition.
// A pass over thousands of assignments of a few topics looks each topic up
// once per incarnation, not per partition. Use one per pass: it keeps what
// it read.
type TopicKeys struct {
	Topics interface {
		Topic(name string) (messages.Topic, bool)
	}
	seen map[uint64]messages.Topic
}

// Key is a's partition, and whether it is one of its topic now.
func (c *TopicKeys) Key(a messages.Assignment) (messages.PartitionKey, bool) {
	t, ok := c.seen[a.Incarnation]
	if !ok {
		t, ok = c.Topics.Topic(a.Topic)
		if !ok || t.Incarnation != a.Incarnation {
			t = messages.Topic{} // Partitions 0: no partition of it is current
		}
		if c.seen == nil {
			c.seen = map[uint64]messages.Topic{}
		}
		c.seen[a.Incarnation] = t
	}
	if t.Name != a.Topic || a.Partition >= t.Partitions {
		return messages.PartitionKey{}, false
	}
	return messages.PartitionKey{Topic: a.Topic, Incarnation: a.Incarnation, Partition: a.Partition}, true
}

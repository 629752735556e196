package metastore

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/naradmq/narad/messages"
)

// changes is a change feed a test fires by hand.
type changes struct {
	mu sync.Mutex
	ch chan struct{}
}

func (c *changes) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

func (c *changes) fire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
	}
	c.ch = make(chan struct{})
}

// A burst of changes while a notice is unhandled sends nothing more; once
// handled, the next change sends again.
func TestAChangeWatchSendsOneNoticeAtATime(t *testing.T) {
	var feed changes
	var w ChangeWatch
	var sent atomic.Int32
	stop := make(chan struct{})
	w.Start(&feed, stop, func() { sent.Add(1) })
	defer close(stop)
	waitSent := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for sent.Load() < want && time.Now().Before(deadline) {
			feed.fire()
			time.Sleep(time.Millisecond)
		}
		if got := sent.Load(); got != want {
			t.Fatalf("notices: got %d, want %d", got, want)
		}
	}
	waitSent(1)
	for range 20 {
		feed.fire()
		time.Sleep(2 * ChangePassEvery / 20)
	}
	if got := sent.Load(); got != 1 {
		t.Fatalf("notices while one is unhandled: got %d, want 1", got)
	}
	w.Handled()
	waitSent(2)
}

// A change that lands after Start returned and before its goroutine first
// runs still sends: the caller's first pass read the state before it. In
// a bubble the goroutine runs only once the test blocks, after the change.
func TestAChangeWatchMissesNoChangeBeforeItsGoroutineRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var feed changes
		var w ChangeWatch
		var sent atomic.Int32
		stop := make(chan struct{})
		w.Start(&feed, stop, func() { sent.Add(1) })
		feed.fire()
		synctest.Wait()
		if got := sent.Load(); got != 1 {
			t.Errorf("notices for a change before the goroutine ran: got %d, want 1", got)
		}
		close(stop)
		synctest.Wait()
	})
}

// TopicKeys names only the partitions of a topic's current incarnation.
func TestTopicKeysNameCurrentPartitionsOnly(t *testing.T) {
	keys := TopicKeys{Topics: topicsOf{"t": {Name: "t", Incarnation: 7, Partitions: 3}}}
	for _, tc := range []struct {
		a    messages.Assignment
		want bool
	}{
		{messages.Assignment{Topic: "t", Incarnation: 7, Partition: 2}, true},
		{messages.Assignment{Topic: "t", Incarnation: 7, Partition: 3}, false}, // past the count
		{messages.Assignment{Topic: "t", Incarnation: 6, Partition: 0}, false}, // a deleted incarnation
		{messages.Assignment{Topic: "u", Incarnation: 7, Partition: 0}, false}, // another name
		{messages.Assignment{Topic: "gone", Incarnation: 1, Partition: 0}, false},
	} {
		k, ok := keys.Key(tc.a)
		if ok != tc.want || (ok && (k.Topic != tc.a.Topic || k.Incarnation != tc.a.Incarnation || k.Partition != tc.a.Partition)) {
			t.Errorf("%+v: got %+v %v, want %v", tc.a, k, ok, tc.want)
		}
	}
}

type topicsOf map[string]messages.Topic

func (m topicsOf) Topic(name string) (messages.Topic, bool) { t, ok := m[name]; return t, ok }

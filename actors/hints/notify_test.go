package hints

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// fakePublisher records what the notice loop publishes.
type fakePublisher struct {
	mu   sync.Mutex
	sent []string // services, in order
	got  chan string
}

func (p *fakePublisher) Publish(service string, _ []byte) error {
	p.mu.Lock()
	p.sent = append(p.sent, service)
	p.mu.Unlock()
	p.got <- service
	return nil
}

// Commit notices go out only while a peer said lately that it serves
// consumes: nobody else reads them. A node that serves consumes says so,
// at most once every interestEvery.
func TestNoticesGoOutOnlyWhileAPeerServesConsumes(t *testing.T) {
	n := NewNotifier(nil)
	pub := &fakePublisher{got: make(chan string, 16)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go n.SendNotices(ctx, pub, time.Millisecond, func(err error) { t.Errorf("publish: %v", err) })
	k := messages.PartitionKey{Topic: "t", Incarnation: 1, Partition: 2}
	expectNone := func(what string) {
		t.Helper()
		select {
		case s := <-pub.got:
			t.Fatalf("%s: got %q published, want nothing", what, s)
		case <-time.After(50 * time.Millisecond):
		}
	}
	expect := func(what, service string) {
		t.Helper()
		select {
		case s := <-pub.got:
			if s != service {
				t.Fatalf("%s: got %q published, want %q", what, s, service)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: got nothing published, want %q", what, service)
		}
	}

	n.Notify(k)
	expect("a commit within interestFor of the node's start", NoticeService)
	n.peersConsume.Store(time.Now().Add(-interestFor).UnixNano())
	n.Notify(k)
	expectNone("a commit with no peer consuming")
	n.HeardInterest(time.Now())
	n.Notify(k)
	expect("a commit after a peer said it consumes", NoticeService)
	n.peersConsume.Store(time.Now().Add(-interestFor).UnixNano())
	n.Notify(k)
	expectNone("a commit once the peer's word is interestFor old")

	now := time.Now()
	n.Consuming(now)
	expect("this node's first consume", InterestService)
	n.Consuming(now.Add(interestEvery / 2))
	expectNone("a consume within interestEvery of the word")
	n.Consuming(now.Add(interestEvery))
	expect("a consume interestEvery after the word", InterestService)
}

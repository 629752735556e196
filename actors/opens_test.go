package actors

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/naradmq/narad/actors/partition"
	"github.com/naradmq/narad/messages"
)

// heldOpens holds every partition open in the fault hook until released,
// counting how many are inside at once.
type heldOpens struct {
	mu               sync.Mutex
	inside, most, in int
	release          chan struct{}
}

func (h *heldOpens) open(messages.PartitionKey) error {
	h.mu.Lock()
	h.inside++
	h.in++
	h.most = max(h.most, h.inside)
	h.mu.Unlock()
	<-h.release
	h.mu.Lock()
	h.inside--
	h.mu.Unlock()
	return nil
}

func (h *heldOpens) entered() (inside, total int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inside, h.in
}

func (h *heldOpens) mostInside() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.most
}

// At most MaxParallelPartitionOpens partitions open their log at once; a
// produce to one still waiting its turn is answered once it opened. The
// partitions were created at rest (issue 50), so each opens at its first
// produce, all twelve asked at once.
func TestAtMostMaxParallelPartitionOpensOpenAtOnce(t *testing.T) {
	const partitions, bound = 12, 2
	held := &heldOpens{release: make(chan struct{})}
	tn := newTestNode(t, func(c *Config) {
		c.MaxParallelPartitionOpens = bound
		c.faults = &faultHooks{partition: partition.Knobs{OpenPartition: held.open}}
	})
	tn.createTopic("opens", partitions)
	if _, total := held.entered(); total != 0 {
		t.Fatalf("opens after the create: got %d, want 0 (created at rest)", total)
	}
	produced := make(chan int, partitions)
	for p := range partitions {
		go func() {
			code, _ := tn.do("POST", fmt.Sprintf("/v1/topics/opens/produce?partition=%d", p), []byte("waits its turn"))
			produced <- code
		}()
	}
	// Every open waits in the hook until released: the first ones are in
	// before any is let go, so an unbounded wake would have all inside.
	waitFor(t, func() bool { inside, _ := held.entered(); return inside >= bound })
	for range partitions {
		held.release <- struct{}{}
	}
	for range partitions {
		if code := <-produced; code != http.StatusAccepted {
			t.Errorf("produce to a partition that waited its turn to open: got %d, want 202", code)
		}
	}
	waitFor(t, func() bool {
		code, _ := tn.do("GET", fmt.Sprintf("/v1/topics/opens/consume?partition=%d&offset=0", partitions-1), nil)
		return code == http.StatusOK
	})
	if _, total := held.entered(); total != partitions {
		t.Errorf("opens: got %d, want %d", total, partitions)
	}
	if most := held.mostInside(); most > bound {
		t.Errorf("partitions opening at once: got %d, want at most %d", most, bound)
	}
}

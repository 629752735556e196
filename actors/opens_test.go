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
// produce to one still waiting its turn is answered once it opened.
func TestAtMostMaxParallelPartitionOpensOpenAtOnce(t *testing.T) {
	const partitions, bound = 12, 2
	held := &heldOpens{release: make(chan struct{})}
	tn := newTestNode(t, func(c *Config) {
		c.MaxParallelPartitionOpens = bound
		c.faults = &faultHooks{partition: partition.Knobs{OpenPartition: held.open}}
	})
	tn.createTopic("opens", partitions)
	// Every open waits in the hook until released: the first ones are in
	// before any is let go, so an unbounded start would have all inside.
	waitFor(t, func() bool { inside, _ := held.entered(); return inside >= bound })
	produced := make(chan int, 1)
	go func() {
		code, _ := tn.do("POST", fmt.Sprintf("/v1/topics/opens/produce?partition=%d", partitions-1), []byte("waits its turn"))
		produced <- code
	}()
	for range partitions {
		held.release <- struct{}{}
	}
	if code := <-produced; code != http.StatusAccepted {
		t.Errorf("produce to a partition that waited its turn to open: got %d, want 202", code)
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

package mover

import (
	"sync"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
)

// Requests submitted together are carried out in one call, each answered
// its own outcome; a request queued as the batcher closes is still carried
// out, and one submitted after it is refused.
func TestABatcherCarriesOutTogetherAndAnswersEachItsOwn(t *testing.T) {
	var mu sync.Mutex
	var calls [][]int
	release := make(chan struct{})
	b := newBatcher(nil, time.Hour, 4, 1, func(items []int) []int {
		mu.Lock()
		calls = append(calls, append([]int(nil), items...))
		mu.Unlock()
		<-release
		out := make([]int, len(items))
		for i, v := range items {
			out[i] = v * 10
		}
		return out
	})
	var dones []<-chan int
	for v := range 6 { // a full batch of 4, then 2 that wait behind it
		d, ok := b.submit(v)
		if !ok {
			t.Fatalf("submit %d: refused by an open batcher", v)
		}
		dones = append(dones, d)
	}
	// The first batch gathers its 4 before the close: a close that came
	// first would end the gathering early (a closing batcher carries out
	// what it holds at once), and the batches would split otherwise.
	testnet.Eventually(t, time.Minute, "the first batch under way", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) == 1
	})
	closed := make(chan struct{})
	go func() { b.close(); close(closed) }()
	close(release)
	<-closed
	for v, d := range dones {
		if got := <-d; got != v*10 {
			t.Fatalf("outcome of %d: got %d, want %d", v, got, v*10)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 2 || len(calls[0]) != 4 || len(calls[1]) != 2 {
		t.Fatalf("calls: got %v, want a batch of 4 then the 2 queued", calls)
	}
	if _, ok := b.submit(9); ok {
		t.Fatal("submit after close: accepted, want refused")
	}
}

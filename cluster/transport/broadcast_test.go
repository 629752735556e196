package transport

import (
	"testing"
	"time"
)

// A broadcast reaches every other node watching its service, with the
// sender's id, and never the sender itself; a cut-off node neither sends
// nor hears one.
func TestABroadcastReachesEveryOtherNodeAndNotItsSender(t *testing.T) {
	s := startServer(t)
	type heard struct{ at, from, body string }
	got := make(chan heard, 16)
	nodes := map[string]*Transport{}
	for _, id := range []string{"a", "b", "c"} {
		tr := newNode(t, s, id, nil)
		nodes[id] = tr
		if err := tr.Watch("hints", func(from string, data []byte) { got <- heard{id, from, string(data)} }); err != nil {
			t.Fatal(err)
		}
	}
	for _, tr := range nodes {
		if err := tr.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := nodes["a"].Publish("hints", []byte("p1")); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case h := <-got:
			if h.from != "a" || h.body != "p1" {
				t.Fatalf("%s heard %q from %q, want p1 from a", h.at, h.body, h.from)
			}
			if h.at == "a" {
				t.Fatal("a heard its own broadcast, want only b and c")
			}
			seen[h.at] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("heard by %v, want b and c", seen)
		}
	}
	nodes["b"].CutOff(true)
	if err := nodes["b"].Publish("hints", []byte("lost")); err != nil {
		t.Fatal(err)
	}
	if err := nodes["c"].Publish("hints", []byte("p2")); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.at != "a" || h.from != "c" || h.body != "p2" {
		t.Fatalf("after b was cut off: %s heard %q from %q, want a to hear p2 from c", h.at, h.body, h.from)
	}
	for _, tr := range nodes {
		if err := tr.nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case h := <-got:
		t.Fatalf("%s heard %q from %q, want nothing more (b is cut off)", h.at, h.body, h.from)
	case <-time.After(100 * time.Millisecond):
	}
}

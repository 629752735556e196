package hints

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

func TestConsumePlan(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ready := Partition{Ready: true, Since: t0}
	empty := Partition{}
	expiring := func(in time.Duration) Partition { return Partition{Expires: t0.Add(in)} }
	// Partitions 0..5 owned a, b, c, a, b, c; this node is a.
	owners := []string{"a", "b", "c", "a", "b", "c"}
	cases := []struct {
		name       string
		parts      []Partition
		owners     []string
		start      int
		full       bool
		localFirst bool
		want       []AskGroup
	}{
		{"nothing ready asks nobody", []Partition{empty, empty, empty, empty, empty, empty}, owners, 0, false, true, nil},
		{"a full scan asks every owner once, local first",
			[]Partition{empty, empty, empty, empty, empty, empty}, owners, 1, true, true,
			[]AskGroup{{"a", []int{3, 0}}, {"b", []int{1, 4}}, {"c", []int{2, 5}}}},
		{"only the ready partitions are asked",
			[]Partition{empty, ready, empty, empty, empty, ready}, owners, 0, false, true,
			[]AskGroup{{"b", []int{1}}, {"c", []int{5}}}},
		{"the local group goes first",
			[]Partition{ready, ready, ready, ready, empty, empty}, owners, 1, false, true,
			[]AskGroup{{"a", []int{3, 0}}, {"b", []int{1}}, {"c", []int{2}}}},
		{"a rotating consume keeps the rotation",
			[]Partition{ready, ready, ready, ready, empty, empty}, owners, 1, false, false,
			[]AskGroup{{"b", []int{1}}, {"c", []int{2}}, {"a", []int{3, 0}}}},
		{"a local group already first stays first",
			[]Partition{ready, ready, empty, empty, empty, ready}, owners, 0, false, true,
			[]AskGroup{{"a", []int{0}}, {"b", []int{1}}, {"c", []int{5}}}},
		{"a lease that has expired makes its partition deliverable",
			[]Partition{empty, expiring(0), expiring(time.Millisecond), empty, empty, empty}, owners, 0, false, true,
			[]AskGroup{{"b", []int{1}}}},
		{"a partition without an owner is never asked",
			[]Partition{ready, ready}, []string{"", "b"}, 0, true, true,
			[]AskGroup{{"b", []int{1}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Plan(tc.parts, tc.owners, "a", tc.start, t0, tc.full, tc.localFirst)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadyBookLearnsFromNoticesAndAnswers(t *testing.T) {
	c := testnet.NewClock()
	b := NewBook(c)
	now := c.Now()
	ti := TopicIncarnation{"t", 7}
	k := func(p int) messages.PartitionKey {
		return messages.PartitionKey{Topic: "t", Incarnation: 7, Partition: p}
	}
	readyOf := func() []bool {
		parts, _, _ := b.Snapshot(ti, 3)
		out := make([]bool, len(parts))
		for i, p := range parts {
			out[i] = p.Ready
		}
		return out
	}
	b.mark(k(0)) // before any consume asked: not recorded
	if got, want := readyOf(), []bool{true, true, true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("a topic first seen: got %v, want every partition ready", got)
	}
	b.Observe(ti, 3, 0, b.Asking(), false, false, 0)
	b.Observe(ti, 3, 1, b.Asking(), true, false, 0)
	b.Observe(ti, 3, 2, b.Asking(), true, true, 0)
	if got, want := readyOf(), []bool{false, false, true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after empty, leased, leased with more: got %v, want %v", got, want)
	}
	c.Advance(time.Second)
	now = c.Now()
	b.mark(k(0))
	b.mark(messages.PartitionKey{Topic: "t", Incarnation: 6, Partition: 1}) // an older incarnation
	b.mark(k(9))                                                            // no such partition
	parts, _, _ := b.Snapshot(ti, 3)
	if !parts[0].Ready || !parts[0].Since.Equal(now) || parts[1].Ready {
		t.Fatalf("after a notice of partition 0: got %+v, want 0 ready since %v and 1 still empty", parts, now)
	}
	b.Observe(ti, 3, 1, b.Asking(), false, false, 30*time.Second)
	parts, _, _ = b.Snapshot(ti, 3)
	if !parts[1].Expires.Equal(now.Add(30 * time.Second)) {
		t.Fatalf("an empty answer with a lease out: got expires %v, want %v", parts[1].Expires, now.Add(30*time.Second))
	}
	if got, want := readyOf(), []bool{true, false, true}; !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if parts, _, _ := b.Snapshot(ti, 4); len(parts) != 4 || !parts[1].Ready {
		t.Fatalf("after the topic grew to 4 partitions: got %+v, want 4 partitions all ready", parts)
	}
}

// A notice that overtakes the answer of an ask begun before it keeps its
// partition Ready: the answer may predate the commit the notice announced,
// and believing it would leave that record to the next commit there or the
// full scan.
func TestReadyBookKeepsANoticeNewerThanTheAsk(t *testing.T) {
	b := NewBook(nil)
	ti := TopicIncarnation{"t", 7}
	k := messages.PartitionKey{Topic: "t", Incarnation: 7, Partition: 1}
	ready := func() bool {
		parts, _, _ := b.Snapshot(ti, 3)
		return parts[1].Ready
	}
	_, _, asked := b.Snapshot(ti, 3)
	b.mark(k) // the commit's notice, heard while the ask was out
	b.Observe(ti, 3, 1, asked, false, false, 0)
	if !ready() {
		t.Fatalf("an empty answer to an ask begun before the notice: got not ready, want ready")
	}
	b.Observe(ti, 3, 1, asked, true, false, 0)
	if !ready() {
		t.Fatalf("a lease without more, asked before the notice: got not ready, want ready")
	}
	_, _, asked = b.Snapshot(ti, 3)
	b.Observe(ti, 3, 1, asked, false, false, 0)
	if ready() {
		t.Fatalf("an empty answer to an ask begun after the notice: got ready, want not ready")
	}
	if b.mark(k); !ready() {
		t.Fatalf("a notice after that: got not ready, want ready")
	}
}

func BenchmarkConsumePlan(b *testing.B) {
	for _, n := range []int{12, 108} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			now := time.Unix(1000, 0)
			parts := make([]Partition, n)
			owners := make([]string, n)
			for i := range parts {
				parts[i] = Partition{Ready: i%3 != 0, Since: now.Add(-time.Duration(i) * time.Millisecond)}
				owners[i] = fmt.Sprintf("n%d", i%3)
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				Plan(parts, owners, "n0", i%n, now, false, i%8 != 0)
			}
		})
	}
}

// The full scans of a topic's long polls on one node share one clock: one
// is due once per interval, however many consumes ask and however short
// their waits.
func TestReadyBookFullScanDueOncePerInterval(t *testing.T) {
	c := testnet.NewClock()
	b := NewBook(c)
	ti := TopicIncarnation{"t", 1}
	if b.FullScanDue(ti, 3, time.Second) {
		t.Fatal("a topic first seen: got a full scan due, want none (every partition reads ready)")
	}
	c.Advance(999 * time.Millisecond)
	if b.FullScanDue(ti, 3, time.Second) {
		t.Fatal("999 ms after: got due, want not yet")
	}
	c.Advance(time.Millisecond)
	if !b.FullScanDue(ti, 3, time.Second) {
		t.Fatal("1 s after: got not due, want due")
	}
	if b.FullScanDue(ti, 3, time.Second) {
		t.Fatal("a second consume at the same instant: got due again, want one scan per interval")
	}
}

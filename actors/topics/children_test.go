package topics

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/messages"
)

// childList is the lag arithmetic of GET children: HWM − cursor summed
// over the parent's partitions, complete only when every partition
// answered with a cursor for the child.
func TestChildListLag(t *testing.T) {
	p := messages.Topic{Name: "p", Partitions: 3, Children: []messages.ChildLink{{Name: "a"}, {Name: "b", DelayMs: 500}}}
	stats := []*messages.PartitionStats{
		{HighWatermark: 10, Cursors: map[string]int64{"a": 4, "b": 10}},
		{HighWatermark: 7, Cursors: map[string]int64{"a": 7}},
		{HighWatermark: 5, Cursors: map[string]int64{"a": 0, "b": 2}},
	}
	got := childList(p, stats)
	want := []messages.ChildInfo{{Name: "a", LagMessages: 6 + 0 + 5, LagComplete: true}, {Name: "b", DelayMs: 500, LagMessages: 0 + 3, LagComplete: false}}
	if !slices.Equal(got.Children, want) {
		t.Fatalf("got %+v, want %+v", got.Children, want)
	}
	// An owner that did not answer makes every lag incomplete.
	got = childList(p, []*messages.PartitionStats{stats[0], nil, stats[2]})
	if got.Children[0].LagComplete || got.Children[0].LagMessages != 6+5 {
		t.Fatalf("with partition 1 unanswered got %+v, want lag 11 and incomplete", got.Children[0])
	}
	if empty := childList(messages.Topic{Name: "q", Partitions: 3}, nil); empty.Children == nil || len(empty.Children) != 0 {
		t.Fatalf("a topic without children got %#v, want [] (not null)", empty.Children)
	}
}

// The attach's wait ends when every partition anchored, or when its bound
// runs out, answering the partitions still missing.
func TestAttachWaitsForAnchors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		start := time.Now()
		asked := 0
		missing := untilAnchored(ctx, clock.Wall{}, anchorPoll, func(context.Context) []int {
			asked++
			// Each owner anchors one poll after the previous.
			stats := []ownerStat{}
			for p := range 3 {
				st := &messages.PartitionStats{}
				if p < asked-1 {
					st.Cursors = map[string]int64{"c": 0}
				}
				stats = append(stats, ownerStat{owner: messages.Assignment{Partition: p}, stats: st})
			}
			return unanchored(3, stats, "c")
		})
		if missing != nil || asked != 4 || time.Since(start) != 3*anchorPoll {
			t.Fatalf("got missing %v after %d asks and %s, want none after 4 asks and %s", missing, asked, time.Since(start), 3*anchorPoll)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		missing := untilAnchored(ctx, clock.Wall{}, anchorPoll, func(context.Context) []int {
			return unanchored(3, []ownerStat{{owner: messages.Assignment{Partition: 1}, stats: &messages.PartitionStats{Cursors: map[string]int64{"c": 3}}}}, "c")
		})
		if !slices.Equal(missing, []int{0, 2}) || time.Since(start) != time.Second {
			t.Fatalf("got missing %v after %s, want [0 2] after the 1s bound", missing, time.Since(start))
		}
	})
}

// The contract's limits on a node's topic defaults.
func TestConfigValidate(t *testing.T) {
	good := Config{DefaultPartitions: 3, MaxPartitions: 108, DefaultRetention: 7 * 24 * time.Hour}
	if err := good.Validate(); err != nil {
		t.Fatalf("the defaults: got %v, want nil", err)
	}
	for _, tc := range []struct {
		name string
		bad  func(*Config)
	}{
		{"TopicDefaultPartitions", func(c *Config) { c.DefaultPartitions = 2 }},
		{"TopicMaxPartitions", func(c *Config) { c.MaxPartitions = 10001 }},
		{"TopicDefaultRetention", func(c *Config) { c.DefaultRetention = time.Minute }},
		{"TopicDefaultRetention", func(c *Config) { c.DefaultRetention = (maxRetentionMs + 1) * time.Millisecond }},
	} {
		c := good
		tc.bad(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s out of range (%v): got %v, want an error naming it", tc.name, c, err)
		}
	}
}

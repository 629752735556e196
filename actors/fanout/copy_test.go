package fanout

import (
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/naradmq/narad/storage"
)

// fnv32a is the API contract's partition of a key, as the node hands it
// to the fan-out (Deps.PartitionOf): FNV-1a 32, mod partitions.
func fnv32a(key string, partitions int) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % uint32(partitions))
}

func TestFanoutDue(t *testing.T) {
	base := time.Unix(1000, 0)
	rec := func(off int64, at time.Duration) storage.Record {
		return storage.Record{Offset: off, Time: base.Add(at).UnixNano()}
	}
	recs := []storage.Record{rec(0, 0), rec(1, 100*time.Millisecond), rec(2, 50*time.Millisecond), rec(3, 300*time.Millisecond)}
	cases := []struct {
		name    string
		delay   time.Duration
		now     time.Time
		want    int
		wantDue time.Time
	}{
		{"no delay: all", 0, base, 4, time.Time{}},
		{"none due yet", time.Second, base, 0, base.Add(time.Second)},
		{"a prefix", time.Second, base.Add(1100 * time.Millisecond), 3, base.Add(1300 * time.Millisecond)},
		{"a record stepping back in time never lets the cursor pass one not due", time.Second, base.Add(1060 * time.Millisecond), 1, base.Add(1100 * time.Millisecond)},
		{"all due", time.Second, base.Add(2 * time.Second), 4, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n, due := duePrefix(recs, c.delay, c.now)
			if n != c.want || !due.Equal(c.wantDue) {
				t.Fatalf("got %d due, next at %v; want %d, %v", n, due, c.want, c.wantDue)
			}
		})
	}
}

func TestFanoutGroupsKeepEachKeyOnItsPartitionInOffsetOrder(t *testing.T) {
	var recs []storage.Record
	for i := range 40 {
		recs = append(recs, storage.Record{Offset: int64(i), Key: fmt.Appendf(nil, "k%d", i%7), Body: fmt.Appendf(nil, "b%d", i)})
	}
	recs[5].Corrupt, recs[5].Key, recs[5].Body = true, nil, nil
	groups := groupRecords(recs, 5, fnv32a)
	seen := 0
	for _, g := range groups {
		last := int64(-1)
		for _, r := range g.records {
			if got := fnv32a(string(r.Key), 5); got != g.partition {
				t.Fatalf("key %s in group %d, want %d", r.Key, g.partition, got)
			}
			if int64(r.Seq) <= last {
				t.Fatalf("group %d: offset %d after %d", g.partition, r.Seq, last)
			}
			last = int64(r.Seq)
			if want := fmt.Sprintf("b%d", r.Seq); string(r.Body) != want {
				t.Fatalf("offset %d carries %q, want %q", r.Seq, r.Body, want)
			}
			seen++
		}
	}
	if seen != 39 {
		t.Fatalf("records grouped: got %d, want 39 (40 less the corrupt one)", seen)
	}
}

func BenchmarkFanoutGroups(b *testing.B) {
	recs := make([]storage.Record, 256)
	for i := range recs {
		recs[i] = storage.Record{Offset: int64(i), Key: fmt.Appendf(nil, "key-%d", i), Body: make([]byte, 1024)}
	}
	b.ReportAllocs()
	for b.Loop() {
		groupRecords(recs, 12, fnv32a)
	}
}

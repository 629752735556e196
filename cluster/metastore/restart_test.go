//go:build !noraft

package metastore

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/naradmq/narad/messages"
)

// allAssignments lists every assignment on s, for comparing replicas.
func allAssignments(s *Store) []messages.Assignment {
	var out []messages.Assignment
	for _, f := range s.assign {
		f.view(func(st *assignState) { out = append(out, st.all()...) })
	}
	sortAssignments(out)
	return out
}

// TestRestartRecoversFromSnapshotAndLog proposes a few hundred commands with
// snapshots every 20 entries, closes the NodeHost, reopens the same
// directory at the same address, and finds every topic and assignment back:
// each shard restored a snapshot and replayed the log after it.
func TestRestartRecoversFromSnapshotAndLog(t *testing.T) {
	ctx := guardCtx(t)
	cfg := Config{
		NodeID:             "n1",
		ReplicaID:          1,
		RaftAddr:           freeAddr(t),
		Dir:                t.TempDir(),
		RTTMillisecond:     1,
		ElectionRTT:        10,
		HeartbeatRTT:       1,
		SnapshotEntries:    20,
		CompactionOverhead: 5,
	}
	s, err := Open(cfg, testLog)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := s.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady: %v", err)
	}

	proposals := 0
	nodes := []string{"n1", "n2", "n3"}
	for i := range 30 {
		topic, err := s.CreateTopic(ctx, messages.Topic{Name: fmt.Sprintf("t%02d", i), Partitions: 8, CreatedAt: int64(i)})
		if err != nil {
			t.Fatalf("CreateTopic t%02d: %v", i, err)
		}
		if _, err := s.AlterTopic(ctx, messages.AlterTopic{Name: topic.Name, RetentionMs: ptr(int64(i * 1000))}); err != nil {
			t.Fatalf("AlterTopic t%02d: %v", i, err)
		}
		proposals += 2
		var as []messages.Assignment
		for p := range topic.Partitions {
			as = append(as, messages.Assignment{Topic: topic.Name, Incarnation: topic.Incarnation, Partition: p, Owner: nodes[p%3]})
		}
		if err := s.PutAssignments(ctx, as); err != nil {
			t.Fatalf("PutAssignments t%02d: %v", i, err)
		}
		proposals++ // at least one, one per shard touched
		for p := range 2 {
			from, to := nodes[p%3], nodes[(p+1)%3]
			if r, err := s.SetTarget(ctx, messages.SetTarget{Incarnation: topic.Incarnation, Partition: p, Owner: from, To: to}); err != nil || r.Code != messages.ResultOK {
				t.Fatalf("SetTarget t%02d/%d: got (%+v, %v), want OK", i, p, r, err)
			}
			if r, err := s.Flip(ctx, messages.Flip{Incarnation: topic.Incarnation, Partition: p, From: from, To: to}); err != nil || r.Code != messages.ResultOK {
				t.Fatalf("Flip t%02d/%d: got (%+v, %v), want OK", i, p, r, err)
			}
			proposals += 2
		}
	}
	if proposals < 200 {
		t.Fatalf("proposals: got %d, want at least 200", proposals)
	}
	wantTopics, wantAssignments, wantVersion := s.Topics(), allAssignments(s), s.Version()
	if len(wantTopics) != 30 || len(wantAssignments) != 240 {
		t.Fatalf("before restart: got %d topics and %d assignments, want 30 and 240", len(wantTopics), len(wantAssignments))
	}
	for _, shard := range s.Shards() {
		lr, err := s.nh.GetLogReader(shard)
		if err != nil {
			t.Fatal(err)
		}
		if snap := lr.Snapshot(); snap.Index == 0 {
			t.Errorf("shard %d before restart: got no snapshot, want one every 20 entries", shard)
		}
	}
	s.Close()

	r, err := Open(cfg, testLog)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer r.Close()
	if err := r.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady after reopen: %v", err)
	}
	if got := r.Topics(); !reflect.DeepEqual(got, wantTopics) {
		t.Errorf("topics after restart: got %d, want %d equal records", len(got), len(wantTopics))
	}
	if got := allAssignments(r); !reflect.DeepEqual(got, wantAssignments) {
		t.Errorf("assignments after restart: got %d, want %d equal records", len(got), len(wantAssignments))
	}
	if got := r.Version(); got != wantVersion {
		t.Errorf("Version after restart: got %d, want %d (same applied indexes)", got, wantVersion)
	}
	if got := r.meta.restores.Load(); got < 1 {
		t.Errorf("metadata shard snapshot restores: got %d, want at least 1", got)
	}
	for _, f := range r.assign {
		if got := f.restores.Load(); got < 1 {
			t.Errorf("assignment shard %d snapshot restores: got %d, want at least 1", f.shard, got)
		}
	}
	// The reopened replica keeps working.
	if _, err := r.CreateTopic(ctx, messages.Topic{Name: "after", Partitions: 1}); err != nil {
		t.Errorf("CreateTopic after restart: %v", err)
	}
}

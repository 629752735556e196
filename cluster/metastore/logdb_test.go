//go:build !noraft

package metastore

import (
	"path/filepath"
	"testing"

	"github.com/naradmq/narad/messages"
)

// A Raft directory keeps the LogDB instances it was made with: Dragonboat
// refuses to open it with another count, so a node made before the
// default changed must still start.
func TestReopenKeepsTheLogDBCountADirWasMadeWith(t *testing.T) {
	ctx := guardCtx(t)
	cfg := Config{NodeID: "n1", ReplicaID: 1, RaftAddr: freeAddr(t), Dir: t.TempDir(),
		RTTMillisecond: 1, ElectionRTT: 10, HeartbeatRTT: 1, LogDBShards: 3}
	s := openReady(t, ctx, cfg)
	if _, err := s.CreateTopic(ctx, messages.Topic{Name: "kept", Partitions: 3, CreatedAt: 1}); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	s.Close()
	if got, _ := logDBShardsIn(cfg.Dir); got != 3 {
		t.Fatalf("LogDB instances made: got %d, want 3", got)
	}

	cfg.LogDBShards = 0 // the default, 1
	again := openReady(t, ctx, cfg)
	if _, ok := again.Topic("kept"); !ok {
		t.Errorf("topic after reopening with the default LogDB count: got none, want kept")
	}
	if got, _ := logDBShardsIn(cfg.Dir); got != 3 {
		t.Errorf("LogDB instances after reopening: got %d, want 3", got)
	}
}

// A new directory gets the configured count, by default one instance.
func TestNewDirGetsOneLogDB(t *testing.T) {
	ctx := guardCtx(t)
	cfg := Config{NodeID: "n1", ReplicaID: 1, RaftAddr: freeAddr(t), Dir: filepath.Join(t.TempDir(), "raft"),
		RTTMillisecond: 1, ElectionRTT: 10, HeartbeatRTT: 1}
	openReady(t, ctx, cfg)
	if got, _ := logDBShardsIn(cfg.Dir); got != DefaultLogDBShards {
		t.Errorf("LogDB instances of a new dir: got %d, want %d", got, DefaultLogDBShards)
	}
}

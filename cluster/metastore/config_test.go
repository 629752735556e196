package metastore

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{NodeID: "n1", ReplicaID: 1, RaftAddr: "127.0.0.1:7001", Dir: "/tmp/x"}
}

func TestConfigDefaults(t *testing.T) {
	c := validConfig().WithDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate of the defaults: got %v, want nil", err)
	}
	if c.AssignmentShards != DefaultAssignmentShards || c.RTTMillisecond != DefaultRTTMillisecond ||
		c.ElectionRTT != DefaultElectionRTT || c.HeartbeatRTT != DefaultHeartbeatRTT ||
		c.SnapshotEntries != DefaultSnapshotEntries || c.CompactionOverhead != DefaultCompactionOverhead ||
		c.ProposalTimeout != DefaultProposalTimeout {
		t.Errorf("defaults: got %+v", c)
	}
	if got := c.InitialMembers; len(got) != 1 || got[1] != "127.0.0.1:7001" {
		t.Errorf("InitialMembers: got %v, want map[1:127.0.0.1:7001]", got)
	}
	mem := Config{NodeID: "n1", ReplicaID: 1, RaftAddr: "a:1", InMemory: true}.WithDefaults()
	if mem.Dir == "" {
		t.Errorf("in-memory Dir: got empty, want a default")
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no node id", func(c *Config) { c.NodeID = "" }, "NodeID is empty"},
		{"replica id 0", func(c *Config) { c.ReplicaID = 0 }, "ReplicaID is 0"},
		{"no raft address", func(c *Config) { c.RaftAddr = "" }, "RaftAddr is empty"},
		{"no dir on disk", func(c *Config) { c.Dir = "" }, "Dir is empty"},
		{"self missing from members", func(c *Config) { c.InitialMembers = map[uint64]string{2: "b:1", 3: "c:1"} }, "InitialMembers[1]"},
		{"self at another address", func(c *Config) { c.InitialMembers = map[uint64]string{1: "x:1"} }, "want RaftAddr"},
		{"shared address", func(c *Config) {
			c.InitialMembers = map[uint64]string{1: c.RaftAddr, 2: "b:1", 3: "b:1"}
		}, "share address"},
		{"negative shards", func(c *Config) { c.AssignmentShards = -1 }, "AssignmentShards is -1"},
		{"election too short", func(c *Config) { c.ElectionRTT, c.HeartbeatRTT = 4, 2 }, "ElectionRTT 4"},
		{"overhead above snapshot", func(c *Config) { c.SnapshotEntries, c.CompactionOverhead = 10, 10 }, "CompactionOverhead 10"},
		{"timeout below a tick", func(c *Config) { c.ProposalTimeout = time.Microsecond }, "ProposalTimeout"},
		{"raft tls without a key", func(c *Config) { c.TLSCAFile, c.TLSCertFile = "ca.pem", "n1.pem" }, "want all three or none"},
		{"raft tls key only", func(c *Config) { c.TLSKeyFile = "n1.key" }, "TLSKeyFile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.change(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate: got %v, want an ErrInvalid mentioning %q", err, tt.want)
			}
		})
	}
}

func TestAssignmentShard(t *testing.T) {
	const k = 4
	counts := map[uint64]int{}
	for inc := uint64(1); inc <= 10; inc++ {
		for p := range 1000 {
			got := AssignmentShard(inc, p, k)
			var b [16]byte
			binary.BigEndian.PutUint64(b[:8], inc)
			binary.BigEndian.PutUint64(b[8:], uint64(p))
			h := fnv.New64a()
			h.Write(b[:])
			if want := 2 + h.Sum64()%k; got != want {
				t.Fatalf("AssignmentShard(%d, %d, %d): got %d, want %d", inc, p, k, got, want)
			}
			counts[got]++
		}
	}
	// 10,000 partitions over 4 shards: each within 10% of 2,500.
	for shard := uint64(2); shard < 2+k; shard++ {
		if counts[shard] < 2250 || counts[shard] > 2750 {
			t.Errorf("shard %d holds %d of 10000 partitions, want about 2500", shard, counts[shard])
		}
	}
	if got := AssignmentShard(5, 5, 0); got != 2 {
		t.Errorf("AssignmentShard with k 0: got %d, want 2", got)
	}
	if got := shardIDs(3); len(got) != 4 || got[0] != MetaShard || got[3] != 4 {
		t.Errorf("shardIDs(3): got %v, want [1 2 3 4]", got)
	}
}

package metastore

import "encoding/binary"

// MetaShard is the Raft shard id of the metadata shard (topics; members
// later). The assignment shards are 2 .. K+1.
const MetaShard uint64 = 1

// firstAssignmentShard is the shard id of assignment shard index 0.
const firstAssignmentShard uint64 = 2

// FNV-1a 64 parameters.
const (
	fnvOffset64 = 14695981039346656037
	fnvPrime64  = 1099511628211
)

// AssignmentShard returns the Raft shard id (2 .. k+1) holding the
// assignment of (incarnation, partition): FNV-1a 64 of the two as
// big-endian uint64s, modulo k. Every node must use the same k for the life
// of the cluster. A k below 1 is treated as 1.
func AssignmentShard(incarnation uint64, partition int, k int) uint64 {
	if k < 1 {
		k = 1
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], incarnation)
	binary.BigEndian.PutUint64(b[8:], uint64(partition))
	h := uint64(fnvOffset64)
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime64
	}
	return firstAssignmentShard + h%uint64(k)
}

// shardIDs returns every shard id of a cluster with k assignment shards,
// the metadata shard first.
func shardIDs(k int) []uint64 {
	ids := make([]uint64, 0, k+1)
	ids = append(ids, MetaShard)
	for i := range k {
		ids = append(ids, firstAssignmentShard+uint64(i))
	}
	return ids
}

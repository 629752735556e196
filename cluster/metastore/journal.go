package metastore

// ownerJournalLen bounds each assignment shard's journal of owner changes.
// A reader that falls further behind than this (a node that was busy while
// a bulk move flipped more than this many partitions of one shard) reads
// the shard whole instead, which is what every reader did before the
// journal: the bound costs a slow pass, never a missed change. 16,384
// partition keys are 256 KiB per shard.
const ownerJournalLen = 1 << 14

// ownerJournal is a ring of the partitions whose owner changed (created,
// flipped, deleted) in one assignment shard, in apply order. Like the owner
// and target indexes it is derived from the applied entries and never
// snapshotted; a restore starts an empty one.
type ownerJournal struct {
	ring []partKey
	// seq counts the changes appended since this state was made.
	seq uint64
}

func (j *ownerJournal) add(k partKey) {
	if j.ring == nil {
		j.ring = make([]partKey, ownerJournalLen)
	}
	j.ring[j.seq%ownerJournalLen] = k
	j.seq++
}

// since calls fn with every change after the first seq ones, oldest first,
// and reports false (calling fn with none) when the ring no longer holds
// them all or seq is past what was appended.
func (j *ownerJournal) since(seq uint64, fn func(partKey)) bool {
	if seq > j.seq || j.seq-seq > ownerJournalLen {
		return false
	}
	for i := seq; i < j.seq; i++ {
		fn(j.ring[i%ownerJournalLen])
	}
	return true
}

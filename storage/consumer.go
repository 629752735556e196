package storage

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// ConsumerState is a partition's consumer progress: what the consumers have
// acked, in the compact form that survives a restart and travels with a move.
//
// The zero value is NOT the empty state: Frontier 0 says offset 0 is acked.
// Start from EmptyConsumerState.
type ConsumerState struct {
	// Frontier is the committed consumer offset: every offset <= Frontier is
	// acked. -1 means nothing is acked yet.
	Frontier int64
	// AckedAhead holds the offsets acked out of order: ascending, without
	// duplicates, each > Frontier+1 (Frontier+1 itself would have advanced
	// the frontier). Its length is bounded by the topic's
	// max_acked_ahead_per_partition, which the partition enforces when it
	// leases; the storage only refuses what its own limits cannot hold.
	AckedAhead []int64
	// Recent are the receipt handles acked last, oldest first, at most
	// consumerRecentLimit: each offset is acked (<= Frontier or in
	// AckedAhead). They let a restarted owner answer a retried ack of a
	// handle its previous life applied with 204 instead of 410: the retry
	// of an ack whose answer died with the process.
	Recent []AckedHandle
	// Leases are the receipt handles out when the state was written,
	// ascending by offset, at most consumerLeaseLimit, each on an offset
	// not acked. They let a restarted owner keep a record its previous
	// life leased from another consumer while the holder retries its ack
	// against the new life, instead of redelivering it at once: the
	// duplicate a crash costs. A move never carries them (rule K5).
	Leases []Lease
}

// Lease is one receipt handle out: its record's offset, its nonce and the
// lease's length, which a restarted owner grants again from its start.
type Lease struct {
	Offset     int64
	Nonce      uint64
	Visibility time.Duration
}

// AckedHandle is one receipt handle a consumer acked: its record's offset
// and its lease's nonce.
type AckedHandle struct {
	Offset int64
	Nonce  uint64
}

// EmptyConsumerState is the state of a partition no consumer has acked in.
func EmptyConsumerState() ConsumerState {
	return ConsumerState{Frontier: -1}
}

// Ack marks offset as acked and reports whether that changed the state. An
// ack of Frontier+1 advances the frontier through every contiguous offset
// already in AckedAhead, so AckedAhead only ever holds true gaps. Acks of
// negative or already-acked offsets are no-ops: redelivery makes duplicate
// acks normal. A lease on offset ends with its ack.
func (s *ConsumerState) Ack(offset int64) bool {
	if offset <= s.Frontier || offset < 0 {
		return false
	}
	if i, found := slices.BinarySearchFunc(s.Leases, offset, func(l Lease, o int64) int { return cmp.Compare(l.Offset, o) }); found {
		s.Leases = slices.Delete(s.Leases, i, i+1)
	}
	if offset-1 > s.Frontier {
		i, found := slices.BinarySearch(s.AckedAhead, offset)
		if found {
			return false
		}
		s.AckedAhead = slices.Insert(s.AckedAhead, i, offset)
		return true
	}
	s.Frontier = offset
	n := 0
	for n < len(s.AckedAhead) && s.AckedAhead[n]-1 == s.Frontier {
		s.Frontier = s.AckedAhead[n]
		n++
	}
	s.AckedAhead = slices.Delete(s.AckedAhead, 0, n)
	return true
}

// IsAcked reports whether offset has been acked.
func (s ConsumerState) IsAcked(offset int64) bool {
	if offset <= s.Frontier {
		return offset >= 0
	}
	_, found := slices.BinarySearch(s.AckedAhead, offset)
	return found
}

// Clone returns a copy that shares no memory with s, so a caller may keep
// acking into s while the copy is being persisted.
func (s ConsumerState) Clone() ConsumerState {
	return ConsumerState{Frontier: s.Frontier, AckedAhead: slices.Clone(s.AckedAhead), Recent: slices.Clone(s.Recent), Leases: slices.Clone(s.Leases)}
}

// Equal reports whether s and o describe the same acks, handles and leases.
// A nil and an empty AckedAhead (or Recent, or Leases) are equal.
func (s ConsumerState) Equal(o ConsumerState) bool {
	return s.Frontier == o.Frontier && slices.Equal(s.AckedAhead, o.AckedAhead) &&
		slices.Equal(s.Recent, o.Recent) && slices.Equal(s.Leases, o.Leases)
}

// Validate checks the invariants the encoding and Ack rely on. A state that
// arrived from elsewhere (a move's transfer info) must pass it before use.
func (s ConsumerState) Validate() error {
	if s.Frontier < -1 {
		return fmt.Errorf("consumer state: frontier %d below -1: %w", s.Frontier, ErrInvalid)
	}
	if len(s.AckedAhead) > consumerAckedAheadLimit {
		return fmt.Errorf("consumer state: %d acked-ahead entries, limit %d: %w",
			len(s.AckedAhead), consumerAckedAheadLimit, ErrTooLarge)
	}
	for i, o := range s.AckedAhead {
		// Written as o-1 > Frontier, not o > Frontier+1, which overflows at
		// the top of the range; o > Frontier >= -1 keeps o-1 in range.
		if i == 0 && (o <= s.Frontier || o-1 <= s.Frontier) {
			return fmt.Errorf("consumer state: acked-ahead[0] = %d not above frontier+1 (frontier %d): %w",
				o, s.Frontier, ErrInvalid)
		}
		if i > 0 && o <= s.AckedAhead[i-1] {
			return fmt.Errorf("consumer state: acked-ahead[%d] = %d not above acked-ahead[%d] = %d: %w",
				i, o, i-1, s.AckedAhead[i-1], ErrInvalid)
		}
	}
	if len(s.Recent) > consumerRecentLimit {
		return fmt.Errorf("consumer state: %d recent handles, limit %d: %w", len(s.Recent), consumerRecentLimit, ErrTooLarge)
	}
	for i, h := range s.Recent {
		if !s.IsAcked(h.Offset) {
			return fmt.Errorf("consumer state: recent handle %d at offset %d, which is not acked: %w", i, h.Offset, ErrInvalid)
		}
	}
	if len(s.Leases) > consumerLeaseLimit {
		return fmt.Errorf("consumer state: %d leases, limit %d: %w", len(s.Leases), consumerLeaseLimit, ErrTooLarge)
	}
	for i, l := range s.Leases {
		switch {
		case i > 0 && l.Offset <= s.Leases[i-1].Offset:
			return fmt.Errorf("consumer state: lease[%d] at offset %d not above lease[%d] at %d: %w",
				i, l.Offset, i-1, s.Leases[i-1].Offset, ErrInvalid)
		case l.Offset < 0 || s.IsAcked(l.Offset):
			return fmt.Errorf("consumer state: lease %d at offset %d, which is acked or negative: %w", i, l.Offset, ErrInvalid)
		case l.Nonce == 0:
			// A handle with nonce 0 is refused by the API (§10); a
			// lease holding one could never be acked.
			return fmt.Errorf("consumer state: lease %d at offset %d has nonce 0: %w", i, l.Offset, ErrInvalid)
		case l.Visibility <= 0:
			return fmt.Errorf("consumer state: lease %d at offset %d has visibility %v: %w", i, l.Offset, l.Visibility, ErrInvalid)
		}
	}
	return nil
}

// ClampConsumerState fits a state received with a partition move to the
// destination's log, whose high watermark hwm may be lower than the source's
// was: nothing at or past hwm may count as acked, or records the destination
// later appends at those offsets would be skipped without delivery. It
// keeps only the recent handles whose offsets it still counts as acked, and
// only the leases below hwm (a move installs none: rule K5). It
// reports whether the frontier was lowered, which the caller logs as a
// warning (acked-ahead entries dropped at or past hwm are expected and not
// reported). s must be valid; a negative hwm is treated as 0. s is not
// modified.
func ClampConsumerState(s ConsumerState, hwm int64) (ConsumerState, bool) {
	hwm = max(hwm, 0)
	out := ConsumerState{Frontier: s.Frontier}
	clamped := false
	if out.Frontier > hwm-1 {
		out.Frontier = hwm - 1
		clamped = true
	}
	for _, o := range s.AckedAhead {
		if o < hwm && o-1 > out.Frontier {
			out.AckedAhead = append(out.AckedAhead, o)
		}
	}
	for _, h := range s.Recent {
		if out.IsAcked(h.Offset) {
			out.Recent = append(out.Recent, h)
		}
	}
	for _, l := range s.Leases {
		if l.Offset < hwm {
			out.Leases = append(out.Leases, l)
		}
	}
	return out, clamped
}

// ConsumerConfig tunes how consumer state reaches the disk. The partition
// actor owns the timers; these values tell it and the OffsetCommitter how
// often to act.
type ConsumerConfig struct {
	// FlushInterval is how often the partition calls OffsetCommitter.Flush.
	// It bounds what a process restart redelivers: acks newer than the last
	// flush are lost with the process.
	FlushInterval time.Duration
	// SyncInterval is how long a flushed state may stay without fsync. A
	// write without fsync survives a process crash (the page cache keeps
	// it); only the fsync covers power loss. A node with 10,000 partitions
	// cannot afford an fsync each per FlushInterval (100,000 fsyncs/s), so
	// a power loss may redeliver up to SyncInterval of acks instead.
	SyncInterval time.Duration
	// MaxAckedAheadEntries is the largest acked-ahead set the committer
	// persists (8 bytes each per slot write). It must cover the largest
	// max_acked_ahead_per_partition any topic may set; it exists so a bug
	// cannot turn every flush into a huge write.
	MaxAckedAheadEntries int
	// CursorReadAttempts is how many times a fan-out cursor reader reads a
	// file that fails its checksum before giving up. A reader only sees a
	// torn cursor while a writer is between the first and last byte of one
	// small write, so a few immediate re-reads suffice; a file still bad
	// after that is damaged, not in flight.
	CursorReadAttempts int
	// Faults, when not nil, fails the consumer state's writes or fsyncs
	// on purpose (a fault-injection run); the partition actor hands it to
	// its fan-out cursor writes too.
	Faults *Faults
	// FS is the file system of the consumer state's slots; nil is the
	// OS's. A crash test hands one that forgets what was not synced.
	FS FS
}

// Bounds for ConsumerConfig.Validate. They reject values that are surely
// mistakes, not values that are merely unusual.
const (
	// Below a millisecond the flush timer messages would crowd the actor's
	// mailbox for no gain in what a restart redelivers.
	consumerMinFlushInterval = time.Millisecond
	// Above a minute a routine restart redelivers more than any consumer
	// would call "at most the last interval".
	consumerMaxFlushInterval = time.Minute
	// Above ten minutes a power loss redelivers a backlog that looks like an
	// outage to the consumers.
	consumerMaxSyncInterval = 10 * time.Minute
	// More re-reads than this without a pause only spin; a writer finishes
	// a small write long before.
	consumerMaxCursorReadAttempts = 1000
)

// consumerAckedAheadLimit is the format's hard ceiling on acked-ahead entries
// (32 MiB of offsets). It is a constant, not a config field, because the
// decoder must bound its allocation on arbitrary bytes without being told a
// config; MaxAckedAheadEntries may be set anywhere up to it.
const consumerAckedAheadLimit = 1 << 22

// DefaultConsumerConfig returns the defaults a node starts with.
func DefaultConsumerConfig() ConsumerConfig {
	return ConsumerConfig{
		FlushInterval:        100 * time.Millisecond,
		SyncInterval:         time.Second,
		MaxAckedAheadEntries: 1 << 20,
		CursorReadAttempts:   8,
	}
}

// Validate reports the first bad field, wrapping ErrInvalid.
func (c ConsumerConfig) Validate() error {
	switch {
	case c.FlushInterval < consumerMinFlushInterval || c.FlushInterval > consumerMaxFlushInterval:
		return fmt.Errorf("consumer config: FlushInterval %v outside [%v, %v]: %w",
			c.FlushInterval, consumerMinFlushInterval, consumerMaxFlushInterval, ErrInvalid)
	case c.SyncInterval < c.FlushInterval || c.SyncInterval > consumerMaxSyncInterval:
		// Syncs only happen at flushes, so a shorter SyncInterval would
		// promise a durability the committer cannot deliver.
		return fmt.Errorf("consumer config: SyncInterval %v outside [FlushInterval %v, %v]: %w",
			c.SyncInterval, c.FlushInterval, consumerMaxSyncInterval, ErrInvalid)
	case c.MaxAckedAheadEntries < 1 || c.MaxAckedAheadEntries > consumerAckedAheadLimit:
		return fmt.Errorf("consumer config: MaxAckedAheadEntries %d outside [1, %d]: %w",
			c.MaxAckedAheadEntries, consumerAckedAheadLimit, ErrInvalid)
	case c.CursorReadAttempts < 1 || c.CursorReadAttempts > consumerMaxCursorReadAttempts:
		return fmt.Errorf("consumer config: CursorReadAttempts %d outside [1, %d]: %w",
			c.CursorReadAttempts, consumerMaxCursorReadAttempts, ErrInvalid)
	}
	return nil
}

// A slot record, big-endian:
//
//	off  size  field
//	0    4     magic "NCST"
//	4    2     version (1, or 2 with recent handles)
//	6    2     reserved, zero
//	8    8     seq: uint64 >= 1, the write's sequence; the newest valid slot wins
//	16   8     frontier: int64 >= -1
//	24   4     n: uint32 acked-ahead count <= consumerAckedAheadLimit
//	28   8*n   acked-ahead offsets: int64, strictly ascending, each > frontier+1
//	version 2 and 3:
//	     4     m: uint32 recent-handle count, 1..consumerRecentLimit
//	           (0..consumerRecentLimit in version 3)
//	     16*m  recent handles: offset int64, nonce uint64, each offset acked
//	version 3 only:
//	     4     k: uint32 lease count, 1..consumerLeaseLimit
//	     24*k  leases: offset int64, nonce uint64, visibility int64 ns;
//	           offsets strictly ascending, none acked
//	end  4     CRC-32C (Castagnoli) of every byte before it
//
// The length is exact: trailing bytes are corruption. A state with leases
// is written as version 3, one with recent handles and no lease as
// version 2, and one with neither as version 1, never as a version 2 with
// m = 0 or a version 3 with k = 0, so every record still has one encoding
// and a decode re-encodes to the same bytes; files written before version
// 2 or 3 load as they are.
const (
	consumerVersion       = 1
	consumerVersionRecent = 2
	consumerVersionLeases = 3
	consumerHeaderBytes   = 28
	consumerFixedBytes    = consumerHeaderBytes + 4
	consumerLeaseBytes    = 24
	consumerMaxRecord     = consumerFixedBytes + 8*consumerAckedAheadLimit + 4 + 16*consumerRecentLimit +
		4 + consumerLeaseBytes*consumerLeaseLimit
)

// consumerRecentLimit is the format's ceiling on recent handles (16 KiB of
// them). A partition writes as many as its config says, far fewer: only
// the acks in flight when a process dies are retried against its next life.
const consumerRecentLimit = 1024

// consumerLeaseLimit is the format's ceiling on leases (1.5 MiB of them). A
// partition writes as many as its config says (Config.LeasePersistedMax),
// far fewer; the ceiling bounds what a decoder allocates.
const consumerLeaseLimit = 1 << 16

var (
	consumerMagic = [4]byte{'N', 'C', 'S', 'T'}
	consumerCRC   = crc32.MakeTable(crc32.Castagnoli)
)

// appendConsumerState appends the slot record of s at sequence seq. s must
// be valid; the callers check.
func appendConsumerState(dst []byte, seq uint64, s ConsumerState) []byte {
	start := len(dst)
	dst = append(dst, consumerMagic[:]...)
	version := uint16(consumerVersion)
	switch {
	case len(s.Leases) > 0:
		version = consumerVersionLeases
	case len(s.Recent) > 0:
		version = consumerVersionRecent
	}
	dst = binary.BigEndian.AppendUint16(dst, version)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, seq)
	dst = binary.BigEndian.AppendUint64(dst, uint64(s.Frontier))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.AckedAhead)))
	for _, o := range s.AckedAhead {
		dst = binary.BigEndian.AppendUint64(dst, uint64(o))
	}
	if version >= consumerVersionRecent {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.Recent)))
		for _, h := range s.Recent {
			dst = binary.BigEndian.AppendUint64(dst, uint64(h.Offset))
			dst = binary.BigEndian.AppendUint64(dst, h.Nonce)
		}
	}
	if version == consumerVersionLeases {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.Leases)))
		for _, l := range s.Leases {
			dst = binary.BigEndian.AppendUint64(dst, uint64(l.Offset))
			dst = binary.BigEndian.AppendUint64(dst, l.Nonce)
			dst = binary.BigEndian.AppendUint64(dst, uint64(l.Visibility))
		}
	}
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], consumerCRC))
}

func encodeConsumerState(seq uint64, s ConsumerState) []byte {
	size := consumerFixedBytes + 8*len(s.AckedAhead) + 4 + 16*len(s.Recent) + 4 + consumerLeaseBytes*len(s.Leases)
	return appendConsumerState(make([]byte, 0, size), seq, s)
}

// decodeConsumerState parses one slot record. Every failure wraps
// ErrCorrupt; it checks lengths before it allocates and never panics.
func decodeConsumerState(b []byte) (uint64, ConsumerState, error) {
	fail := func(format string, args ...any) (uint64, ConsumerState, error) {
		return 0, ConsumerState{}, fmt.Errorf("consumer state: "+format+": %w", append(args, ErrCorrupt)...)
	}
	if len(b) < consumerFixedBytes {
		return fail("%d bytes, need at least %d", len(b), consumerFixedBytes)
	}
	if [4]byte(b[0:4]) != consumerMagic {
		return fail("bad magic %x", b[0:4])
	}
	n := binary.BigEndian.Uint32(b[24:28])
	if n > consumerAckedAheadLimit {
		return fail("%d acked-ahead entries, limit %d", n, consumerAckedAheadLimit)
	}
	version := binary.BigEndian.Uint16(b[4:6])
	if version < consumerVersion || version > consumerVersionLeases {
		return fail("version %d, want %d..%d", version, consumerVersion, consumerVersionLeases)
	}
	recentAt := consumerHeaderBytes + 8*uint64(n)
	want := consumerFixedBytes + 8*uint64(n)
	var m, k uint32
	if version >= consumerVersionRecent {
		if uint64(len(b)) < recentAt+4+4 {
			return fail("%d bytes, too short for version %d with %d acked-ahead entries", len(b), version, n)
		}
		m = binary.BigEndian.Uint32(b[recentAt:])
		least := uint32(1)
		if version == consumerVersionLeases {
			least = 0
		}
		if m < least || m > consumerRecentLimit {
			return fail("%d recent handles, want %d..%d", m, least, consumerRecentLimit)
		}
		want += 4 + 16*uint64(m)
	}
	leasesAt := want - 4
	if version == consumerVersionLeases {
		if uint64(len(b)) < leasesAt+4+4 {
			return fail("%d bytes, too short for version 3 with %d acked-ahead entries and %d recent handles", len(b), n, m)
		}
		k = binary.BigEndian.Uint32(b[leasesAt:])
		if k == 0 || k > consumerLeaseLimit {
			return fail("%d leases, want 1..%d", k, consumerLeaseLimit)
		}
		want += 4 + consumerLeaseBytes*uint64(k)
	}
	if uint64(len(b)) != want {
		return fail("%d bytes, header says %d", len(b), want)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, consumerCRC); got != sum {
		return fail("crc %08x, stored %08x", got, sum)
	}
	if r := binary.BigEndian.Uint16(b[6:8]); r != 0 {
		return fail("reserved field %d, want 0", r)
	}
	seq := binary.BigEndian.Uint64(b[8:16])
	if seq == 0 {
		return fail("sequence 0")
	}
	s := ConsumerState{Frontier: int64(binary.BigEndian.Uint64(b[16:24]))}
	if n > 0 {
		s.AckedAhead = make([]int64, n)
		for i := range s.AckedAhead {
			s.AckedAhead[i] = int64(binary.BigEndian.Uint64(b[consumerHeaderBytes+8*i:]))
		}
	}
	if m > 0 {
		s.Recent = make([]AckedHandle, m)
		for i := range s.Recent {
			at := recentAt + 4 + 16*uint64(i)
			s.Recent[i] = AckedHandle{Offset: int64(binary.BigEndian.Uint64(b[at:])), Nonce: binary.BigEndian.Uint64(b[at+8:])}
		}
	}
	if k > 0 {
		s.Leases = make([]Lease, k)
		for i := range s.Leases {
			at := leasesAt + 4 + consumerLeaseBytes*uint64(i)
			s.Leases[i] = Lease{Offset: int64(binary.BigEndian.Uint64(b[at:])), Nonce: binary.BigEndian.Uint64(b[at+8:]),
				Visibility: time.Duration(binary.BigEndian.Uint64(b[at+16:]))}
		}
	}
	if err := s.Validate(); err != nil {
		return fail("%v", err)
	}
	return seq, s, nil
}

// Consumer state lives in consumerSlotCount slot files, each overwritten in
// place, never renamed. Why not write-tmp-and-rename: every flush would then
// pay a create, a rename and a directory fsync; at 10,000 partitions every
// 100 ms that is the dominant metadata load of the node. Overwriting in place
// can tear the slot being written, so the previous state must live in
// another slot: a load takes the valid slot with the highest sequence.
//
// Why three slots, not two: not every write is fsynced. With two
// alternating slots the second unsynced write after an fsync overwrites the
// fsynced slot, and a power loss can then tear both. With three, the slot
// holding the last fsynced state ("durable") is never written until another
// slot has been fsynced; unsynced writes alternate between the other two, so
// a process crash mid-write still finds the previous write in the third.
//
// A process cannot know which slot a previous process fsynced (a crash may
// leave unsynced writes in the page cache), so before its first overwrite it
// fsyncs the newest valid slot and the directory, which makes that slot its
// durable one.
const consumerSlotCount = 3

func consumerSlotPath(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("consumer-%d.state", i))
}

// consumerSlotInfo is what a scan learned about one slot file.
type consumerSlotInfo struct {
	exists bool
	size   int64
	seq    uint64 // 0 when the slot holds no valid record
	state  ConsumerState
}

// consumerScanSlots reads and decodes every slot. A slot that does not
// decode is reported with seq 0, not as an error: a torn slot is an expected
// outcome of a crash. I/O errors are returned, because guessing past an
// unreadable slot could hide the newest state.
func consumerScanSlots(fsys FS, dir string) ([consumerSlotCount]consumerSlotInfo, error) {
	var infos [consumerSlotCount]consumerSlotInfo
	for i := range infos {
		info, err := consumerReadSlot(fsys, consumerSlotPath(dir, i))
		if err != nil {
			return infos, err
		}
		infos[i] = info
	}
	return infos, nil
}

func consumerReadSlot(fsys FS, path string) (consumerSlotInfo, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return consumerSlotInfo{size: -1}, nil
	}
	if err != nil {
		return consumerSlotInfo{}, fmt.Errorf("open consumer slot %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return consumerSlotInfo{}, fmt.Errorf("stat consumer slot %s: %w", path, err)
	}
	info := consumerSlotInfo{exists: true, size: fi.Size()}
	if info.size < consumerFixedBytes || info.size > consumerMaxRecord {
		return info, nil
	}
	b := make([]byte, info.size)
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, info.size), b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return info, nil // shrank under us: not a valid record
		}
		return consumerSlotInfo{}, fmt.Errorf("read consumer slot %s: %w", path, err)
	}
	if seq, s, err := decodeConsumerState(b); err == nil {
		info.seq, info.state = seq, s
	}
	return info, nil
}

// LoadConsumerState returns the newest valid consumer state in dir. A
// partition that never saved one (no slot files, or only empty ones left by
// a crash right after creating them) gets EmptyConsumerState and no error.
// If slot files hold bytes but none is valid, it returns EmptyConsumerState
// with an error wrapping ErrCorrupt: redelivering everything is the safe
// fallback, but the caller must decide to take it (and say so in its log).
func LoadConsumerState(dir string) (ConsumerState, error) { return loadConsumerState(osFS{}, dir) }

// loadConsumerState is LoadConsumerState on fsys.
func loadConsumerState(fsys FS, dir string) (ConsumerState, error) {
	infos, err := consumerScanSlots(fsys, dir)
	if err != nil {
		return EmptyConsumerState(), err
	}
	best, damaged := -1, false
	for i, info := range infos {
		if info.seq == 0 {
			damaged = damaged || info.size > 0
			continue
		}
		if best < 0 || info.seq > infos[best].seq {
			best = i
		}
	}
	if best < 0 {
		if damaged {
			return EmptyConsumerState(), fmt.Errorf("load consumer state in %s: no slot holds a valid state: %w", dir, ErrCorrupt)
		}
		return EmptyConsumerState(), nil
	}
	return infos[best].state, nil
}

// SaveConsumerState writes s to dir. With sync it returns only once s
// survives power loss; without, it survives a process crash. Either way a
// crash mid-write leaves the previous state loadable.
//
// It keeps no memory between calls, so each call rescans the slots and,
// before overwriting one, fsyncs the newest (see consumerSlotCount): even
// without sync a call costs an fsync, of the previous state. The periodic
// flush path is OffsetCommitter, which remembers which slot is durable.
func SaveConsumerState(dir string, s ConsumerState, sync bool) error {
	return saveConsumerState(osFS{}, dir, s, sync)
}

// saveConsumerState is SaveConsumerState on fsys.
func saveConsumerState(fsys FS, dir string, s ConsumerState, sync bool) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("save consumer state in %s: %w", dir, err)
	}
	slots := newConsumerSlots(fsys, dir, nil)
	return slots.write(s, sync)
}

// consumerSlots is the writer's view of the slot files: which slot holds
// the last write, which holds the last fsynced write, and the sizes and
// sequences it has put there, so steady-state writes need no reads.
type consumerSlots struct {
	fs       FS
	dir      string
	prepared bool // scanned and made the newest slot durable
	seq      [consumerSlotCount]uint64
	size     [consumerSlotCount]int64 // -1: no file
	// nameSynced says the directory entry of the slot is durable; a slot
	// whose name is not may vanish on power loss along with its data.
	nameSynced [consumerSlotCount]bool
	last       int // slot of the newest complete write, -1 none
	durable    int // slot of the newest fsynced write, -1 none
	nextSeq    uint64
	buf        []byte

	// syncFile is f.Sync under faults; tests replace it to count or to
	// model power loss.
	syncFile  func(f File) error
	faults    *Faults
	fileSyncs int
	writes    int
}

func newConsumerSlots(fsys FS, dir string, faults *Faults) *consumerSlots {
	return &consumerSlots{
		fs:       orOS(fsys),
		dir:      dir,
		last:     -1,
		durable:  -1,
		syncFile: func(f File) error { return faults.sync(f) },
		faults:   faults,
	}
}

// prepare scans the slots and makes the newest valid one durable before the
// first overwrite, so that whatever this process writes next, one fsynced
// state stays untouched.
func (c *consumerSlots) prepare() error {
	infos, err := consumerScanSlots(c.fs, c.dir)
	if err != nil {
		return err
	}
	// A failed prepare is retried from scratch by the next write.
	c.last, c.durable, c.nextSeq = -1, -1, 0
	exist := false
	for i, info := range infos {
		c.seq[i], c.size[i] = info.seq, info.size
		exist = exist || info.exists
		if info.seq > 0 && (c.last < 0 || info.seq > c.seq[c.last]) {
			c.last = i
		}
		c.nextSeq = max(c.nextSeq, info.seq)
	}
	c.nextSeq++
	if exist {
		if err := c.faults.syncDir(c.fs, c.dir); err != nil {
			return err
		}
		for i := range c.nameSynced {
			c.nameSynced[i] = c.size[i] >= 0
		}
	} else if err := c.faults.mkdirAllSync(c.fs, c.dir); err != nil {
		// First state of this partition: its directory may be new too.
		return err
	}
	if c.last >= 0 {
		if err := c.syncSlot(c.last); err != nil {
			return err
		}
	}
	c.durable = c.last
	c.prepared = true
	return nil
}

// target picks the slot to overwrite: never the newest write (a crash now
// must find it) and never the durable one (a power loss now must find it);
// of the rest, the oldest.
func (c *consumerSlots) target() int {
	t := -1
	for i := range consumerSlotCount {
		if i == c.last || i == c.durable {
			continue
		}
		if t < 0 || c.seq[i] < c.seq[t] {
			t = i
		}
	}
	return t
}

// write stores s (which must be valid) in a fresh slot, fsyncing it if sync.
func (c *consumerSlots) write(s ConsumerState, sync bool) error {
	if !c.prepared {
		if err := c.prepare(); err != nil {
			return err
		}
	}
	t := c.target()
	seq := c.nextSeq
	c.nextSeq++
	c.buf = appendConsumerState(c.buf[:0], seq, s)
	// Until the write is known complete the slot's old record is gone.
	c.seq[t] = 0
	if err := c.writeSlot(t, c.buf, sync); err != nil {
		// The file's size and whether its name exists are now unknown:
		// make the next write truncate and sync the directory.
		c.size[t], c.nameSynced[t] = consumerMaxRecord+1, false
		return err
	}
	c.seq[t] = seq
	c.last = t
	if sync {
		c.durable = t
	}
	return nil
}

func (c *consumerSlots) writeSlot(i int, data []byte, sync bool) error {
	path := consumerSlotPath(c.dir, i)
	if c.size[i] < 0 {
		c.nameSynced[i] = false
	}
	// No O_TRUNC: ext4 flushes a file truncated to zero and rewritten on
	// close (auto_da_alloc), which would turn every flush into a sync write.
	f, err := c.fs.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open consumer slot %s: %w", path, err)
	}
	c.writes++
	if _, err := c.faults.writeAt(f, data, 0); err != nil {
		f.Close()
		return fmt.Errorf("write consumer slot %s: %w", path, err)
	}
	if c.size[i] > int64(len(data)) {
		// A crash before this truncate leaves trailing bytes, which the
		// exact-length check rejects: the write counts as not done.
		if err := f.Truncate(int64(len(data))); err != nil {
			f.Close()
			return fmt.Errorf("truncate consumer slot %s: %w", path, err)
		}
	}
	c.size[i] = int64(len(data))
	if sync {
		if err := c.syncOpen(f, i); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close consumer slot %s: %w", path, err)
	}
	return nil
}

// syncLast fsyncs the newest write if it is not yet durable, so an idle
// partition's last acks do not stay exposed to power loss indefinitely.
func (c *consumerSlots) syncLast() error {
	if c.last < 0 || c.last == c.durable {
		return nil
	}
	if err := c.syncSlot(c.last); err != nil {
		return err
	}
	c.durable = c.last
	return nil
}

func (c *consumerSlots) unsynced() bool {
	return c.last >= 0 && c.last != c.durable
}

func (c *consumerSlots) syncSlot(i int) error {
	path := consumerSlotPath(c.dir, i)
	f, err := c.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("open consumer slot %s for sync: %w", path, err)
	}
	err = c.syncOpen(f, i)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close consumer slot %s: %w", path, cerr)
	}
	return err
}

func (c *consumerSlots) syncOpen(f File, i int) error {
	c.fileSyncs++
	if err := c.syncFile(f); err != nil {
		return fmt.Errorf("sync consumer slot %s: %w", f.Name(), err)
	}
	if c.nameSynced[i] {
		return nil
	}
	if err := c.faults.syncDir(c.fs, c.dir); err != nil {
		return err
	}
	for j := range c.nameSynced {
		c.nameSynced[j] = c.size[j] >= 0
	}
	return nil
}

// OffsetCommitter persists a partition's consumer state on the partition
// actor's timer: the actor calls Update as acks arrive (or once per tick)
// and Flush every FlushInterval, passing the time; the committer decides
// whether to write and whether to fsync. It starts no goroutine, reads no
// clock, and is not safe for concurrent use: it belongs to one actor.
//
// Open a partition with LoadConsumerState, then NewOffsetCommitter on the
// same dir; the committer only touches the disk on its first write.
type OffsetCommitter struct {
	cfg           ConsumerConfig
	slots         *consumerSlots
	pending       ConsumerState // latest from Update; owned copy
	written       ConsumerState // last state written; owned copy
	hasWritten    bool
	dirty         bool
	lastSync      time.Time
	hasSynced     bool
	syncedFlushes int
}

// NewOffsetCommitter returns a committer for the consumer state in dir. It
// validates cfg and does no I/O.
func NewOffsetCommitter(dir string, cfg ConsumerConfig) (*OffsetCommitter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("offset committer for %s: %w", dir, err)
	}
	return &OffsetCommitter{cfg: cfg, slots: newConsumerSlots(cfg.FS, dir, cfg.Faults)}, nil
}

// Update remembers s as the state to write at the next flush. It copies s,
// so the caller may keep acking into it. A state equal to the last one
// written leaves nothing to flush.
func (c *OffsetCommitter) Update(s ConsumerState) {
	c.pending.Frontier = s.Frontier
	c.pending.AckedAhead = append(c.pending.AckedAhead[:0], s.AckedAhead...)
	c.pending.Recent = append(c.pending.Recent[:0], s.Recent...)
	c.pending.Leases = append(c.pending.Leases[:0], s.Leases...)
	c.dirty = !c.hasWritten || !c.pending.Equal(c.written)
}

// Flush writes the latest state if it changed since the last write, and
// fsyncs when SyncInterval has passed since the last fsync (the first flush
// always fsyncs). A partition with no new acks but an unsynced last write
// gets the fsync without a write once it is due. wrote reports a write. On
// error the state stays pending and the next Flush tries again.
func (c *OffsetCommitter) Flush(now time.Time) (wrote bool, err error) {
	// A clock that went backwards cannot tell us the interval passed; syncing
	// early is the safe side.
	due := !c.hasSynced || now.Sub(c.lastSync) >= c.cfg.SyncInterval || now.Before(c.lastSync)
	if !c.dirty {
		if !due || !c.slots.unsynced() {
			return false, nil
		}
		if err := c.slots.syncLast(); err != nil {
			return false, fmt.Errorf("flush consumer state: %w", err)
		}
		c.noteSync(now)
		return false, nil
	}
	if err := c.writePending(due); err != nil {
		return false, err
	}
	if due {
		c.noteSync(now)
	}
	return true, nil
}

// FlushSync writes the latest state if it changed and makes it durable, for
// a clean shutdown or before handing the partition away.
func (c *OffsetCommitter) FlushSync() error {
	if c.dirty {
		return c.writePending(true)
	}
	if err := c.slots.syncLast(); err != nil {
		return fmt.Errorf("flush consumer state: %w", err)
	}
	return nil
}

func (c *OffsetCommitter) noteSync(now time.Time) {
	c.lastSync, c.hasSynced = now, true
	c.syncedFlushes++
}

func (c *OffsetCommitter) writePending(sync bool) error {
	if n := len(c.pending.AckedAhead); n > c.cfg.MaxAckedAheadEntries {
		return fmt.Errorf("flush consumer state in %s: %d acked-ahead entries, MaxAckedAheadEntries %d: %w",
			c.slots.dir, n, c.cfg.MaxAckedAheadEntries, ErrTooLarge)
	}
	if err := c.pending.Validate(); err != nil {
		return fmt.Errorf("flush consumer state in %s: %w", c.slots.dir, err)
	}
	if err := c.slots.write(c.pending, sync); err != nil {
		return fmt.Errorf("flush consumer state: %w", err)
	}
	c.written.Frontier = c.pending.Frontier
	c.written.AckedAhead = append(c.written.AckedAhead[:0], c.pending.AckedAhead...)
	c.written.Recent = append(c.written.Recent[:0], c.pending.Recent...)
	c.written.Leases = append(c.written.Leases[:0], c.pending.Leases...)
	c.hasWritten, c.dirty = true, false
	return nil
}

package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"
)

func consumerTestState(frontier int64, ahead ...int64) ConsumerState {
	return ConsumerState{Frontier: frontier, AckedAhead: ahead}
}

func consumerMustSave(t *testing.T, dir string, s ConsumerState, sync bool) {
	t.Helper()
	if err := SaveConsumerState(dir, s, sync); err != nil {
		t.Fatalf("SaveConsumerState(%v): %v", s, err)
	}
}

func consumerMustLoad(t *testing.T, dir string) ConsumerState {
	t.Helper()
	s, err := LoadConsumerState(dir)
	if err != nil {
		t.Fatalf("LoadConsumerState: %v", err)
	}
	return s
}

func consumerMustCommitter(t *testing.T, dir string, cfg ConsumerConfig) *OffsetCommitter {
	t.Helper()
	c, err := NewOffsetCommitter(dir, cfg)
	if err != nil {
		t.Fatalf("NewOffsetCommitter: %v", err)
	}
	return c
}

func consumerMustFlush(t *testing.T, c *OffsetCommitter, now time.Time) bool {
	t.Helper()
	wrote, err := c.Flush(now)
	if err != nil {
		t.Fatalf("Flush(%v): %v", now, err)
	}
	return wrote
}

// consumerNewestSlot returns the path and bytes of the slot holding the
// highest valid sequence.
func consumerNewestSlot(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	var bestPath string
	var best []byte
	var bestSeq uint64
	for i := range consumerSlotCount {
		p := consumerSlotPath(dir, i)
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if seq, _, err := decodeConsumerState(b); err == nil && seq > bestSeq {
			bestPath, best, bestSeq = p, b, seq
		}
	}
	if best == nil {
		t.Fatalf("no valid slot in %s", dir)
	}
	return bestPath, best
}

func TestConsumerStateAckAdvancesFrontierThroughContiguousAckedAhead(t *testing.T) {
	s := EmptyConsumerState()
	for _, o := range []int64{2, 4, 3, 7} {
		if !s.Ack(o) {
			t.Fatalf("Ack(%d) = false, want true", o)
		}
	}
	if want := consumerTestState(-1, 2, 3, 4, 7); !s.Equal(want) {
		t.Fatalf("after acking 2,4,3,7: got %+v, want %+v", s, want)
	}
	s.Ack(1)
	s.Ack(0)
	if want := consumerTestState(4, 7); !s.Equal(want) {
		t.Fatalf("after acking 1 then 0: got %+v, want %+v", s, want)
	}
	s.Ack(6)
	s.Ack(5)
	if want := consumerTestState(7); !s.Equal(want) {
		t.Fatalf("after acking 6 then 5: got %+v, want %+v", s, want)
	}
}

func TestConsumerStateDuplicateAndNegativeAcksChangeNothing(t *testing.T) {
	s := consumerTestState(3, 5)
	for _, o := range []int64{-5, -1, 0, 3, 5} {
		if s.Ack(o) {
			t.Errorf("Ack(%d) = true, want false", o)
		}
	}
	if want := consumerTestState(3, 5); !s.Equal(want) {
		t.Fatalf("got %+v, want %+v", s, want)
	}
}

func TestConsumerStateIsAckedCoversFrontierAndAckedAhead(t *testing.T) {
	s := consumerTestState(2, 5, 9)
	for o := int64(-1); o <= 10; o++ {
		want := o >= 0 && o <= 2 || o == 5 || o == 9
		if got := s.IsAcked(o); got != want {
			t.Errorf("IsAcked(%d) = %v, want %v", o, got, want)
		}
	}
}

func TestConsumerStateValidateRejectsBrokenInvariants(t *testing.T) {
	const top = int64(^uint64(0) >> 1)
	for _, tc := range []struct {
		name string
		s    ConsumerState
		want error
	}{
		{"frontier below -1", consumerTestState(-2), ErrInvalid},
		{"acked-ahead at frontier+1", consumerTestState(3, 4), ErrInvalid},
		{"acked-ahead below frontier", consumerTestState(3, 1), ErrInvalid},
		{"acked-ahead unsorted", consumerTestState(3, 9, 7), ErrInvalid},
		{"acked-ahead duplicate", consumerTestState(3, 7, 7), ErrInvalid},
		{"frontier at the top leaves no room", consumerTestState(top, top), ErrInvalid},
		{"acked-ahead over the format limit", ConsumerState{Frontier: -1, AckedAhead: make([]int64, consumerAckedAheadLimit+1)}, ErrTooLarge},
	} {
		if err := tc.s.Validate(); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, s := range []ConsumerState{EmptyConsumerState(), consumerTestState(-1, 1), consumerTestState(3, 5, 9), consumerTestState(top-2, top)} {
		if err := s.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", s, err)
		}
	}
}

func TestConsumerStateEncodingRoundTrips(t *testing.T) {
	for _, s := range []ConsumerState{EmptyConsumerState(), consumerTestState(0), consumerTestState(41, 43, 50, 1<<40)} {
		b := encodeConsumerState(7, s)
		if len(b) != consumerFixedBytes+8*len(s.AckedAhead) {
			t.Errorf("len(encode(%+v)) = %d, want %d", s, len(b), consumerFixedBytes+8*len(s.AckedAhead))
		}
		seq, got, err := decodeConsumerState(b)
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", s, err)
		}
		if seq != 7 || !got.Equal(s) {
			t.Errorf("decode(encode(%+v)) = seq %d %+v, want seq 7 %+v", s, seq, got, s)
		}
	}
}

func TestConsumerStateDecodeChecksTheCountBeforeAllocating(t *testing.T) {
	// A header claiming the largest allowed count over a short buffer must
	// fail on length, not allocate 32 MiB first.
	b := encodeConsumerState(1, EmptyConsumerState())
	b[24], b[25], b[26], b[27] = 0, 0x40, 0, 0 // 1<<22 entries
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, _, err := decodeConsumerState(b); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("got %v, want ErrCorrupt", err)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("10 decodes of a lying header allocated %d bytes, want under 1 MiB", grew)
	}
	b[24] = 0x80 // far over the limit
	if _, _, err := decodeConsumerState(b); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("count over limit: got %v, want ErrCorrupt", err)
	}
}

func TestConsumerStateMissingIsEmpty(t *testing.T) {
	dir := t.TempDir()
	if got := consumerMustLoad(t, dir); !got.Equal(EmptyConsumerState()) {
		t.Fatalf("empty dir: got %+v, want %+v", got, EmptyConsumerState())
	}
	if got := consumerMustLoad(t, filepath.Join(dir, "no-such-partition")); !got.Equal(EmptyConsumerState()) {
		t.Fatalf("missing dir: got %+v, want %+v", got, EmptyConsumerState())
	}
}

func TestConsumerStateEmptySlotFileCountsAsMissing(t *testing.T) {
	// A crash right after creating a slot leaves it empty.
	dir := t.TempDir()
	if err := os.WriteFile(consumerSlotPath(dir, 0), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := consumerMustLoad(t, dir); !got.Equal(EmptyConsumerState()) {
		t.Fatalf("got %+v, want %+v", got, EmptyConsumerState())
	}
}

func TestConsumerStateLoadReturnsTheLastSave(t *testing.T) {
	dir := t.TempDir()
	saves := []ConsumerState{
		consumerTestState(3, 5, 6, 7, 8, 9, 10),
		consumerTestState(4, 6),
		consumerTestState(10),
		consumerTestState(10, 12, 14),
		consumerTestState(20),
	}
	for i, s := range saves {
		consumerMustSave(t, dir, s, i%2 == 0)
		if got := consumerMustLoad(t, dir); !got.Equal(s) {
			t.Fatalf("after save %d: got %+v, want %+v", i, got, s)
		}
	}
}

func TestConsumerStateSaveRejectsInvalidState(t *testing.T) {
	dir := t.TempDir()
	if err := SaveConsumerState(dir, consumerTestState(3, 4), true); !errors.Is(err, ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
	if got := consumerMustLoad(t, dir); !got.Equal(EmptyConsumerState()) {
		t.Fatalf("after refused save: got %+v, want %+v", got, EmptyConsumerState())
	}
}

func TestConsumerStateRestartRedeliversAtMostTheLastInterval(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConsumerConfig()
	c := consumerMustCommitter(t, dir, cfg)
	t0 := time.Unix(1000, 0)
	s := EmptyConsumerState()
	for o := int64(0); o < 10; o++ {
		s.Ack(o)
	}
	s.Ack(12)
	c.Update(s)
	consumerMustFlush(t, c, t0)
	flushed := s.Clone()

	// The last interval: acks that reach the committer but not a flush.
	for _, o := range []int64{10, 11, 15} {
		s.Ack(o)
	}
	c.Update(s)

	// Restart: a new process loads what is on disk.
	got := consumerMustLoad(t, dir)
	if !got.Equal(flushed) {
		t.Fatalf("after restart: got %+v, want the last flushed %+v", got, flushed)
	}
	var redelivered []int64
	for o := int64(0); o < 16; o++ {
		if s.IsAcked(o) && !got.IsAcked(o) {
			redelivered = append(redelivered, o)
		}
	}
	if want := []int64{10, 11, 15}; !slices.Equal(redelivered, want) {
		t.Fatalf("acked but redelivered after restart: got %v, want %v (only the unflushed acks)", redelivered, want)
	}
}

func TestConsumerStateTornSlotFallsBackToPreviousState(t *testing.T) {
	dir := t.TempDir()
	prev := consumerTestState(5, 7, 9)
	next := consumerTestState(9, 11, 12, 13, 20)
	consumerMustSave(t, dir, prev, false)
	consumerMustSave(t, dir, next, false)
	if got := consumerMustLoad(t, dir); !got.Equal(next) {
		t.Fatalf("before damage: got %+v, want %+v", got, next)
	}
	path, good := consumerNewestSlot(t, dir)

	check := func(what string, damaged []byte) {
		t.Helper()
		if err := os.WriteFile(path, damaged, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := LoadConsumerState(dir)
		if err != nil {
			t.Fatalf("%s: LoadConsumerState: %v", what, err)
		}
		if !got.Equal(prev) {
			t.Fatalf("%s: got %+v, want the previous state %+v", what, got, prev)
		}
	}
	for p := range good {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			b := bytes.Clone(good)
			b[p] ^= mask
			check(fmt.Sprintf("byte %d ^ %#x", p, mask), b)
		}
	}
	for n := range len(good) {
		check(fmt.Sprintf("torn after %d of %d bytes", n, len(good)), good[:n])
		// A torn overwrite of a longer record: new prefix, old tail.
		check(fmt.Sprintf("new prefix of %d bytes over zeros", n), append(bytes.Clone(good[:n]), make([]byte, len(good)-n)...))
	}
	check("trailing bytes", append(bytes.Clone(good), 0))
}

func TestConsumerStateAllSlotsDamagedIsCorruptNotEmpty(t *testing.T) {
	dir := t.TempDir()
	consumerMustSave(t, dir, consumerTestState(5), true)
	for i := range consumerSlotCount {
		p := consumerSlotPath(dir, i)
		if b, err := os.ReadFile(p); err == nil {
			b[len(b)-1] ^= 1
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := LoadConsumerState(dir)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got error %v, want ErrCorrupt", err)
	}
	if !got.Equal(EmptyConsumerState()) {
		t.Fatalf("got state %+v with the error, want %+v", got, EmptyConsumerState())
	}
}

// consumerDiskModel records what each slot file held at its last fsync, and
// plays a power loss: every file changed since its last fsync is replaced by
// garbage, the worst a torn, unsynced write can leave.
type consumerDiskModel struct {
	t       *testing.T
	durable map[string][]byte
}

func newConsumerDiskModel(t *testing.T) *consumerDiskModel {
	return &consumerDiskModel{t: t, durable: map[string][]byte{}}
}

func (m *consumerDiskModel) attach(slots *consumerSlots) {
	slots.syncFile = func(f File) error {
		b, err := os.ReadFile(f.Name())
		if err != nil {
			m.t.Fatalf("model: read %s at sync: %v", f.Name(), err)
		}
		m.durable[filepath.Base(f.Name())] = b
		return f.Sync()
	}
}

// powerLoss copies dir into a fresh directory as a power loss would leave it.
func (m *consumerDiskModel) powerLoss(dir string) string {
	return m.powerLossWriting(dir, -1)
}

// powerLossWriting is powerLoss while slot writing is being overwritten.
func (m *consumerDiskModel) powerLossWriting(dir string, writing int) string {
	out := m.t.TempDir()
	for i := range consumerSlotCount {
		name := filepath.Base(consumerSlotPath(dir, i))
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			m.t.Fatal(err)
		}
		if d, ok := m.durable[name]; !ok || !bytes.Equal(d, b) || i == writing {
			b = bytes.Repeat([]byte{0xa5}, len(b))
		}
		if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
			m.t.Fatal(err)
		}
	}
	return out
}

func TestConsumerStatePowerLossKeepsTheLastSyncedState(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConsumerConfig()
	c := consumerMustCommitter(t, dir, cfg)
	model := newConsumerDiskModel(t)
	model.attach(c.slots)
	t0 := time.Unix(1000, 0)
	// Acks in a fixed shuffled order, so the acked-ahead set grows and
	// shrinks and slot records change size.
	order := rand.New(rand.NewPCG(1, 2)).Perm(180)
	s := EmptyConsumerState()
	var written []ConsumerState
	lastSynced := EmptyConsumerState()
	check := func(what string, lost string) {
		t.Helper()
		got, err := LoadConsumerState(lost)
		if err != nil {
			t.Fatalf("%s: LoadConsumerState: %v", what, err)
		}
		if got.Frontier < lastSynced.Frontier {
			t.Fatalf("%s: got frontier %d, want at least the last synced %d", what, got.Frontier, lastSynced.Frontier)
		}
		if !got.Equal(lastSynced) && !slices.ContainsFunc(written, got.Equal) {
			t.Fatalf("%s: got %+v, want a state that was written", what, got)
		}
	}
	for tick := range 45 {
		for _, o := range order[tick*4 : tick*4+4] {
			s.Ack(int64(o))
		}
		c.Update(s)
		if c.slots.prepared {
			check(fmt.Sprintf("tick %d: power loss mid-write", tick), model.powerLossWriting(dir, c.slots.target()))
		}
		before := c.syncedFlushes
		consumerMustFlush(t, c, t0.Add(time.Duration(tick)*cfg.FlushInterval))
		written = append(written, s.Clone())
		if c.syncedFlushes > before {
			lastSynced = s.Clone()
		}
		check(fmt.Sprintf("tick %d: power loss after flush", tick), model.powerLoss(dir))
	}
	if c.syncedFlushes != 5 {
		t.Fatalf("synced flushes in 45 ticks of 100ms with SyncInterval 1s: got %d, want 5", c.syncedFlushes)
	}
	if s.Frontier != 179 {
		t.Fatalf("final frontier: got %d, want 179 (the test must exercise a moving frontier)", s.Frontier)
	}
}

func TestConsumerStateSaveAfterRestartMakesTheFoundStateDurableBeforeOverwriting(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConsumerConfig()
	model := newConsumerDiskModel(t)
	t0 := time.Unix(1000, 0)

	first := consumerMustCommitter(t, dir, cfg)
	model.attach(first.slots)
	s := EmptyConsumerState()
	for tick := range 5 { // one synced flush, then four unsynced
		s.Ack(int64(tick))
		first.Update(s)
		consumerMustFlush(t, first, t0.Add(time.Duration(tick)*cfg.FlushInterval))
	}
	found := s.Clone()

	// The process crashes; its unsynced writes are still in the page cache,
	// and a new process reads them as the newest state. It cannot know which
	// slot the old process fsynced, yet its unsynced saves must not leave a
	// power loss with nothing.
	if got := consumerMustLoad(t, dir); !got.Equal(found) {
		t.Fatalf("after crash: got %+v, want %+v", got, found)
	}
	second := newConsumerSlots(nil, dir, nil)
	model.attach(second)
	for i := range 4 {
		s.Ack(int64(5 + i))
		if err := second.write(s, false); err != nil {
			t.Fatalf("unsynced save %d after restart: %v", i, err)
		}
		got, err := LoadConsumerState(model.powerLoss(dir))
		if err != nil {
			t.Fatalf("power loss after unsynced save %d after restart: %v", i, err)
		}
		if got.Frontier < found.Frontier {
			t.Fatalf("power loss after unsynced save %d after restart: got frontier %d, want at least %d", i, got.Frontier, found.Frontier)
		}
	}
}

// rule K6
func TestClampLowersFrontierToHWMMinusOne(t *testing.T) {
	got, clamped := ClampConsumerState(consumerTestState(20, 22, 30), 10)
	if want := consumerTestState(9); !got.Equal(want) || !clamped {
		t.Fatalf("got %+v clamped=%v, want %+v clamped=true", got, clamped, want)
	}
	got, clamped = ClampConsumerState(consumerTestState(20), 0)
	if want := EmptyConsumerState(); !got.Equal(want) || !clamped {
		t.Fatalf("hwm 0: got %+v clamped=%v, want %+v clamped=true", got, clamped, want)
	}
}

// rule K6
func TestClampDropsAckedAheadAtOrPastHWM(t *testing.T) {
	in := consumerTestState(3, 5, 9, 10, 11)
	got, clamped := ClampConsumerState(in, 10)
	if want := consumerTestState(3, 5, 9); !got.Equal(want) || clamped {
		t.Fatalf("got %+v clamped=%v, want %+v clamped=false", got, clamped, want)
	}
	if want := consumerTestState(3, 5, 9, 10, 11); !in.Equal(want) {
		t.Fatalf("input changed: got %+v, want %+v", in, want)
	}
}

func TestClampLeavesAStateBelowHWMAlone(t *testing.T) {
	for _, hwm := range []int64{12, 100} {
		got, clamped := ClampConsumerState(consumerTestState(3, 5, 11), hwm)
		if want := consumerTestState(3, 5, 11); !got.Equal(want) || clamped {
			t.Fatalf("hwm %d: got %+v clamped=%v, want %+v clamped=false", hwm, got, clamped, want)
		}
	}
	// Frontier exactly HWM-1 is the fully consumed log, not a clamp.
	if got, clamped := ClampConsumerState(consumerTestState(9), 10); !got.Equal(consumerTestState(9)) || clamped {
		t.Fatalf("frontier hwm-1: got %+v clamped=%v, want frontier 9 clamped=false", got, clamped)
	}
}

func TestConsumerConfigValidate(t *testing.T) {
	if err := DefaultConsumerConfig().Validate(); err != nil {
		t.Fatalf("default config: got %v, want nil", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*ConsumerConfig)
	}{
		{"zero FlushInterval", func(c *ConsumerConfig) { c.FlushInterval = 0 }},
		{"negative FlushInterval", func(c *ConsumerConfig) { c.FlushInterval = -time.Second }},
		{"FlushInterval over a minute", func(c *ConsumerConfig) { c.FlushInterval, c.SyncInterval = 2*time.Minute, 2*time.Minute }},
		{"SyncInterval below FlushInterval", func(c *ConsumerConfig) { c.SyncInterval = c.FlushInterval / 2 }},
		{"SyncInterval over ten minutes", func(c *ConsumerConfig) { c.SyncInterval = time.Hour }},
		{"zero MaxAckedAheadEntries", func(c *ConsumerConfig) { c.MaxAckedAheadEntries = 0 }},
		{"MaxAckedAheadEntries over the format limit", func(c *ConsumerConfig) { c.MaxAckedAheadEntries = consumerAckedAheadLimit + 1 }},
		{"zero CursorReadAttempts", func(c *ConsumerConfig) { c.CursorReadAttempts = 0 }},
		{"CursorReadAttempts over the bound", func(c *ConsumerConfig) { c.CursorReadAttempts = consumerMaxCursorReadAttempts + 1 }},
	} {
		c := DefaultConsumerConfig()
		tc.mutate(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", tc.name, err)
		}
		if _, err := NewOffsetCommitter(t.TempDir(), c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: NewOffsetCommitter: got %v, want ErrInvalid", tc.name, err)
		}
	}
	edge := DefaultConsumerConfig()
	edge.SyncInterval = edge.FlushInterval
	edge.MaxAckedAheadEntries = 1024
	if err := edge.Validate(); err != nil {
		t.Fatalf("SyncInterval == FlushInterval: got %v, want nil", err)
	}
}

func TestOffsetCommitterWritesOnlyWhenDirty(t *testing.T) {
	dir := t.TempDir()
	c := consumerMustCommitter(t, dir, DefaultConsumerConfig())
	now := time.Unix(1000, 0)
	step := func(what string, want bool) {
		t.Helper()
		now = now.Add(100 * time.Millisecond)
		writes := c.slots.writes
		wrote := consumerMustFlush(t, c, now)
		if wrote != want || (c.slots.writes > writes) != want {
			t.Fatalf("%s: got wrote=%v (slot writes %d -> %d), want wrote=%v", what, wrote, writes, c.slots.writes, want)
		}
	}
	step("flush before any update", false)
	s := consumerTestState(4, 6)
	c.Update(s)
	step("flush after an update", true)
	step("second flush with nothing new", false)
	c.Update(s)
	step("flush after updating to the same state", false)
	s.Ack(5)
	c.Update(s)
	step("flush after an ack", true)
	if got := consumerMustLoad(t, dir); !got.Equal(consumerTestState(6)) {
		t.Fatalf("on disk: got %+v, want %+v", got, consumerTestState(6))
	}
}

func TestOffsetCommitterUpdateCopiesTheState(t *testing.T) {
	dir := t.TempDir()
	c := consumerMustCommitter(t, dir, DefaultConsumerConfig())
	s := consumerTestState(1, 3, 5)
	c.Update(s)
	s.AckedAhead[0] = 4 // the caller reuses its slice
	consumerMustFlush(t, c, time.Unix(1000, 0))
	if got, want := consumerMustLoad(t, dir), consumerTestState(1, 3, 5); !got.Equal(want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestOffsetCommitterFsyncsOncePerSyncInterval(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConsumerConfig() // flush 100 ms, sync 1 s
	c := consumerMustCommitter(t, dir, cfg)
	t0 := time.Unix(1000, 0)
	s := EmptyConsumerState()
	var syncedAt []int
	for tick := range 30 {
		s.Ack(int64(tick))
		c.Update(s)
		before := c.slots.fileSyncs
		if !consumerMustFlush(t, c, t0.Add(time.Duration(tick)*cfg.FlushInterval)) {
			t.Fatalf("tick %d: got wrote=false, want true", tick)
		}
		if c.slots.fileSyncs > before {
			syncedAt = append(syncedAt, tick)
		}
	}
	// The first flush syncs (nothing durable yet), then every 10th tick.
	if want := []int{0, 10, 20}; !slices.Equal(syncedAt, want) {
		t.Fatalf("ticks that fsynced: got %v, want %v", syncedAt, want)
	}
	if c.slots.fileSyncs != 3 {
		t.Fatalf("file fsyncs: got %d, want 3", c.slots.fileSyncs)
	}
}

func TestOffsetCommitterIdlePartitionGetsItsLastWriteSynced(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConsumerConfig()
	c := consumerMustCommitter(t, dir, cfg)
	t0 := time.Unix(1000, 0)
	s := EmptyConsumerState()
	s.Ack(0)
	c.Update(s)
	consumerMustFlush(t, c, t0) // synced: the first flush
	s.Ack(1)
	c.Update(s)
	consumerMustFlush(t, c, t0.Add(100*time.Millisecond)) // unsynced
	syncs := c.slots.fileSyncs
	if wrote := consumerMustFlush(t, c, t0.Add(500*time.Millisecond)); wrote || c.slots.fileSyncs != syncs {
		t.Fatalf("idle flush before SyncInterval: got wrote=%v fsyncs %d, want wrote=false fsyncs %d", wrote, c.slots.fileSyncs, syncs)
	}
	if wrote := consumerMustFlush(t, c, t0.Add(time.Second)); wrote || c.slots.fileSyncs != syncs+1 {
		t.Fatalf("idle flush at SyncInterval: got wrote=%v fsyncs %d, want wrote=false fsyncs %d", wrote, c.slots.fileSyncs, syncs+1)
	}
	if wrote := consumerMustFlush(t, c, t0.Add(5*time.Second)); wrote || c.slots.fileSyncs != syncs+1 {
		t.Fatalf("idle flush with everything synced: got wrote=%v fsyncs %d, want wrote=false fsyncs %d", wrote, c.slots.fileSyncs, syncs+1)
	}
}

func TestOffsetCommitterFlushSyncMakesTheLatestStateDurable(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConsumerConfig()
	c := consumerMustCommitter(t, dir, cfg)
	model := newConsumerDiskModel(t)
	model.attach(c.slots)
	t0 := time.Unix(1000, 0)
	s := EmptyConsumerState()
	s.Ack(0)
	c.Update(s)
	consumerMustFlush(t, c, t0)
	s.Ack(1)
	c.Update(s)
	consumerMustFlush(t, c, t0.Add(100*time.Millisecond)) // written, not synced
	s.Ack(2)
	c.Update(s) // not written at all
	if err := c.FlushSync(); err != nil {
		t.Fatalf("FlushSync: %v", err)
	}
	got, err := LoadConsumerState(model.powerLoss(dir))
	if err != nil {
		t.Fatalf("power loss after FlushSync: %v", err)
	}
	if want := consumerTestState(2); !got.Equal(want) {
		t.Fatalf("power loss after FlushSync: got %+v, want %+v", got, want)
	}
}

func TestOffsetCommitterRefusesStatesItMustNotWrite(t *testing.T) {
	dir := t.TempDir()
	cfg := DefaultConsumerConfig()
	cfg.MaxAckedAheadEntries = 2
	c := consumerMustCommitter(t, dir, cfg)
	now := time.Unix(1000, 0)
	c.Update(consumerTestState(0, 2, 4, 6))
	if _, err := c.Flush(now); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("3 acked-ahead with MaxAckedAheadEntries 2: got %v, want ErrTooLarge", err)
	}
	c.Update(consumerTestState(0, 1))
	if _, err := c.Flush(now); !errors.Is(err, ErrInvalid) {
		t.Fatalf("acked-ahead at frontier+1: got %v, want ErrInvalid", err)
	}
	if got := consumerMustLoad(t, dir); !got.Equal(EmptyConsumerState()) {
		t.Fatalf("after refusals: got %+v, want %+v", got, EmptyConsumerState())
	}
	c.Update(consumerTestState(0, 2))
	if !consumerMustFlush(t, c, now) {
		t.Fatalf("valid state after refusals: got wrote=false, want true")
	}
}

func BenchmarkSaveConsumerState(b *testing.B) {
	s := EmptyConsumerState()
	for o := int64(0); o < 1000; o += 7 {
		s.Ack(o + 100)
	}
	for _, sync := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync=%v", sync), func(b *testing.B) {
			dir := b.TempDir()
			for b.Loop() {
				if err := SaveConsumerState(dir, s, sync); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(encodeConsumerState(1, s))), "bytes/save")
		})
	}
	// The periodic path: the committer remembers its slots, so an unsynced
	// flush is one open, one write, one close.
	b.Run("committer-flush-nosync", func(b *testing.B) {
		cfg := DefaultConsumerConfig()
		cfg.SyncInterval = consumerMaxSyncInterval
		c, err := NewOffsetCommitter(b.TempDir(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		// Two states of the same size, alternated, keep every flush dirty
		// without growing the record.
		other := s.Clone()
		other.Ack(s.Frontier + 1)
		states := [2]ConsumerState{s, other}
		now := time.Unix(1000, 0)
		i := 0
		for b.Loop() {
			c.Update(states[i%2])
			i++
			now = now.Add(time.Millisecond)
			if _, err := c.Flush(now); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(c.slots.fileSyncs)/float64(b.N), "fsyncs/flush")
		b.ReportMetric(float64(len(encodeConsumerState(1, s))), "bytes/save")
	})
}

// The recent handles ride in a version 2 record; a state without them is
// still written as version 1, byte for byte as before, so an older file
// loads and a record has one encoding.
func TestConsumerStateRecentHandlesRoundTripAsVersion2(t *testing.T) {
	plain := consumerTestState(41, 43, 50)
	withRecent := plain.Clone()
	withRecent.Recent = []AckedHandle{{Offset: 43, Nonce: 7}, {Offset: 12, Nonce: 1 << 63}, {Offset: 50, Nonce: 0}}
	for _, tc := range []struct {
		name        string
		s           ConsumerState
		wantVersion uint16
		wantLen     int
	}{
		{"no recent handles", plain, 1, consumerFixedBytes + 8*2},
		{"three recent handles", withRecent, 2, consumerFixedBytes + 8*2 + 4 + 16*3},
	} {
		checkConsumerRoundTrip(t, tc.name, tc.s, tc.wantVersion, tc.wantLen)
	}
	// A version 2 record that says it has no handle is not the encoding
	// of anything: refused as corrupt.
	b := encodeConsumerState(9, plain)
	b[5] = 2
	b = append(b[:len(b)-4], 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, consumerCRC))
	if _, _, err := decodeConsumerState(b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("version 2 with 0 recent handles: got %v, want ErrCorrupt", err)
	}
}

// A recent handle names an acked offset; the clamp of a move drops those
// it no longer counts as acked.
func TestConsumerStateRecentHandlesAreAcked(t *testing.T) {
	s := consumerTestState(3, 7)
	s.Recent = []AckedHandle{{Offset: 2, Nonce: 1}, {Offset: 7, Nonce: 2}}
	if err := s.Validate(); err != nil {
		t.Fatalf("handles of acked offsets: got %v, want nil", err)
	}
	bad := s.Clone()
	bad.Recent = append(bad.Recent, AckedHandle{Offset: 5, Nonce: 3})
	if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("a handle of offset 5, not acked: got %v, want ErrInvalid", err)
	}
	big := EmptyConsumerState()
	big.Recent = make([]AckedHandle, consumerRecentLimit+1)
	if err := big.Validate(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("%d handles: got %v, want ErrTooLarge", len(big.Recent), err)
	}
	got, _ := ClampConsumerState(s, 3)
	if want := []AckedHandle{{Offset: 2, Nonce: 1}}; !slices.Equal(got.Recent, want) {
		t.Errorf("recent handles clamped to HWM 3: got %v, want %v", got.Recent, want)
	}
}

// The committer writes a state whose only change is a new recent handle
// (what the next life answers a retried ack from) or a new lease (what it
// keeps for the lease's holder), and the next life loads it.
func TestOffsetCommitterWritesANewRecentHandleOrLease(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*ConsumerState)
	}{
		{"a new recent handle", func(s *ConsumerState) { s.Recent = []AckedHandle{{Offset: 3, Nonce: 11}} }},
		{"a new lease", func(s *ConsumerState) { s.Leases = []Lease{{Offset: 4, Nonce: 11, Visibility: time.Minute}} }},
	} {
		dir := t.TempDir()
		c, err := NewOffsetCommitter(dir, DefaultConsumerConfig())
		if err != nil {
			t.Fatal(err)
		}
		s := consumerTestState(3)
		c.Update(s)
		if _, err := c.Flush(time.Now()); err != nil {
			t.Fatal(err)
		}
		tc.change(&s)
		c.Update(s)
		if wrote, err := c.Flush(time.Now()); err != nil || !wrote {
			t.Fatalf("flush of a state with %s: got wrote %v (%v), want a write", tc.name, wrote, err)
		}
		got, err := LoadConsumerState(dir)
		if err != nil || !got.Equal(s) {
			t.Fatalf("%s, loaded: got %+v (%v), want %+v", tc.name, got, err, s)
		}
	}
}

// The leases out ride in a version 3 record, with or without recent
// handles; a state without leases keeps its version 1 or 2 bytes.
func TestConsumerStateLeasesRoundTripAsVersion3(t *testing.T) {
	plain := consumerTestState(41, 43, 50)
	leased := plain.Clone()
	leased.Leases = []Lease{{Offset: 42, Nonce: 7, Visibility: 3 * time.Second}, {Offset: 51, Nonce: 1 << 63, Visibility: time.Millisecond}}
	both := leased.Clone()
	both.Recent = []AckedHandle{{Offset: 43, Nonce: 5}}
	for _, tc := range []struct {
		name        string
		s           ConsumerState
		wantVersion uint16
		wantLen     int
	}{
		{"two leases, no recent handle", leased, 3, consumerFixedBytes + 8*2 + 4 + 4 + 24*2},
		{"two leases and a recent handle", both, 3, consumerFixedBytes + 8*2 + 4 + 16 + 4 + 24*2},
	} {
		checkConsumerRoundTrip(t, tc.name, tc.s, tc.wantVersion, tc.wantLen)
	}
	// A version 3 record that says it has no lease is the encoding of
	// nothing: refused as corrupt.
	b := encodeConsumerState(9, plain)
	b[5] = 3
	b = append(b[:len(b)-4], 0, 0, 0, 0, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, consumerCRC))
	if _, _, err := decodeConsumerState(b); !errors.Is(err, ErrCorrupt) {
		t.Errorf("version 3 with 0 leases: got %v, want ErrCorrupt", err)
	}
}

// A lease names an offset nobody acked, under a handle the API accepts; the
// clamp keeps those below the HWM only.
func TestConsumerStateLeasesAreUnackedAndOrdered(t *testing.T) {
	s := consumerTestState(3, 7)
	s.Leases = []Lease{{Offset: 5, Nonce: 1, Visibility: time.Second}, {Offset: 8, Nonce: 2, Visibility: time.Second}}
	if err := s.Validate(); err != nil {
		t.Fatalf("leases of unacked offsets: got %v, want nil", err)
	}
	for _, tc := range []struct {
		name string
		l    Lease
	}{
		{"at the frontier", Lease{Offset: 3, Nonce: 3, Visibility: time.Second}},
		{"on an acked-ahead offset", Lease{Offset: 7, Nonce: 3, Visibility: time.Second}},
		{"below the previous one", Lease{Offset: 6, Nonce: 3, Visibility: time.Second}},
		{"nonce 0", Lease{Offset: 9, Nonce: 0, Visibility: time.Second}},
		{"no visibility", Lease{Offset: 9, Nonce: 3}},
	} {
		bad := s.Clone()
		bad.Leases = append(bad.Leases, tc.l)
		if err := bad.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("a lease %s: got %v, want ErrInvalid", tc.name, err)
		}
	}
	big := EmptyConsumerState()
	big.Leases = make([]Lease, consumerLeaseLimit+1)
	if err := big.Validate(); !errors.Is(err, ErrTooLarge) {
		t.Errorf("%d leases: got %v, want ErrTooLarge", len(big.Leases), err)
	}
	got, _ := ClampConsumerState(s, 8)
	if want := s.Leases[:1]; !slices.Equal(got.Leases, want) {
		t.Errorf("leases clamped to HWM 8: got %v, want %v", got.Leases, want)
	}
}

// checkConsumerRoundTrip encodes s, expects the version and length given,
// decodes it back to s and the decoded state to the same bytes.
func checkConsumerRoundTrip(t *testing.T, name string, s ConsumerState, wantVersion uint16, wantLen int) {
	t.Helper()
	b := encodeConsumerState(9, s)
	if v := binary.BigEndian.Uint16(b[4:6]); v != wantVersion || len(b) != wantLen {
		t.Errorf("%s: got version %d in %d bytes, want version %d in %d", name, v, len(b), wantVersion, wantLen)
	}
	seq, got, err := decodeConsumerState(b)
	if err != nil || seq != 9 || !got.Equal(s) {
		t.Errorf("%s: decode(encode) got seq %d %+v (%v), want seq 9 %+v", name, seq, got, err, s)
	}
	if again := encodeConsumerState(seq, got); !bytes.Equal(again, b) {
		t.Errorf("%s: the decoded state encodes to other bytes", name)
	}
}

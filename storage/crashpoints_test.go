package storage_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/naradmq/narad/storage"
	"github.com/naradmq/narad/storage/crashfs"
)

// The crash-point tests: storage on a file system that loses power after
// the k-th operation that changes something (crashfs.CrashAfter), k drawn
// at random from the operations the work does, so crashes land between
// any two writes, syncs, renames and removals of produce (the ingress
// WAL), commit (the WAL's records into a partition log), install (a
// move's copy staged and renamed into place), sweep (a topic directory
// set aside), consumer state (the offset committer's slots) and fan-out
// cursors. Half the runs also keep a random prefix of every unsynced
// write (crashfs.TearOnCrash). After every crash: nothing acknowledged is
// lost, no seq or offset later holds another record, no install is a torn
// mix, and no copy set aside is lost.
//
// Each test counts its crashes; together they make well over a thousand
// in a default run. NARAD_CRASH_SCALE=k runs k times as many (a soak);
// -short runs a tenth.

// crashRuns scales a test's default number of runs.
func crashRuns(t *testing.T, n int) int {
	t.Helper()
	if v := os.Getenv("NARAD_CRASH_SCALE"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 {
			t.Fatalf("NARAD_CRASH_SCALE=%q: want a whole number from 1", v)
		}
		n *= k
	}
	if testing.Short() {
		n = max(1, n/10)
	}
	return n
}

// crashPoint arms fsys to crash after a random one of the next ops
// operations, or (one time in ops+1) not before the work ends, when the
// caller crashes it after everything was acknowledged.
func crashPoint(rng *rand.Rand, fsys *crashfs.FS, ops int) {
	fsys.CrashAfter(1 + rng.IntN(max(ops, 1)+1))
}

// powerBack crashes fsys if the armed crash did not come, and turns the
// power back on. The caller has closed what ran on it first, so nothing
// of the dead process writes after the reboot.
func powerBack(fsys *crashfs.FS) {
	if !fsys.Crashed() {
		fsys.Crash()
	}
	fsys.Reboot()
}

// --- produce: the ingress WAL ---------------------------------------------

// walCrash is one seeded run of WAL lives on a crashing file system.
type walCrash struct {
	t   *testing.T
	rng *rand.Rand
	fs  *crashfs.FS
	cfg storage.WALConfig
	// acked: seq to body for every append the WAL acknowledged; marked:
	// the seqs marked committed (they may or may not replay); seen: seq
	// to body for every record a replay returned; written: every body
	// handed to the WAL.
	acked, seen map[uint64]string
	marked      map[uint64]bool
	written     map[string]bool
	crashes     int
}

const walCrashDir = "/data/wal"

func newWALCrash(t *testing.T, seed uint64) *walCrash {
	c := &walCrash{t: t, rng: rand.New(rand.NewPCG(seed, 48)), fs: crashfs.New(),
		acked: map[uint64]string{}, seen: map[uint64]string{}, marked: map[uint64]bool{}, written: map[string]bool{}}
	if seed%2 == 0 {
		c.fs.TearOnCrash(seed)
	}
	cfg := storage.DefaultWALConfig()
	cfg.SegmentMaxBytes = 2 << 10
	cfg.MaxBatchBytes = 2 << 10
	cfg.MaxQueueBytes = 64 << 10
	cfg.MaxBodyBytes = 300
	cfg.MaxKeyBytes = 8
	cfg.MaxTopicBytes = 8
	cfg.ReadBufferBytes = 4 << 10
	cfg.MaxPositionRanges = 16
	cfg.PositionSaveInterval = 0
	cfg.PositionOnCommit = seed%3 != 0
	cfg.FS = c.fs
	c.cfg = cfg
	return c
}

// open opens the WAL and checks its replay against everything known.
func (c *walCrash) open() *storage.WAL {
	t := c.t
	t.Helper()
	w, err := storage.OpenWAL(walCrashDir, c.cfg)
	if err != nil {
		t.Fatalf("open wal after %d crashes: %v", c.crashes, err)
	}
	replayed := map[uint64]bool{}
	stats, err := w.Replay(func(r storage.WALRecord) error {
		body := string(r.Body)
		switch {
		case !c.written[body]:
			t.Fatalf("replay: seq %d holds %.30q, which was never appended", r.Seq, body)
		case c.acked[r.Seq] != "" && c.acked[r.Seq] != body:
			t.Fatalf("replay: seq %d holds %.30q, want the acknowledged %.30q", r.Seq, body, c.acked[r.Seq])
		case c.seen[r.Seq] != "" && c.seen[r.Seq] != body:
			t.Fatalf("replay: seq %d holds %.30q, once replayed as %.30q", r.Seq, body, c.seen[r.Seq])
		}
		c.seen[r.Seq], replayed[r.Seq] = body, true
		return nil
	})
	if err != nil {
		t.Fatalf("replay after %d crashes: %v", c.crashes, err)
	}
	if stats.Lost > 0 || stats.Corrupt > 0 {
		t.Fatalf("replay after %d crashes: got %d lost and %d damaged, want none", c.crashes, stats.Lost, stats.Corrupt)
	}
	for seq := range c.acked {
		if !c.marked[seq] && !replayed[seq] {
			t.Fatalf("after %d crashes: acknowledged seq %d (%.30q), never marked committed, is not replayed: lost",
				c.crashes, seq, c.acked[seq])
		}
	}
	return w
}

// live runs one life of random work on w until the work ends or the power
// goes; it reports the operations it did.
func (c *walCrash) live(w *storage.WAL, life int) {
	t := c.t
	for step := range 30 {
		var err error
		switch r := c.rng.IntN(10); {
		case r < 6:
			recs := make([]storage.WALRecord, 1+c.rng.IntN(4))
			for i := range recs {
				body := fmt.Sprintf("life %d step %d record %d %s", life, step, i, make([]byte, c.rng.IntN(250)))
				c.written[body] = true
				recs[i] = storage.WALRecord{Topic: "t", Partition: 0, Key: []byte("k"), Body: []byte(body)}
			}
			seqs, errs := w.AppendMany(context.Background(), recs)
			for i, e := range errs {
				if e != nil {
					err = e
					continue
				}
				if was, ok := c.acked[seqs[i]]; ok {
					t.Fatalf("append: seq %d handed out again (held %.30q)", seqs[i], was)
				}
				if was, ok := c.seen[seqs[i]]; ok {
					t.Fatalf("append: seq %d handed out again (replayed as %.30q)", seqs[i], was)
				}
				c.acked[seqs[i]] = string(recs[i].Body)
			}
		case r < 8:
			for seq := range c.acked {
				if !c.marked[seq] && c.rng.IntN(2) == 0 {
					if err = w.MarkCommitted(seq); err != nil {
						t.Fatalf("mark committed %d: %v", seq, err)
					}
					c.marked[seq] = true
				}
			}
		case r < 9:
			err = w.SavePosition()
		default:
			err = w.Compact()
		}
		if err != nil {
			if !c.fs.Crashed() {
				t.Fatalf("life %d step %d: %v, with the power on", life, step, err)
			}
			return
		}
	}
}

// TestPowerLossWALKeepsEveryAcknowledgedAppend: seeded runs of four WAL
// lives, each cut by a power loss at a random operation (appends and
// their group commits, rolls, position saves live and whole, compactions,
// the open's own repairs). After each, the reopened WAL replays every
// acknowledged append not marked committed, each seq with its own record;
// no seq is handed out twice; nothing replays that was not appended.
//
// It fails when the writer's fsync of a batch is left out (an
// acknowledged append lost), or the directory sync of a new segment.
func TestPowerLossWALKeepsEveryAcknowledgedAppend(t *testing.T) {
	runs, crashes := crashRuns(t, 300), 0
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		c := newWALCrash(t, seed)
		ops := 0
		for life := range 4 {
			w := c.open()
			before := c.fs.Ops()
			if life > 0 {
				crashPoint(c.rng, c.fs, ops)
			}
			c.live(w, life)
			w.Close() // fails after the crash: nothing more reaches the disk
			ops = max(ops, c.fs.Ops()-before)
			powerBack(c.fs)
			c.crashes++
		}
		c.open().Close()
		crashes += c.crashes
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	t.Logf("%d power losses", crashes)
}

// --- commit: the WAL's records into a partition log -----------------------

// TestPowerLossCommitFromWALToLog runs the dispatcher's commit path on one
// crashing file system: records appended to the WAL (acknowledged once
// synced), committed to a partition log with their WAL origin (written,
// synced, published), then marked committed in the WAL; after each power
// loss the WAL's replay is committed again unless the log already holds
// the origin (Log.Committed). Then every record marked committed is in the
// log and every other acknowledged one is replayed, and no offset of the
// log ever held another record. (A record whose origin the log no longer
// remembers, in a segment before the active one, is committed again:
// delivery is at least once, and the test counts those duplicates.)
//
// It fails when the log's batch sync is left out (a record the WAL was told
// is committed vanishes from both) or the WAL's.
func TestPowerLossCommitFromWALToLog(t *testing.T) {
	runs, crashes, dups := crashRuns(t, 200), 0, 0
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		n, d := commitCrashRun(t, seed)
		crashes, dups = crashes+n, dups+d
		if t.Failed() {
			t.Fatalf("seed %d", seed)
		}
	}
	t.Logf("%d power losses, %d records committed twice", crashes, dups)
}

func commitCrashRun(t *testing.T, seed uint64) (crashes, dups int) {
	c := newWALCrash(t, seed)
	logCfg := storage.DefaultLogConfig()
	logCfg.SegmentMaxBytes = 4 << 10
	logCfg.IndexIntervalBytes = 512
	logCfg.FS = c.fs
	const logDir = "/data/topics/t/0"
	// seenAt: log offset to body, for every record a read returned.
	seenAt := map[int64]string{}
	ops := 0
	inLog := map[string]bool{}
	const lives = 4
	for life := range lives + 1 {
		l, err := storage.OpenLog(logDir, logCfg)
		if err != nil {
			t.Fatalf("open log after %d crashes: %v", c.crashes, err)
		}
		// The log as it is now: no offset changed.
		clear(inLog)
		dups = 0
		for off := int64(0); off < l.HWM(); off++ {
			recs, err := l.Read(off, 1, 1<<20)
			if err != nil || len(recs) != 1 || recs[0].Offset != off {
				t.Fatalf("read offset %d below HWM %d: %v (%d records)", off, l.HWM(), err, len(recs))
			}
			body := string(recs[0].Body)
			if was, ok := seenAt[off]; ok && was != body {
				t.Fatalf("offset %d holds %.30q, once held %.30q", off, body, was)
			}
			if inLog[body] {
				dups++
			}
			seenAt[off], inLog[body] = body, true
		}
		for seq, body := range c.acked {
			if c.marked[seq] && !inLog[body] {
				t.Fatalf("seq %d (%.30q) was marked committed, and the log lacks it: lost", seq, body)
			}
		}
		if life == lives { // the last crash's check: no more work
			l.Close()
			c.open().Close()
			break
		}
		w := c.open() // checks the replay; c.seen holds what it returned
		before := c.fs.Ops()
		if life > 0 {
			crashPoint(c.rng, c.fs, ops)
		}
		// The dispatcher: replay first, then new appends, each committed.
		var pending []storage.WALRecord
		for seq, body := range c.seen {
			if !c.marked[seq] {
				pending = append(pending, storage.WALRecord{Seq: seq, Body: []byte(body)})
			}
		}
		slices.SortFunc(pending, func(a, b storage.WALRecord) int { return int(a.Seq) - int(b.Seq) })
		if commitToLog(c, w, l, pending) {
			for step := range 12 {
				recs := make([]storage.WALRecord, 1+c.rng.IntN(4))
				for i := range recs {
					body := fmt.Sprintf("seed %d life %d step %d record %d %s", seed, life, step, i, make([]byte, c.rng.IntN(200)))
					c.written[body] = true
					recs[i] = storage.WALRecord{Topic: "t", Partition: 0, Body: []byte(body)}
				}
				seqs, errs := w.AppendMany(context.Background(), recs)
				var got []storage.WALRecord
				for i, e := range errs {
					if e == nil {
						c.acked[seqs[i]] = string(recs[i].Body)
						recs[i].Seq = seqs[i]
						got = append(got, recs[i])
					}
				}
				if !commitToLog(c, w, l, got) || len(got) < len(recs) {
					break
				}
				if c.rng.IntN(4) == 0 && w.Compact() != nil {
					break
				}
			}
		}
		w.Close()
		l.Close()
		ops = max(ops, c.fs.Ops()-before)
		powerBack(c.fs)
		c.crashes++
	}
	return c.crashes, dups
}

// commitToLog commits recs to l as the dispatcher does, skipping those l
// already holds, and marks each committed in w once published. It reports
// false when the power went.
func commitToLog(c *walCrash, w *storage.WAL, l *storage.Log, recs []storage.WALRecord) bool {
	var entries []storage.Entry
	var seqs []uint64
	for _, r := range recs {
		o := w.Origin(r.Seq)
		if o != (storage.Origin{}) && l.Committed(o) {
			c.marked[r.Seq] = true
			if w.MarkCommitted(r.Seq) != nil {
				return false
			}
			continue
		}
		entries = append(entries, storage.Entry{Key: []byte("k"), Body: r.Body, Origin: o})
		seqs = append(seqs, r.Seq)
	}
	if len(entries) == 0 {
		return !c.fs.Crashed()
	}
	b, err := l.Write(time.Unix(0, 0), entries)
	if err != nil {
		return false
	}
	if err := l.Sync(); err != nil {
		l.Abort(err)
		return false
	}
	if err := l.Publish(b); err != nil {
		return false
	}
	for _, seq := range seqs {
		c.marked[seq] = true
		if w.MarkCommitted(seq) != nil {
			return false
		}
	}
	return !c.fs.Crashed()
}

// --- install: a move's copy staged and renamed into place -----------------

// installCase is one partition a move installs over an older copy.
type installCase struct {
	topic    string
	old, new []string // the records of the copy at the path and of the source
	state    storage.ConsumerState
	staging  *storage.Staging
	target   string
	hwm      int64
	acked    bool // Install or InstallBatch returned nil for it
}

const installData = "/data"

// TestPowerLossInstallIsWholeOrNotAtAll: a move stages a copy of a source
// partition chunk by chunk (segments sealed and synced as they complete,
// consumer state beside them), verifies it and installs it over an older
// copy at the partition's path: alone (Install), two at once in one topic
// (InstallBatch, the syncfs barriers of StageBatch and a directory sync
// per rename), or two in two topics (a syncfs for the renames too), or
// either pair with per-file barriers (LogConfig.InstallSyncs). The power
// goes at a random operation. Then each partition's path holds nothing,
// the older copy whole, or the new copy whole with its marker and consumer
// state, never a mix; a staged copy with a marker is whole; the older copy
// is at the path or set aside, never lost; and an install acknowledged is
// there.
//
// It fails when the staging directory's sync after the marker is left
// out, or the marker's fsync, or the sync of the directory an install
// renames into, or the barrier or fsync of the staged files before the
// markers.
func TestPowerLossInstallIsWholeOrNotAtAll(t *testing.T) {
	runs, crashes := crashRuns(t, 600), 0
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		variant := int(seed % 5)
		ops := installCrashRun(t, seed, variant, -1)
		installCrashRun(t, seed, variant, ops)
		crashes += 2 // the counting run's power loss comes after all of it
		if t.Failed() {
			t.Fatalf("seed %d, variant %d", seed, variant)
		}
	}
	t.Logf("%d power losses", crashes)
}

func installLogConfig(fsys storage.FS) storage.LogConfig {
	cfg := storage.DefaultLogConfig()
	cfg.SegmentMaxBytes = 4 << 10
	cfg.IndexIntervalBytes = 512
	cfg.FS = fsys
	return cfg
}

// installCrashRun runs one move on a fresh file system, crashing at a
// random operation of the ops it takes (ops < 0: none, to count them).
func installCrashRun(t *testing.T, seed uint64, variant, ops int) int {
	rng := rand.New(rand.NewPCG(seed, 46))
	fsys := crashfs.New()
	if seed%2 == 0 {
		fsys.TearOnCrash(seed)
	}
	cfg := installLogConfig(fsys)
	topics := []string{"t"}
	switch variant {
	case 1, 3:
		topics = []string{"t", "t"}
	case 2, 4:
		topics = []string{"t", "u"}
	}
	if variant >= 3 {
		cfg.InstallSyncs = storage.InstallSyncPerFile
	}
	cases := make([]*installCase, len(topics))
	for i, topic := range topics {
		ic := &installCase{topic: topic, target: storage.PartitionPath(installData, topic, i)}
		ic.old = fillLog(t, ic.target, cfg, fmt.Sprintf("old %s/%d", topic, i), 3+rng.IntN(40))
		ic.new = fillLog(t, fmt.Sprintf("/source/%s/%d", topic, i), cfg, fmt.Sprintf("new %s/%d", topic, i), 1+rng.IntN(60))
		ic.hwm = int64(len(ic.new))
		ic.state = storage.EmptyConsumerState()
		for off := range min(ic.hwm, 3) {
			ic.state.Ack(off)
		}
		cases[i] = ic
	}
	if err := fsys.SyncAll("/"); err != nil {
		t.Fatal(err)
	}
	start := fsys.Ops()
	if ops >= 0 {
		crashPoint(rng, fsys, ops)
	}
	moveCopies(t, fsys, cfg, cases)
	took := fsys.Ops() - start
	if ops < 0 && fsys.Crashed() {
		t.Fatalf("the counting run crashed")
	}
	for _, ic := range cases {
		if ic.staging != nil {
			ic.staging.Close()
		}
	}
	powerBack(fsys)
	for i, ic := range cases {
		checkInstall(t, fsys, cfg, ic, i)
	}
	return took
}

// fillLog writes n records to a new log at dir, durably, and returns them.
func fillLog(t *testing.T, dir string, cfg storage.LogConfig, prefix string, n int) []string {
	t.Helper()
	l, err := storage.OpenLog(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for i := range n {
		body := fmt.Sprintf("%s record %d %s", prefix, i, make([]byte, 40+i%90))
		if _, err := l.Append(time.Unix(0, 0), []storage.Entry{{Key: []byte("k"), Body: []byte(body)}}); err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return bodies
}

// moveCopies stages each case's source into its staging directory and
// installs them; it stops at the first error, which must be the crash.
func moveCopies(t *testing.T, fsys *crashfs.FS, cfg storage.LogConfig, cases []*installCase) {
	t.Helper()
	stop := func(what string, err error) bool {
		if err == nil {
			return false
		}
		if !fsys.Crashed() {
			t.Fatalf("%s: %v, with the power on", what, err)
		}
		return true
	}
	now := time.Unix(1000, 0)
	var items []storage.InstallItem
	for i, ic := range cases {
		src := fmt.Sprintf("/source/%s/%d", ic.topic, i)
		ls, err := storage.ListClosed(src, cfg, now)
		if stop("list", err) {
			return
		}
		s, _, err := storage.OpenStaging(storage.StagingPath(installData, ic.topic, i), cfg, "move-"+strconv.Itoa(i))
		if stop("open staging", err) {
			return
		}
		ic.staging = s
		if stop("reconcile", s.Reconcile(ls)) {
			return
		}
		for j, seg := range ls.Segments {
			f, err := fsys.OpenFile(filepath.Join(src, seg.Name), os.O_RDONLY, 0)
			if stop("open source", err) {
				return
			}
			buf := make([]byte, seg.Size)
			_, err = f.ReadAt(buf, 0)
			f.Close()
			if err != nil && !fsys.Crashed() && seg.Size > 0 {
				t.Fatalf("read source %s: %v", seg.Name, err)
			}
			for pos := 0; pos < len(buf); pos += 1500 {
				if stop("write chunk", s.WriteChunk(seg.Name, int64(pos), buf[pos:min(pos+1500, len(buf))])) {
					return
				}
			}
			if j < len(ls.Segments)-1 && stop("seal", s.SealSegment(seg.Name)) {
				return
			}
		}
		if stop("verify", s.Verify(ic.hwm)) || stop("consumer state", s.SaveConsumerState(ic.state)) {
			return
		}
		items = append(items, storage.InstallItem{Staging: s, Target: ic.target, Options: storage.InstallOptions{
			Marker: storage.Marker{PromotedHWM: ic.hwm, SourceNode: "n1"}, Now: now}})
	}
	if len(items) == 1 {
		_, err := items[0].Staging.Install(items[0].Target, items[0].Options)
		cases[0].acked = err == nil
		stop("install", err)
		return
	}
	_, errs := storage.InstallBatch(items)
	for i, err := range errs {
		cases[i].acked = err == nil
		stop("install batch", err)
	}
}

// checkInstall checks what a crash left of one case.
func checkInstall(t *testing.T, fsys *crashfs.FS, cfg storage.LogConfig, ic *installCase, i int) {
	t.Helper()
	at, found := logAt(t, fsys, cfg, ic.target)
	_, markerErr := storage.ReadMarkerOn(fsys, ic.target)
	isNew := found && slices.Equal(at, ic.new)
	switch {
	case !found:
	case slices.Equal(at, ic.old) && errors.Is(markerErr, storage.ErrNotFound):
	case isNew && markerErr == nil:
		st, err := storage.LoadConsumerStateOn(fsys, ic.target)
		if err != nil || !st.Equal(ic.state) {
			t.Fatalf("%s: the installed copy's consumer state: got %+v (%v), want %+v", ic.target, st, err, ic.state)
		}
	default:
		t.Fatalf("%s after the crash: %d records (old %d, new %d), marker %v: neither the old copy nor the new one whole",
			ic.target, len(at), len(ic.old), len(ic.new), markerErr)
	}
	if ic.acked && !isNew {
		t.Fatalf("%s: the install was acknowledged, and the path holds %d records without the new copy", ic.target, len(at))
	}
	// A marker says its copy is durable (V6: the files before the marker;
	// V7's durability stamp): a copy the crash left in staging with a
	// marker that reads holds the whole new copy.
	staging := storage.StagingPath(installData, ic.topic, i)
	if _, err := storage.ReadMarkerOn(fsys, staging); err == nil {
		if got, ok := logAt(t, fsys, cfg, staging); !ok || !slices.Equal(got, ic.new) {
			t.Fatalf("%s after the crash: a marker, and %d records (new %d): a staged copy marked durable is not whole", staging, len(got), len(ic.new))
		}
	}
	if found && slices.Equal(at, ic.old) {
		return
	}
	for _, q := range []string{ic.target + ".quarantine", ic.target + ".quarantine.2"} {
		if got, ok := logAt(t, fsys, cfg, q); ok && slices.Equal(got, ic.old) {
			return
		}
	}
	t.Fatalf("%s (case %d): the older copy's %d records are neither at the path nor set aside: lost", ic.target, i, len(ic.old))
}

// logAt opens the log at dir, if there is a directory, and returns its
// records' bodies.
func logAt(t *testing.T, fsys storage.FS, cfg storage.LogConfig, dir string) ([]string, bool) {
	t.Helper()
	if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	l, err := storage.OpenLog(dir, cfg)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	defer l.Close()
	var out []string
	for off := int64(0); off < l.HWM(); {
		recs, err := l.Read(off, 100, 1<<20)
		if err != nil || len(recs) == 0 {
			t.Fatalf("read %s at %d below HWM %d: %v", dir, off, l.HWM(), err)
		}
		for _, r := range recs {
			out = append(out, string(r.Body))
		}
		off += int64(len(recs))
	}
	return out, true
}

// --- sweep: topic directories set aside -----------------------------------

// TestPowerLossSetAsideNeverLosesACopy: a topic directory of an older
// incarnation is set aside under StalePath as a newer one is prepared
// (PrepareTopicDir), or an unmarked one holding a quarantined copy is set
// aside whole by the startup sweep (SweepOrphanTopicDir); the power goes at
// a random operation. Then the older partition's records are at the
// topic's path under the older marker or set aside under StalePath, never
// lost and never at the path under the newer marker; and a prepare
// acknowledged left the newer marker.
//
// It fails when the new StalePath directory's name is not synced into the
// data directory, or StalePath is not synced after the rename into it.
func TestPowerLossSetAsideNeverLosesACopy(t *testing.T) {
	runs, crashes := crashRuns(t, 400), 0
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		orphan := seed%2 == 1
		ops := sweepCrashRun(t, seed, orphan, -1)
		sweepCrashRun(t, seed, orphan, ops)
		crashes += 2 // the counting run's power loss comes after all of it
		if t.Failed() {
			t.Fatalf("seed %d, orphan %v", seed, orphan)
		}
	}
	t.Logf("%d power losses", crashes)
}

func sweepCrashRun(t *testing.T, seed uint64, orphan bool, ops int) int {
	rng := rand.New(rand.NewPCG(seed, 47))
	fsys := crashfs.New()
	if seed%4 < 2 {
		fsys.TearOnCrash(seed)
	}
	cfg := installLogConfig(fsys)
	topicDir := storage.TopicPath(installData, "t")
	part := filepath.Join(topicDir, "0")
	if orphan {
		part = filepath.Join(topicDir, "0.quarantine")
	}
	old := fillLog(t, part, cfg, "old", 1+rng.IntN(50))
	if !orphan {
		f, err := fsys.OpenFile(filepath.Join(topicDir, "incarnation"), os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte("1\n"), 0)
		f.Close()
	}
	if err := fsys.SyncAll("/"); err != nil {
		t.Fatal(err)
	}
	start := fsys.Ops()
	if ops >= 0 {
		crashPoint(rng, fsys, ops)
	}
	var err error
	if orphan {
		_, _, err = storage.SweepOrphanTopicDirOn(fsys, installData, "t")
	} else {
		_, err = storage.PrepareTopicDirOn(fsys, installData, "t", 2)
	}
	if err != nil && !fsys.Crashed() {
		t.Fatalf("set aside: %v, with the power on", err)
	}
	acked := err == nil
	took := fsys.Ops() - start
	powerBack(fsys)

	inc, marked, err := storage.TopicIncarnationOn(fsys, installData, "t")
	if err != nil {
		t.Fatalf("incarnation after the crash: %v", err)
	}
	if acked && !orphan && (!marked || inc != 2) {
		t.Fatalf("the prepare was acknowledged: got incarnation %d (marked %v), want 2", inc, marked)
	}
	places := []string{part}
	name := "t@1"
	if orphan {
		name = "t@unmarked"
	}
	for _, s := range []string{name, name + ".2"} {
		places = append(places, filepath.Join(storage.StalePath(installData), s, filepath.Base(part)))
	}
	kept := false
	for _, p := range places {
		got, ok := logAt(t, fsys, cfg, p)
		switch {
		case !ok:
		case p == part && marked && inc == 2:
			t.Fatalf("%s holds %d records under the newer incarnation: an older copy served as the new one", p, len(got))
		case slices.Equal(got, old):
			kept = true
		}
	}
	if !kept {
		t.Fatalf("the older copy's %d records are neither at %s nor under %s: lost", len(old), part, storage.StalePath(installData))
	}
	return took
}

// --- consumer state: the offset committer's slots -------------------------

// TestPowerLossConsumerStateKeepsTheLastSyncedFlush: a partition's acks
// flushed by an OffsetCommitter (writes, some synced on SyncInterval,
// FlushSync now and then) on a crashing file system, three lives a seed.
// After each power loss the loaded state is one that was flushed, never a
// torn mix of two, and it is at least the last one FlushSync made durable.
//
// It fails when the fsync of a slot is left out, or the directory sync
// that makes a new slot's name durable.
func TestPowerLossConsumerStateKeepsTheLastSyncedFlush(t *testing.T) {
	runs, crashes := crashRuns(t, 300), 0
	const dir = "/data/topics/t/0"
	key := func(s storage.ConsumerState) string { return fmt.Sprint(s.Frontier, s.AckedAhead) }
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		rng := rand.New(rand.NewPCG(seed, 49))
		fsys := crashfs.New()
		if seed%2 == 0 {
			fsys.TearOnCrash(seed)
		}
		cfg := storage.DefaultConsumerConfig()
		cfg.FlushInterval, cfg.SyncInterval = 10*time.Millisecond, 50*time.Millisecond
		cfg.FS = fsys
		written := map[string]bool{key(storage.EmptyConsumerState()): true}
		durable := int64(-1)
		now, ops := time.Unix(1000, 0), 0
		const lives = 3
		for life := range lives + 1 {
			state, err := storage.LoadConsumerStateOn(fsys, dir)
			if err != nil {
				t.Fatalf("seed %d: load after %d crashes: %v", seed, life, err)
			}
			if !written[key(state)] {
				t.Fatalf("seed %d: loaded %s, which was never flushed: torn", seed, key(state))
			}
			if state.Frontier < durable {
				t.Fatalf("seed %d: loaded frontier %d, want at least %d, made durable by FlushSync", seed, state.Frontier, durable)
			}
			if life == lives { // the last crash's check: no more work
				break
			}
			oc, err := storage.NewOffsetCommitter(dir, cfg)
			if err != nil {
				t.Fatal(err)
			}
			before := fsys.Ops()
			if life > 0 {
				crashPoint(rng, fsys, ops)
			}
			for range 40 {
				state.Ack(state.Frontier + 1 + int64(rng.IntN(3)))
				written[key(state)] = true
				oc.Update(state)
				now = now.Add(time.Duration(rng.IntN(30)) * time.Millisecond)
				if rng.IntN(8) == 0 {
					err = oc.FlushSync()
					if err == nil {
						durable = state.Frontier
					}
				} else {
					_, err = oc.Flush(now)
				}
				if err != nil {
					if !fsys.Crashed() {
						t.Fatalf("seed %d: flush: %v, with the power on", seed, err)
					}
					break
				}
			}
			ops = max(ops, fsys.Ops()-before)
			powerBack(fsys)
			crashes++
		}
	}
	t.Logf("%d power losses", crashes)
}

// --- fan-out cursors ------------------------------------------------------

// TestPowerLossCursorKeepsTheLastSyncedWrite: fan-out cursors of two
// children overwritten in place (WriteCursor), some writes synced, on a
// crashing file system. After each power loss each cursor reads back as a
// value that was written, never a torn one, at least the last synced; it
// is missing or unreadable only if none was synced.
//
// It fails when the cursor's fsync is left out, or the sync of its
// directory (a new cursor file's name lost).
func TestPowerLossCursorKeepsTheLastSyncedWrite(t *testing.T) {
	runs, crashes := crashRuns(t, 200), 0
	const dir = "/data/topics/t/0"
	children := []string{"c1", "c2"}
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		rng := rand.New(rand.NewPCG(seed, 50))
		fsys := crashfs.New()
		if seed%2 == 0 {
			fsys.TearOnCrash(seed)
		}
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		fsys.SyncAll("/")
		written := map[string]map[int64]bool{}
		synced := map[string]int64{}
		next := map[string]int64{}
		for _, c := range children {
			written[c], synced[c] = map[int64]bool{}, -1
		}
		ops := 0
		const lives = 3
		for life := range lives + 1 {
			for _, child := range children {
				c, err := storage.ReadCursorOn(fsys, dir, child, 3)
				switch {
				case synced[child] < 0 && (errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrCorrupt)):
					// Never synced: its name may have reached the disk
					// without its bytes (the fan-out copies from the
					// oldest record then).
				case err != nil:
					t.Fatalf("seed %d: cursor %s after %d crashes: %v (last synced %d)", seed, child, life, err, synced[child])
				case !written[child][c.Offset] || c.Offset < synced[child]:
					t.Fatalf("seed %d: cursor %s: got offset %d, want one written, at least the synced %d", seed, child, c.Offset, synced[child])
				}
			}
			if life == lives {
				break
			}
			before := fsys.Ops()
			if life > 0 {
				crashPoint(rng, fsys, ops)
			}
			for range 30 {
				child := children[rng.IntN(len(children))]
				next[child] += 1 + int64(rng.IntN(1000))
				sync := rng.IntN(3) == 0
				written[child][next[child]] = true
				err := storage.WriteCursorOn(fsys, dir, storage.Cursor{Child: child, Epoch: 1, Offset: next[child]}, sync, nil)
				if err != nil {
					if !fsys.Crashed() {
						t.Fatalf("seed %d: write cursor: %v, with the power on", seed, err)
					}
					break
				}
				if sync {
					synced[child] = next[child]
				}
			}
			ops = max(ops, fsys.Ops()-before)
			powerBack(fsys)
			crashes++
		}
	}
	t.Logf("%d power losses", crashes)
}

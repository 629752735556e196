package storage_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/naradmq/narad/storage"
	"github.com/naradmq/narad/storage/crashfs"
)

// A log on a file system that forgets, at each simulated power loss,
// every write and every name not synced (storage/crashfs), or on even
// seeds keeps a random prefix of each file's unsynced bytes (a torn
// write, crashfs.TearOnCrash). Seeded runs of
// commits (write, sync through the node's lane, publish), commits cut
// short (written, perhaps synced, never published), process crashes (the
// log abandoned, its page cache kept) and power losses (Crash), with small
// segments so that rolls and their directory syncs happen throughout.
// After every reopen:
//   - every record whose commit the log acknowledged (Publish returned nil)
//     is there, at its offset, with its bytes;
//   - no offset ever seen holding a record later holds another one, or
//     none: a record a reopen exposed (a batch whole on disk whose commit
//     was never answered: its sender sends it again) stays exposed;
//   - nothing is visible that was never written.
//
// It fails when a sync the commit path needs is removed: the batch's own
// fsync (Log.Sync, or the lane's), the directory sync of a new segment,
// or the sync of what the open's walk found in the page cache.
func TestPowerLossKeepsEveryAcknowledgedRecordAndNeverReusesAnOffset(t *testing.T) {
	for seed := uint64(1); seed <= 150; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { powerLossRun(t, seed) })
	}
}

type powerLoss struct {
	t    *testing.T
	fs   *crashfs.FS
	cfg  storage.LogConfig
	lane *storage.SyncLane
	log  *storage.Log
	// acked: offset to body, for every commit Publish acknowledged; seen:
	// offset to body, for every record a read ever returned; written: every
	// body ever handed to Write.
	acked, seen map[int64]string
	written     map[string]bool
}

const powerLossDir = "/data/topic/0"

func powerLossRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 45))
	cfg := storage.DefaultLogConfig()
	cfg.SegmentMaxBytes = 4 << 10
	cfg.IndexIntervalBytes = 512
	p := &powerLoss{t: t, fs: crashfs.New(), cfg: cfg, acked: map[int64]string{}, seen: map[int64]string{}, written: map[string]bool{}}
	p.cfg.FS = p.fs
	if seed%2 == 0 {
		p.fs.TearOnCrash(seed)
	}
	lane, err := storage.OpenSyncLane(t.TempDir(), storage.DefaultSyncLaneConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer lane.Close()
	p.lane = lane
	p.open()
	for step := range 80 {
		switch r := rng.IntN(20); {
		case r < 13:
			p.commit(rng, step, true)
		case r < 16:
			// Cut short: written, perhaps synced, never published; then the
			// process dies, or the power goes.
			p.commit(rng, step, false)
			if rng.IntN(2) == 0 {
				p.fs.Crash()
			}
			p.open()
		case r < 18:
			p.open() // the process dies; the page cache stays
		default:
			p.fs.Crash()
			p.open()
		}
	}
	p.fs.Crash()
	p.open()
}

// commit writes a batch of 1 to 8 records and, when whole, syncs it
// through the lane and publishes it; a cut-short commit stops after the
// write or after the sync.
func (p *powerLoss) commit(rng *rand.Rand, step int, whole bool) {
	n := 1 + rng.IntN(8)
	entries := make([]storage.Entry, n)
	for i := range entries {
		body := fmt.Sprintf("step %d record %d %s", step, i, string(make([]byte, rng.IntN(600))))
		entries[i] = storage.Entry{Key: []byte("k"), Body: []byte(body)}
		p.written[body] = true
	}
	b, err := p.log.Write(time.Unix(0, 0), entries)
	if err != nil {
		p.t.Fatalf("write: %v", err)
	}
	if !whole && rng.IntN(2) == 0 {
		return
	}
	if err := p.lane.Sync(context.Background(), p.log); err != nil {
		p.t.Fatalf("sync: %v", err)
	}
	if !whole {
		return
	}
	if err := p.log.Publish(b); err != nil {
		p.t.Fatalf("publish: %v", err)
	}
	for i, e := range entries {
		p.acked[b.First()+int64(i)] = string(e.Body)
	}
}

// open (re)opens the log, abandoning the one before as a killed process
// does, and checks what it holds.
func (p *powerLoss) open() {
	t := p.t
	t.Helper()
	l, err := storage.OpenLog(powerLossDir, p.cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	p.log = l
	hwm := l.HWM()
	for off := range p.acked {
		if off >= hwm {
			t.Fatalf("acknowledged offset %d is past the reopened HWM %d: lost", off, hwm)
		}
	}
	next := int64(0)
	for next < hwm {
		recs, err := l.Read(next, 100, 1<<20)
		if err != nil {
			t.Fatalf("read at %d: %v", next, err)
		}
		if len(recs) == 0 {
			t.Fatalf("read at %d below the HWM %d: nothing", next, hwm)
		}
		for _, r := range recs {
			if r.Offset != next || r.Corrupt {
				t.Fatalf("read: got offset %d (corrupt %v), want %d", r.Offset, r.Corrupt, next)
			}
			body := string(r.Body)
			if want, ok := p.acked[next]; ok && body != want {
				t.Fatalf("offset %d: got %.24q, want the acknowledged %.24q", next, body, want)
			}
			if was, ok := p.seen[next]; ok && body != was {
				t.Fatalf("offset %d: got %.24q, once held %.24q", next, body, was)
			}
			if !p.written[body] {
				t.Fatalf("offset %d: got %.24q, which was never written", next, body)
			}
			p.seen[next] = body
			next++
		}
	}
	for off := range p.seen {
		if off >= hwm {
			t.Fatalf("offset %d was seen holding a record and is past the reopened HWM %d", off, hwm)
		}
	}
}

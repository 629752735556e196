package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkInstallSyncs compares LogConfig.InstallSyncs on what a batch
// install makes durable: syncsBatch partition copies staged as a move
// stages them (a segment written chunk by chunk, the consumer state and
// the move's name beside it, nothing synced yet), then InstallBatch, which
// syncs them in the install's order (every file, every marker and staging
// directory, then the renames' directories). One op is one batch; the
// figure to compare is µs/partition.
//
// Its cases: a copy of one small record (the bulk bench's partitions) or
// of 1 MiB; and with or without a writer dirtying pages on the same file
// system meanwhile (writer=on, at NARAD_SYNCS_DIRTY_MIBPS, 32 by default),
// which stands in for the other nodes of a machine that runs three on one
// disk: a syncfs writes their dirty pages back too. NARAD_SYNCS_DIR puts
// the copies (and the writer) on another file system, such as a freshly
// made ext4 of its own for the one-node-per-machine case; empty is the
// test's temporary directory. bench/syncs/run.sh runs the members
// alternately and summarises them.
func BenchmarkInstallSyncs(b *testing.B) {
	sizes := []struct {
		name           string
		records, bytes int
	}{{"1rec", 1, 100}, {"1MiB", 16, 64 << 10}}
	for _, size := range sizes {
		for _, writer := range []bool{false, true} {
			for _, syncs := range []InstallSyncMode{InstallSyncFS, InstallSyncPerFile} {
				name := fmt.Sprintf("size=%s/writer=%s/%s", size.name, map[bool]string{false: "off", true: "on"}[writer],
					map[InstallSyncMode]string{InstallSyncFS: "syncfs", InstallSyncPerFile: "per-file"}[syncs])
				b.Run(name, func(b *testing.B) {
					benchInstallSyncs(b, size.records, size.bytes, writer, syncs)
				})
			}
		}
	}
}

// syncsBatch is the copies of one install batch: a bulk stop's batches
// are a window's worth of its 128 frozen partitions.
const syncsBatch = 64

func benchInstallSyncs(b *testing.B, records, bodyBytes int, writer bool, syncs InstallSyncMode) {
	work := b.TempDir()
	if d := os.Getenv("NARAD_SYNCS_DIR"); d != "" {
		var err error
		if work, err = os.MkdirTemp(d, "syncs-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(work) })
	}
	cfg := DefaultLogConfig()
	cfg.InstallSyncs = syncs
	src := filepath.Join(work, "src")
	l, err := OpenLog(src, cfg)
	if err != nil {
		b.Fatal(err)
	}
	entries := make([]Entry, records)
	for i := range entries {
		body := make([]byte, bodyBytes)
		for j := range body {
			body[j] = byte(i*31 + j*7)
		}
		entries[i] = Entry{Key: []byte("key-" + strconv.Itoa(i)), Body: body}
	}
	if _, err := l.Append(time.Now(), entries); err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	seg, err := os.ReadFile(filepath.Join(src, segmentName(0)))
	if err != nil {
		b.Fatal(err)
	}
	listing := Listing{HWM: int64(records), Clock: time.Now(), Segments: []SegmentInfo{{Name: segmentName(0), Size: int64(len(seg)), ModTime: time.Now()}}}
	state := EmptyConsumerState()
	state.Ack(0)

	if writer {
		stop := dirtyPages(b, filepath.Join(work, "other-nodes"))
		defer stop()
	}
	copies := func(root string) []InstallItem {
		items := make([]InstallItem, syncsBatch)
		for i := range items {
			st, _, err := OpenStaging(StagingPath(root, "t", i), cfg, "bench")
			if err != nil {
				b.Fatal(err)
			}
			if err := st.Reconcile(listing); err != nil {
				b.Fatal(err)
			}
			for pos := 0; pos < len(seg); pos += 256 << 10 { // the mover's chunks
				if err := st.WriteChunk(segmentName(0), int64(pos), seg[pos:min(pos+256<<10, len(seg))]); err != nil {
					b.Fatal(err)
				}
			}
			if err := st.SaveConsumerState(state); err != nil {
				b.Fatal(err)
			}
			items[i] = InstallItem{Staging: st, Target: PartitionPath(root, "t", i),
				Options: InstallOptions{Marker: Marker{PromotedHWM: int64(records), SourceNode: "bench"}, Now: time.Now()}}
		}
		// Targets share one parent; creating it is not an install's cost.
		if err := (*Faults)(nil).mkdirAllSync(osFS{}, filepath.Dir(items[0].Target)); err != nil {
			b.Fatal(err)
		}
		return items
	}
	var items []InstallItem
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		items = stageFresh(b, work, i, func(_ *testing.B, root string) []InstallItem { return copies(root) })
		_, errs := InstallBatch(items)
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	if s := b.Elapsed(); s > 0 {
		b.ReportMetric(float64(s.Microseconds())/float64(b.N*syncsBatch), "µs/partition")
	}
	for _, it := range items {
		if m, err := ReadMarker(it.Target); err != nil || m.PromotedHWM != int64(records) {
			b.Fatalf("install at %s: marker %+v, %v", it.Target, m, err)
		}
	}
}

// dirtyPages starts a writer that appends to files under dir at
// NARAD_SYNCS_DIRTY_MIBPS (32 MiB/s by default) without syncing, as the
// other nodes of a shared disk do between their own syncs, starting a new
// file every 64 MiB and removing the one before. stop ends it and waits.
func dirtyPages(b *testing.B, dir string) (stop func()) {
	rate := 32
	if v := os.Getenv("NARAD_SYNCS_DIRTY_MIBPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("NARAD_SYNCS_DIRTY_MIBPS=%q: want a whole number from 1", v)
		}
		rate = n
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		chunk := make([]byte, 1<<20)
		for i := range chunk {
			chunk[i] = byte(i)
		}
		start := time.Now()
		var f *os.File
		defer func() {
			if f != nil {
				f.Close()
			}
		}()
		for n := 0; ; n++ {
			select {
			case <-done:
				return
			default:
			}
			if n%64 == 0 {
				if f != nil {
					f.Close()
					os.Remove(f.Name())
				}
				var err error
				if f, err = os.Create(filepath.Join(dir, strconv.Itoa(n/64))); err != nil {
					b.Error(err)
					return
				}
			}
			if _, err := f.Write(chunk); err != nil {
				b.Error(err)
				return
			}
			// Pace to the rate: the n+1 MiB written are due by then.
			if ahead := time.Duration(n+1) * time.Second / time.Duration(rate); ahead > time.Since(start) {
				select {
				case <-done:
					return
				case <-time.After(ahead - time.Since(start)):
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

package storage

// Benchmarks come in pairs, BenchmarkX/<case>/narad and BenchmarkX/<case>/raw,
// so that bench/ratio can divide them: raw is what the disk does for the same
// bytes without the log, measured in the same run, and the figure that
// matters is the ratio, not the absolute time. Run them with, e.g.:
//
//	go test ./storage -run '^$' -bench '^BenchmarkAppend$' -benchtime 200x | go run ./bench/ratio

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

const (
	benchKeyBytes  = 16
	benchBodyBytes = 1 << 10
)

// benchEntries returns n records of 1 KiB with 16-byte keys. Bodies are
// random so that no layer below can make them cheaper than real traffic.
func benchEntries(n int, seed uint64) []Entry {
	r := rand.New(rand.NewPCG(seed, 1))
	es := make([]Entry, n)
	for i := range es {
		body := make([]byte, benchBodyBytes)
		for j := 0; j < len(body); j += 8 {
			v := r.Uint64()
			for k := 0; k < 8 && j+k < len(body); k++ {
				body[j+k] = byte(v >> (8 * k))
			}
		}
		es[i] = Entry{Key: []byte(fmt.Sprintf("key-%012d", uint64(i)+seed*1e6)[:benchKeyBytes]), Body: body}
	}
	return es
}

// benchFill appends batches of 1,024 records to l through the group commit
// until its segments hold at least bytes.
func benchFill(tb testing.TB, l *Log, bytes int64) {
	tb.Helper()
	entries := benchEntries(1024, 7)
	now := time.Now()
	for l.Bytes() < bytes {
		commitBatch(tb, l, now, entries)
	}
}

// commitBatch is one group commit of entries as the partition actor runs
// it: Write, Sync (an Abort when it fails), then Publish.
func commitBatch(tb testing.TB, l *Log, now time.Time, entries []Entry) {
	tb.Helper()
	b, err := l.Write(now, entries)
	if err != nil {
		tb.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		tb.Fatal(l.Abort(err))
	}
	if err := l.Publish(b); err != nil {
		tb.Fatal(err)
	}
}

func reportRate(b *testing.B, perOp int, unit string) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(perOp)*float64(b.N)/s, unit)
	}
}

// BenchmarkAppend is the log's durable write path against the same bytes
// written and fsynced by hand. One op is one batch. The goal is
// narad >= 0.8 of raw at batch=256. A batch is one write and one fsync on
// both sides.
func BenchmarkAppend(b *testing.B) {
	for _, batch := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			entries := benchEntries(batch, 1)
			recordBytes := int64(batch * frameSize(benchKeyBytes, benchBodyBytes))
			now := time.Now()

			b.Run("narad", func(b *testing.B) {
				l, err := OpenLog(b.TempDir(), DefaultLogConfig())
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				b.SetBytes(recordBytes)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					commitBatch(b, l, now, entries)
				}
				b.StopTimer()
				if l.HWM() != int64(b.N*batch) {
					b.Fatalf("HWM %d after %d batches of %d", l.HWM(), b.N, batch)
				}
				reportRate(b, batch, "records/s")
			})

			b.Run("raw", func(b *testing.B) {
				// What one Write puts down: the batch's record frames, then
				// its commit frame. Encoding it once keeps the encoder's CPU
				// on narad's side of the ratio.
				ts := now.UnixNano()
				var buf []byte
				for i, e := range entries {
					buf = appendFrame(buf, frame{kind: frameRecord, offset: int64(i), time: ts, key: e.Key, body: e.Body})
				}
				buf = appendFrame(buf, frame{kind: frameCommit, offset: int64(len(entries)), time: ts})
				f, err := os.Create(filepath.Join(b.TempDir(), "raw.log"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				b.SetBytes(recordBytes)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := f.Write(buf); err != nil {
						b.Fatal(err)
					}
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				reportRate(b, batch, "records/s")
			})
		})
	}
}

// BenchmarkCopyPartition is a whole partition move on one disk: the source's
// listing and chunk reads, staging, sealing, verify, age stamps and the
// durable install, against a plain copy of the same segment files. The
// issue's goal is narad >= 0.7 of raw. One op moves 256 MiB, so small
// iteration counts (-benchtime 3x) are the intended use.
func BenchmarkCopyPartition(b *testing.B) {
	b.Run("256MiB", func(b *testing.B) {
		cfg := DefaultLogConfig()
		src, err := OpenLog(filepath.Join(b.TempDir(), "src"), cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer src.Close()
		benchFill(b, src, 256<<20)
		ls, err := src.List(time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if len(ls.Segments) < 4 {
			b.Fatalf("source has %d segments; the copy is meant to cross several", len(ls.Segments))
		}
		// The listing holds 256 MiB give or take the last batch.
		copyBytes := ls.Bytes()

		b.Run("narad", func(b *testing.B) {
			work := b.TempDir()
			buf := make([]byte, 1<<20)
			b.SetBytes(copyBytes)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				root := benchFreshRoot(b, work, i)
				staging := StagingPath(root, "t", 0)
				target := PartitionPath(root, "t", 0)
				if err := benchCopyPartition(src, cfg, staging, target, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			ls2, err := ListClosed(PartitionPath(filepath.Join(work, strconv.Itoa(b.N-1)), "t", 0), cfg, time.Now())
			if err != nil || ls2.HWM != ls.HWM || ls2.Bytes() != copyBytes {
				b.Fatalf("installed copy lists HWM %d, %d bytes, want %d, %d (%v)", ls2.HWM, ls2.Bytes(), ls.HWM, copyBytes, err)
			}
		})

		b.Run("raw", func(b *testing.B) {
			work := b.TempDir()
			b.SetBytes(copyBytes)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				root := benchFreshRoot(b, work, i)
				if err := os.Mkdir(filepath.Join(root, "copy"), 0o755); err != nil {
					b.Fatal(err)
				}
				for _, seg := range ls.Segments {
					if err := benchRawCopy(filepath.Join(src.Dir(), seg.Name), filepath.Join(root, "copy", seg.Name)); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	})
}

// benchFreshRoot gives iteration i an empty directory, with the timer
// stopped: the previous iteration's copy is deleted and that deletion made
// durable, so no iteration pays for another's leftovers.
func benchFreshRoot(b *testing.B, work string, i int) string {
	b.StopTimer()
	defer b.StartTimer()
	if i > 0 {
		if err := os.RemoveAll(filepath.Join(work, strconv.Itoa(i-1))); err != nil {
			b.Fatal(err)
		}
	}
	root := filepath.Join(work, strconv.Itoa(i))
	if err := os.Mkdir(root, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := syncFS(work); err != nil {
		b.Fatal(err)
	}
	return root
}

// benchCopyPartition is what a move worker does, minus the network: every
// byte goes through ReadChunk and WriteChunk in 1 MiB chunks.
func benchCopyPartition(src *Log, cfg LogConfig, staging, target string, buf []byte) error {
	now := time.Now()
	ls, err := src.List(now)
	if err != nil {
		return err
	}
	st, _, err := OpenStaging(staging, cfg, "bench")
	if err != nil {
		return err
	}
	if err := st.Reconcile(ls); err != nil {
		return err
	}
	active := ls.Segments[len(ls.Segments)-1].Name
	for _, r := range st.Missing() {
		for pos := r.From; pos < r.To; {
			n, err := src.ReadChunk(r.Name, pos, buf[:min(int64(len(buf)), r.To-pos)])
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("read chunk of %s at %d: nothing before %d", r.Name, pos, r.To)
			}
			if err := st.WriteChunk(r.Name, pos, buf[:n]); err != nil {
				return err
			}
			pos += int64(n)
		}
		if r.Name != active {
			if err := st.SealSegment(r.Name); err != nil {
				return err
			}
		}
	}
	if err := st.Verify(ls.HWM); err != nil {
		return err
	}
	if err := st.StampAges(ls, now, now); err != nil {
		return err
	}
	_, err = st.Install(target, InstallOptions{Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "bench"}, Now: now})
	return err
}

// benchRawCopy is the baseline: a plain io.Copy of a segment file
// plus one fsync of that file, and no directory fsync. Between two
// *os.File io.Copy uses copy_file_range(2) on Linux, so the bytes never
// cross into user space: this is the floor for the disk, not a copy a
// remote move could make.
func benchRawCopy(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// BenchmarkInstallSmall is a bulk move's last step for 1,000 small
// partitions (one 4 KiB segment of real frames and a marker each): Install
// one by one, InstallBatch all at once, and raw, the disk's fsync rate: 4 KiB
// written to each of 1,000 existing empty files and fsynced, the unit the
// other two are counted in. One op is all 1,000.
func BenchmarkInstallSmall(b *testing.B) {
	const parts = 1000
	b.Run(strconv.Itoa(parts), func(b *testing.B) {
		cfg := DefaultLogConfig()
		seg, hwm := benchSmallSegment(b, cfg)
		listing := Listing{HWM: hwm, Clock: time.Now(), Segments: []SegmentInfo{{Name: segmentName(0), Size: int64(len(seg)), ModTime: time.Now()}}}

		stage := func(b *testing.B, root string) []InstallItem {
			items := make([]InstallItem, parts)
			for i := range items {
				st, _, err := OpenStaging(StagingPath(root, "t", i), cfg, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if err := st.Reconcile(listing); err != nil {
					b.Fatal(err)
				}
				if err := st.WriteChunk(segmentName(0), 0, seg); err != nil {
					b.Fatal(err)
				}
				if err := st.Verify(hwm); err != nil {
					b.Fatal(err)
				}
				items[i] = InstallItem{Staging: st, Target: PartitionPath(root, "t", i),
					Options: InstallOptions{Marker: Marker{PromotedHWM: hwm, SourceNode: "bench"}, Now: time.Now()}}
			}
			// Targets share one parent; creating it is not an install's cost.
			if err := (*Faults)(nil).mkdirAllSync(osFS{}, filepath.Dir(items[0].Target)); err != nil {
				b.Fatal(err)
			}
			return items
		}
		checkInstalled := func(b *testing.B, items []InstallItem) {
			for _, it := range items {
				if m, err := ReadMarker(it.Target); err != nil || m.PromotedHWM != hwm {
					b.Fatalf("install at %s: marker %+v, %v", it.Target, m, err)
				}
			}
		}

		b.Run("serial", func(b *testing.B) {
			work := b.TempDir()
			var items []InstallItem
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				items = stageFresh(b, work, i, stage)
				for _, it := range items {
					if _, err := it.Staging.Install(it.Target, it.Options); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			reportRate(b, parts, "installs/s")
			checkInstalled(b, items)
		})

		b.Run("batch", func(b *testing.B) {
			work := b.TempDir()
			var items []InstallItem
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				items = stageFresh(b, work, i, stage)
				if _, errs := InstallBatch(items); errs != nil {
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			b.StopTimer()
			reportRate(b, parts, "installs/s")
			checkInstalled(b, items)
		})

		// The issue-46 split, in batches of 64 (a freeze's worth): the
		// stage before the freeze, and the install under it of copies
		// staged and untouched, each with the batch's barrier as one
		// syncfs or as an fsync of each file and directory.
		for _, syncs := range []InstallSyncMode{InstallSyncFS, InstallSyncPerFile} {
			mode := map[InstallSyncMode]string{InstallSyncFS: "syncfs", InstallSyncPerFile: "fsync-each"}[syncs]
			fresh := func(b *testing.B, work string, i int) []InstallItem {
				items := stageFresh(b, work, i, stage)
				for _, it := range items {
					it.Staging.cfg.InstallSyncs = syncs
				}
				return items
			}
			const batch = 64
			inBatches := func(items []InstallItem, do func([]InstallItem)) {
				for i := 0; i < len(items); i += batch {
					do(items[i:min(i+batch, len(items))])
				}
			}
			installAll := func(b *testing.B, items []InstallItem) {
				inBatches(items, func(part []InstallItem) {
					_, errs := InstallBatch(part)
					for _, err := range errs {
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			stageAll := func(b *testing.B, items []InstallItem) {
				inBatches(items, func(part []InstallItem) {
					st := make([]StageItem, len(part))
					for j, it := range part {
						st[j] = StageItem{Staging: it.Staging, Marker: it.Options.Marker, Now: it.Options.Now}
					}
					for _, err := range StageBatch(st) {
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			b.Run("stage-"+mode, func(b *testing.B) {
				work := b.TempDir()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					stageAll(b, fresh(b, work, i))
				}
				b.StopTimer()
				reportRate(b, parts, "stages/s")
			})
			b.Run("staged-install-"+mode, func(b *testing.B) {
				work := b.TempDir()
				var items []InstallItem
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					items = fresh(b, work, i)
					b.StopTimer()
					stageAll(b, items)
					b.StartTimer()
					installAll(b, items)
				}
				b.StopTimer()
				reportRate(b, parts, "installs/s")
				checkInstalled(b, items)
			})
			b.Run("batch64-"+mode, func(b *testing.B) {
				work := b.TempDir()
				var items []InstallItem
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					items = fresh(b, work, i)
					installAll(b, items)
				}
				b.StopTimer()
				reportRate(b, parts, "installs/s")
				checkInstalled(b, items)
			})
		}

		b.Run("raw", func(b *testing.B) {
			work := b.TempDir()
			files := make([]*os.File, parts)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				// The files are created with the timer stopped: a create
				// costs about as much as an fsync on some disks, and this
				// member is the fsync rate alone.
				root := benchFreshRoot(b, work, i)
				b.StopTimer()
				for j := range files {
					f, err := os.Create(filepath.Join(root, strconv.Itoa(j)))
					if err != nil {
						b.Fatal(err)
					}
					files[j] = f
				}
				if err := syncFS(root); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for _, f := range files {
					if _, err := f.Write(seg); err != nil {
						b.Fatal(err)
					}
					if err := f.Sync(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				for _, f := range files {
					if err := f.Close(); err != nil {
						b.Fatal(err)
					}
				}
				b.StartTimer()
			}
			b.StopTimer()
			reportRate(b, parts, "fsyncs/s")
		})
	})
}

// stageFresh builds iteration i's staged partitions with the timer stopped.
// Their segment bytes are left dirty on purpose: making them durable is
// part of what an install costs.
func stageFresh(b *testing.B, work string, i int, stage func(*testing.B, string) []InstallItem) []InstallItem {
	root := benchFreshRoot(b, work, i)
	b.StopTimer()
	defer b.StartTimer()
	return stage(b, root)
}

// benchSmallSegment returns the bytes of a real segment of exactly 4 KiB:
// one batch of four records and its commit frame, written by a Log.
func benchSmallSegment(b *testing.B, cfg LogConfig) ([]byte, int64) {
	const records, size = 4, 4 << 10
	bodies := size - frameHeaderBytes - records*frameSize(benchKeyBytes, 0)
	entries := benchEntries(records, 3)
	for i := range entries {
		n := bodies / records
		if i < bodies%records {
			n++
		}
		entries[i].Body = entries[i].Body[:n]
	}
	dir := b.TempDir()
	l, err := OpenLog(dir, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := l.Append(time.Now(), entries); err != nil {
		b.Fatal(err)
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	seg, err := os.ReadFile(filepath.Join(dir, segmentName(0)))
	if err != nil {
		b.Fatal(err)
	}
	if len(seg) != size {
		b.Fatalf("small segment is %d bytes, want %d", len(seg), size)
	}
	return seg, records
}

// BenchmarkRead reads 1 KiB records from a sealed segment in batches of
// 1 MiB, from the page cache: the CPU cost of the read path.
func BenchmarkRead(b *testing.B) {
	cfg := DefaultLogConfig()
	l, err := OpenLog(b.TempDir(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	benchFill(b, l, cfg.SegmentMaxBytes+(8<<20))
	ls, err := l.List(time.Now())
	if err != nil {
		b.Fatal(err)
	}
	sealedEnd := ls.Segments[1].Base
	// The first read of a sealed segment builds its index; that is a
	// one-off per segment, not the steady state.
	if _, err := l.Read(0, 1, 1); err != nil {
		b.Fatal(err)
	}
	var bytes, records int64
	from := int64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		recs, err := l.Read(from, int(sealedEnd-from), 1<<20)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			bytes += int64(len(r.Key) + len(r.Body))
		}
		records += int64(len(recs))
		if from = recs[len(recs)-1].Offset + 1; from >= sealedEnd {
			from = 0
		}
	}
	b.StopTimer()
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(bytes)/1e6/s, "MB/s")
		b.ReportMetric(float64(records)/s, "records/s")
	}
}

// BenchmarkRecoverActiveSegment is OpenLog's recovery walk over a 64 MiB
// active segment with nothing to cut, from the page cache: the CPU a
// restart spends per partition before it can serve.
func BenchmarkRecoverActiveSegment(b *testing.B) {
	b.Run("64MiB", func(b *testing.B) {
		cfg := DefaultLogConfig()
		cfg.SegmentMaxBytes = 128 << 20
		dir := b.TempDir()
		l, err := OpenLog(dir, cfg)
		if err != nil {
			b.Fatal(err)
		}
		benchFill(b, l, 64<<20)
		size, hwm := l.Bytes(), l.HWM()
		if err := l.Close(); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(size)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			l, err := OpenLog(dir, cfg)
			if err != nil {
				b.Fatal(err)
			}
			if l.HWM() != hwm {
				b.Fatalf("recovered HWM %d, want %d", l.HWM(), hwm)
			}
			if err := l.Close(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

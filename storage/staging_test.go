package storage

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// copyPass does what a move worker's catch-up pass does: list the source,
// reconcile the staging area with the listing, fetch what is missing chunk
// by chunk, and seal every sealed segment once its last chunk landed.
func copyPass(t testing.TB, src *Log, st *Staging, now time.Time) (Listing, int64) {
	t.Helper()
	ls, err := src.List(now)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if err := st.Reconcile(ls); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	active := ls.Segments[len(ls.Segments)-1].Name
	buf := make([]byte, 64<<10)
	var copied int64
	for _, r := range st.Missing() {
		for pos := r.From; pos < r.To; {
			want := min(int64(len(buf)), r.To-pos)
			n, err := src.ReadChunk(r.Name, pos, buf[:want])
			if err != nil || int64(n) != want {
				t.Fatalf("read chunk %s at %d: got %d bytes (%v), want %d", r.Name, pos, n, err, want)
			}
			if err := st.WriteChunk(r.Name, pos, buf[:n]); err != nil {
				t.Fatalf("write chunk: %v", err)
			}
			pos += int64(n)
			copied += int64(n)
		}
		if r.Name != active {
			if err := st.SealSegment(r.Name); err != nil {
				t.Fatalf("seal: %v", err)
			}
		}
	}
	return ls, copied
}

func openTestStaging(t testing.TB, dir string) *Staging {
	t.Helper()
	st, _, err := OpenStaging(dir, smallLogConfig(), "test-move")
	if err != nil {
		t.Fatalf("open staging: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// rules C1, V1, V6, V7, G1: a copy taken while appends continue installs the same
// records, the exact HWM and the source's segment ages, with a durable marker.
func TestRoundTripCopyWhileAppendsContinueInstallsTheSameRecordsHWMAndAges(t *testing.T) {
	data := t.TempDir()
	src := openTestLog(t, filepath.Join(data, "src"), smallLogConfig())
	appendN(t, src, 40, 5)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	repeatUntil(&wg, stop, func() bool {
		if _, err := src.Append(t0, entriesFrom(src.HWM(), 3)); err != nil {
			t.Errorf("append during copy: %v", err)
			return false
		}
		return true
	})
	st := openTestStaging(t, StagingPath(data, "orders", 3))
	for pass := 0; pass < 5; pass++ {
		copyPass(t, src, st, time.Now())
	}
	close(stop) // the freeze: nothing commits from here on
	wg.Wait()
	var ls Listing
	for quiet := 0; quiet < 2; {
		var copied int64
		ls, copied = copyPass(t, src, st, time.Now())
		if copied == 0 {
			quiet++
		}
	}
	if err := st.Verify(ls.HWM); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := st.StampAges(ls, ls.Clock, time.Now()); err != nil {
		t.Fatal(err)
	}
	target := PartitionPath(data, "orders", 3)
	if _, err := st.Install(target, InstallOptions{Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, Now: t0}); err != nil {
		t.Fatalf("install: %v", err)
	}

	dst := openTestLog(t, target, smallLogConfig())
	if got, want := dst.HWM(), src.HWM(); got != want {
		t.Fatalf("installed hwm: got %d, want %d", got, want)
	}
	checkRecords(t, readAll(t, dst, 0), 0, src.HWM())
	dls, _ := dst.List(t0)
	if len(dls.Segments) != len(ls.Segments) {
		t.Fatalf("installed segments: got %d, want %d", len(dls.Segments), len(ls.Segments))
	}
	for i, s := range dls.Segments {
		want := ls.Segments[i]
		if s.Name != want.Name || s.Size != want.Size || !s.ModTime.Equal(want.ModTime) {
			t.Fatalf("installed segment %d: got %s %d bytes at %v, want %s %d bytes at %v", i, s.Name, s.Size, s.ModTime, want.Name, want.Size, want.ModTime)
		}
	}
	m, err := ReadMarker(target)
	if err != nil || m.PromotedHWM != ls.HWM || m.SourceNode != "n1" || !m.DurableAt.Equal(t0) {
		t.Fatalf("marker: got %+v (%v), want promoted %d from n1 durable at %v", m, err, ls.HWM, t0)
	}
	if _, err := os.Stat(StagingPath(data, "orders", 3)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("staging dir after install: %v, want it gone", err)
	}
}

// rule C6
func TestStagingCutsASegmentTheListingReportsShorter(t *testing.T) {
	data := t.TempDir()
	src := openTestLog(t, filepath.Join(data, "src"), smallLogConfig())
	appendN(t, src, 3, 2)
	st := openTestStaging(t, StagingPath(data, "t", 0))
	ls, _ := copyPass(t, src, st, t0)
	shorter := ls
	shorter.Segments = append([]SegmentInfo(nil), ls.Segments...)
	shorter.Segments[0].Size -= 10
	if err := st.Reconcile(shorter); err != nil {
		t.Fatal(err)
	}
	if got, want := st.Staged()[shorter.Segments[0].Name], shorter.Segments[0].Size; got != want {
		t.Fatalf("staged size: got %d, want %d", got, want)
	}
	if got := fileSize(t, filepath.Join(st.Dir(), shorter.Segments[0].Name)); got != shorter.Segments[0].Size {
		t.Fatalf("staged file: got %d bytes, want %d", got, shorter.Segments[0].Size)
	}
}

// rule C6
func TestStagingNeverTakesMoreBytesThanTheListingReported(t *testing.T) {
	st := openTestStaging(t, t.TempDir())
	ls := Listing{HWM: 0, Segments: []SegmentInfo{{Name: segmentName(0), Base: 0, Size: 10}}}
	if err := st.Reconcile(ls); err != nil {
		t.Fatal(err)
	}
	if err := st.WriteChunk(segmentName(0), 0, make([]byte, 11)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("chunk past listed size: got %v, want ErrTooLarge", err)
	}
	if err := st.WriteChunk(segmentName(0), 5, make([]byte, 1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("chunk leaving a hole: got %v, want ErrInvalid", err)
	}
	if err := st.WriteChunk(segmentName(64), 0, make([]byte, 1)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("chunk for an unlisted segment: got %v, want ErrInvalid", err)
	}
}

func TestStagingDropsSegmentsTheSourceNoLongerLists(t *testing.T) {
	data := t.TempDir()
	src := openTestLog(t, filepath.Join(data, "src"), smallLogConfig())
	appendN(t, src, 60, 5)
	st := openTestStaging(t, StagingPath(data, "t", 0))
	copyPass(t, src, st, t0)
	if _, err := src.Retain(time.Now(), 0, 1); err != nil {
		t.Fatal(err)
	}
	ls, _ := copyPass(t, src, st, t0)
	if got := len(st.Staged()); got != len(ls.Segments) {
		t.Fatalf("staged segments: got %d, want %d", got, len(ls.Segments))
	}
	if err := st.Verify(ls.HWM); err != nil {
		t.Fatalf("verify: %v", err)
	}
}

func TestStagingResumesWhatAnEarlierAttemptStaged(t *testing.T) {
	data := t.TempDir()
	src := openTestLog(t, filepath.Join(data, "src"), smallLogConfig())
	appendN(t, src, 30, 5)
	dir := StagingPath(data, "t", 0)
	st := openTestStaging(t, dir)
	_, first := copyPass(t, src, st, t0)
	st.Close()
	appendN(t, src, 1, 1)
	st = openTestStaging(t, dir)
	_, second := copyPass(t, src, st, t0)
	if second == 0 || second >= first {
		t.Fatalf("resumed pass copied %d bytes, want only the new tail (first pass copied %d)", second, first)
	}
	if err := st.Verify(src.HWM()); err != nil {
		t.Fatal(err)
	}
}

// rules V1, V2
func TestVerifyCutsACopyThatRecoversPastTheHWMBackToExactlyIt(t *testing.T) {
	for _, hwm := range []int64{0, 4, 7, 9, 10} { // batch ends are 4, 8, 12: 7 and 9 cut inside a batch
		data := t.TempDir()
		src := openTestLog(t, filepath.Join(data, "src"), smallLogConfig())
		appendN(t, src, 3, 4)
		st := openTestStaging(t, StagingPath(data, "t", 0))
		copyPass(t, src, st, t0) // as an older source would: more than hwm
		if err := st.Verify(hwm); err != nil {
			t.Fatalf("verify at %d: %v", hwm, err)
		}
		ls, err := ListClosed(st.Dir(), smallLogConfig(), t0)
		if err != nil || ls.HWM != hwm {
			t.Fatalf("staged copy recovers to %d (%v), want %d", ls.HWM, err, hwm)
		}
		if _, err := st.Install(PartitionPath(data, "t", 0), InstallOptions{Now: t0}); err != nil {
			t.Fatal(err)
		}
		checkRecords(t, readAll(t, openTestLog(t, PartitionPath(data, "t", 0), smallLogConfig()), 0), 0, hwm)
	}
}

// rule V2
func TestVerifyFailsACopyShortOfTheHWM(t *testing.T) {
	data := t.TempDir()
	src := openTestLog(t, filepath.Join(data, "src"), smallLogConfig())
	appendN(t, src, 3, 4)
	st := openTestStaging(t, StagingPath(data, "t", 0))
	ls, _ := copyPass(t, src, st, t0)
	if err := st.Verify(ls.HWM + 1); !errors.Is(err, ErrVerify) {
		t.Fatalf("verify past what was copied: got %v, want ErrVerify", err)
	}
	empty := openTestStaging(t, StagingPath(data, "u", 0))
	if err := empty.Verify(1); !errors.Is(err, ErrVerify) {
		t.Fatalf("verify of an empty staging: got %v, want ErrVerify", err)
	}
}

// rules G1, G2
func TestStampAgesGivesEachSegmentTheAgeItHadOnTheSource(t *testing.T) {
	st := openTestStaging(t, t.TempDir())
	ls := Listing{
		Clock: t0.Add(10 * time.Hour), // the source's clock runs 10 h ahead of ours
		Segments: []SegmentInfo{
			{Name: segmentName(0), Size: 0, ModTime: t0.Add(10*time.Hour - 3*time.Hour)},   // 3 h old
			{Name: segmentName(10), Base: 10, ModTime: t0.Add(10*time.Hour + 2*time.Hour)}, // 2 h in the future: ignored
			{Name: segmentName(20), Base: 20},                                              // no time: kept
		},
	}
	if err := st.Reconcile(ls); err != nil {
		t.Fatal(err)
	}
	before := modTime(t, filepath.Join(st.Dir(), segmentName(20)))
	arrived := t0.Add(time.Second)
	if err := st.StampAges(ls, arrived, t0); err != nil {
		t.Fatal(err)
	}
	if got, want := modTime(t, filepath.Join(st.Dir(), segmentName(0))), arrived.Add(-3*time.Hour); !got.Equal(want) {
		t.Fatalf("3 h old segment: got %v, want %v", got, want)
	}
	if got := modTime(t, filepath.Join(st.Dir(), segmentName(10))); got.Equal(arrived.Add(2 * time.Hour)) {
		t.Fatalf("a time more than an hour in the future was stamped: %v", got)
	}
	if got := modTime(t, filepath.Join(st.Dir(), segmentName(20))); !got.Equal(before) {
		t.Fatalf("segment without a time: got %v, want its write time %v", got, before)
	}
}

// rule G2
func TestStampAgesWithoutASourceClockKeepsTheWriteTimes(t *testing.T) {
	st := openTestStaging(t, t.TempDir())
	ls := Listing{Segments: []SegmentInfo{{Name: segmentName(0), ModTime: t0.Add(-48 * time.Hour)}}}
	st.Reconcile(ls)
	before := modTime(t, filepath.Join(st.Dir(), segmentName(0)))
	if err := st.StampAges(ls, t0, t0); err != nil {
		t.Fatal(err)
	}
	if got := modTime(t, filepath.Join(st.Dir(), segmentName(0))); !got.Equal(before) {
		t.Fatalf("mod time: got %v, want %v", got, before)
	}
}

// installFresh stages a copy of a fresh source with n records and installs it at target.
func installFresh(t *testing.T, data, target string, n int64, opts InstallOptions) (InstallResult, error) {
	t.Helper()
	src := openTestLog(t, filepath.Join(data, "src-"+filepath.Base(t.TempDir())), smallLogConfig())
	if n > 0 {
		appendN(t, src, 1, int(n))
	}
	st := openTestStaging(t, StagingPath(data, "t", 0))
	ls, _ := copyPass(t, src, st, t0)
	if err := st.Verify(ls.HWM); err != nil {
		t.Fatal(err)
	}
	return st.Install(target, opts)
}

// rule V8
func TestInstallQuarantinesACopyWithUnexpiredRecordsAtThePath(t *testing.T) {
	data := t.TempDir()
	target := PartitionPath(data, "t", 0)
	old := openTestLog(t, target, smallLogConfig())
	appendN(t, old, 1, 3)
	old.Close()
	res, err := installFresh(t, data, target, 5, InstallOptions{Now: time.Now(), RetentionAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Quarantined != target+".quarantine" {
		t.Fatalf("quarantined at %q, want %q", res.Quarantined, target+".quarantine")
	}
	checkRecords(t, readAll(t, openTestLog(t, res.Quarantined, smallLogConfig()), 0), 0, 3)
	if got := openTestLog(t, target, smallLogConfig()).HWM(); got != 5 {
		t.Fatalf("installed hwm: got %d, want 5", got)
	}
}

// rule V8
func TestInstallNeverOverwritesAnEarlierQuarantine(t *testing.T) {
	data := t.TempDir()
	target := PartitionPath(data, "t", 0)
	l := openTestLog(t, target, smallLogConfig())
	appendN(t, l, 1, 2)
	l.Close()
	// Each install meets the previous install's copy, which holds a record.
	for i, want := range []string{".quarantine", ".quarantine.2", ".quarantine.3"} {
		res, err := installFresh(t, data, target, 1, InstallOptions{Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if res.Quarantined != target+want {
			t.Fatalf("install %d: quarantined at %q, want %q", i, res.Quarantined, target+want)
		}
	}
	checkRecords(t, readAll(t, openTestLog(t, target+".quarantine", smallLogConfig()), 0), 0, 2)
}

// rule V8
func TestInstallReplacesAnEmptyOrExpiredCopy(t *testing.T) {
	for _, c := range []struct {
		name    string
		records int
		age     time.Duration
	}{{"empty", 0, 0}, {"expired", 3, 3 * time.Hour}} {
		t.Run(c.name, func(t *testing.T) {
			data := t.TempDir()
			target := PartitionPath(data, "t", 0)
			l := openTestLog(t, target, smallLogConfig())
			if c.records > 0 {
				appendN(t, l, 1, c.records)
			}
			l.Close()
			old := time.Now().Add(-c.age)
			os.Chtimes(filepath.Join(target, segmentName(0)), old, old)
			res, err := installFresh(t, data, target, 2, InstallOptions{Now: time.Now(), RetentionAge: time.Hour})
			if err != nil || !res.Replaced || res.Quarantined != "" {
				t.Fatalf("install: got %+v (%v), want the old copy replaced", res, err)
			}
			if _, err := os.Stat(target + ".quarantine"); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("quarantine exists: %v", err)
			}
		})
	}
}

func TestRenameBackPutsAnInstalledCopyBackInStaging(t *testing.T) {
	data := t.TempDir()
	target := PartitionPath(data, "t", 0)
	if _, err := installFresh(t, data, target, 4, InstallOptions{Now: t0}); err != nil {
		t.Fatal(err)
	}
	staging := StagingPath(data, "t", 0)
	if err := RenameBack(target, staging); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("path after rename back: %v, want it gone", err)
	}
	st := openTestStaging(t, staging)
	if err := st.Verify(4); err != nil {
		t.Fatalf("renamed-back copy: %v", err)
	}
	if err := RenameBack(target, staging); err == nil {
		t.Fatal("rename back over an existing staging dir: got nil, want an error")
	}
}

// rules V6, V8
func TestInstallBatchInstallsEveryCopyDurably(t *testing.T) {
	data := t.TempDir()
	src := openTestLog(t, filepath.Join(data, "src"), smallLogConfig())
	appendN(t, src, 2, 3)
	var items []InstallItem
	for p := 0; p < 20; p++ {
		st := openTestStaging(t, StagingPath(data, "bulk", p))
		ls, _ := copyPass(t, src, st, t0)
		if err := st.Verify(ls.HWM); err != nil {
			t.Fatal(err)
		}
		items = append(items, InstallItem{Staging: st, Target: PartitionPath(data, "bulk", p),
			Options: InstallOptions{Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "n2"}, Now: t0}})
	}
	// One target already holds records: it is quarantined, not lost.
	busy := openTestLog(t, items[7].Target, smallLogConfig())
	appendN(t, busy, 1, 1)
	busy.Close()
	results, errs := InstallBatch(items)
	for p, err := range errs {
		if err != nil {
			t.Fatalf("install %d: %v", p, err)
		}
		if got := openTestLog(t, items[p].Target, smallLogConfig()).HWM(); got != 6 {
			t.Fatalf("partition %d: hwm %d, want 6", p, got)
		}
		if m, err := ReadMarker(items[p].Target); err != nil || m.SourceNode != "n2" || !m.DurableAt.Equal(t0) {
			t.Fatalf("partition %d marker: %+v (%v)", p, m, err)
		}
	}
	if results[7].Quarantined == "" {
		t.Fatal("a target holding records was not quarantined")
	}
}

// rule V7
func TestMarkerRoundTripsAndRefusesDamage(t *testing.T) {
	m := Marker{PromotedHWM: 42, ForcePromoted: true, SourceNode: "n3", DurableAt: t0,
		Children: []ChildLink{{Child: "audit", AttachEpoch: 7}}}
	b, err := encodeMarker(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMarker(b)
	if err != nil || got.PromotedHWM != 42 || !got.ForcePromoted || got.SourceNode != "n3" || !got.DurableAt.Equal(t0) || len(got.Children) != 1 || got.Children[0] != m.Children[0] {
		t.Fatalf("round trip: got %+v (%v), want %+v", got, err, m)
	}
	for i := range b {
		d := append([]byte(nil), b...)
		d[i] ^= 0x01
		if _, err := decodeMarker(d); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at byte %d: got %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := ReadMarker(t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing marker: got %v, want ErrNotFound", err)
	}
}

func TestStagingBytesCountsStagedCopiesButNotThoseSetAside(t *testing.T) {
	data := t.TempDir()
	staged := StagingPath(data, "orders", 2)
	aside := StagingPath(data, "orders", 3) + ".quarantine"
	for dir, size := range map[string]int{staged: 300, aside: 5000} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000000.log"), make([]byte, size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := StagingBytes(data); got != 300 {
		t.Fatalf("staging bytes: got %d, want 300 (the copy set aside is quarantine's)", got)
	}
	if got := StagingBytes(t.TempDir()); got != 0 {
		t.Fatalf("staging bytes with no .moves: got %d, want 0", got)
	}
}

// issue 26: a move worker whose stale retry asked for its install twice
// put the same staged copy in one batch twice. The second must not touch
// the partition's path: there it meets the copy the first just installed
// and sets it aside (or removes it, when the owner vouches for it), while
// the first reports success, so the move flips to an empty path.
func TestInstallBatchNeverLetsACopyMeetItsOwnInstall(t *testing.T) {
	data := t.TempDir()
	src := openTestLog(t, filepath.Join(data, "src"), smallLogConfig())
	appendN(t, src, 1, 4)
	st := openTestStaging(t, StagingPath(data, "t", 0))
	ls, _ := copyPass(t, src, st, t0)
	if err := st.Verify(ls.HWM); err != nil {
		t.Fatal(err)
	}
	target := PartitionPath(data, "t", 0)
	item := InstallItem{Staging: st, Target: target, Options: InstallOptions{Marker: Marker{PromotedHWM: ls.HWM, SourceNode: "n1"}, Now: t0}}
	results, errs := InstallBatch([]InstallItem{item, item})
	if errs[0] != nil {
		t.Fatalf("first install: %v", errs[0])
	}
	if errs[1] == nil || !errors.Is(errs[1], ErrClosed) {
		t.Fatalf("second install of the same copy: got %v, want ErrClosed", errs[1])
	}
	if results[1].Quarantined != "" || results[1].Replaced {
		t.Fatalf("second install touched the path: %+v", results[1])
	}
	if got := openTestLog(t, target, smallLogConfig()).HWM(); got != ls.HWM {
		t.Fatalf("installed hwm: got %d, want %d (the first install's copy)", got, ls.HWM)
	}
}

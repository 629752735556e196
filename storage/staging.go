package storage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// PartitionPath is where a partition's log lives under a node's data dir.
// Topics sit under topics/ so that a topic name such as ".moves" cannot
// collide with the node's own directories.
func PartitionPath(dataDir, topic string, partition int) string {
	return filepath.Join(TopicPath(dataDir, topic), strconv.Itoa(partition))
}

// StagingPath is where a move stages its copy: <data>/.moves/<topic>-<N>
// (the partition number is the part after the last dash), or
// <data>/.moves/@long/<topic>/<N> for a topic name too long to carry the
// suffixes (names.go).
func StagingPath(dataDir, topic string, partition int) string {
	return filepath.Join(dataDir, movesDir, stagingName(topic, partition))
}

// StagingBytes is what the copies moves are staging under dataDir hold
// on disk (.moves), less the copies set aside there (quarantine counts
// those). A file that vanishes during the walk (an install renamed it
// away) is not counted.
func StagingBytes(dataDir string) int64 { return stagingBytes(osFS{}, dataDir) }

func stagingBytes(fsys FS, dataDir string) int64 {
	var n int64
	skip := func(name string) bool { return strings.Contains(name, ".quarantine") }
	walkFiles(fsys, filepath.Join(dataDir, ".moves"), skip, func(_ string, info os.FileInfo) {
		n += info.Size()
	})
	return n
}

// Staging is the receiving side of a partition copy: segment files filled
// chunk by chunk, checked against the listing they came from, verified,
// stamped with the source's ages and installed with a rename.
//
// A Staging belongs to one move worker and is not safe for concurrent use.
type Staging struct {
	dir    string
	cfg    LogConfig
	fs     FS               // fsOf(cfg)
	limits map[string]int64 // listed size of each segment of the last listing
	sizes  map[string]int64 // staged size of each segment
	files  map[string]File
	synced map[string]bool // files whose content is known durable
	done   bool            // removed or set aside
	// fresh: OpenStaging created the directory, so no file of an earlier
	// attempt is in it (a consumer state never written reads as empty).
	fresh bool
	// installed: the copy was renamed to the partition's path (dir names
	// it now) and stays open there: a move installs it before its freeze
	// and writes the freeze's tail into it in place (issue 46). It is
	// never removed or quarantined through this handle.
	installed bool
	// renamedFrom is the directory the install renamed the copy out of,
	// and renameDurable whether both directories the rename touched were
	// synced: an install that failed after its rename leaves that to the
	// next Install of the copy, which syncs them before it answers (V6).
	renamedFrom   string
	renameDurable bool
	// staged is the marker Stage made durable, nil once anything is
	// written to the copy after it (stage.go).
	staged *Marker
	// consumer and cursors are what this Staging last wrote of the
	// consumer state and the cursor files (cursors at cursorsHWM), so the
	// same written again is no write at all.
	consumer   *ConsumerState
	cursors    *[][]byte
	cursorsHWM int64
}

// stagingMoveFile names the move a staging directory belongs to.
const stagingMoveFile = "staging.move"

// StagedMove is the name of the move whose staging copy dir is, or was: an
// install carries it to the partition's path, where a worker of the same
// move that starts after a crash or a restart finds its predecessor's
// install (ErrNotFound: no name there).
func StagedMove(dir string) (string, error) {
	b, err := readFile(osFS{}, filepath.Join(dir, stagingMoveFile), readFileMaxBytes)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("staged move of %s: %w", dir, ErrNotFound)
	}
	return string(b), err
}

// OpenStaging opens the staging directory dir for the move named move,
// creating it or resuming what an earlier attempt of the same move staged
// there. A copy left by another move (one whose target was cleared while
// this node was away, rule T2), or by a release that did not name its
// moves, is cleared first: cleared reports it. Resuming it could install
// the segments of a source that no longer has them.
func OpenStaging(dir string, cfg LogConfig, move string) (s *Staging, cleared bool, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, false, err
	}
	if move == "" {
		return nil, false, fmt.Errorf("open staging %s: no move name: %w", dir, ErrInvalid)
	}
	fsys := fsOf(cfg)
	// Most moves find no staging directory: creating it first answers
	// that in one system call, where reading the move's name, looking the
	// directory up and creating it took five (issue 46: the syscalls of a
	// bulk hand-off are most of its CPU).
	fresh := false
	switch err := fsys.Mkdir(dir, 0o755); {
	case err == nil:
		fresh = true
	case errors.Is(err, fs.ErrNotExist):
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return nil, false, fmt.Errorf("create staging %s: %w", dir, err)
		}
		fresh = true
	case !errors.Is(err, fs.ErrExist):
		return nil, false, fmt.Errorf("create staging %s: %w", dir, err)
	}
	if !fresh {
		if b, err := readFile(fsys, filepath.Join(dir, stagingMoveFile), readFileMaxBytes); err == nil && string(b) == move {
			s, err := resumeStaging(dir, cfg)
			return s, false, err
		}
		if err := fsys.RemoveAll(dir); err != nil {
			return nil, false, fmt.Errorf("clear the staging copy of another move at %s: %w", dir, err)
		}
		cleared = true
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return nil, cleared, fmt.Errorf("create staging %s: %w", dir, err)
		}
	}
	// Neither the directory nor the move's name are synced here: Stage and
	// Install sync every file of the copy and its directory before the
	// marker, and the rename's directories after it; a name lost to a
	// crash before that loses a copy that was not the partition yet, and
	// the move copies it again.
	if err := writeFile(fsys, filepath.Join(dir, stagingMoveFile), []byte(move)); err != nil {
		return nil, cleared, fmt.Errorf("name the move of staging %s: %w", dir, err)
	}
	// Created just now: nothing in it to resume.
	s = newStaging(dir, cfg)
	s.fresh = true
	return s, cleared, nil
}

func newStaging(dir string, cfg LogConfig) *Staging {
	return &Staging{dir: dir, cfg: cfg, fs: fsOf(cfg), limits: map[string]int64{}, sizes: map[string]int64{},
		files: map[string]File{}, synced: map[string]bool{}}
}

// resumeStaging opens an existing staging directory as it is.
func resumeStaging(dir string, cfg LogConfig) (*Staging, error) {
	s := newStaging(dir, cfg)
	bases, err := listSegmentBases(s.fs, dir)
	if err != nil {
		return nil, err
	}
	for _, b := range bases {
		st, err := s.fs.Stat(filepath.Join(dir, segmentName(b)))
		if err != nil {
			return nil, fmt.Errorf("open staging: %w", err)
		}
		s.sizes[segmentName(b)] = st.Size()
	}
	return s, nil
}

// Dir is the staging directory; consumer state and cursor files of the copy
// are written into it before Install.
func (s *Staging) Dir() string { return s.dir }

// Staged returns the staged size of each segment.
func (s *Staging) Staged() map[string]int64 {
	out := make(map[string]int64, len(s.sizes))
	for k, v := range s.sizes {
		out[k] = v
	}
	return out
}

// Reconcile brings the staged segments in line with a new listing before any
// chunk of it is fetched: a segment the listing no longer has is removed (the
// source's retention took it), one the listing has and staging lacks is
// created empty, and one staged longer than listed is cut back to the listed
// size (rule C6). Chunks are then accepted only within the listed sizes.
func (s *Staging) Reconcile(ls Listing) error {
	if s.done {
		return fmt.Errorf("reconcile %s: %w", s.dir, ErrClosed)
	}
	listed := make(map[string]int64, len(ls.Segments))
	for _, seg := range ls.Segments {
		base, ok := parseSegmentName(seg.Name)
		if !ok || base != seg.Base || seg.Size < 0 {
			return fmt.Errorf("listing segment %q base %d size %d: %w", seg.Name, seg.Base, seg.Size, ErrInvalid)
		}
		listed[seg.Name] = seg.Size
	}
	changed := false
	for name := range s.sizes {
		if _, ok := listed[name]; ok {
			continue
		}
		s.closeFile(name)
		if err := s.fs.Remove(filepath.Join(s.dir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("reconcile: %w", err)
		}
		delete(s.sizes, name)
		delete(s.synced, name)
		changed = true
	}
	for name, size := range listed {
		staged, ok := s.sizes[name]
		switch {
		case !ok:
			f, err := s.fs.OpenFile(filepath.Join(s.dir, name), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				return fmt.Errorf("reconcile: %w", err)
			}
			s.files[name] = f
			s.sizes[name] = 0
			changed = true
		case staged > size:
			f, err := s.file(name)
			if err != nil {
				return err
			}
			if err := f.Truncate(size); err != nil {
				return fmt.Errorf("reconcile: cut %s back to %d: %w", name, size, err)
			}
			s.sizes[name] = size
			s.synced[name] = false
			s.touched()
		}
	}
	s.limits = listed
	if changed {
		// Not synced: a segment created or removed here is made durable
		// by Stage or Install (the staging directory, before the marker);
		// lost to a crash before that, the next pass finds it again.
		s.touched()
	}
	return nil
}

// Missing returns, for each listed segment, the byte range still to fetch.
func (s *Staging) Missing() []SegmentRange {
	var out []SegmentRange
	for name, limit := range s.limits {
		if have := s.sizes[name]; have < limit {
			out = append(out, SegmentRange{Name: name, From: have, To: limit})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SegmentRange is a byte range [From, To) of a named segment.
type SegmentRange struct {
	Name     string
	From, To int64
}

func (s *Staging) file(name string) (File, error) {
	if f, ok := s.files[name]; ok {
		return f, nil
	}
	f, err := s.fs.OpenFile(filepath.Join(s.dir, name), os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("staging file %s: %w", name, err)
	}
	s.files[name] = f
	return f, nil
}

func (s *Staging) closeFile(name string) error {
	f, ok := s.files[name]
	if !ok {
		return nil
	}
	delete(s.files, name)
	return f.Close()
}

// WriteChunk writes data at byte position pos of a listed segment. Chunks
// must not leave holes and must stay within the listed size.
func (s *Staging) WriteChunk(name string, pos int64, data []byte) error {
	if s.done {
		return fmt.Errorf("write chunk to %s: %w", s.dir, ErrClosed)
	}
	limit, ok := s.limits[name]
	if !ok {
		return fmt.Errorf("chunk for unlisted segment %q: %w", name, ErrInvalid)
	}
	have := s.sizes[name]
	if pos < 0 || pos > have {
		return fmt.Errorf("chunk at %d of %s would leave a hole after %d: %w", pos, name, have, ErrInvalid)
	}
	if end := pos + int64(len(data)); end > limit {
		return fmt.Errorf("chunk to %d of %s past its listed %d bytes: %w", end, name, limit, ErrTooLarge)
	}
	f, err := s.file(name)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Faults.writeAt(f, data, pos); err != nil {
		return fmt.Errorf("write chunk of %s at %d: %w", name, pos, err)
	}
	if end := pos + int64(len(data)); end > have {
		s.sizes[name] = end
	}
	s.synced[name] = false
	s.touched()
	return nil
}

// SealSegment syncs and closes a segment whose last chunk has landed, so a
// large copy's sealed segments become durable as they complete (rule V6)
// and do not hold descriptors. Install syncs whatever is not sealed.
func (s *Staging) SealSegment(name string) error {
	if err := s.syncFile(name, "seal"); err != nil {
		return err
	}
	return s.closeFile(name)
}

// syncFile fsyncs a staged file and records it durable, so that Install
// does not sync it again; op names the step in the error.
func (s *Staging) syncFile(name, op string) error {
	f, err := s.file(name)
	if err != nil {
		return err
	}
	if err := s.cfg.Faults.sync(f); err != nil {
		return fmt.Errorf("%s %s: %w", op, name, err)
	}
	s.synced[name] = true
	return nil
}

// Verify checks that the staged copy recovers to exactly hwm. A copy that
// recovers past it (a source that listed more than its committed bytes) is
// first cut back to hwm: trailing segments past it are removed and the last
// one is cut at the first record at or above hwm, with a commit frame naming
// hwm appended when the cut did not land on one. A copy that recovers short
// of hwm, or not at all, fails with ErrVerify. Sealed segments are copied
// byte for byte and not proved here: a damaged frame the source tolerates
// stays tolerated on the destination (rule V5).
func (s *Staging) Verify(hwm int64) error {
	if s.done {
		return fmt.Errorf("verify %s: %w", s.dir, ErrClosed)
	}
	bases, err := listSegmentBases(s.fs, s.dir)
	if err != nil {
		return err
	}
	for len(bases) > 1 && bases[len(bases)-1] > hwm {
		name := segmentName(bases[len(bases)-1])
		s.closeFile(name)
		if err := s.fs.Remove(filepath.Join(s.dir, name)); err != nil {
			return fmt.Errorf("verify: cut segment past hwm: %w", err)
		}
		delete(s.sizes, name)
		s.touched()
		bases = bases[:len(bases)-1]
	}
	if len(bases) == 0 || bases[len(bases)-1] > hwm {
		return fmt.Errorf("verify %s: no segment at or below hwm %d: %w", s.dir, hwm, ErrVerify)
	}
	base := bases[len(bases)-1]
	name := segmentName(base)
	f, err := s.file(name)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	sc, err := scanSegment(f, st.Size(), base, s.cfg)
	if err != nil {
		return fmt.Errorf("verify %s: %w", name, err)
	}
	if sc.hwm > hwm {
		if err := cutBack(f, st.Size(), base, hwm, s.cfg); err != nil {
			return fmt.Errorf("verify %s: %w", name, err)
		}
		s.synced[name] = false
		s.touched()
	} else if sc.committed < st.Size() {
		if err := f.Truncate(sc.committed); err != nil {
			return fmt.Errorf("verify: cut hidden tail of %s: %w", name, err)
		}
		s.synced[name] = false
		s.touched()
	}
	if st, err = f.Stat(); err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	s.sizes[name] = st.Size()
	if sc, err = scanSegment(f, st.Size(), base, s.cfg); err != nil {
		return fmt.Errorf("verify %s: %w", name, err)
	}
	if sc.hwm != hwm || sc.committed != st.Size() {
		return fmt.Errorf("verify %s: copy recovers to %d, want %d: %w", s.dir, sc.hwm, hwm, ErrVerify)
	}
	return nil
}

// cutBack truncates a segment whose commit frames run past hwm so that it
// recovers to exactly hwm.
func cutBack(f File, size, base, hwm int64, cfg LogConfig) error {
	w := newWindow(f, size, cfg.ReadBufferBytes)
	var pos int64
	var last frame
	var lastTime int64
	for pos < size {
		fr, n, err := w.frameAt(pos)
		if err != nil {
			if isFrameDamage(err) {
				break
			}
			return err
		}
		if fr.kind == frameRecord && fr.offset >= hwm {
			break
		}
		last, lastTime = fr, fr.time
		pos += int64(n)
	}
	if err := f.Truncate(pos); err != nil {
		return fmt.Errorf("cut back to %d: %w", pos, err)
	}
	if hwm == base || (last.kind == frameCommit && last.offset == hwm) {
		return nil
	}
	commit := appendFrame(nil, frame{kind: frameCommit, offset: hwm, time: lastTime})
	if _, err := f.WriteAt(commit, pos); err != nil {
		return fmt.Errorf("write commit frame at cut: %w", err)
	}
	return nil
}

// ageFutureLimit is how far in the future a stamped time may land before it
// is ignored: further than that the source's clock or listing is not sane.
const ageFutureLimit = time.Hour

// StampAges gives each staged segment the age it had on the source: the
// listing's clock minus the segment's modification time, taken back from
// when the listing arrived on this node. Retention then expires moved
// records on schedule whatever the clocks' skew. A listing without a clock
// (an older source) keeps the copy's write times. Call it once the copy is
// complete: writing a chunk moves the time again.
func (s *Staging) StampAges(ls Listing, arrived, now time.Time) error {
	if ls.Clock.IsZero() {
		return nil
	}
	for _, seg := range ls.Segments {
		if seg.ModTime.IsZero() || seg.ModTime.After(ls.Clock.Add(ageFutureLimit)) {
			continue
		}
		if _, ok := s.sizes[seg.Name]; !ok {
			continue
		}
		stamp := arrived.Add(-ls.Clock.Sub(seg.ModTime))
		if stamp.After(now.Add(ageFutureLimit)) {
			continue
		}
		if err := s.fs.Chtimes(filepath.Join(s.dir, seg.Name), stamp, stamp); err != nil {
			return fmt.Errorf("stamp age of %s: %w", seg.Name, err)
		}
	}
	return nil
}

// InstallOptions say how to install a staged copy.
type InstallOptions struct {
	// Marker is written into the copy; Install sets its DurableAt.
	Marker Marker
	// Now stamps DurableAt and is the clock for judging whether records at
	// the path have expired.
	Now time.Time
	// RetentionAge is the topic's age retention: segments at the path older
	// than this hold only expired records. Zero keeps every record.
	RetentionAge time.Duration
	// Vouched, when set, reports whether the partition's owner vouches for
	// the copy found at the path (the stale-copy sweep's judgement, rules
	// S1-S3): such a copy holds nothing the owner lacks and is removed
	// rather than quarantined. It runs with the copy closed.
	Vouched func(dir string) bool
}

// InstallResult says what the install met at the partition's path.
type InstallResult struct {
	// Quarantined is where a copy holding unexpired records was set aside.
	Quarantined string
	// Replaced is true when an empty or expired copy was removed.
	Replaced bool
}

// Install makes the staged copy the partition at target, durably, in an order
// where a crash at any point leaves either the old path or a complete copy:
//
//  1. every file of the copy not yet synced is fsynced (segments, consumer
//     state, cursor files);
//  2. the move marker is written with its durability stamp and fsynced, and
//     the staging directory is synced, so the copy's names are durable;
//  3. whatever sits at target is set aside: quarantined when it holds
//     unexpired records (it may hold records nobody else has) the owner
//     does not vouch for, removed when empty or vouched for (rule V8);
//  4. the staging directory is renamed to target, and both parent
//     directories are synced, so the install is durable before it returns
//     and before anyone proposes the ownership flip.
//
// The Staging then names target and stays open there (Installed): what is
// written through it lands in the installed copy, and a later Install
// makes that durable in place (sealInPlace).
//
// No Log may be open at target: the caller makes sure of it. (The node has
// no per-topic open guard yet, rule V9: a move installs only a partition
// this node does not own, whose actor is therefore not running.)
func (s *Staging) Install(target string, opts InstallOptions) (InstallResult, error) {
	if s.done {
		return InstallResult{}, fmt.Errorf("install %s: %w", s.dir, ErrClosed)
	}
	if s.installed {
		return InstallResult{}, s.sealInPlace(target, opts)
	}
	if s.stagedAs(opts.Marker) {
		// Steps 1 and 2 are what Stage did, and nothing was written since.
		if err := s.closeFiles(); err != nil {
			return InstallResult{}, err
		}
	} else if err := s.Stage(opts.Marker, opts.Now); err != nil {
		return InstallResult{}, err
	}
	if err := s.cfg.Faults.mkdirAllSync(s.fs, filepath.Dir(target)); err != nil {
		return InstallResult{}, err
	}
	if err := s.present(); err != nil {
		return InstallResult{}, err
	}
	res, err := setAside(target, s.cfg, opts)
	if err != nil {
		return res, err
	}
	if err := s.fs.Rename(s.dir, target); err != nil {
		return res, fmt.Errorf("install %s as %s: %w", s.dir, target, err)
	}
	s.renamedFrom = filepath.Dir(s.dir)
	s.dir, s.installed = target, true
	return res, s.syncRename()
}

// syncRename syncs the two directories the install's rename touched,
// once both are synced: until then the rename may not be durable.
func (s *Staging) syncRename() error {
	if s.renameDurable {
		return nil
	}
	if err := s.cfg.Faults.syncDir(s.fs, filepath.Dir(s.dir)); err != nil {
		return err
	}
	if err := s.cfg.Faults.syncDir(s.fs, s.renamedFrom); err != nil {
		return err
	}
	s.renameDurable = true
	return nil
}

// sealInPlace is Install of a copy already installed at target (issue 46:
// installed before the freeze, its tail written into it under the freeze):
// nothing is renamed and nothing at the path is set aside; what was written
// since it was last made durable is, in Stage's order (files, then marker,
// then the directory), so rule V6 holds for the tail as for the copy. A
// copy untouched since, with the same marker, needs nothing.
func (s *Staging) sealInPlace(target string, opts InstallOptions) error {
	if s.dir != target {
		return fmt.Errorf("install %s as %s: it is installed there already: %w", s.dir, target, ErrInvalid)
	}
	if !s.stagedAs(opts.Marker) {
		if err := s.Stage(opts.Marker, opts.Now); err != nil {
			return err
		}
	}
	if err := s.syncRename(); err != nil {
		return err
	}
	return s.closeFiles()
}

// SealedAs reports whether the copy is installed at the partition's path,
// its rename durable, and staged there with marker m with nothing written
// since: an Install with m would have nothing to do.
func (s *Staging) SealedAs(m Marker) bool {
	return s != nil && s.installed && s.renameDurable && s.stagedAs(m)
}

// Installed reports whether the copy is at the partition's path (Install
// renamed it there), where it stays open for the tail of its move.
func (s *Staging) Installed() bool { return s.installed }

// present checks, right before an install sets aside what is at the
// partition's path, that this copy is still there to take its place: one
// already installed (the same copy asked twice in one batch, issue 26) or
// gone from its directory must leave the path as it is, since the copy the
// path holds may be the one that was just installed.
func (s *Staging) present() error {
	if s.done || s.installed {
		return fmt.Errorf("install %s: %w", s.dir, ErrClosed)
	}
	if _, err := s.fs.Lstat(s.dir); err != nil {
		return fmt.Errorf("install %s: the staged copy is gone: %w", s.dir, err)
	}
	return nil
}

// syncFiles fsyncs every regular file in the staging directory that is not
// known durable, and closes every open descriptor.
func (s *Staging) syncFiles() error {
	ents, err := s.fs.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("sync staging: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() || s.synced[name] {
			continue
		}
		if err := s.syncFile(name, "sync staged"); err != nil {
			return err
		}
	}
	return s.closeFiles()
}

func (s *Staging) closeFiles() error {
	var first error
	for name := range s.files {
		if err := s.closeFile(name); err != nil && first == nil {
			first = fmt.Errorf("close staged %s: %w", name, err)
		}
	}
	return first
}

// setAside clears target for an install: a copy with unexpired records is
// renamed to a free <target>.quarantine name unless the owner vouches for
// it (opts.Vouched), anything else is removed. A copy that cannot be
// judged is quarantined: nothing is deleted on a guess.
func setAside(target string, cfg LogConfig, opts InstallOptions) (InstallResult, error) {
	fsys := fsOf(cfg)
	if _, err := fsys.Lstat(target); errors.Is(err, os.ErrNotExist) {
		return InstallResult{}, nil
	} else if err != nil {
		return InstallResult{}, fmt.Errorf("install: %w", err)
	}
	if holdsUnexpiredRecords(target, cfg, opts.Now, opts.RetentionAge) && (opts.Vouched == nil || !opts.Vouched(target)) {
		q, err := quarantine(fsys, target)
		return InstallResult{Quarantined: q}, err
	}
	if err := fsys.RemoveAll(target); err != nil {
		return InstallResult{}, fmt.Errorf("install: remove empty copy at %s: %w", target, err)
	}
	return InstallResult{Replaced: true}, nil
}

// ReclaimEarlierCopy clears target ahead of an install, out of its
// freeze, of the copy an earlier ownership of the partition left on this
// node (a node taking its partitions back after a hand-off meets one at
// every path): removed when it holds no unexpired record or the owner
// vouches for it (vouched, the sweep's judgement: rules S1-S3), left
// otherwise for the install to judge under its freeze (V8). A copy whose
// marker names source, the move's source, is left alone too: it may be an
// install of this very move whose flip may still commit, and only a leader
// read may take that off the path (rule X5). A copy whose marker names
// another source was installed by a move from a node that no longer owns
// the partition: its flip can no longer commit. The caller holds the
// topic's guard, and no log is open at target. It reports whether it
// removed a copy.
func ReclaimEarlierCopy(target, source string, cfg LogConfig, now time.Time, retention time.Duration, vouched func(dir string) bool) (bool, error) {
	fsys := fsOf(cfg)
	if _, err := fsys.Lstat(target); errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("reclaim %s: %w", target, err)
	}
	switch m, err := readMarker(fsys, target); {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return false, nil // a marker that cannot be read: the install judges
	case m.SourceNode == source:
		return false, nil
	}
	if holdsUnexpiredRecords(target, cfg, now, retention) && (vouched == nil || !vouched(target)) {
		return false, nil
	}
	if err := fsys.RemoveAll(target); err != nil {
		return false, fmt.Errorf("reclaim %s: %w", target, err)
	}
	return true, nil
}

// holdsUnexpiredRecords reports whether the partition at dir holds a record
// in a segment retention has not expired. Anything it cannot read counts as
// holding records.
func holdsUnexpiredRecords(dir string, cfg LogConfig, now time.Time, retention time.Duration) bool {
	ls, err := ListClosed(dir, cfg, now)
	if errors.Is(err, ErrNotFound) {
		ents, rerr := fsOf(cfg).ReadDir(dir)
		return rerr != nil || hasSegmentLike(ents)
	}
	if err != nil {
		return true
	}
	for i, seg := range ls.Segments {
		end := ls.HWM
		if i < len(ls.Segments)-1 {
			end = ls.Segments[i+1].Base
		}
		if end <= seg.Base || seg.Size == 0 {
			continue
		}
		if retention <= 0 || now.Sub(seg.ModTime) <= retention {
			return true
		}
	}
	return false
}

func hasSegmentLike(ents []os.DirEntry) bool {
	for _, e := range ents {
		if filepath.Ext(e.Name()) == segmentSuffix {
			return true
		}
	}
	return false
}

// Quarantine sets a closed partition's directory aside as the first free
// <dir>.quarantine[.N] name, durably, and returns that name: for a copy
// that may hold records nobody else has.
func Quarantine(dir string) (string, error) { return quarantine(osFS{}, dir) }

// quarantine renames dir on fsys to the first free <dir>.quarantine[.N]
// name and syncs the parent. It never overwrites an earlier quarantine.
func quarantine(fsys FS, dir string) (string, error) {
	q := dir + ".quarantine"
	for i := 2; ; i++ {
		_, err := fsys.Lstat(q)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			// Not "taken": a disk that fails every lstat would have
			// this loop count forever.
			return "", fmt.Errorf("quarantine %s: %w", dir, err)
		}
		q = dir + ".quarantine." + strconv.Itoa(i)
	}
	if err := fsys.Rename(dir, q); err != nil {
		return "", fmt.Errorf("quarantine %s: %w", dir, err)
	}
	return q, (*Faults)(nil).syncDir(fsys, filepath.Dir(dir))
}

// Quarantine sets the staging copy aside instead of removing it: a move that
// ends without a flip while its source reads dead may hold the only copy.
func (s *Staging) Quarantine() (string, error) {
	if s.done {
		return "", fmt.Errorf("quarantine %s: %w", s.dir, ErrClosed)
	}
	if s.installed {
		return "", fmt.Errorf("quarantine %s: an installed copy is not set aside through its staging: %w", s.dir, ErrInvalid)
	}
	s.closeFiles()
	s.done = true
	return quarantine(s.fs, s.dir)
}

// Remove deletes the staging copy.
func (s *Staging) Remove() error {
	if s.installed {
		return fmt.Errorf("remove staging %s: an installed copy is not removed through its staging: %w", s.dir, ErrInvalid)
	}
	s.closeFiles()
	s.done = true
	if err := s.fs.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("remove staging %s: %w", s.dir, err)
	}
	return (*Faults)(nil).syncDir(s.fs, filepath.Dir(s.dir))
}

// Close releases descriptors; the staged files stay for a later attempt.
func (s *Staging) Close() error { return s.closeFiles() }

// RenameBack takes an installed copy off the partition's path and puts it
// back at its staging path, durably, so a move whose flip did not commit can
// resume from it. No Log may be open at installed (see Install).
func RenameBack(installed, staging string) error { return renameBack(osFS{}, installed, staging) }

// renameBack is RenameBack on fsys.
func renameBack(fsys FS, installed, staging string) error {
	var faults *Faults
	if _, err := fsys.Lstat(staging); err == nil {
		return fmt.Errorf("rename back: %s already exists: %w", staging, ErrInvalid)
	}
	if err := faults.mkdirAllSync(fsys, filepath.Dir(staging)); err != nil {
		return err
	}
	if err := fsys.Rename(installed, staging); err != nil {
		return fmt.Errorf("rename back %s: %w", installed, err)
	}
	if err := faults.syncDir(fsys, filepath.Dir(staging)); err != nil {
		return err
	}
	return faults.syncDir(fsys, filepath.Dir(installed))
}

// InstallItem is one staged copy of a batch install.
type InstallItem struct {
	Staging *Staging
	Target  string
	Options InstallOptions
}

// InstallBatch installs many staged copies, all on the filesystem of the
// first one, in the same order as Install but with the syncs of each step
// shared by the batch: data of every copy, then every marker and staging
// directory (StageBatch, skipped for a copy staged with its marker and
// untouched since), then every rename, after which each directory a rename
// touched is synced once. Each step's syncs are complete before the next
// step starts, so each copy sees exactly Install's ordering; what is shared
// is only the waiting. This is how a node takes thousands of small
// partitions in seconds.
//
// The syncs, as LogConfig.InstallSyncs of the first copy says, three steps
// each complete before the next starts: (1) every file of every copy not
// yet durable (the unsealed segment, consumer state, cursors, the move's
// name; a sealed segment was fsynced as it sealed): one syncfs, or an
// fsync of each; (2) every marker, written after (1), and every staging
// directory's entries: one syncfs, or an fsync of each marker and
// directory; (3) after the renames, each directory they touched (the
// topics' and .moves): an fsync of each, or under InstallSyncFS one
// syncfs past renameDirSyncs of them. That is rule V6: a copy's files are
// durable before its marker exists, its marker and names before its
// rename is issued (a rename that reaches the disk early finds the copy
// whole), and the rename in both directories before InstallBatch returns,
// so before any flip is proposed.
//
// errs[i] is the outcome of items[i]; an item that fails a step skips the
// rest. A batch of one is Install.
func InstallBatch(items []InstallItem) (results []InstallResult, errs []error) {
	results = make([]InstallResult, len(items))
	errs = make([]error, len(items))
	if len(items) == 0 {
		return results, errs
	}
	if len(items) == 1 {
		// One copy syncs its own files and directories.
		results[0], errs[0] = items[0].Staging.Install(items[0].Target, items[0].Options)
		return results, errs
	}
	var stage []StageItem
	var at []int
	inPlace := make([]bool, len(items))
	for i, it := range items {
		switch {
		case it.Staging.done:
			errs[i] = fmt.Errorf("install %s: %w", it.Staging.dir, ErrClosed)
		case it.Staging.installed && it.Staging.dir != it.Target:
			errs[i] = fmt.Errorf("install %s as %s: it is installed there already: %w", it.Staging.dir, it.Target, ErrInvalid)
		case it.Staging.stagedAs(it.Options.Marker):
			inPlace[i] = it.Staging.installed
			errs[i] = it.Staging.closeFiles()
			if inPlace[i] && errs[i] == nil {
				errs[i] = it.Staging.syncRename()
			}
		default:
			// A copy installed already (before its freeze) is staged in
			// place: its tail and marker made durable where it is, with
			// the batch's syncs, and nothing renamed (sealInPlace).
			inPlace[i] = it.Staging.installed
			stage = append(stage, StageItem{Staging: it.Staging, Marker: it.Options.Marker, Now: it.Options.Now})
			at = append(at, i)
		}
	}
	if len(stage) > 0 {
		for j, err := range StageBatch(stage) {
			errs[at[j]] = err
		}
	}
	dirs := map[string]bool{}
	renamed := make([]bool, len(items))
	for i, it := range items {
		if errs[i] != nil || inPlace[i] {
			continue
		}
		errs[i] = func() error {
			if err := it.Staging.cfg.Faults.mkdirAllSync(it.Staging.fs, filepath.Dir(it.Target)); err != nil {
				return err
			}
			if err := it.Staging.present(); err != nil {
				return err
			}
			res, err := setAside(it.Target, it.Staging.cfg, it.Options)
			results[i] = res
			if err != nil {
				return err
			}
			if err := it.Staging.fs.Rename(it.Staging.dir, it.Target); err != nil {
				return fmt.Errorf("install %s as %s: %w", it.Staging.dir, it.Target, err)
			}
			it.Staging.renamedFrom = filepath.Dir(it.Staging.dir)
			dirs[filepath.Dir(it.Target)], dirs[it.Staging.renamedFrom] = true, true
			it.Staging.dir, it.Staging.installed, renamed[i] = it.Target, true, true
			return nil
		}()
	}
	// The renames: every directory they touched, each once, or one
	// syncfs when they touched more than renameDirSyncs of them under
	// InstallSyncFS (copies of many topics: a directory's fsync waits on
	// the disk as long as a syncfs on this machine, and there is one per
	// topic). InstallSyncPerFile always syncs each directory.
	failed := map[string]error{}
	first := items[0].Staging
	if first.cfg.InstallSyncs == InstallSyncFS && len(dirs) > renameDirSyncs {
		err := first.cfg.Faults.syncAll(first.fs, filepath.Dir(first.dir))
		for d := range dirs {
			if err != nil {
				failed[d] = err
			}
		}
	} else {
		var jobs []syncJob
		var order []string
		for d := range dirs {
			jobs = append(jobs, syncJob{owner: len(order), path: d, faults: first.cfg.Faults, fs: first.fs})
			order = append(order, d)
		}
		for k, err := range syncEach(len(order), jobs) {
			if err != nil {
				failed[order[k]] = err
			}
		}
	}
	for i, it := range items {
		if errs[i] != nil || !renamed[i] {
			continue
		}
		if err := failed[filepath.Dir(it.Target)]; err != nil {
			errs[i] = err
		} else if err := failed[it.Staging.renamedFrom]; err != nil {
			errs[i] = err
		} else {
			it.Staging.renameDurable = true
		}
	}
	return results, errs
}

// Package crashfs is a file system in memory for crash tests of storage
// (the FS field of its configs). It remembers, for every file, the bytes
// its last Sync made durable and, for every directory, the names its last
// SyncDir made durable; a crash forgets everything else, as a power loss
// does: a write not synced is gone, and so is a file whose name was never
// synced into its directory. A test that acknowledges only what storage
// said was durable, crashes, reopens and still finds all of it proves
// storage syncs what it must; remove one of those syncs and it fails.
//
// A crash comes when the test says (Crash), or after the k-th operation
// that changes something (CrashAfter): every call after it fails with
// ErrCrashed until Reboot, as a machine without power answers nothing.
// Counting operations and crashing after a random k puts crashes at
// random points of whatever storage was doing, between any two of its
// writes, syncs and renames. With TearOnCrash, a crash keeps a random
// prefix of each file's unsynced bytes, in whole 512-byte sectors,
// instead of none, as a disk that wrote back some of its pages.
//
// A rename is durable once the directory it moved into is synced (SyncDir),
// and its old name goes at the same time; a sync of the directory it left
// keeps the old name until then (unless a new entry took that name), so a
// crash finds the file at one of its names, never both. SyncAll, the
// barrier (syncfs), makes everything durable.
//
// Tests only. It is strict in what it drops and lenient elsewhere: no
// permissions, no hard links, no symlinks (Lstat is Stat), modification
// times that survive a crash, and a RemoveAll that comes back whole when
// its parent's entry was not synced.
package crashfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/naradmq/narad/storage"
)

// FS is a crashable file system in memory; the zero value is not usable,
// call New. Safe for concurrent use.
type FS struct {
	mu    sync.Mutex
	root  *node
	clock int64 // ticks, for modification times
	// life counts crashes: a file opened before one refuses every call.
	life int
	// ops counts the operations that changed something; crashAt, when
	// not 0, is the count after which the power goes (CrashAfter); down
	// is set from then until Reboot.
	ops, crashAt int
	down         bool
	// renames are the renames no SyncDir or SyncAll made durable yet.
	renames []rename
	// tear, when set, keeps a random prefix of each file's unsynced bytes
	// at a crash (TearOnCrash).
	tear *rand.Rand
}

// rename is one rename not yet durable: n moved from one directory's
// entry to another's.
type rename struct {
	n                *node
	fromDir, toDir   *node
	fromName, toName string
}

// ErrCrashed is every call's answer between a crash of CrashAfter and
// Reboot.
var ErrCrashed = errors.New("crashfs: crashed: the power is off")

// node is a file or a directory.
type node struct {
	name  string
	dir   bool
	mod   int64
	data  []byte // a file's bytes now
	kept  []byte // a file's bytes as its last Sync left them
	names map[string]*node
	// keptNames are a directory's entries as its last SyncDir left them.
	keptNames map[string]*node
}

var _ storage.FS = (*FS)(nil)

// New is an empty file system: a root directory, durable.
func New() *FS {
	root := &node{name: "/", dir: true, names: map[string]*node{}, keptNames: map[string]*node{}}
	return &FS{root: root}
}

// Crash forgets every write and every name not synced, and closes every
// file open: what is left is what a machine that lost power would find.
// The file system is usable again at once.
func (c *FS) Crash() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashLocked()
}

// CrashAfter arms a crash: after n more operations that change something
// (a write, a truncation, a sync, a create, a rename, a removal, a new
// directory), the power goes, as Crash, and every call fails with
// ErrCrashed until Reboot. n below 1 disarms it.
func (c *FS) CrashAfter(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.crashAt = 0
	if n > 0 {
		c.crashAt = c.ops + n
	}
}

// Ops is how many operations that change something were done so far: a
// test runs a workload once to learn how many crash points it has.
func (c *FS) Ops() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ops
}

// Crashed reports whether an armed crash happened and Reboot has not run.
func (c *FS) Crashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.down
}

// Reboot ends a crash of CrashAfter: the file system answers again, with
// what the crash left. Files opened before it stay refused.
func (c *FS) Reboot() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down, c.crashAt = false, 0
}

// TearOnCrash makes every later crash keep, of each file's bytes written
// since its last Sync, a prefix of a random number of whole sectors
// (drawn from seed): the pages a disk wrote back before the power went.
// Without it a crash keeps none of them.
func (c *FS) TearOnCrash(seed uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tear = rand.New(rand.NewPCG(seed, 0x7ea2))
}

// crashLocked is the power loss; c.mu is held.
func (c *FS) crashLocked() {
	c.life++
	c.renames = nil
	seen := map[*node]bool{}
	var keep func(n *node)
	keep = func(n *node) {
		if seen[n] {
			return
		}
		seen[n] = true
		if !n.dir {
			// What survived is on the disk: durable, as the synced bytes.
			n.data = c.survivor(n)
			n.kept = slices.Clone(n.data)
			return
		}
		n.names = maps.Clone(n.keptNames)
		for name, child := range n.keptNames {
			child.name = name // a rename that was not durable is undone
			keep(child)
		}
	}
	keep(c.root)
}

// sectorBytes is the unit a torn crash keeps or drops whole: a disk
// writes a 512-byte sector entirely or not at all, so a record smaller
// than a sector, written at a sector's start, is never torn.
const sectorBytes = 512

// survivor is what a crash leaves of file n: its synced bytes, or with
// tears, the first L bytes of what it holds now over the synced ones, L
// a whole number of sectors (or all of it).
func (c *FS) survivor(n *node) []byte {
	if c.tear == nil || slices.Equal(n.data, n.kept) {
		return slices.Clone(n.kept)
	}
	l := min(c.tear.IntN(len(n.data)/sectorBytes+2)*sectorBytes, len(n.data))
	out := slices.Clone(n.data[:l])
	if l < len(n.kept) {
		out = append(out, n.kept[l:]...)
	}
	return out
}

// check refuses every call while the power is off; c.mu is held.
func (c *FS) check(op, name string) error {
	if c.down {
		return &fs.PathError{Op: op, Path: name, Err: ErrCrashed}
	}
	return nil
}

// did counts an operation that changed something, and crashes when an
// armed crash is due; c.mu is held.
func (c *FS) did() {
	c.ops++
	if c.crashAt > 0 && c.ops >= c.crashAt {
		c.crashAt = 0
		c.crashLocked()
		c.down = true
	}
}

// lookup walks path from the root; nil when a part is missing.
func (c *FS) lookup(path string) (parent, n *node, base string, err error) {
	clean := filepath.Clean(path)
	if !filepath.IsAbs(clean) {
		return nil, nil, "", fmt.Errorf("crashfs: %s is not absolute", path)
	}
	if clean == "/" {
		return nil, c.root, "/", nil
	}
	cur := c.root
	parts := splitPath(clean)
	for i, p := range parts {
		if !cur.dir {
			return nil, nil, "", fmt.Errorf("crashfs: %s: %w", path, fs.ErrNotExist)
		}
		next := cur.names[p]
		if i == len(parts)-1 {
			return cur, next, p, nil
		}
		if next == nil {
			return nil, nil, "", fmt.Errorf("crashfs: %s: %w", path, fs.ErrNotExist)
		}
		cur = next
	}
	return nil, nil, "", fmt.Errorf("crashfs: %s: %w", path, fs.ErrNotExist)
}

func splitPath(clean string) []string {
	var parts []string
	for p := clean; p != "/"; p = filepath.Dir(p) {
		parts = append(parts, filepath.Base(p))
	}
	slices.Reverse(parts)
	return parts
}

func (c *FS) tick() int64 {
	c.clock++
	return c.clock
}

// OpenFile opens or creates a file; O_CREATE, O_EXCL and O_TRUNC are
// honoured, the other flags and perm ignored.
func (c *FS) OpenFile(name string, flag int, _ os.FileMode) (storage.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("open", name); err != nil {
		return nil, err
	}
	parent, n, base, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	switch {
	case n == nil && (parent == nil || flag&os.O_CREATE == 0):
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case n != nil && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case n != nil && n.dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	case n == nil:
		n = &node{name: base, mod: c.tick()}
		parent.names[base] = n
		defer c.did()
	case flag&os.O_TRUNC != 0:
		n.data, n.mod = nil, c.tick()
		defer c.did()
	}
	return &file{fs: c, n: n, path: filepath.Clean(name), life: c.life}, nil
}

// existing is the node at name for op, a directory when dir is set; c.mu
// is held.
func (c *FS) existing(op, name string, dir bool) (*node, error) {
	_, n, _, err := c.lookup(name)
	if err == nil && (n == nil || dir && !n.dir) {
		err = fs.ErrNotExist
	}
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	return n, nil
}

// Stat describes a file or directory.
func (c *FS) Stat(name string) (os.FileInfo, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("stat", name); err != nil {
		return nil, err
	}
	n, err := c.existing("stat", name, false)
	if err != nil {
		return nil, err
	}
	return info{n}, nil
}

// ReadDir lists a directory, sorted by name.
// Lstat is Stat: there are no symlinks.
func (c *FS) Lstat(name string) (os.FileInfo, error) { return c.Stat(name) }

func (c *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("readdir", name); err != nil {
		return nil, err
	}
	n, err := c.existing("readdir", name, true)
	if err != nil {
		return nil, err
	}
	var out []fs.DirEntry
	for _, child := range n.names {
		out = append(out, fs.FileInfoToDirEntry(info{child}))
	}
	slices.SortFunc(out, func(a, b fs.DirEntry) int {
		switch {
		case a.Name() < b.Name():
			return -1
		case a.Name() > b.Name():
			return 1
		}
		return 0
	})
	return out, nil
}

// Remove removes a file or an empty directory.
func (c *FS) Remove(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("remove", name); err != nil {
		return err
	}
	parent, n, base, err := c.lookup(name)
	if err == nil && (n == nil || parent == nil) {
		err = fs.ErrNotExist
	}
	if err == nil && n.dir && len(n.names) > 0 {
		err = errors.New("directory not empty")
	}
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	delete(parent.names, base)
	c.did()
	return nil
}

// RemoveAll removes a file or a directory with everything in it; a
// missing one is no error. Durable once its parent is synced.
func (c *FS) RemoveAll(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("removeall", name); err != nil {
		return err
	}
	parent, n, base, err := c.lookup(name)
	if errors.Is(err, fs.ErrNotExist) || err == nil && (n == nil || parent == nil) {
		return nil
	}
	if err != nil {
		return &fs.PathError{Op: "removeall", Path: name, Err: err}
	}
	delete(parent.names, base)
	c.did()
	return nil
}

// Rename moves a file or directory, replacing a file or an empty
// directory at to; it is durable once the directory of to is synced.
func (c *FS) Rename(from, to string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("rename", from); err != nil {
		return err
	}
	fromDir, n, fromName, err := c.lookup(from)
	if err == nil && (n == nil || fromDir == nil) {
		err = fs.ErrNotExist
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	toDir, old, toName, err := c.lookup(to)
	switch {
	case err == nil && toDir == nil:
		err = errors.New("cannot replace the root")
	case err == nil && !toDir.dir:
		err = errors.New("not a directory")
	case err == nil && old == n:
		return nil
	case err == nil && old != nil && old.dir && (!n.dir || len(old.names) > 0):
		err = errors.New("directory not empty")
	case err == nil && old != nil && !old.dir && n.dir:
		err = errors.New("not a directory")
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
	}
	delete(fromDir.names, fromName)
	toDir.names[toName] = n
	n.name = toName
	c.renames = append(c.renames, rename{n: n, fromDir: fromDir, toDir: toDir, fromName: fromName, toName: toName})
	c.did()
	return nil
}

// Chtimes sets a file's or directory's modification time.
func (c *FS) Chtimes(name string, _, mtime time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("chtimes", name); err != nil {
		return err
	}
	n, err := c.existing("chtimes", name, false)
	if err != nil {
		return err
	}
	n.mod = mtime.UnixNano()
	c.did()
	return nil
}

// MkdirAll creates a directory and its missing parents; each new name is
// durable only once its parent is synced.
func (c *FS) MkdirAll(name string, _ os.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("mkdir", name); err != nil {
		return err
	}
	clean := filepath.Clean(name)
	cur := c.root
	for _, p := range splitPath(clean) {
		next := cur.names[p]
		if next == nil {
			next = &node{name: p, dir: true, mod: c.tick(), names: map[string]*node{}, keptNames: map[string]*node{}}
			cur.names[p] = next
			c.did()
			if c.down {
				return &fs.PathError{Op: "mkdir", Path: name, Err: ErrCrashed}
			}
		}
		if !next.dir {
			return &fs.PathError{Op: "mkdir", Path: name, Err: errors.New("not a directory")}
		}
		cur = next
	}
	return nil
}

// Mkdir creates one directory whose parent exists; its name is durable
// only once the parent is synced.
func (c *FS) Mkdir(name string, _ os.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("mkdir", name); err != nil {
		return err
	}
	parent, n, base, err := c.lookup(filepath.Clean(name))
	switch {
	case err != nil:
		return &fs.PathError{Op: "mkdir", Path: name, Err: err}
	case parent == nil || !parent.dir:
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrNotExist}
	case n != nil:
		return &fs.PathError{Op: "mkdir", Path: name, Err: fs.ErrExist}
	}
	parent.names[base] = &node{name: base, dir: true, mod: c.tick(), names: map[string]*node{}, keptNames: map[string]*node{}}
	c.did()
	if c.down {
		return &fs.PathError{Op: "mkdir", Path: name, Err: ErrCrashed}
	}
	return nil
}

// SyncDir makes a directory's entries durable as they are now, with the
// other side of every rename into or out of it; on a file, it is the
// file's Sync (an fsync of a descriptor opened on the path).
func (c *FS) SyncDir(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("syncdir", name); err != nil {
		return err
	}
	n, err := c.existing("syncdir", name, false)
	if err != nil {
		return err
	}
	defer c.did()
	if !n.dir {
		n.kept = slices.Clone(n.data)
		return nil
	}
	n.keptNames = maps.Clone(n.names)
	committed := map[*node]bool{}
	for _, r := range c.renames {
		if r.toDir == n {
			committed[r.n] = true
		}
	}
	rest := c.renames[:0]
	for _, r := range c.renames {
		switch {
		case committed[r.n]:
			// Its new name is durable now, and its old names go with it
			// (every earlier rename of the same file too): one entry.
			if r.fromDir.keptNames[r.fromName] == r.n {
				delete(r.fromDir.keptNames, r.fromName)
			}
		case r.fromDir == n:
			// Not durable yet: the old name stays until the directory
			// it went to is synced, unless another entry took it.
			if _, taken := n.names[r.fromName]; !taken {
				n.keptNames[r.fromName] = r.n
			}
			rest = append(rest, r)
		default:
			rest = append(rest, r)
		}
	}
	c.renames = rest
	return nil
}

// SyncAll is the barrier: every byte and every name reachable now is
// made durable, as a syncfs(2) does.
func (c *FS) SyncAll(dir string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.check("syncall", dir); err != nil {
		return err
	}
	var keep func(n *node)
	keep = func(n *node) {
		if !n.dir {
			n.kept = slices.Clone(n.data)
			return
		}
		n.keptNames = maps.Clone(n.names)
		for _, child := range n.names {
			keep(child)
		}
	}
	keep(c.root)
	c.renames = nil
	c.did()
	return nil
}

// SameFile reports whether two infos of this FS describe one file.
func (c *FS) SameFile(a, b os.FileInfo) bool {
	x, ok1 := a.(info)
	y, ok2 := b.(info)
	return ok1 && ok2 && x.n == y.n
}

// info is a node's os.FileInfo.
type info struct{ n *node }

func (i info) Name() string { return i.n.name }
func (i info) Size() int64  { return int64(len(i.n.data)) }
func (i info) Mode() os.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o755
	}
	return 0o644
}
func (i info) ModTime() time.Time { return time.Unix(0, i.n.mod) }
func (i info) IsDir() bool        { return i.n.dir }
func (i info) Sys() any           { return nil }

// file is an open file; it refuses every call once closed or once the FS
// crashed after it was opened.
type file struct {
	fs     *FS
	n      *node
	path   string
	life   int
	closed bool
}

func (f *file) usable() error {
	if f.fs.down {
		return ErrCrashed
	}
	if f.closed || f.life != f.fs.life {
		return os.ErrClosed
	}
	return nil
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable(); err != nil {
		return 0, err
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable(); err != nil {
		return 0, err
	}
	if end := off + int64(len(p)); end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[off:], p)
	f.n.mod = f.fs.tick()
	f.fs.did()
	return len(p), nil
}

func (f *file) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable(); err != nil {
		return err
	}
	if size < int64(len(f.n.data)) {
		f.n.data = f.n.data[:size:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	f.fs.did()
	return nil
}

// Sync makes the file's bytes durable as they are now.
func (f *file) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable(); err != nil {
		return err
	}
	f.n.kept = slices.Clone(f.n.data)
	f.fs.did()
	return nil
}

func (f *file) Stat() (os.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.usable(); err != nil {
		return nil, err
	}
	return info{f.n}, nil
}

func (f *file) Name() string { return f.path }

func (f *file) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return os.ErrClosed
	}
	f.closed = true
	return nil
}

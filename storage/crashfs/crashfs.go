// Package crashfs is a file system in memory for crash tests of the
// partition log (storage.LogConfig.FS). It remembers, for every file, the
// bytes its last Sync made durable and, for every directory, the names its
// last SyncDir made durable; Crash forgets everything else, as a power loss
// does: a write not synced is gone, and so is a file whose name was never
// synced into its directory. A test that acknowledges only what the log
// said was durable, crashes, reopens and still finds all of it proves the
// log syncs what it must; remove one of those syncs and it fails.
//
// Tests only. It is strict in what it drops and lenient elsewhere: no
// permissions, no hard links, and a crash keeps nothing of a write that
// was not synced (a real disk may keep some of its pages; the log's own
// tests cut and tear writes byte by byte for that).
package crashfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
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
}

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
func (c *FS) Crash() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.life++
	var keep func(n *node)
	keep = func(n *node) {
		if !n.dir {
			n.data = slices.Clone(n.kept)
			return
		}
		n.names = map[string]*node{}
		for name, child := range n.keptNames {
			n.names[name] = child
			keep(child)
		}
	}
	keep(c.root)
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
	case flag&os.O_TRUNC != 0:
		n.data, n.mod = nil, c.tick()
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
	n, err := c.existing("stat", name, false)
	if err != nil {
		return nil, err
	}
	return info{n}, nil
}

// ReadDir lists a directory, sorted by name.
func (c *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
	return nil
}

// MkdirAll creates a directory and its missing parents; each new name is
// durable only once its parent is synced.
func (c *FS) MkdirAll(name string, _ os.FileMode) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	clean := filepath.Clean(name)
	cur := c.root
	for _, p := range splitPath(clean) {
		next := cur.names[p]
		if next == nil {
			next = &node{name: p, dir: true, mod: c.tick(), names: map[string]*node{}, keptNames: map[string]*node{}}
			cur.names[p] = next
		}
		if !next.dir {
			return &fs.PathError{Op: "mkdir", Path: name, Err: errors.New("not a directory")}
		}
		cur = next
	}
	return nil
}

// SyncDir makes a directory's entries durable as they are now.
func (c *FS) SyncDir(name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.existing("syncdir", name, true)
	if err != nil {
		return err
	}
	n.keptNames = map[string]*node{}
	for k, v := range n.names {
		n.keptNames[k] = v
	}
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

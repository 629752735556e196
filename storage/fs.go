package storage

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// FS is the file system under everything storage keeps: a partition
// log's segments, the ingress WAL, consumer state, cursor files, a move's
// staging copy and its install, topic directories and the copies set
// aside. Each user takes it from its config (LogConfig.FS, WALConfig.FS,
// ConsumerConfig.FS; nil is the OS's); the functions that have no config
// (cursors, markers, topic directories, the sweep's) run on the OS's, and
// each has an unexported twin that takes an FS, for the crash tests.
//
// A node runs on the OS's. A crash test hands in one that forgets every
// write not synced when it "loses power" (storage/crashfs), to prove that
// what storage acknowledged was durable and that no crash leaves a torn
// mix of an old and a new state.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Stat(name string) (os.FileInfo, error)
	Lstat(name string) (os.FileInfo, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	Remove(name string) error
	RemoveAll(name string) error
	// Rename moves a file or directory; storage counts it durable once
	// the directory it moved into is synced (SyncDir, rule V6), the old
	// name going with it.
	Rename(from, to string) error
	MkdirAll(name string, perm os.FileMode) error
	// Mkdir creates one directory whose parent exists; it fails with an
	// error matching fs.ErrExist when the name is taken, fs.ErrNotExist
	// when the parent is missing.
	Mkdir(name string, perm os.FileMode) error
	Chtimes(name string, atime, mtime time.Time) error
	// SyncDir makes what an fsync of a descriptor opened on name makes
	// durable: a directory's entries (the names created, renamed and
	// removed in it), or a file's bytes. A file's Sync does not cover
	// its name.
	SyncDir(name string) error
	// SyncAll is a barrier: everything written so far anywhere on the
	// file system holding dir is durable when it returns, names and bytes
	// alike. On the OS it is one syncfs(2) (sync(2) where there is none).
	SyncAll(dir string) error
	// SameFile reports whether two infos this FS gave describe one file.
	SameFile(a, b os.FileInfo) bool
}

// File is an open file of an FS. *os.File is one.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	Stat() (os.FileInfo, error)
	Truncate(size int64) error
	// Sync makes the file's data and size durable.
	Sync() error
	Name() string
}

// osFS is the OS's file system, the FS of a nil FS field.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // a nil *os.File in a File would not be nil
	}
	return f, nil
}
func (osFS) Stat(name string) (os.FileInfo, error)      { return os.Stat(name) }
func (osFS) Lstat(name string) (os.FileInfo, error)     { return os.Lstat(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }
func (osFS) Remove(name string) error                   { return os.Remove(name) }
func (osFS) RemoveAll(name string) error                { return os.RemoveAll(name) }
func (osFS) Rename(from, to string) error               { return os.Rename(from, to) }
func (osFS) MkdirAll(name string, perm os.FileMode) error {
	return os.MkdirAll(name, perm)
}
func (osFS) Mkdir(name string, perm os.FileMode) error { return os.Mkdir(name, perm) }
func (osFS) Chtimes(name string, atime, mtime time.Time) error {
	return os.Chtimes(name, atime, mtime)
}
func (osFS) SameFile(a, b os.FileInfo) bool { return os.SameFile(a, b) }
func (osFS) SyncAll(dir string) error       { return syncFS(dir) }

func (osFS) SyncDir(name string) error {
	d, err := os.Open(name)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// orOS is fsys, or the OS's file system when it is nil.
func orOS(fsys FS) FS {
	if fsys != nil {
		return fsys
	}
	return osFS{}
}

// fsOf is cfg's file system: its FS, or the OS's.
func fsOf(cfg LogConfig) FS { return orOS(cfg.FS) }

// readFile is os.ReadFile on fsys, reading at most limit bytes (a file
// longer than that reads as its first limit bytes; callers pass one more
// than the largest valid file, so it then fails to decode).
func readFile(fsys FS, path string, limit int64) ([]byte, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close() // read-only: nothing to lose on close
	b, err := io.ReadAll(io.NewSectionReader(f, 0, limit))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// readFileMaxBytes bounds readFile where a file has no format limit of
// its own (a move's name, a topic's incarnation): far past any valid one.
const readFileMaxBytes = 1 << 20

// writeFile is os.WriteFile on fsys: created or truncated, written, not
// synced.
func writeFile(fsys FS, path string, data []byte) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close() // the write error is the one worth returning
		return err
	}
	return f.Close()
}

// walkFiles calls fn for every regular file under dir that it can read,
// with its info, skipping the directories skip names: a file or directory
// that vanishes during the walk or cannot be read is left out, and so is
// a dir that is missing (a gauge's walk, which counts what it finds).
func walkFiles(fsys FS, dir string, skip func(name string) bool, fn func(path string, info os.FileInfo)) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		switch {
		case e.IsDir() && skip != nil && skip(e.Name()):
		case e.IsDir():
			walkFiles(fsys, p, skip, fn)
		case e.Type().IsRegular():
			if info, err := e.Info(); err == nil {
				fn(p, info)
			}
		}
	}
}

package storage

import (
	"io"
	"io/fs"
	"os"
)

// FS is the file system a partition log's segments live on
// (LogConfig.FS): the log's directory, its segment files, their reads,
// syncs and truncations. A node's logs use the OS's (nil); a crash test
// hands its logs one that forgets every write not synced when it
// "crashes" (storage/crashfs), to prove that what a log acknowledged was
// durable. The ingress WAL, consumer state, cursors, staging and installs
// use the OS's directly.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Stat(name string) (os.FileInfo, error)
	ReadDir(name string) ([]fs.DirEntry, error)
	Remove(name string) error
	MkdirAll(name string, perm os.FileMode) error
	// SyncDir makes the entries of a directory durable: the names created
	// and removed in it. A file's Sync does not cover its name.
	SyncDir(name string) error
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

// osFS is the OS's file system, the FS of a nil LogConfig.FS.
type osFS struct{}

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err // a nil *os.File in a File would not be nil
	}
	return f, nil
}
func (osFS) Stat(name string) (os.FileInfo, error)      { return os.Stat(name) }
func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }
func (osFS) Remove(name string) error                   { return os.Remove(name) }
func (osFS) MkdirAll(name string, perm os.FileMode) error {
	return os.MkdirAll(name, perm)
}
func (osFS) SameFile(a, b os.FileInfo) bool { return os.SameFile(a, b) }

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

// fsOf is cfg's file system: its FS, or the OS's.
func fsOf(cfg LogConfig) FS {
	if cfg.FS != nil {
		return cfg.FS
	}
	return osFS{}
}

package storage

import (
	"fmt"
	"os"
	"path/filepath"
)

// syncDir makes the directory entries of dir durable (creates, renames and
// removes inside it). A file's fsync does not cover its name.
func syncDir(dir string) error { return (*Faults)(nil).syncDir(dir) }

// syncDir is syncDir under the fault switch f.
func (f *Faults) syncDir(dir string) error { return f.syncDirIn(osFS{}, dir) }

// syncDirIn is syncDir on the file system fsys.
func (f *Faults) syncDirIn(fsys FS, dir string) error {
	if err := f.failSync("dir " + dir); err != nil {
		return err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	f.noteSynced(dir)
	return nil
}

// mkdirAllSync creates dir and its missing parents and syncs each parent whose
// entries changed, so a created path survives a power loss.
func mkdirAllSync(dir string) error { return (*Faults)(nil).mkdirAllSync(dir) }

// mkdirAllSync is mkdirAllSync under the fault switch f.
func (f *Faults) mkdirAllSync(dir string) error { return f.mkdirAllSyncIn(osFS{}, dir) }

// mkdirAllSyncIn is mkdirAllSync on the file system fsys.
func (f *Faults) mkdirAllSyncIn(fsys FS, dir string) error {
	var created []string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if _, err := fsys.Stat(p); err == nil {
			break
		}
		created = append(created, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create dir %s: %w", dir, err)
	}
	for _, p := range created {
		if err := f.syncDirIn(fsys, filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

// writeFileSync writes data to path through a temporary file, fsyncs it and
// renames it into place, then syncs the directory. A crash leaves either the
// old file or the new one, never a torn one.
func writeFileSync(path string, data []byte) error {
	return (*Faults)(nil).writeFileSync(path, data)
}

// writeFileSync is writeFileSync under the fault switch f.
func (f *Faults) writeFileSync(path string, data []byte) error {
	tmp := path + ".tmp"
	file, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if _, err := f.writeAt(file, data, 0); err != nil {
		file.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.sync(file); err != nil {
		file.Close()
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return f.syncDir(filepath.Dir(path))
}

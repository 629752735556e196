package storage

import (
	"fmt"
	"os"
	"path/filepath"
)

// syncDir makes the directory entries of dir on fsys durable (creates,
// renames and removes inside it), under the fault switch f. A file's
// fsync does not cover its name.
func (f *Faults) syncDir(fsys FS, dir string) error {
	if err := f.failSync("dir " + dir); err != nil {
		return err
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync dir %s: %w", dir, err)
	}
	f.noteSynced(dir)
	return nil
}

// syncAll is fsys's barrier (FS.SyncAll: one syncfs on the OS) for the
// file system holding dir, under the fault switch f.
func (f *Faults) syncAll(fsys FS, dir string) error {
	if err := f.failSync("filesystem of " + dir); err != nil {
		return err
	}
	if err := fsys.SyncAll(dir); err != nil {
		return fmt.Errorf("sync filesystem of %s: %w", dir, err)
	}
	f.noteSynced(syncAllNote + dir)
	return nil
}

// syncAllNote marks a barrier among the paths Faults.synced is told.
const syncAllNote = "syncfs:"

// mkdirAllSync creates dir and its missing parents on fsys and syncs each
// parent whose entries changed, so a created path survives a power loss.
func (f *Faults) mkdirAllSync(fsys FS, dir string) error {
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
		if err := f.syncDir(fsys, filepath.Dir(p)); err != nil {
			return err
		}
	}
	return nil
}

// writeFileSync writes data to path on fsys through a temporary file,
// fsyncs it and renames it into place, then syncs the directory. A crash
// leaves either the old file or the new one, never a torn one.
func (f *Faults) writeFileSync(fsys FS, path string, data []byte) error {
	tmp := path + ".tmp"
	file, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
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
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return f.syncDir(fsys, filepath.Dir(path))
}

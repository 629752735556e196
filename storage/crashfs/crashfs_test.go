package crashfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"
	"testing"
)

func write(t *testing.T, f interface {
	WriteAt([]byte, int64) (int, error)
}, s string, at int64) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), at); err != nil {
		t.Fatal(err)
	}
}

func content(t *testing.T, c *FS, path string) string {
	t.Helper()
	f, err := c.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return string(b)
}

func TestACrashKeepsOnlyWhatWasSynced(t *testing.T) {
	c := New()
	if err := c.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, "synced", 0)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	write(t, f, "+lost", 6)
	// /d and /d/a are not in a synced directory yet: all of it goes.
	c.Crash()
	if _, err := c.Stat("/d"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an unsynced directory after a crash: got %v, want it gone", err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("a write through a file open before the crash: got %v, want os.ErrClosed", err)
	}

	c.MkdirAll("/d", 0o755)
	c.SyncDir("/")
	f, _ = c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	write(t, f, "synced", 0)
	f.Sync()
	c.SyncDir("/d")
	write(t, f, "+lost", 6)
	f.Truncate(3) // not synced either
	g, _ := c.OpenFile("/d/b", os.O_RDWR|os.O_CREATE, 0o644)
	write(t, g, "b", 0)
	g.Sync() // its data is durable, its name is not
	c.Crash()
	if got := content(t, c, "/d/a"); got != "synced" {
		t.Fatalf("/d/a after the crash: got %q, want %q", got, "synced")
	}
	if _, err := c.Stat("/d/b"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file whose name was never synced: got %v, want it gone", err)
	}
	ents, err := c.ReadDir("/d")
	if err != nil || len(ents) != 1 || ents[0].Name() != "a" {
		t.Fatalf("/d after the crash: got %v (%v), want [a]", ents, err)
	}
}

func TestRemoveIsDurableOnlyOnceTheDirectoryIsSynced(t *testing.T) {
	c := New()
	c.MkdirAll("/d", 0o755)
	c.SyncDir("/")
	f, _ := c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	write(t, f, "a", 0)
	f.Sync()
	c.SyncDir("/d")
	if err := c.Remove("/d/a"); err != nil {
		t.Fatal(err)
	}
	c.Crash()
	if got := content(t, c, "/d/a"); got != "a" {
		t.Fatalf("a removal never synced: got %q, want the file back", got)
	}
	c.Remove("/d/a")
	c.SyncDir("/d")
	c.Crash()
	if _, err := c.Stat("/d/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a synced removal: got %v, want the file gone", err)
	}
}

func TestSameFileAndExclusiveCreate(t *testing.T) {
	c := New()
	c.MkdirAll("/d", 0o755)
	f, _ := c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if _, err := c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("exclusive create of an existing file: got %v, want fs.ErrExist", err)
	}
	a, _ := f.Stat()
	b, _ := c.Stat("/d/a")
	g, _ := c.OpenFile("/d/g", os.O_RDWR|os.O_CREATE, 0o644)
	other, _ := g.Stat()
	if !c.SameFile(a, b) || c.SameFile(a, other) {
		t.Fatalf("SameFile: got %v for one file and %v for two, want true and false", c.SameFile(a, b), c.SameFile(a, other))
	}
}

func TestARenameIsDurableOnceItsNewDirectoryIsSynced(t *testing.T) {
	for _, synced := range []string{"", "/from", "/to"} {
		c := New()
		c.MkdirAll("/from", 0o755)
		c.MkdirAll("/to", 0o755)
		f, _ := c.OpenFile("/from/a", os.O_RDWR|os.O_CREATE, 0o644)
		write(t, f, "a", 0)
		f.Sync()
		c.SyncAll("/")
		if err := c.Rename("/from/a", "/to/b"); err != nil {
			t.Fatal(err)
		}
		if synced != "" {
			c.SyncDir(synced)
		}
		c.Crash()
		_, errFrom := c.Stat("/from/a")
		_, errTo := c.Stat("/to/b")
		moved := errors.Is(errFrom, fs.ErrNotExist) && errTo == nil
		stayed := errFrom == nil && errors.Is(errTo, fs.ErrNotExist)
		if synced != "/to" && !stayed || synced == "/to" && !moved {
			t.Fatalf("a rename, then a sync of %q and a crash: got /from/a %v, /to/b %v; want it at one name only, moved iff /to was synced",
				synced, errFrom, errTo)
		}
		if moved {
			if got := content(t, c, "/to/b"); got != "a" {
				t.Fatalf("the renamed file: got %q, want %q", got, "a")
			}
		} else {
			ents, _ := c.ReadDir("/from")
			if len(ents) != 1 || ents[0].Name() != "a" {
				t.Fatalf("a rename undone by the crash: got %v in /from, want [a]", ents)
			}
		}
	}
}

func TestCrashAfterStopsEverythingUntilReboot(t *testing.T) {
	c := New()
	c.MkdirAll("/d", 0o755)                                  // op 1
	c.SyncDir("/")                                           // op 2
	f, _ := c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644) // op 3
	c.CrashAfter(2)
	write(t, f, "kept", 0)           // op 4
	if err := f.Sync(); err != nil { // op 5: the last one
		t.Fatal(err)
	}
	if !c.Crashed() {
		t.Fatalf("after the armed operation: got no crash, want one")
	}
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("a write with the power off: got %v, want ErrCrashed", err)
	}
	if _, err := c.Stat("/d"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("a stat with the power off: got %v, want ErrCrashed", err)
	}
	c.Reboot()
	// /d/a's name was never synced: gone, though its bytes were.
	if _, err := c.Stat("/d/a"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after the reboot: got %v, want /d/a gone", err)
	}
	if got := c.Ops(); got != 5 {
		t.Fatalf("operations: got %d, want 5", got)
	}
}

func TestSyncAllMakesEverythingDurable(t *testing.T) {
	c := New()
	c.MkdirAll("/d/e", 0o755)
	f, _ := c.OpenFile("/d/e/a", os.O_RDWR|os.O_CREATE, 0o644)
	write(t, f, "all", 0)
	c.SyncAll("/d")
	write(t, f, "+lost", 3)
	c.Crash()
	if got := content(t, c, "/d/e/a"); got != "all" {
		t.Fatalf("after a SyncAll and a crash: got %q, want %q", got, "all")
	}
}

func TestATornCrashKeepsWholeSectorsOfTheUnsyncedBytes(t *testing.T) {
	old, new := strings.Repeat("o", 1024), strings.Repeat("n", 1536)
	outcomes := map[int]bool{}
	for seed := range uint64(40) {
		c := New()
		c.TearOnCrash(seed)
		c.MkdirAll("/d", 0o755)
		f, _ := c.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
		write(t, f, old, 0)
		f.Sync()
		c.SyncAll("/")
		write(t, f, new, 0)
		c.Crash()
		got := content(t, c, "/d/a")
		sectors := -1
		for k := 0; k <= 3; k++ {
			mix := new[:512*k]
			if 512*k < len(old) {
				mix += old[512*k:]
			}
			if got == mix {
				sectors = k
			}
		}
		if sectors < 0 {
			t.Fatalf("seed %d: got %d bytes, want whole sectors of the new bytes over the old", seed, len(got))
		}
		outcomes[sectors] = true
		c.Crash() // what survived is on the disk: a second crash keeps it
		if again := content(t, c, "/d/a"); again != got {
			t.Fatalf("seed %d: a second crash: got %d bytes changed, want what survived kept", seed, len(again))
		}
	}
	if len(outcomes) < 3 {
		t.Fatalf("40 torn crashes: got %d distinct outcomes (%v), want the sectors kept to vary", len(outcomes), outcomes)
	}
}

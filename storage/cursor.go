package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A fan-out cursor is the parent partition's position in its own log for
// one child topic, in the file fanout-<child>.offset. The parent overwrites
// it in place as the cursor advances (one small write, where a temporary
// file and a rename would cost a create, a rename and a directory fsync per
// advance), and another actor may read it meanwhile (a move source shipping
// it, a destination installing it). A reader can therefore catch a write
// half done; the checksum tells it so, and it reads again.
//
// The record, big-endian:
//
//	off   size  field
//	0     4     magic "NFCR"
//	4     2     version (2)
//	6     2     name length n, 1..255
//	8     8     offset: int64 >= 0
//	16    8     epoch: the link's attach epoch (Topic.AttachEpoch)
//	24    n     child topic name
//	24+n  4     CRC-32C (Castagnoli) of bytes [0, 24+n)
//
// Version 1 had no epoch field (the name at 16, the CRC at 16+n); it still
// decodes, with epoch 0, which no attach has (a Raft index starts at 1), so
// the fan-out engine treats such a file as stale. The epoch is in the file
// because a child detached and attached again gets a new epoch, and a cursor
// left from the earlier attach must not be mistaken for the current one.
//
// The record carries the child's name because a file name cannot always
// carry it: a topic name may be 255 bytes, the prefix and suffix add 14,
// and Linux file names stop at 255. A child whose file name would be too
// long is stored as fanout-~<sha256 of name, hex>.offset ('~' cannot occur
// in a topic name, so the two forms never collide), and ListCursors learns
// its name from the record. The record for a child has one size, at most
// 283 bytes, so an in-place overwrite never changes the file's length and
// stays within one disk sector.
const (
	cursorVersion      = 2
	cursorVersion1     = 1
	cursorFixedBytes   = 28
	cursorFixedBytesV1 = 20
	cursorPrefix       = "fanout-"
	cursorSuffix       = ".offset"
	cursorHashedMark   = "~"
	// cursorMaxChildBytes is the topic name limit (^[A-Za-z0-9._-]{1,255}$).
	cursorMaxChildBytes = 255
	cursorMaxRecord     = cursorFixedBytes + cursorMaxChildBytes
	// cursorMaxFileName is NAME_MAX on Linux file systems.
	cursorMaxFileName = 255
)

var cursorMagic = [4]byte{'N', 'F', 'C', 'R'}

// Cursor is one fan-out cursor: Offset is the next parent offset to copy to
// Child, for the link attached at Epoch.
type Cursor struct {
	Child  string
	Epoch  uint64
	Offset int64
}

// cursorCheckChild enforces the topic name rule, which also keeps the name
// from escaping dir or hiding as a dot file.
func cursorCheckChild(child string) error {
	if len(child) < 1 || len(child) > cursorMaxChildBytes {
		return fmt.Errorf("fan-out child %q: length %d outside [1, %d]: %w", child, len(child), cursorMaxChildBytes, ErrInvalid)
	}
	if child == "." || child == ".." {
		return fmt.Errorf("fan-out child %q: not a topic name: %w", child, ErrInvalid)
	}
	for i := 0; i < len(child); i++ {
		c := child[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("fan-out child %q: byte %d (%q) outside [A-Za-z0-9._-]: %w", child, i, c, ErrInvalid)
		}
	}
	return nil
}

// cursorFileName maps a (valid) child to its file name.
func cursorFileName(child string) string {
	if len(cursorPrefix)+len(child)+len(cursorSuffix) <= cursorMaxFileName {
		return cursorPrefix + child + cursorSuffix
	}
	sum := sha256.Sum256([]byte(child))
	return cursorPrefix + cursorHashedMark + hex.EncodeToString(sum[:]) + cursorSuffix
}

// EncodeCursor is the record a cursor file holds for c, the bytes a move
// ships as a sidecar (ListCursorFiles) and InstallCursor takes. It checks
// nothing: WriteCursor checks c before it writes the record, and a test
// builds the sidecars a source would ship from cursors it knows valid.
func EncodeCursor(c Cursor) []byte { return encodeCursor(c) }

func encodeCursor(c Cursor) []byte {
	b := make([]byte, 0, cursorFixedBytes+len(c.Child))
	b = append(b, cursorMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, cursorVersion)
	b = binary.BigEndian.AppendUint16(b, uint16(len(c.Child)))
	b = binary.BigEndian.AppendUint64(b, uint64(c.Offset))
	b = binary.BigEndian.AppendUint64(b, c.Epoch)
	b = append(b, c.Child...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, consumerCRC))
}

// decodeCursor parses one cursor record of either version; every failure
// wraps ErrCorrupt and it never panics.
func decodeCursor(b []byte) (Cursor, error) {
	fail := func(format string, args ...any) (Cursor, error) {
		return Cursor{}, fmt.Errorf("fan-out cursor: "+format+": %w", append(args, ErrCorrupt)...)
	}
	if len(b) < cursorFixedBytesV1 {
		return fail("%d bytes, need at least %d", len(b), cursorFixedBytesV1)
	}
	if [4]byte(b[0:4]) != cursorMagic {
		return fail("bad magic %x", b[0:4])
	}
	// The CRC is checked before the version is trusted to pick a layout.
	fixed := cursorFixedBytes
	if binary.BigEndian.Uint16(b[4:6]) == cursorVersion1 {
		fixed = cursorFixedBytesV1
	}
	n := int(binary.BigEndian.Uint16(b[6:8]))
	if len(b) != fixed+n {
		return fail("%d bytes, header says %d", len(b), fixed+n)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if got := crc32.Checksum(body, consumerCRC); got != sum {
		return fail("crc %08x, stored %08x", got, sum)
	}
	var c Cursor
	switch v := binary.BigEndian.Uint16(b[4:6]); v {
	case cursorVersion:
		c.Epoch = binary.BigEndian.Uint64(b[16:24])
	case cursorVersion1:
	default:
		return fail("version %d, want %d or %d", v, cursorVersion1, cursorVersion)
	}
	c.Offset = int64(binary.BigEndian.Uint64(b[8:16]))
	if c.Offset < 0 {
		return fail("offset %d below 0", c.Offset)
	}
	name := fixed - 4
	c.Child = string(b[name : name+n])
	if err := cursorCheckChild(c.Child); err != nil {
		return fail("%v", err)
	}
	return c, nil
}

// WriteCursor records c as the fan-out cursor for c.Child in dir,
// overwriting the previous value in place. With sync it returns once the
// value survives power loss; that includes syncing dir every time, because
// an earlier unsynced call may have created the file and its name would
// otherwise not be durable (a dir fsync with nothing new in it is cheap).
// faults, when not nil, may fail the write or its fsyncs (a fault-injection
// run).
func WriteCursor(dir string, c Cursor, sync bool, faults *Faults) error {
	return writeCursor(osFS{}, dir, c, sync, faults)
}

// writeCursor is WriteCursor on fsys.
func writeCursor(fsys FS, dir string, c Cursor, sync bool, faults *Faults) error {
	if err := cursorCheckChild(c.Child); err != nil {
		return fmt.Errorf("write cursor: %w", err)
	}
	if c.Offset < 0 {
		return fmt.Errorf("write cursor %s: offset %d below 0: %w", c.Child, c.Offset, ErrInvalid)
	}
	path := filepath.Join(dir, cursorFileName(c.Child))
	rec := encodeCursor(c)
	// No O_TRUNC: truncating would open a window in which a reader sees an
	// empty file, and on ext4 a truncate-and-rewrite forces writeback on
	// close (auto_da_alloc).
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("open cursor %s: %w", path, err)
	}
	if _, err := faults.writeAt(f, rec, 0); err != nil {
		f.Close()
		return fmt.Errorf("write cursor %s: %w", path, err)
	}
	// A file longer than the record (not written by us) would read as
	// corrupt forever; a child's record has one length, so cut it once. A
	// version 1 file is shorter, so the first overwrite only lengthens it.
	fi, err := f.Stat()
	if err == nil && fi.Size() > int64(len(rec)) {
		err = f.Truncate(int64(len(rec)))
	}
	if err != nil {
		f.Close()
		return fmt.Errorf("resize cursor %s: %w", path, err)
	}
	if sync {
		if err := faults.sync(f); err != nil {
			f.Close()
			return fmt.Errorf("sync cursor %s: %w", path, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close cursor %s: %w", path, err)
	}
	if sync {
		return faults.syncDir(fsys, dir)
	}
	return nil
}

// ReadCursor returns the fan-out cursor for child in dir. A missing file
// wraps ErrNotFound. A file that fails its checksum is read again, up to
// attempts reads in all (ConsumerConfig.CursorReadAttempts), because a writer
// may be mid-overwrite; if no read verifies, the error wraps ErrCorrupt. It
// never returns an unverified value.
func ReadCursor(dir, child string, attempts int) (Cursor, error) {
	_, c, err := cursorRead(cursorReadFile, dir, child, attempts)
	return c, err
}

// ReadCursorFile is ReadCursor that also returns the verified record as
// read, for a move source to ship as a sidecar (rule K8): the destination
// checks the same bytes again rather than trusting a re-encoding.
func ReadCursorFile(dir, child string, attempts int) ([]byte, Cursor, error) {
	return cursorRead(cursorReadFile, dir, child, attempts)
}

// cursorRead is ReadCursorFile with the file read injected, so tests can let
// a writer finish between two reads.
func cursorRead(read func(path string) ([]byte, error), dir, child string, attempts int) ([]byte, Cursor, error) {
	if err := cursorCheckChild(child); err != nil {
		return nil, Cursor{}, fmt.Errorf("read cursor: %w", err)
	}
	if attempts < 1 {
		return nil, Cursor{}, fmt.Errorf("read cursor %s: %d attempts: %w", child, attempts, ErrInvalid)
	}
	path := filepath.Join(dir, cursorFileName(child))
	var last error
	for range attempts {
		b, err := read(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, Cursor{}, fmt.Errorf("read cursor %s: %w", path, ErrNotFound)
		}
		if err != nil {
			return nil, Cursor{}, fmt.Errorf("read cursor %s: %w", path, err)
		}
		c, err := decodeCursor(b)
		if err == nil && c.Child != child {
			// Only a hashed name can hold another child, and only by a
			// SHA-256 collision or a misplaced file; either way not ours.
			err = fmt.Errorf("fan-out cursor: names child %q: %w", c.Child, ErrCorrupt)
		}
		if err == nil {
			return b, c, nil
		}
		last = err
	}
	return nil, Cursor{}, fmt.Errorf("read cursor %s: no verified read in %d attempts: %w", path, attempts, last)
}

// cursorReadFile reads a cursor file, but never more than one byte past the
// largest record: a bigger file is corrupt, and need not be read to say so.
func cursorReadFile(path string) ([]byte, error) {
	return readFile(osFS{}, path, cursorMaxRecord+1)
}

// ListCursors returns every fan-out cursor in dir by child topic, each read
// as ReadCursor does. Other files in dir are ignored. A cursor removed while
// listing is left out; one that does not verify fails the whole listing,
// since a caller shipping cursors must not ship a partial set silently.
func ListCursors(dir string, attempts int) (map[string]Cursor, error) {
	files, err := cursorList(cursorReadFile, dir, attempts)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Cursor, len(files))
	for child, f := range files {
		out[child] = f.cursor
	}
	return out, nil
}

// ListCursorFiles is ListCursors returning each verified record as read,
// in child order: a move source's sidecars (rule K8). Like ListCursors it
// fails on a record that does not verify in attempts reads, so a source
// never ships an unverified record, nor a set short of one silently.
func ListCursorFiles(dir string, attempts int) ([][]byte, error) {
	files, err := cursorList(cursorReadFile, dir, attempts)
	if err != nil {
		return nil, err
	}
	children := slices.Sorted(maps.Keys(files))
	out := make([][]byte, len(children))
	for i, child := range children {
		out[i] = files[child].raw
	}
	return out, nil
}

// cursorFile is a verified cursor record and what it decodes to.
type cursorFile struct {
	raw    []byte
	cursor Cursor
}

func cursorList(read func(path string) ([]byte, error), dir string, attempts int) (map[string]cursorFile, error) {
	entries, err := osFS{}.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("list cursors in %s: %w", dir, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("list cursors in %s: %w", dir, err)
	}
	out := make(map[string]cursorFile)
	for _, e := range entries {
		name := e.Name()
		mid, ok := strings.CutPrefix(name, cursorPrefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if mid, ok = strings.CutSuffix(mid, cursorSuffix); !ok {
			continue
		}
		child := mid
		if hashed, ok := strings.CutPrefix(mid, cursorHashedMark); ok {
			if !cursorIsHashName(hashed) {
				continue // not a name WriteCursor produces
			}
			// The name is only in the record; the read below checks that
			// the record's name hashes back to this file.
			c, err := cursorNameInFile(read, filepath.Join(dir, name), attempts)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("list cursors in %s: %w", dir, err)
			}
			child = c
		}
		if cursorCheckChild(child) != nil || cursorFileName(child) != name {
			continue // not a name WriteCursor produces
		}
		raw, c, err := cursorRead(read, dir, child, attempts)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list cursors in %s: %w", dir, err)
		}
		out[child] = cursorFile{raw: raw, cursor: c}
	}
	return out, nil
}

// cursorIsHashName reports whether s is what cursorFileName puts after the
// '~': lower-case hex of a SHA-256.
func cursorIsHashName(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// cursorNameInFile reads the child name from a hashed-name cursor file,
// retrying torn reads like cursorRead.
func cursorNameInFile(read func(path string) ([]byte, error), path string, attempts int) (string, error) {
	if attempts < 1 {
		return "", fmt.Errorf("read cursor %s: %d attempts: %w", path, attempts, ErrInvalid)
	}
	var last error
	for range attempts {
		b, err := read(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("read cursor %s: %w", path, ErrNotFound)
		}
		if err != nil {
			return "", fmt.Errorf("read cursor %s: %w", path, err)
		}
		c, err := decodeCursor(b)
		if err == nil {
			return c.Child, nil
		}
		last = err
	}
	return "", fmt.Errorf("read cursor %s: no verified read in %d attempts: %w", path, attempts, last)
}

// RemoveCursor deletes the fan-out cursor for child and makes the removal
// durable, so a deleted child does not get a cursor back after a power loss.
// Removing a missing cursor is not an error: removal is retried after
// failures, and the end state is what matters.
func RemoveCursor(dir, child string) error {
	if err := cursorCheckChild(child); err != nil {
		return fmt.Errorf("remove cursor: %w", err)
	}
	path := filepath.Join(dir, cursorFileName(child))
	fsys := osFS{}
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove cursor %s: %w", path, err)
	}
	return (*Faults)(nil).syncDir(fsys, dir)
}

// ClampCursor lowers a cursor past hwm to hwm. A moved partition's
// destination may have a lower HWM than the source had; a cursor past it
// would skip records the destination appends at those offsets. Lowering
// only re-forwards records, which fan-out tolerates, so no warning is due.
func ClampCursor(offset, hwm int64) int64 {
	return min(offset, hwm)
}

// InstallCursor writes a cursor shipped from a move source (rule K8): it
// checks raw again (a sidecar damaged in transit must fail the pass, never
// install garbage), lowers the offset to hwm, the installed partition's high
// watermark (rule K6, silently: see ClampCursor), and writes it as this
// version's record. It returns the cursor as installed.
func InstallCursor(dir string, raw []byte, hwm int64, sync bool) (Cursor, error) {
	return installCursor(osFS{}, dir, raw, hwm, sync)
}

// installCursor is InstallCursor on fsys.
func installCursor(fsys FS, dir string, raw []byte, hwm int64, sync bool) (Cursor, error) {
	c, err := decodeCursor(raw)
	if err != nil {
		return Cursor{}, fmt.Errorf("install cursor: %w", err)
	}
	if hwm < 0 {
		return Cursor{}, fmt.Errorf("install cursor %s: hwm %d below 0: %w", c.Child, hwm, ErrInvalid)
	}
	c.Offset = ClampCursor(c.Offset, hwm)
	if err := writeCursor(fsys, dir, c, sync, nil); err != nil {
		return Cursor{}, fmt.Errorf("install cursor: %w", err)
	}
	return c, nil
}

// VerifyCursor checks a cursor record received from elsewhere (a move's
// sidecar) and returns what it holds; a record that does not verify wraps
// ErrCorrupt.
func VerifyCursor(raw []byte) (Cursor, error) {
	c, err := decodeCursor(raw)
	if err != nil {
		return Cursor{}, fmt.Errorf("verify cursor: %w", err)
	}
	return c, nil
}

// ReplaceCursors makes the fan-out cursors in dir exactly the records in
// raws, each clamped to hwm (rule K6): the install of a moved partition's
// sidecars (rule K8). Every record is verified before anything is written,
// so a bad one fails the call with dir unchanged; a cursor file in dir for
// a child not in raws (left by an earlier attempt) is removed. Two records
// for one child are ErrInvalid: a source lists a child once.
func ReplaceCursors(dir string, raws [][]byte, hwm int64, sync bool) ([]Cursor, error) {
	return replaceCursors(osFS{}, dir, raws, hwm, sync)
}

// replaceCursors is ReplaceCursors on fsys.
func replaceCursors(fsys FS, dir string, raws [][]byte, hwm int64, sync bool) ([]Cursor, error) {
	keep := make(map[string]bool, len(raws))
	for _, raw := range raws {
		c, err := VerifyCursor(raw)
		if err != nil {
			return nil, fmt.Errorf("replace cursors in %s: %w", dir, err)
		}
		if keep[cursorFileName(c.Child)] {
			return nil, fmt.Errorf("replace cursors in %s: child %s twice: %w", dir, c.Child, ErrInvalid)
		}
		keep[cursorFileName(c.Child)] = true
	}
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("replace cursors in %s: %w", dir, err)
	}
	removed := false
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, cursorPrefix) || !strings.HasSuffix(name, cursorSuffix) || keep[name] || !e.Type().IsRegular() {
			continue
		}
		if err := fsys.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("replace cursors in %s: %w", dir, err)
		}
		removed = true
	}
	out := make([]Cursor, 0, len(raws))
	for _, raw := range raws {
		c, err := installCursor(fsys, dir, raw, hwm, sync)
		if err != nil {
			return nil, fmt.Errorf("replace cursors in %s: %w", dir, err)
		}
		out = append(out, c)
	}
	if removed && sync && len(raws) == 0 {
		return out, (*Faults)(nil).syncDir(fsys, dir)
	}
	return out, nil
}

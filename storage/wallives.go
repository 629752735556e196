package storage

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"sort"
)

// A WAL's lives: every open begins one, under a random ID of its own, and
// every record appended in it is known to partitions by (that ID, its seq),
// its Origin. A new ID at every open, rather than one per WAL directory,
// is what makes the pair name one record only: a directory restored from a
// backup or copied to another machine hands out seqs it, or its twin,
// handed out already, and a WAL whose segments were lost starts again
// below seqs it used. Under a fresh ID none of those can be taken for a
// record a partition already holds (Log.Committed), which would lose the
// new one. The lives file keeps, for the records still in the segments,
// which life wrote them, so a replay names each by the ID it was committed
// under.
//
// The file: walLivesMagic, a count, then each life's first seq and ID
// (little-endian u64s, ascending first seq), CRC-32C of all of it; replaced
// whole (temp file, fsync, rename, directory sync) at open, before the
// first append.
const (
	walLivesName  = "lives"
	walLivesMagic = "NRDWALL1"
	// walLivesMax bounds the lives the file keeps. An open whose WAL
	// appended nothing replaces the life before it, so only restarts that
	// each appended a record before the segments were compacted add up;
	// past the bound the oldest are forgotten and their records replay
	// with no origin (stored again if committed already, never lost).
	walLivesMax = 1024
)

// walLife is one open of the WAL: the seqs from from on, until the next
// life's from, were handed out under id.
type walLife struct {
	from uint64
	id   uint64
}

func walEncodeLives(lives []walLife) []byte {
	b := make([]byte, 0, len(walLivesMagic)+4+16*len(lives)+4)
	b = append(b, walLivesMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(lives)))
	for _, l := range lives {
		b = binary.LittleEndian.AppendUint64(b, l.from)
		b = binary.LittleEndian.AppendUint64(b, l.id)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, walCRC))
}

// walDecodeLives decodes the lives file; anything but lives in ascending
// order with IDs that are not 0 is ErrCorrupt.
func walDecodeLives(b []byte) ([]walLife, error) {
	head := len(walLivesMagic) + 4
	if len(b) < head+4 || string(b[:len(walLivesMagic)]) != walLivesMagic {
		return nil, fmt.Errorf("wal lives header: %w", ErrCorrupt)
	}
	n := int(binary.LittleEndian.Uint32(b[len(walLivesMagic):]))
	if n > walLivesMax || len(b) != head+16*n+4 {
		return nil, fmt.Errorf("wal lives: %d lives in %d bytes: %w", n, len(b), ErrCorrupt)
	}
	if binary.LittleEndian.Uint32(b[len(b)-4:]) != crc32.Checksum(b[:len(b)-4], walCRC) {
		return nil, fmt.Errorf("wal lives checksum: %w", ErrCorrupt)
	}
	lives := make([]walLife, n)
	for i := range lives {
		p := b[head+16*i:]
		lives[i] = walLife{from: binary.LittleEndian.Uint64(p), id: binary.LittleEndian.Uint64(p[8:])}
		if lives[i].id == 0 || i > 0 && lives[i].from <= lives[i-1].from {
			return nil, fmt.Errorf("wal lives: life %d (from %d, id %d) out of order or without an id: %w", i, lives[i].from, lives[i].id, ErrCorrupt)
		}
	}
	return lives, nil
}

// walReadLives reads dir's lives file. A missing one is no lives: a new
// WAL, or one an older node wrote, whose records then replay without an
// origin.
func walReadLives(fsys FS, dir string) ([]walLife, error) {
	b, err := readFile(fsys, filepath.Join(dir, walLivesName), int64(len(walLivesMagic)+4+16*walLivesMax+4)+1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read wal lives: %w", err)
	}
	return walDecodeLives(b)
}

// walNextLives is the lives after an open that hands out seqs from next
// on, under id: those that wrote a seq at or above oldest (the first seq
// any segment still holds) and the new one, which replaces a life that
// began at the same seq (it appended nothing), at most walLivesMax.
func walNextLives(lives []walLife, oldest, next, id uint64) []walLife {
	keep := 0
	for keep+1 < len(lives) && lives[keep+1].from <= oldest {
		keep++ // lives[keep] wrote nothing still held
	}
	out := append([]walLife(nil), lives[keep:]...)
	for len(out) > 0 && out[len(out)-1].from >= next {
		out = out[:len(out)-1]
	}
	out = append(out, walLife{from: next, id: id})
	if over := len(out) - walLivesMax; over > 0 {
		out = out[over:]
	}
	return out
}

// walLifeOf is the ID of the life that handed out seq, 0 when no life kept
// names it.
func walLifeOf(lives []walLife, seq uint64) uint64 {
	if n := len(lives); n > 0 && seq >= lives[n-1].from {
		return lives[n-1].id // this open's: every record but a replayed one
	}
	i := sort.Search(len(lives), func(i int) bool { return lives[i].from > seq })
	if i == 0 {
		return 0
	}
	return lives[i-1].id
}

// walNewLifeID draws a random ID that is not 0 and not one of lives'.
func walNewLifeID(lives []walLife) (uint64, error) {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("wal life id: %w", err)
		}
		id := binary.LittleEndian.Uint64(b[:])
		if id == 0 {
			continue
		}
		taken := false
		for _, l := range lives {
			taken = taken || l.id == id
		}
		if !taken {
			return id, nil
		}
	}
}

// beginLife starts this open's life: it writes the lives file for the
// segments kept and the seqs from w.nextSeq on. A lives file that does
// not decode is started afresh: its records replay without an origin.
func (w *WAL) beginLife() error {
	lives, err := walReadLives(w.fs, w.dir)
	if errors.Is(err, ErrCorrupt) {
		lives, err = nil, nil
	}
	if err != nil {
		return err
	}
	oldest := w.nextSeq
	if len(w.segs) > 0 {
		oldest = w.segs[0].base
	}
	id, err := walNewLifeID(lives)
	if err != nil {
		return err
	}
	next := walNextLives(lives, oldest, w.nextSeq, id)
	if err := w.cfg.Faults.writeFileSync(w.fs, filepath.Join(w.dir, walLivesName), walEncodeLives(next)); err != nil {
		return fmt.Errorf("write wal lives: %w", err)
	}
	w.lives = next
	return nil
}

// Origin is how partitions know the record the WAL handed seq to: the ID
// of the life that handed it out, and seq. The zero Origin when no life
// kept names it (see walLivesMax). Safe for concurrent use: the lives are
// fixed once the WAL is open.
func (w *WAL) Origin(seq uint64) Origin {
	id := walLifeOf(w.lives, seq)
	if id == 0 {
		return Origin{}
	}
	return Origin{WAL: id, Seq: seq}
}

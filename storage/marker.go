package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"time"
)

// MarkerFile is the name of the move marker inside an installed partition.
const MarkerFile = "move.marker"

// Marker is written into every copy a move installs. The old owner's
// stale-copy sweep asks the new owner for it before reclaiming its own copy.
type Marker struct {
	// PromotedHWM is the HWM the copy was installed at.
	PromotedHWM int64 `json:"promoted_hwm"`
	// ForcePromoted is set when the destination promoted its copy because the
	// source was dead, without a freeze.
	ForcePromoted bool `json:"force_promoted,omitempty"`
	// SourceNode is the node the copy came from.
	SourceNode string `json:"source_node"`
	// DurableAt is when every file of the copy was synced. Zero means an older
	// destination whose copy may still sit in its page cache.
	DurableAt time.Time `json:"durable_at,omitzero"`
	// Children are the fan-out links that existed at install time, so a
	// cursor file missing later resumes from the oldest offset, not the tail.
	Children []ChildLink `json:"children,omitempty"`
}

// ChildLink is a fan-out child and the epoch at which it was attached.
type ChildLink struct {
	Child       string `json:"child"`
	AttachEpoch uint64 `json:"attach_epoch"`
}

const (
	markerMagic   = "NMKR"
	markerVersion = 1
	// markerMaxBytes bounds a marker's payload before decoding allocates: a
	// marker names at most a few hundred children.
	markerMaxBytes = 1 << 20
)

// encodeMarker frames the marker as magic, version, length, JSON, CRC-32C.
// JSON keeps the marker readable by an operator and lets fields be added.
func encodeMarker(m Marker) ([]byte, error) {
	body, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode marker: %w", err)
	}
	b := make([]byte, 0, 9+len(body)+4)
	b = append(b, markerMagic...)
	b = append(b, markerVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

func decodeMarker(b []byte) (Marker, error) {
	var m Marker
	if len(b) < 13 || string(b[:4]) != markerMagic {
		return m, fmt.Errorf("marker header: %w", ErrCorrupt)
	}
	if b[4] != markerVersion {
		return m, fmt.Errorf("marker version %d: %w", b[4], ErrCorrupt)
	}
	n := binary.BigEndian.Uint32(b[5:9])
	if n > markerMaxBytes || int(n) != len(b)-13 {
		return m, fmt.Errorf("marker length %d: %w", n, ErrCorrupt)
	}
	if crc32.Checksum(b[:9+n], castagnoli) != binary.BigEndian.Uint32(b[9+n:]) {
		return m, fmt.Errorf("marker checksum: %w", ErrCorrupt)
	}
	if err := json.Unmarshal(b[9:9+n], &m); err != nil {
		return Marker{}, fmt.Errorf("marker body: %v: %w", err, ErrCorrupt)
	}
	if m.PromotedHWM < 0 {
		return Marker{}, fmt.Errorf("marker promoted hwm %d: %w", m.PromotedHWM, ErrCorrupt)
	}
	return m, nil
}

// ReadMarker reads the move marker of the partition in dir. A partition that
// was never installed by a move has none (ErrNotFound).
func ReadMarker(dir string) (Marker, error) { return readMarker(osFS{}, dir) }

// readMarker is ReadMarker on fsys.
func readMarker(fsys FS, dir string) (Marker, error) {
	b, err := readFile(fsys, filepath.Join(dir, MarkerFile), markerMaxBytes+13+1)
	if errors.Is(err, os.ErrNotExist) {
		return Marker{}, fmt.Errorf("marker in %s: %w", dir, ErrNotFound)
	}
	if err != nil {
		return Marker{}, fmt.Errorf("read marker in %s: %w", dir, err)
	}
	return decodeMarker(b)
}

// writeMarker writes the marker file, and fsyncs it when sync is set (a batch
// install covers it with a filesystem barrier instead). The caller syncs the
// directory (the install does it once for the whole staging directory).
func writeMarker(fsys FS, dir string, m Marker, sync bool, faults *Faults) error {
	b, err := encodeMarker(m)
	if err != nil {
		return err
	}
	f, err := fsys.OpenFile(filepath.Join(dir, MarkerFile), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write marker: %w", err)
	}
	if _, err := faults.writeAt(f, b, 0); err != nil {
		f.Close()
		return fmt.Errorf("write marker: %w", err)
	}
	if sync {
		if err := faults.sync(f); err != nil {
			f.Close()
			return fmt.Errorf("sync marker: %w", err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close marker: %w", err)
	}
	return nil
}

// WriteMarker writes m as dir's move marker. An install writes its own
// (InstallBatch); this is for a tool or a test that lays out a copy as an
// install would.
func WriteMarker(dir string, m Marker, sync bool) error {
	return writeMarker(osFS{}, dir, m, sync, nil)
}

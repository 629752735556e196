package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Loop disks give each node slot a file system of its own, so that a run
// can fill one node's disk to the last block while the others keep
// theirs: an ext4 image under Dir, sparse (it takes only what is written),
// mounted on a loop device, the node's data directory inside it. Without
// them every node writes to the file system of Dir, and a full disk would
// stop the bench and every node at once.
//
// It needs Linux, root, mkfs.ext4 (Debian's e2fsprogs) and loop devices;
// LoopDisksAvailable says whether this machine has them. Close unmounts
// them; a run killed with SIGKILL leaves them mounted (`mount | grep
// narad`).

// ErrNoLoopDisks is a machine where the run cannot mount loop disks.
var ErrNoLoopDisks = errors.New("loop disks unavailable")

// loopDisks are the cluster's disks, one per node slot.
type loopDisks struct {
	// mounts are the mount points, in node slot order.
	mounts []string
}

// LoopDisksAvailable reports whether this process can make and mount
// ext4 images: root, mkfs.ext4 and mount.
func LoopDisksAvailable() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: not root", ErrNoLoopDisks)
	}
	for _, cmd := range []string{"mkfs.ext4", "mount", "umount"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("%w: no %s (Debian's e2fsprogs, mount): %v", ErrNoLoopDisks, cmd, err)
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return fmt.Errorf("%w: no /dev/loop-control: %v", ErrNoLoopDisks, err)
	}
	return nil
}

// run runs name args..., its output in the error.
func run(name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// UseLoopDisks gives every node slot an ext4 file system of sizeMiB of
// its own, mounted at Dir/disk<k>; a node's data directory is then inside
// its slot's (DataDir). Call it before any node starts; Close unmounts.
func (c *Cluster) UseLoopDisks(sizeMiB int) error {
	if err := LoopDisksAvailable(); err != nil {
		return err
	}
	if sizeMiB < 64 {
		return fmt.Errorf("loop disks of %d MiB: want at least 64 (the metastore's log alone takes tens)", sizeMiB)
	}
	c.disks = &loopDisks{}
	for i := range c.Nodes {
		img := filepath.Join(c.Dir, fmt.Sprintf("disk%d.img", i+1))
		mnt := filepath.Join(c.Dir, fmt.Sprintf("disk%d", i+1))
		f, err := os.Create(img)
		if err != nil {
			return err
		}
		err = errors.Join(f.Truncate(int64(sizeMiB)<<20), f.Close())
		if err != nil {
			return err
		}
		if err := os.Mkdir(mnt, 0o755); err != nil {
			return err
		}
		// -m 0: no blocks reserved for root, which the node may run as:
		// full is full for it too.
		if err := run("mkfs.ext4", "-q", "-m", "0", img); err != nil {
			return err
		}
		if err := run("mount", "-o", "loop", img, mnt); err != nil {
			return err
		}
		c.disks.mounts = append(c.disks.mounts, mnt)
	}
	return nil
}

// DataDir is node's --data: Dir/<id>, or inside its slot's loop disk.
func (c *Cluster) DataDir(n *Node) string {
	if c.disks != nil {
		for i, o := range c.Nodes {
			if o == n && i < len(c.disks.mounts) {
				return filepath.Join(c.disks.mounts[i], n.ID)
			}
		}
	}
	return filepath.Join(c.Dir, n.ID)
}

// ballast is the file that fills a loop disk.
const ballast = "ballast"

// FillDisk fills node's loop disk to its last block with a ballast file
// and returns how many bytes that took: every write of the node that needs
// a new block fails with ENOSPC until FreeDisk.
func (c *Cluster) FillDisk(n *Node) (int64, error) {
	if c.disks == nil {
		return 0, fmt.Errorf("fill the disk of %s: %w: the cluster runs without UseLoopDisks", n.ID, ErrNoLoopDisks)
	}
	mnt := filepath.Dir(c.DataDir(n))
	f, err := os.OpenFile(filepath.Join(mnt, ballast), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		return 0, err
	}
	// One allocation of what statfs calls free, then smaller ones until
	// none fits: the extents' own blocks come out of the same free space.
	var size int64
	chunk := int64(st.Bavail) * st.Bsize
	for chunk >= st.Bsize {
		err := syscall.Fallocate(int(f.Fd()), 0, size, chunk)
		switch {
		case err == nil:
			size += chunk
		case errors.Is(err, syscall.ENOSPC):
			chunk /= 2
		default:
			return size, fmt.Errorf("fill the disk of %s: %w", n.ID, err)
		}
	}
	return size, f.Sync()
}

// FreeDisk removes the ballast FillDisk wrote.
func (c *Cluster) FreeDisk(n *Node) error {
	if c.disks == nil {
		return fmt.Errorf("free the disk of %s: %w", n.ID, ErrNoLoopDisks)
	}
	return os.Remove(filepath.Join(filepath.Dir(c.DataDir(n)), ballast))
}

// close unmounts the disks; their images go with Dir.
func (d *loopDisks) close() error {
	var errs []error
	for _, mnt := range d.mounts {
		errs = append(errs, run("umount", mnt))
	}
	return errors.Join(errs...)
}

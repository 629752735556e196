// Command image writes narad's container image as a tarball, from a static
// narad binary and nothing else: no base image, no registry, no Docker.
//
//	go run ./deploy/image -binary build/narad -version v1.2.3 -out build/narad-image.tar
//
// `task image` builds the binary (CGO_ENABLED=0, the version linked in) and
// runs this. The tarball is in the format `docker save` writes, which
// `docker load`, `podman load`, `kind load image-archive` and `crane push`
// read. The image is one layer on an empty base: the binary at /narad, the
// data directory /var/lib/narad owned by the non-root user, /tmp, and
// /etc/passwd and /etc/group naming that user. Every timestamp is the Unix
// epoch, so the same binary gives the same image digest.
//
// Dockerfile (beside this file) builds the same image for those who build
// with Docker; image_test.go holds the two to the same user, entrypoint,
// ports and data directory.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image is: the Dockerfile says the same, and the test checks it.
const (
	// uid and gid 65532: the "nonroot" id distroless images use, which
	// no system account of a host takes, so a volume's owner is unambiguous.
	userID      = 65532
	groupID     = 65532
	userName    = "narad"
	binaryPath  = "narad" // in the image's root, without the leading slash
	dataDir     = "var/lib/narad"
	httpPort    = "7942/tcp"
	raftPort    = "7950/tcp"
	sourceURL   = "https://github.com/naradmq/narad"
	imageTitle  = "narad"
	defaultTag  = "narad"
	binaryMode  = 0o755
	dataDirMode = 0o750
)

// errUsage marks a bad command line.
var errUsage = errors.New("usage")

// options are what one image build takes.
type options struct {
	binary   string // a static linux narad binary
	version  string // the binary's version, for the labels and the tag
	revision string // the commit, for a label; may be empty
	out      string // the tarball written
}

func main() {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.binary, "binary", "", "a static linux/amd64 narad binary (CGO_ENABLED=0)")
	fs.StringVar(&o.version, "version", "", "the binary's version: the image's tag and its org.opencontainers.image.version label")
	fs.StringVar(&o.revision, "revision", "", "the commit the binary was built from (org.opencontainers.image.revision)")
	fs.StringVar(&o.out, "out", "build/narad-image.tar", "the image tarball to write")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if err := build(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// build writes the image of o.binary to o.out.
func build(o options) error {
	if o.binary == "" || o.version == "" || o.out == "" {
		return fmt.Errorf("%w: -binary, -version and -out are required", errUsage)
	}
	img, err := image(o)
	if err != nil {
		return err
	}
	tag, err := name.NewTag(defaultTag + ":" + o.version)
	if err != nil {
		return fmt.Errorf("%w: version %q is no image tag: %w", errUsage, o.version, err)
	}
	tmp := o.out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	return os.Rename(tmp, o.out)
}

// image is the image of o.binary.
func image(o options) (v1.Image, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, fmt.Errorf("read the binary: %w", err)
	}
	if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
		return nil, fmt.Errorf("%w: %s is not a linux (ELF) binary", errUsage, o.binary)
	}
	layerTar, err := rootFS(bin)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{CreatedBy: "deploy/image: the narad binary, its user and data directory", Created: v1.Time{Time: time.Unix(0, 0).UTC()}},
	})
	if err != nil {
		return nil, fmt.Errorf("append the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config = config(o)
	return mutate.ConfigFile(img, cf)
}

// config is how the image runs: narad serve, as the non-root user, its
// data in /var/lib/narad (a volume), HTTP and Raft exposed.
func config(o options) v1.Config {
	labels := map[string]string{
		"org.opencontainers.image.title":   imageTitle,
		"org.opencontainers.image.version": o.version,
		"org.opencontainers.image.source":  sourceURL,
	}
	if o.revision != "" {
		labels["org.opencontainers.image.revision"] = o.revision
	}
	return v1.Config{
		Entrypoint:   []string{"/" + binaryPath},
		Cmd:          []string{"serve"},
		User:         strconv.Itoa(userID) + ":" + strconv.Itoa(groupID),
		WorkingDir:   "/" + dataDir,
		Env:          []string{"NARAD_DATA=/" + dataDir},
		ExposedPorts: map[string]struct{}{httpPort: {}, raftPort: {}},
		Volumes:      map[string]struct{}{"/" + dataDir: {}},
		Labels:       labels,
	}
}

// rootFS is the layer's tar: every entry dated at the epoch.
func rootFS(bin []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0).UTC()
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/%s:/sbin/nologin\n", userName, userID, groupID, userName, dataDir)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, groupID)
	entries := []struct {
		hdr  tar.Header
		body []byte
	}{
		{tar.Header{Typeflag: tar.TypeDir, Name: "etc/", Mode: 0o755}, nil},
		{tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644}, []byte(passwd)},
		{tar.Header{Typeflag: tar.TypeReg, Name: "etc/group", Mode: 0o644}, []byte(group)},
		{tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}, nil},
		{tar.Header{Typeflag: tar.TypeDir, Name: "var/", Mode: 0o755}, nil},
		{tar.Header{Typeflag: tar.TypeDir, Name: "var/lib/", Mode: 0o755}, nil},
		{tar.Header{Typeflag: tar.TypeDir, Name: dataDir + "/", Mode: dataDirMode, Uid: userID, Gid: groupID}, nil},
		{tar.Header{Typeflag: tar.TypeReg, Name: binaryPath, Mode: binaryMode}, bin},
	}
	for _, e := range entries {
		h := e.hdr
		h.ModTime, h.Size = epoch, int64(len(e.body))
		if err := tw.WriteHeader(&h); err != nil {
			return nil, fmt.Errorf("layer %s: %w", h.Name, err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("layer %s: %w", h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

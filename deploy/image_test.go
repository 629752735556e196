package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageBuilder builds deploy/image, the command `task image` runs, into
// the test's temp dir.
func imageBuilder(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image")
	if b, err := exec.Command("go", "build", "-o", out, "./image").CombinedOutput(); err != nil {
		t.Fatalf("go build ./image: %v\n%s", err, b)
	}
	return out
}

// buildImage runs the image command; its error carries its output.
func buildImage(t *testing.T, builder string, args ...string) error {
	t.Helper()
	if b, err := exec.Command(builder, args...).CombinedOutput(); err != nil {
		return &buildError{err: err, out: string(b)}
	}
	return nil
}

// layerFiles is every entry of the image's one layer, by name, with its
// content.
type layerEntry struct {
	hdr  tar.Header
	body []byte
}

func layerFiles(t *testing.T, img v1.Image) map[string]layerEntry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("got %d layers, want 1 on an empty base", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	files := map[string]layerEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = layerEntry{*h, body}
	}
	return files
}

// The image task's image runs narad serve as a non-root user from an empty
// base, with the binary built, its data directory owned by that user, and
// the version in its labels; the same binary gives the same image.
func TestImage(t *testing.T) {
	bin := naradBinary(t)
	builder := imageBuilder(t)
	want := readFile(t, bin)
	dir := t.TempDir()
	out := filepath.Join(dir, "narad-image.tar")
	if err := buildImage(t, builder, "-binary", bin, "-version", testVersion, "-revision", "abc123", "-out", out); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatalf("open the image tarball: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" {
		t.Errorf("platform: got %s/%s, want linux/amd64", cf.OS, cf.Architecture)
	}
	c := cf.Config
	if !slices.Equal(c.Entrypoint, []string{"/narad"}) || !slices.Equal(c.Cmd, []string{"serve"}) {
		t.Errorf("entrypoint %q cmd %q: want [/narad] [serve]", c.Entrypoint, c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user: got %q, want 65532:65532, not root", c.User)
	}
	if got := c.Labels["org.opencontainers.image.version"]; got != testVersion {
		t.Errorf("version label: got %q, want %q", got, testVersion)
	}
	if got := c.Labels["org.opencontainers.image.revision"]; got != "abc123" {
		t.Errorf("revision label: got %q, want abc123", got)
	}
	for _, p := range []string{"7942/tcp", "7950/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("exposed ports %v: want %s", c.ExposedPorts, p)
		}
	}
	if _, ok := c.Volumes["/var/lib/narad"]; !ok || c.WorkingDir != "/var/lib/narad" || !slices.Contains(c.Env, "NARAD_DATA=/var/lib/narad") {
		t.Errorf("volumes %v, workdir %q, env %q: want /var/lib/narad the volume, the workdir and NARAD_DATA", c.Volumes, c.WorkingDir, c.Env)
	}

	files := layerFiles(t, img)
	narad, ok := files["narad"]
	if !ok {
		t.Fatalf("no /narad in the layer; got %v", slices.Sorted(func(yield func(string) bool) {
			for k := range files {
				if !yield(k) {
					return
				}
			}
		}))
	}
	if sha256.Sum256(narad.body) != sha256.Sum256(want) {
		t.Errorf("/narad: its bytes differ from the binary built")
	}
	if narad.hdr.Mode&0o777 != 0o755 || narad.hdr.Uid != 0 {
		t.Errorf("/narad: mode %o uid %d, want 755 owned by root (the user cannot rewrite it)", narad.hdr.Mode&0o777, narad.hdr.Uid)
	}
	data := files["var/lib/narad"]
	if data.hdr.Typeflag != tar.TypeDir || data.hdr.Uid != 65532 || data.hdr.Gid != 65532 {
		t.Errorf("/var/lib/narad: type %c uid %d gid %d, want a directory of 65532:65532", data.hdr.Typeflag, data.hdr.Uid, data.hdr.Gid)
	}
	if !strings.Contains(string(files["etc/passwd"].body), "narad:x:65532:65532:") {
		t.Errorf("/etc/passwd names no narad user 65532: %q", files["etc/passwd"].body)
	}

	// No libc in the image: the binary must need none.
	f, err := elf.NewFile(bytes.NewReader(narad.body))
	if err != nil {
		t.Fatal(err)
	}
	if libs, _ := f.ImportedLibraries(); len(libs) != 0 {
		t.Errorf("/narad links %v: want a static binary (CGO_ENABLED=0)", libs)
	}
	f.Close()
	// The binary in the image runs, and says its version.
	extracted := filepath.Join(dir, "narad-from-image")
	if err := os.WriteFile(extracted, narad.body, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := exec.Command(extracted, "version").CombinedOutput(); err != nil || !strings.Contains(string(b), testVersion) {
		t.Errorf("narad version from the image: got %q (%v), want it to say %s", b, err, testVersion)
	}

	// Reproducible: the same binary, the same digest.
	again := filepath.Join(dir, "again.tar")
	if err := buildImage(t, builder, "-binary", bin, "-version", testVersion, "-revision", "abc123", "-out", again); err != nil {
		t.Fatal(err)
	}
	img2, err := tarball.ImageFromPath(again, nil)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := img2.Digest()
	if d1 != d2 {
		t.Errorf("two builds of one binary: digests %s and %s, want one", d1, d2)
	}
	checkDockerfile(t, c)
}

func TestImageRefusesWhatIsNoBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds deploy/image")
	}
	builder := imageBuilder(t)
	notELF := filepath.Join(t.TempDir(), "narad")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "x.tar")
	for _, args := range [][]string{
		{"-binary", notELF, "-version", "v1", "-out", out},
		{"-binary", notELF, "-out", out},
		{"-binary", naradBinary(t), "-version", "bad tag!", "-out", out},
	} {
		err := buildImage(t, builder, args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("image %q: got %v, want a usage error (exit status 2)", args, err)
		}
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused build left %s behind (%v)", out, err)
	}
}

// dockerfile is the Dockerfile's final stage: instruction -> arguments.
func dockerfile(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("image/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stage := map[string][]string{}
	sc := bufio.NewScanner(f)
	var cont string
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cont += strings.TrimSuffix(line, "\\") + " "
			continue
		}
		line, cont = cont+line, ""
		instr, args, _ := strings.Cut(line, " ")
		instr = strings.ToUpper(instr)
		if instr == "FROM" {
			stage = map[string][]string{}
		}
		stage[instr] = append(stage[instr], strings.TrimSpace(args))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stage
}

// checkDockerfile: image/Dockerfile builds the image `task image` built,
// whose config is c: the same user, entrypoint, command, ports, data
// directory and environment.
func checkDockerfile(t *testing.T, c v1.Config) {
	t.Helper()
	d := dockerfile(t)
	ports := slices.Sorted(maps.Keys(c.ExposedPorts))
	volumes := slices.Sorted(maps.Keys(c.Volumes))
	want := map[string]string{
		"FROM":       "scratch",
		"USER":       c.User,
		"WORKDIR":    c.WorkingDir,
		"ENTRYPOINT": `["` + strings.Join(c.Entrypoint, `", "`) + `"]`,
		"CMD":        `["` + strings.Join(c.Cmd, `", "`) + `"]`,
		"ENV":        strings.Join(c.Env, " "),
		"EXPOSE":     strings.Join(ports, " "),
		"VOLUME":     strings.Join(volumes, " "),
	}
	for instr, w := range want {
		if got := d[instr]; len(got) != 1 || got[0] != w {
			t.Errorf("Dockerfile %s: got %q, want %q", instr, got, w)
		}
	}
	copied := strings.Join(d["COPY"], "\n")
	if !strings.Contains(copied, "--chown=65532:65532 /out/var/lib/narad /var/lib/narad") || !strings.Contains(copied, "/out/narad /narad") {
		t.Errorf("Dockerfile COPY: got %q, want the binary at /narad and /var/lib/narad owned by 65532", copied)
	}
}

// `task image` builds the binary as staticBinary does and runs this
// command on it.
func TestTheImageTask(t *testing.T) {
	raw := readFile(t, "../Taskfile.yml")
	var task []string
	in := false
	for line := range strings.Lines(string(raw)) {
		switch {
		case line == "  image:\n":
			in = true
		case in && strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   "):
			in = false // the next task
		}
		if in {
			task = append(task, line)
		}
	}
	if len(task) == 0 {
		t.Fatal("Taskfile.yml has no image task")
	}
	text := strings.Join(task, "")
	for _, want := range []string{"CGO_ENABLED=0", "-X main.version=", "./cmd/narad", "go run ./deploy/image"} {
		if !strings.Contains(text, want) {
			t.Errorf("the image task lacks %q:\n%s", want, text)
		}
	}
}

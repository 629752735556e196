package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The deploy files are checked against the narad binary they run: its
// --help output is the list of flags and NARAD_* variables that exist.
var built struct {
	once sync.Once
	path string
	err  error
	dir  string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// testVersion is linked into the binary the tests build, as `task image`
// links the git description in.
const testVersion = "v0.0.0-deploy-test"

// naradBinary builds ./cmd/narad once for the package's tests.
// raftCertFlags makes, with narad cert, a CA and a loopback certificate
// in a directory of the test's own, and returns the flags that run a
// node's Raft over mutual TLS on them.
func raftCertFlags(t *testing.T, bin string) []string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{{"cert", "create-ca", "--dir", dir}, {"cert", "create-node", "--dir", dir, "127.0.0.1", "localhost"}} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("narad %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return []string{"--raft-tls-ca", filepath.Join(dir, "ca.crt"), "--raft-tls-cert", filepath.Join(dir, "node.crt"), "--raft-tls-key", filepath.Join(dir, "node.key")}
}

func naradBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cmd/narad; skipped with -short")
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "narad-deploy-")
		if err != nil {
			built.err = err
			return
		}
		built.dir, built.path = dir, filepath.Join(dir, "narad")
		// As `task image` builds it (static, the version linked in), so
		// the image test packs this same binary and the package pays one
		// build.
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+testVersion, "-o", built.path, "../cmd/narad")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
		out, err := cmd.CombinedOutput()
		if err != nil {
			built.err = &buildError{out: string(out), err: err}
		}
	})
	if built.err != nil {
		t.Fatalf("build narad: %v", built.err)
	}
	return built.path
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

func (e *buildError) Unwrap() error { return e.err }

// help is `narad <command> --help`'s output (the exit status does not
// matter: only what it lists).
func help(t *testing.T, command string) string {
	t.Helper()
	out, _ := exec.Command(naradBinary(t), command, "--help").CombinedOutput()
	if !strings.Contains(string(out), "Usage: narad "+command) {
		t.Fatalf("narad %s --help printed %q, want its usage", command, out)
	}
	return string(out)
}

// hasFlag reports whether a flag set's PrintDefaults output lists -name.
func hasFlag(helpText, name string) bool {
	return regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(name) + `(\s|$)`).MatchString(helpText)
}

// flagDefault is the "(default X)" of -name in helpText, as a duration.
func flagDefault(t *testing.T, helpText, name string) time.Duration {
	t.Helper()
	re := regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(name) + `\b[^\n]*\n(?:\s{4,}[^\n]*\n)*?\s{4,}[^\n]*\(default ([^)]+)\)`)
	m := re.FindStringSubmatch(helpText)
	if m == nil {
		t.Fatalf("no default of -%s in the help output", name)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatalf("default of -%s: %v", name, err)
	}
	return d
}

package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// unit is a systemd unit file: section -> key -> values in order.
type unit map[string]map[string][]string

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, section := unit{}, ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is neither a section nor key=value", path, n, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// one is the single value of section's key.
func (u unit) one(t *testing.T, section, key string) string {
	t.Helper()
	vs := u[section][key]
	if len(vs) != 1 {
		t.Fatalf("[%s] %s: got %d values, want 1", section, key, len(vs))
	}
	return vs[0]
}

// readEnv is an EnvironmentFile's variables.
func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for n, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s:%d: %q is not NAME=value", path, n+1, line)
		}
		env[k] = v
	}
	return env
}

// commandFlags checks an ExecStart line runs `narad <command>` with flags
// that command has, and returns the command.
func commandFlags(t *testing.T, exec string) (command string, flags []string) {
	t.Helper()
	words := strings.Fields(exec)
	if len(words) < 2 || filepath.Base(words[0]) != "narad" {
		t.Fatalf("ExecStart %q: want narad <command> [flags]", exec)
	}
	for _, w := range words[2:] {
		if strings.HasPrefix(w, "-") {
			name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
			flags = append(flags, name)
		}
	}
	return words[1], flags
}

// The units pass only flags their commands have, the environment file sets
// only variables the commands read, and narad.service's stop timeout
// outlasts the hand-off plus the WAL drain (their defaults from the help,
// or the environment file's values).
func TestSystemdUnits(t *testing.T) {
	env := readEnv(t, "systemd/narad.env")
	helps := map[string]string{}
	for _, name := range []string{"narad-nats.service", "narad.service"} {
		u := readUnit(t, filepath.Join("systemd", name))
		if got := u.one(t, "Service", "EnvironmentFile"); got != "/etc/narad/narad.env" {
			t.Errorf("%s: EnvironmentFile %q, want /etc/narad/narad.env", name, got)
		}
		if got := u.one(t, "Service", "Restart"); got != "on-failure" {
			t.Errorf("%s: Restart=%s, want on-failure (a node that left exits 0 and stays down)", name, got)
		}
		command, flags := commandFlags(t, u.one(t, "Service", "ExecStart"))
		h := help(t, command)
		helps[command] = h
		for _, f := range flags {
			if !hasFlag(h, f) {
				t.Errorf("%s: narad %s has no flag --%s", name, command, f)
			}
		}
	}
	for k := range env {
		found := false
		for _, h := range helps {
			found = found || regexp.MustCompile(`(^|[^A-Z0-9_])`+regexp.QuoteMeta(k)+`([^A-Z0-9_]|$)`).MatchString(h)
		}
		if !found {
			t.Errorf("narad.env sets %s, which neither narad serve nor narad nats reads", k)
		}
	}

	serve := helps["serve"]
	bound := func(flagName, envName string) time.Duration {
		if v, ok := env[envName]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("narad.env %s=%q: %v", envName, v, err)
			}
			return d
		}
		return flagDefault(t, serve, flagName)
	}
	need := bound("shutdown-handoff-timeout", "NARAD_SHUTDOWN_HANDOFF_TIMEOUT") + bound("shutdown-drain-timeout", "NARAD_SHUTDOWN_DRAIN_TIMEOUT")
	stop, err := time.ParseDuration(readUnit(t, "systemd/narad.service").one(t, "Service", "TimeoutStopSec"))
	if err != nil {
		t.Fatalf("narad.service TimeoutStopSec: %v", err)
	}
	if stop <= need {
		t.Errorf("narad.service TimeoutStopSec=%s, want more than hand-off plus drain, %s", stop, need)
	}
}

// systemd-analyze verify, where it is installed, on copies of the units
// that run the binary just built (verify refuses a missing executable).
func TestSystemdAnalyzeVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	bin := naradBinary(t)
	dir := t.TempDir()
	var paths []string
	for _, name := range []string{"narad-nats.service", "narad.service"} {
		raw, err := os.ReadFile(filepath.Join("systemd", name))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(raw), "/usr/local/bin/narad", bin)
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	if err != nil || strings.Contains(string(out), dir) {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

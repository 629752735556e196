package deploy

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
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
	raw := readFile(t, path)
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
		if name == "narad.service" && !strings.Contains(u.one(t, "Service", "ExecStart"), "--config /etc/narad/narad.yaml") {
			t.Errorf("%s: ExecStart %q, want it to read --config /etc/narad/narad.yaml", name, u.one(t, "Service", "ExecStart"))
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
	file := readConfigFile(t, "systemd/narad.yaml")
	for k := range file {
		if !hasFlag(serve, k) {
			t.Errorf("narad.yaml sets %s, which is no flag of narad serve", k)
		}
	}
	// The environment file overrides narad.yaml, which overrides the default.
	bound := func(flagName, envName string) time.Duration {
		v, ok := env[envName]
		if !ok {
			v, ok = file[flagName]
		}
		if !ok {
			return flagDefault(t, serve, flagName)
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s (%s) %q: %v", flagName, envName, v, err)
		}
		return d
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

// readConfigFile is a narad config file's keys and values.
func readConfigFile(t *testing.T, path string) map[string]string {
	t.Helper()
	raw := readFile(t, path)
	return parseConfigFile(t, path, raw)
}

// parseConfigFile is the keys and values of a narad config file's text, a
// list joined with commas as the node joins it.
func parseConfigFile(t *testing.T, where string, raw []byte) map[string]string {
	t.Helper()
	var doc map[string]any
	if err := yaml.UnmarshalStrict(raw, &doc); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	out := map[string]string{}
	for k, v := range doc {
		if list, ok := v.([]any); ok {
			parts := make([]string, len(list))
			for i, p := range list {
				parts[i] = fmt.Sprint(p)
			}
			out[k] = strings.Join(parts, ",")
			continue
		}
		out[k] = fmt.Sprint(v)
	}
	return out
}

// A node starts from narad.service's config file: the node reads every
// key of it (--print-config shows the file's values), and with only the
// keys bound to the example's hosts overridden by flags (its data, its
// addresses, its peers and NATS, its Raft certificate) it comes up ready.
func TestSystemdNodeStartsFromItsConfigFile(t *testing.T) {
	bin := naradBinary(t)
	const path = "systemd/narad.yaml"
	file := readConfigFile(t, path)
	// No NARAD_* of the test's own environment in the way: they would
	// override the file.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NARAD_") {
			env = append(env, kv)
		}
	}
	printed, err := exec.Command(bin, "serve", "--config", path, "--print-config").Output()
	if err != nil {
		t.Fatalf("narad serve --config %s --print-config: %v", path, err)
	}
	var effective map[string]string
	if err := yaml.UnmarshalStrict(printed, &effective); err != nil {
		t.Fatalf("--print-config wrote no config file: %v\n%s", err, printed)
	}
	for k, want := range file {
		if got := effective[k]; got != want {
			t.Errorf("--print-config %s: got %q, want the file's %q", k, got, want)
		}
	}

	httpAddr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--config", path, "--data", t.TempDir(),
		"--http", httpAddr, "--raft", freeAddr(t), "--peers=", "--nats=", "--nats-creds=", "--log-level", "error"}, raftCertFlags(t, bin)...)...)
	cmd.Env = append(env, "NARAD_ADMIN_PASSWORD=config-test-password")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second) // liveness bound only: a node's start-up
	for {
		resp, err := http.Get("http://" + httpAddr + "/metrics")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// The node's id is the file's.
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), `node="`+file["id"]+`"`) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("a node started from %s: /metrics never named node %q within 60s (%v); node output:\n%s", path, file["id"], err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
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
		raw := readFile(t, filepath.Join("systemd", name))
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

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []configEntry
		wantErr    string
	}{
		{name: "empty", text: ""},
		{name: "comments only", text: "# nothing set\n"},
		{name: "scalars", text: "id: n2\nmove-tick: 250ms\nrebalance: false\nmax-in-flight-moves: 64\n",
			want: []configEntry{{"id", "n2", 1}, {"move-tick", "250ms", 2}, {"rebalance", "false", 3}, {"max-in-flight-moves", "64", 4}}},
		{name: "a list joins with commas", text: "peers:\n  - n1=a:7950\n  - n2=b:7950\n",
			want: []configEntry{{"peers", "n1=a:7950,n2=b:7950", 1}}},
		{name: "a flow list", text: "nats: [nats://a:4222, nats://b:4222]\n",
			want: []configEntry{{"nats", "nats://a:4222,nats://b:4222", 1}}},
		{name: "null is empty", text: "nats:\n", want: []configEntry{{"nats", "", 1}}},
		{name: "quoted keeps its text", text: `http: ":7942"` + "\n", want: []configEntry{{"http", ":7942", 1}}},
		{name: "a nested mapping", text: "id: n1\nmove:\n  tick: 1s\n", wantErr: `line 3: key "move": want a value, not a mapping`},
		{name: "a list of mappings", text: "peers:\n  - n1: a\n", wantErr: `line 2: key "peers": a list holds plain values only`},
		{name: "not a mapping", text: "- id\n", wantErr: "line 1: want a mapping of flag names to values"},
		{name: "not YAML", text: "id: [n1\n", wantErr: "yaml:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig([]byte(tc.text))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("got %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestConfigPath(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	withEnv := func(string) (string, bool) { return "env.yaml", true }
	for _, tc := range []struct {
		args []string
		env  func(string) (string, bool)
		want string
	}{
		{[]string{"--id", "n1"}, noEnv, ""},
		{[]string{"--config", "a.yaml"}, noEnv, "a.yaml"},
		{[]string{"-config=b.yaml", "--id", "n1"}, noEnv, "b.yaml"},
		{[]string{"--id", "n1"}, withEnv, "env.yaml"},
		{[]string{"--config", "a.yaml"}, withEnv, "a.yaml"},
		// The last one wins, as flag parsing has it.
		{[]string{"--config", "a.yaml", "--config=c.yaml"}, noEnv, "c.yaml"},
		{[]string{"--configs", "a.yaml"}, noEnv, ""},
		{[]string{"--", "--config", "a.yaml"}, noEnv, ""},
	} {
		if got := configPath(tc.args, tc.env); got != tc.want {
			t.Errorf("configPath(%q): got %q, want %q", tc.args, got, tc.want)
		}
	}
}

// writeConfig writes a config file into the test's temp dir.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "narad.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// printedConfig runs serve --print-config with args and returns what it
// wrote, parsed back.
func printedConfig(t *testing.T, args ...string) map[string]string {
	t.Helper()
	var out bytes.Buffer
	if err := runServe(context.Background(), append(args, "--print-config"), &out, io.Discard); err != nil {
		t.Fatalf("serve %q --print-config: %v", args, err)
	}
	entries, err := parseConfig(out.Bytes())
	if err != nil {
		t.Fatalf("--print-config wrote what does not read back: %v\n%s", err, out.String())
	}
	got := map[string]string{}
	for _, e := range entries {
		got[e.key] = e.value
	}
	return got
}

// The file is the base; a NARAD_* variable overrides a key of it, and a
// flag overrides both.
func TestConfigFileUnderEnvironmentUnderFlags(t *testing.T) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "NARAD_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	p := writeConfig(t, strings.Join([]string{
		"id: from-file",
		"http: 127.0.0.1:7001",
		"move-tick: 700ms",
		"max-in-flight-moves: 70",
		"topic-default-retention: 2h",
		"peers: [n1=a:7950, n2=b:7950]",
	}, "\n"))
	t.Setenv("NARAD_HTTP_ADDR", "127.0.0.1:7002")
	t.Setenv("NARAD_MOVE_TICK", "800ms")
	got := printedConfig(t, "--config", p, "--max-in-flight-moves", "90")
	for key, want := range map[string]string{
		"id":                      "from-file",      // file only
		"http":                    "127.0.0.1:7002", // a serve flag's variable wins
		"move-tick":               "800ms",          // a setting's variable wins
		"max-in-flight-moves":     "90",             // the flag wins
		"topic-default-retention": "2h0m0s",
		"peers":                   "n1=a:7950,n2=b:7950",
		"shutdown-drain-timeout":  "30s", // untouched: the default
	} {
		if got[key] != want {
			t.Errorf("%s: got %q, want %q", key, got[key], want)
		}
	}
}

// What --print-config writes is itself a config file that gives the same
// settings back.
func TestPrintConfigReadsBack(t *testing.T) {
	first := printedConfig(t, "--id", "n7", "--nats", "nats://a:4222,nats://b:4222", "--shutdown-handoff-timeout", "0", "--rebalance=false")
	var out bytes.Buffer
	if err := runServe(context.Background(), []string{"--id", "n7", "--nats", "nats://a:4222,nats://b:4222", "--shutdown-handoff-timeout", "0", "--rebalance=false", "--print-config"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	again := printedConfig(t, "--config", writeConfig(t, out.String()))
	if len(first) < 50 {
		t.Fatalf("--print-config wrote %d keys, want every flag of serve", len(first))
	}
	for k, v := range first {
		if again[k] != v {
			t.Errorf("%s: got %q read back, want %q", k, again[k], v)
		}
	}
}

func TestConfigFileRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string
	}{
		{"unknown key", "id: n1\n\nhttp-addr: :7942\n", []string{`line 3: unknown key "http-addr"`}},
		{"a key twice", "id: n1\nid: n2\n", []string{`line 2: key "id" again (first on line 1)`}},
		{"bad duration", "move-tick: soon\n", []string{`line 1: key "move-tick": value "soon": want a duration`}},
		{"bad count", "max-in-flight-moves: many\n", []string{`line 1: key "max-in-flight-moves"`, "want a whole number"}},
		{"config names another file", "config: other.yaml\n", []string{`line 1: unknown key "config"`}},
		{"nested", "move:\n  tick: 1s\n", []string{"line 2", "not a mapping"}},
		// A value every flag takes, but Config.Validate refuses.
		{"out of range", "max-in-flight-moves: 0\n", []string{"max-in-flight-moves"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeConfig(t, tc.text)
			err := runServe(context.Background(), []string{"--config", p, "--print-config"}, io.Discard, io.Discard)
			if err == nil {
				t.Fatalf("got no error, want one with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %v, want it to say %q", err, w)
				}
			}
			if tc.name != "out of range" {
				if !errors.Is(err, errBadConfig) {
					t.Errorf("got %v, want errBadConfig", err)
				}
				if !strings.Contains(err.Error(), p) {
					t.Errorf("got %v, want it to name the file %s", err, p)
				}
			}
		})
	}
	err := runServe(context.Background(), []string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, io.Discard, io.Discard)
	if !errors.Is(err, errBadConfig) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a missing file: got %v, want errBadConfig and not-exist", err)
	}
}

// Every flag of serve names its NARAD_* variable in its usage, which is
// how a config key learns that a variable overrides it.
func TestEveryServeFlagNamesItsVariable(t *testing.T) {
	var help bytes.Buffer
	if err := runServe(context.Background(), []string{"--help"}, io.Discard, &help); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("serve --help: got %v, want flag.ErrHelp", err)
	}
	// PrintDefaults: "  -name type" then the usage, indented by a tab.
	blocks := strings.Split(help.String(), "\n  -")[1:]
	if len(blocks) < 50 {
		t.Fatalf("serve --help lists %d flags, want every one", len(blocks))
	}
	for _, b := range blocks {
		name, _, _ := strings.Cut(b, " ")
		name, _, _ = strings.Cut(name, "\n")
		fl := &flag.Flag{Name: name, Usage: b}
		if name != printConfigFlag && flagEnv(fl) == "" {
			t.Errorf("--%s: its usage names no NARAD_* variable: %q", name, b)
		}
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var nf nodeFlags
	nf.register(fs)
	for _, s := range settings(&nf.cfg) {
		if got := flagEnv(fs.Lookup(s.flag)); got != s.envName() {
			t.Errorf("--%s: usage names %s, want %s", s.flag, got, s.envName())
		}
	}
}

// --join beside --peers: a pod --peers names starts as an initial member,
// any other pod joins; each alone keeps its meaning.
func TestJoinOrPeer(t *testing.T) {
	const peers = "narad-0=narad-0.narad:7950,narad-1=narad-1.narad:7950,narad-2=narad-2.narad:7950"
	for _, tc := range []struct {
		join      bool
		peers, id string
		wantJoin  bool
		wantPeers string
		wantErr   bool
	}{
		{true, peers, "narad-1", false, peers, false},
		{true, peers, "narad-3", true, "", false},
		{false, peers, "narad-1", false, peers, false},
		{false, peers, "narad-3", false, peers, false}, // refused later by parsePeers
		{true, "", "narad-3", true, "", false},
		{true, "narad-0", "narad-0", false, "", true}, // malformed: an error, never a join
	} {
		join, got, err := joinOrPeer(tc.join, tc.peers, tc.id)
		if join != tc.wantJoin || got != tc.wantPeers || (err != nil) != tc.wantErr {
			t.Errorf("joinOrPeer(%v, %q, %s): got %v, %q, %v; want %v, %q, an error: %v", tc.join, tc.peers, tc.id, join, got, err, tc.wantJoin, tc.wantPeers, tc.wantErr)
		}
	}
}

package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withContexts points the contexts file at a temp dir and clears the
// variables a context yields to.
func withContexts(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("NARAD_CONFIG_DIR", dir)
	for _, v := range []string{"NARAD_SERVER", "NARAD_USER", "NARAD_PASSWORD", "NARAD_CONTEXT", "NARAD_NATS", "NARAD_NATS_CREDS"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	return filepath.Join(dir, "contexts.json")
}

func ctx(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out strings.Builder
	err := runCtx(args, &out, io.Discard)
	return out.String(), err
}

// A saved context gives a command its server and credentials; a flag wins
// over a variable, which wins over the context.
func TestContextsGiveServerAndCredentials(t *testing.T) {
	path := withContexts(t)
	fb, srv := newFakeBroker(t)
	t.Setenv("ALICE_PASSWORD", "from-the-variable")
	if _, err := ctx(t, "add", "prod", "--server", srv.URL, "--user", "alice", "--password-env", "ALICE_PASSWORD"); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("contexts file: %v, %v; want it mode 0600", info, err)
	}
	last := func() fakeRequest { r := fb.recorded(); return r[len(r)-1] }
	if _, _, err := runCLI(t, runTopics, "get", "orders"); err != nil {
		t.Fatalf("topics get with the current context: %v", err)
	}
	if r := last(); r.User != "alice" || r.Password != "from-the-variable" {
		t.Errorf("got user %q password %q, want the context's alice and its variable's password", r.User, r.Password)
	}
	t.Setenv("NARAD_USER", "carol")
	if _, _, err := runCLI(t, runTopics, "get", "orders"); err != nil {
		t.Fatal(err)
	}
	if r := last(); r.User != "carol" {
		t.Errorf("with NARAD_USER: got user %q, want carol (the variable wins over the context)", r.User)
	}
	if _, _, err := runCLI(t, runTopics, "get", "--user", "bob", "orders"); err != nil {
		t.Fatal(err)
	}
	if r := last(); r.User != "bob" {
		t.Errorf("with --user: got user %q, want bob (the flag wins)", r.User)
	}
	if _, _, err := runCLI(t, runTopics, "get", "--context", "staging", "orders"); !errors.Is(err, errNoContext) {
		t.Errorf("--context staging: got %v, want errNoContext", err)
	}
	out, err := ctx(t, "list")
	marked := false
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "*" && f[1] == "prod" {
			marked = true
		}
	}
	if err != nil || !marked {
		t.Errorf("ctx list: got %q, %v; want prod marked current", out, err)
	}
	shown, err := ctx(t, "show")
	if err != nil || !strings.Contains(shown, `"password_env": "ALICE_PASSWORD"`) || strings.Contains(shown, "from-the-variable") {
		t.Errorf("ctx show: got %q, %v; want the variable's name and never a password", shown, err)
	}
}

func TestContextsUseAndRemove(t *testing.T) {
	withContexts(t)
	for _, c := range [][]string{
		{"add", "a", "--server", "http://a:7942", "--password", "pw-a"},
		{"add", "b", "--server", "http://b:7942", "--use"},
	} {
		if _, err := ctx(t, c...); err != nil {
			t.Fatalf("ctx %q: %v", c, err)
		}
	}
	cf, _, err := loadContexts()
	if err != nil || cf.Current != "b" || len(cf.Contexts) != 2 {
		t.Fatalf("after adding a then b --use: got current %q and %d contexts (%v), want b of 2", cf.Current, len(cf.Contexts), err)
	}
	if shown, _ := ctx(t, "show", "a"); !strings.Contains(shown, `"password": "***"`) {
		t.Errorf("ctx show a: got %q, want the password masked", shown)
	}
	if _, err := ctx(t, "use", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctx(t, "rm", "a"); err != nil {
		t.Fatal(err)
	}
	cf, _, _ = loadContexts()
	if cf.Current != "" || len(cf.Contexts) != 1 {
		t.Errorf("after rm of the current a: got current %q and %d contexts, want none current and 1", cf.Current, len(cf.Contexts))
	}
	if _, err := ctx(t, "use", "a"); !errors.Is(err, errNoContext) {
		t.Errorf("ctx use a after rm: got %v, want errNoContext", err)
	}
}

func TestContextsRefuseBadInput(t *testing.T) {
	path := withContexts(t)
	for _, args := range [][]string{
		{"add", "x"},
		{"add", "x", "--server", "ftp://x"},
		{"add", "x", "--server", "http://x", "--password", "p", "--password-env", "P"},
		{"add", "bad name", "--server", "http://x"},
		{"add", "--server", "http://x"},
		{"frobnicate"},
	} {
		if _, err := ctx(t, args...); err == nil {
			t.Errorf("ctx %q: got no error, want one", args)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused commands wrote %s (%v)", path, err)
	}
}

// The cluster commands take --nats from the context as well.
func TestContextsGiveTheClusterCommandsTheirNATS(t *testing.T) {
	withContexts(t)
	if _, err := ctx(t, "add", "ops", "--nats", "nats://127.0.0.1:1"); err != nil {
		t.Fatal(err)
	}
	err := runCluster(t.Context(), []string{"members", "--timeout", "200ms"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "nats://127.0.0.1:1") {
		t.Errorf("cluster members with the context ops: got %v, want it to try the context's NATS URL", err)
	}
}

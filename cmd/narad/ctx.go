package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"text/tabwriter"
)

// savedContext is one saved set of connection settings: a cluster an
// operator works with, so that commands need no --server or credentials.
type savedContext struct {
	Server string `json:"server,omitempty"`
	User   string `json:"user,omitempty"`
	// Password is kept in the file as it is (mode 0600); PasswordEnv names
	// a variable to read it from instead, which keeps it out of the file.
	Password    string `json:"password,omitempty"`
	PasswordEnv string `json:"password_env,omitempty"`
	NATS        string `json:"nats,omitempty"`
	NATSCreds   string `json:"nats_creds,omitempty"`
}

// contextFile is what the contexts file holds.
type contextFile struct {
	Current  string                  `json:"current,omitempty"`
	Contexts map[string]savedContext `json:"contexts"`
}

// Bounds of the contexts file: a handful of clusters, a few hundred bytes
// each; a larger file is not one this command wrote.
const (
	contextsFileMaxBytes = 1 << 20
	contextsMax          = 1000
)

var (
	// errNoContext: a context named that is not saved.
	errNoContext = errors.New("no such context")
	contextName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
)

// contextsPath is $NARAD_CONFIG_DIR/contexts.json, else the user's config
// directory's narad/contexts.json.
func contextsPath() (string, error) {
	dir := os.Getenv("NARAD_CONFIG_DIR")
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("contexts: %w (set NARAD_CONFIG_DIR)", err)
		}
		dir = filepath.Join(base, "narad")
	}
	return filepath.Join(dir, "contexts.json"), nil
}

// loadContexts reads the contexts file; a missing one holds none.
func loadContexts() (contextFile, string, error) {
	cf := contextFile{Contexts: map[string]savedContext{}}
	path, err := contextsPath()
	if err != nil {
		return cf, "", err
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return cf, path, nil
	}
	if err != nil {
		return cf, path, fmt.Errorf("contexts: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, contextsFileMaxBytes+1))
	if err != nil {
		return cf, path, fmt.Errorf("contexts: read %s: %w", path, err)
	}
	if len(raw) > contextsFileMaxBytes {
		return cf, path, fmt.Errorf("contexts: %s is larger than %d bytes", path, contextsFileMaxBytes)
	}
	if err := json.Unmarshal(raw, &cf); err != nil {
		return cf, path, fmt.Errorf("contexts: %s: %w", path, err)
	}
	if cf.Contexts == nil {
		cf.Contexts = map[string]savedContext{}
	}
	return cf, path, nil
}

// save writes the file whole, readable by its owner only (it may hold a
// password), through a temporary file renamed over it: a crash leaves the
// old file or the new one.
func (cf contextFile) save(path string) error {
	raw, err := json.MarshalIndent(cf, "", "  ")
	if err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".contexts-*.json")
	if err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(raw, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("contexts: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("contexts: sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("contexts: %w", err)
	}
	return nil
}

// contextFlag registers --context on a command's flags.
func contextFlag(fs *flag.FlagSet) {
	fs.String("context", os.Getenv("NARAD_CONTEXT"), "saved context to connect with (NARAD_CONTEXT; narad ctx)")
}

// contextSettings are the flags a context fills, each with the variable
// that wins over it.
var contextSettings = []struct {
	flag, env string
	value     func(savedContext) string
}{
	{"server", "NARAD_SERVER", func(c savedContext) string { return c.Server }},
	{"user", "NARAD_USER", func(c savedContext) string { return c.User }},
	{"password", "NARAD_PASSWORD", func(c savedContext) string {
		if c.PasswordEnv != "" {
			return os.Getenv(c.PasswordEnv)
		}
		return c.Password
	}},
	{"nats", "NARAD_NATS", func(c savedContext) string { return c.NATS }},
	{"nats-creds", "NARAD_NATS_CREDS", func(c savedContext) string { return c.NATSCreds }},
}

// applyContext fills the flags of fs that neither the command line nor
// their variable set from the context --context names, else the current
// one: a flag wins over a variable, which wins over the context, which
// wins over the default. No context saved, nothing changes.
func applyContext(fs *flag.FlagSet) error {
	name := ""
	if f := fs.Lookup("context"); f != nil {
		name = f.Value.String()
	}
	cf, path, err := loadContexts()
	if err != nil {
		if name == "" {
			return nil // no context asked for: a broken file must not stop a command that needs none
		}
		return err
	}
	if name == "" {
		name = cf.Current
	}
	if name == "" {
		return nil
	}
	c, ok := cf.Contexts[name]
	if !ok {
		return fmt.Errorf("%w %q in %s (narad ctx list)", errNoContext, name, path)
	}
	set := wasSet(fs)
	for _, s := range contextSettings {
		if fs.Lookup(s.flag) == nil || set[s.flag] || os.Getenv(s.env) != "" {
			continue
		}
		if v := s.value(c); v != "" {
			if err := fs.Set(s.flag, v); err != nil {
				return fmt.Errorf("context %q: %s: %w", name, s.flag, err)
			}
		}
	}
	return nil
}

const ctxUsage = `usage: narad ctx <command> [flags]

Saved contexts: the server and credentials of a cluster, so that commands
need no --server, --user, --password, --nats or --nats-creds. A flag wins
over its NARAD_* variable, which wins over the context. --context NAME (or
NARAD_CONTEXT) picks a context for one command; otherwise the current one
applies. The file is $NARAD_CONFIG_DIR/contexts.json, else contexts.json in
your config directory's narad/, mode 0600.

Commands:
  add <name> --server URL [--user U] [--password-env VAR | --password PW]
             [--nats URL] [--nats-creds FILE] [--use]
                    save a context (replacing one of that name); --password
                    keeps the password in the file, --password-env only the
                    name of a variable to read it from
  use <name>        make it the current context
  list              the contexts, the current one marked *
  show [name]       a context's settings (the current one by default), the
                    password masked
  rm <name>         delete a context
`

func runCtx(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		fmt.Fprint(stdout, ctxUsage)
		if len(args) == 0 {
			return errors.New("ctx: want add, use, list, show or rm")
		}
		return flag.ErrHelp
	}
	if slices.ContainsFunc(args[1:], isHelp) {
		fmt.Fprint(stdout, ctxUsage)
		return flag.ErrHelp
	}
	cf, path, err := loadContexts()
	if err != nil {
		return err
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "add":
		return ctxAdd(cf, path, rest, stderr)
	case "use":
		if len(rest) != 1 {
			return errors.New("ctx use: want one context name")
		}
		if _, ok := cf.Contexts[rest[0]]; !ok {
			return fmt.Errorf("ctx use: %w %q", errNoContext, rest[0])
		}
		cf.Current = rest[0]
		return cf.save(path)
	case "rm":
		if len(rest) != 1 {
			return errors.New("ctx rm: want one context name")
		}
		if _, ok := cf.Contexts[rest[0]]; !ok {
			return fmt.Errorf("ctx rm: %w %q", errNoContext, rest[0])
		}
		delete(cf.Contexts, rest[0])
		if cf.Current == rest[0] {
			cf.Current = ""
		}
		return cf.save(path)
	case "list":
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CURRENT\tNAME\tSERVER\tUSER\tNATS")
		for _, name := range slices.Sorted(maps.Keys(cf.Contexts)) {
			c, mark := cf.Contexts[name], ""
			if name == cf.Current {
				mark = "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", mark, name, c.Server, c.User, c.NATS)
		}
		return tw.Flush()
	case "show":
		name := cf.Current
		if len(rest) == 1 {
			name = rest[0]
		}
		c, ok := cf.Contexts[name]
		if !ok || len(rest) > 1 {
			return fmt.Errorf("ctx show: %w %q", errNoContext, name)
		}
		if c.Password != "" {
			c.Password = "***"
		}
		return printIndented(stdout, map[string]any{"name": name, "current": name == cf.Current, "context": c})
	default:
		fmt.Fprint(stderr, ctxUsage)
		return fmt.Errorf("ctx: unknown command %q", cmd)
	}
}

func ctxAdd(cf contextFile, path string, args []string, stderr io.Writer) error {
	fs := newCommandFlags("ctx add", ctxUsage, stderr)
	var c savedContext
	fs.StringVar(&c.Server, "server", "", "broker URL")
	fs.StringVar(&c.User, "user", "", "username for HTTP Basic")
	fs.StringVar(&c.Password, "password", "", "password, kept in the file")
	fs.StringVar(&c.PasswordEnv, "password-env", "", "variable to read the password from")
	fs.StringVar(&c.NATS, "nats", "", "NATS URL for narad cluster")
	fs.StringVar(&c.NATSCreds, "nats-creds", "", "NATS seed file for narad cluster")
	use := fs.Bool("use", false, "make it the current context")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usageErr(fs, "want one context name, got %d arguments", len(pos))
	case !contextName.MatchString(pos[0]):
		return usageErr(fs, "context name %q: want letters, digits, '.', '_' or '-', at most 63", pos[0])
	case c.Server == "" && c.NATS == "":
		return usageErr(fs, "a context needs --server or --nats")
	case c.Password != "" && c.PasswordEnv != "":
		return usageErr(fs, "--password and --password-env both given: want one")
	}
	if c.Server != "" {
		if u, err := url.Parse(c.Server); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usageErr(fs, "--server %q: want an http:// or https:// URL", c.Server)
		}
	}
	if _, replacing := cf.Contexts[pos[0]]; !replacing && len(cf.Contexts) >= contextsMax {
		return fmt.Errorf("ctx add: %d contexts saved already, the most the file holds; narad ctx rm one", contextsMax)
	}
	cf.Contexts[pos[0]] = c
	if *use || cf.Current == "" {
		cf.Current = pos[0]
	}
	return cf.save(path)
}

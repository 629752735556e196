package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// errBadConfig marks a config file that cannot be used as it is: it does
// not parse, names a key no flag has, or gives a value its flag refuses.
// Like a bad NARAD_* variable, it stops the node before anything starts.
var errBadConfig = errors.New("bad config file")

// configFileMaxBytes bounds a config file: a node's settings are a few
// kilobytes, and a path pointing at something else (a log, a device)
// must not be read whole.
const configFileMaxBytes = 1 << 20

// configEntry is one key of a config file, with the line it is on so an
// error can point at it.
type configEntry struct {
	key, value string
	line       int
}

// parseConfig reads a config file's text: a YAML mapping from flag names to
// scalar values (a list of scalars is joined with commas, the syntax of
// --nats and --peers). Anything else is refused naming the line: a nested
// mapping is most likely a key indented by mistake.
func parseConfig(text []byte) ([]configEntry, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(text, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: want a mapping of flag names to values", root.Line)
	}
	entries := make([]configEntry, 0, len(root.Content)/2)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("line %d: want a flag name as the key", k.Line)
		}
		value, err := configValue(k.Value, v)
		if err != nil {
			return nil, err
		}
		entries = append(entries, configEntry{key: k.Value, value: value, line: k.Line})
	}
	return entries, nil
}

// configValue is the flag syntax of a key's value.
func configValue(key string, v *yaml.Node) (string, error) {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return "", nil
		}
		return v.Value, nil
	case yaml.SequenceNode:
		parts := make([]string, 0, len(v.Content))
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode {
				return "", fmt.Errorf("line %d: key %q: a list holds plain values only", item.Line, key)
			}
			parts = append(parts, item.Value)
		}
		return strings.Join(parts, ","), nil
	}
	if v.Kind == yaml.MappingNode {
		return "", fmt.Errorf("line %d: key %q: want a value, not a mapping (is a key indented by mistake?)", v.Line, key)
	}
	return "", fmt.Errorf("line %d: key %q: want a plain value or a list of them", v.Line, key)
}

// Flags of the file itself, never keys in it.
const (
	configFlag      = "config"
	printConfigFlag = "print-config"
)

// envOfFlag is the NARAD_* variable a flag's usage names last, as every
// node flag's does ("... (NARAD_HTTP_ADDR)"); "" when it names none.
var envOfFlag = regexp.MustCompile(`\((NARAD_[A-Z0-9_]+)(?:=[^)]*)?\)`)

func flagEnv(fl *flag.Flag) string {
	m := envOfFlag.FindAllStringSubmatch(fl.Usage, -1)
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1][1]
}

// applyConfig sets fs's flags from entries, the keys of the file at path.
// A key whose variable is set in the environment is left to it: the file
// is the base, NARAD_* overrides it, the command line overrides both.
func applyConfig(fs *flag.FlagSet, path string, entries []configEntry, lookupEnv func(string) (string, bool)) error {
	seen := map[string]int{}
	for _, e := range entries {
		fl := fs.Lookup(e.key)
		if fl == nil || e.key == configFlag || e.key == printConfigFlag {
			return fmt.Errorf("%w %s line %d: unknown key %q: keys are the flags of narad %s (see --help)", errBadConfig, path, e.line, e.key, fs.Name())
		}
		if at, ok := seen[e.key]; ok {
			return fmt.Errorf("%w %s line %d: key %q again (first on line %d)", errBadConfig, path, e.line, e.key, at)
		}
		seen[e.key] = e.line
		if env := flagEnv(fl); env != "" {
			if _, set := lookupEnv(env); set {
				continue
			}
		}
		if err := fs.Set(e.key, e.value); err != nil {
			return fmt.Errorf("%w %s line %d: key %q: value %q: want %s", errBadConfig, path, e.line, e.key, e.value, kindOf(fl))
		}
	}
	return nil
}

// configPath finds --config in args (or NARAD_CONFIG) before the flags are
// parsed, since the file is read first and the command line then wins.
func configPath(args []string, lookupEnv func(string) (string, bool)) string {
	path, _ := lookupEnv("NARAD_CONFIG")
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != configFlag {
			continue
		}
		if hasValue {
			path = value
		} else if i+1 < len(args) {
			path = args[i+1]
			i++
		}
	}
	return path
}

// loadConfig reads and applies the config file at path.
func loadConfig(fs *flag.FlagSet, path string, lookupEnv func(string) (string, bool)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadConfig, err)
	}
	defer f.Close()
	text, err := io.ReadAll(io.LimitReader(f, configFileMaxBytes+1))
	if err != nil {
		return fmt.Errorf("%w %s: %w", errBadConfig, path, err)
	}
	if len(text) > configFileMaxBytes {
		return fmt.Errorf("%w %s: larger than %d bytes", errBadConfig, path, configFileMaxBytes)
	}
	entries, err := parseConfig(text)
	if err != nil {
		return fmt.Errorf("%w %s: %w", errBadConfig, path, err)
	}
	return applyConfig(fs, path, entries, lookupEnv)
}

// printConfig writes every flag's effective value as a config file: what
// the defaults, the file, the environment and the command line made of it.
func printConfig(w io.Writer, fs *flag.FlagSet) error {
	root := &yaml.Node{Kind: yaml.MappingNode}
	fs.VisitAll(func(fl *flag.Flag) {
		if fl.Name == configFlag || fl.Name == printConfigFlag {
			return
		}
		value := &yaml.Node{Kind: yaml.ScalarNode, Value: fl.Value.String()}
		if _, isBool := fl.Value.(flag.Getter).Get().(bool); !isBool {
			// Quoted, so a value such as "0" or "on" reads back as the
			// flag's text, not a YAML number or boolean.
			value.Style = yaml.DoubleQuotedStyle
		}
		root.Content = append(root.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: fl.Name}, value)
	})
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{root}}); err != nil {
		return fmt.Errorf("print config: %w", err)
	}
	return enc.Close()
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// commands is the command tree shell completion offers: each command path
// ("" for the top) and the words that may follow it. The flags come from
// each command's own --help, so a new flag is completed without a change
// here; TestCompletionKnowsEveryCommand holds this tree to the dispatch.
var commands = map[string][]string{
	"":           {"dev", "serve", "nats", "cert", "topics", "produce", "consume", "bench", "users", "cluster", "version", "completion", "ctx", "help"},
	"ctx":        {"add", "use", "list", "show", "rm"},
	"topics":     {"create", "alter", "list", "get", "delete", "attach", "children", "detach"},
	"users":      {"create", "list", "grant", "passwd", "delete"},
	"cluster":    {"members", "status", "topics", "moves", "decommission", "forget", "version", "quarantine"},
	"completion": {"bash", "zsh", "fish"},
	"cert":       {"create-ca", "create-node", "list"},
	// Second-level verbs of cluster.
	"cluster moves":      {"abort"},
	"cluster quarantine": {"release"},
}

const completionUsage = `usage: narad completion bash|zsh|fish

Prints a script that completes narad's commands, subcommands and flags in
your shell. The script asks the binary itself (narad __complete), so it
follows the binary it finds on PATH.

  bash:  source <(narad completion bash)          (or into /etc/bash_completion.d/narad)
  zsh:   source <(narad completion zsh)
  fish:  narad completion fish > ~/.config/fish/completions/narad.fish
`

var completionScripts = map[string]string{
	"bash": `# narad completion for bash: source <(narad completion bash)
_narad() {
  local IFS=$'\n'
  COMPREPLY=($(narad __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _narad narad
`,
	"zsh": `# narad completion for zsh: source <(narad completion zsh)
autoload -U +X bashcompinit && bashcompinit
_narad() {
  local IFS=$'\n'
  COMPREPLY=($(narad __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
}
complete -o default -F _narad narad
`,
	"fish": `# narad completion for fish: narad completion fish > ~/.config/fish/completions/narad.fish
complete -c narad -f -a '(narad __complete (commandline -opc)[2..-1] (commandline -ct) 2>/dev/null)'
`,
}

func runCompletion(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprint(stdout, completionUsage)
		return nil
	}
	if len(args) != 1 || completionScripts[args[0]] == "" {
		fmt.Fprint(stderr, completionUsage)
		return fmt.Errorf("completion: want one of bash, zsh, fish; got %q", args)
	}
	_, err := io.WriteString(stdout, completionScripts[args[0]])
	return err
}

// flagName finds the flags a --help text lists: "  --name ..." in the
// hand-written usages, "  -name ..." in flag's PrintDefaults.
var flagName = regexp.MustCompile(`(?m)^\s+--?([a-z][a-z0-9-]*)\b`)

// runComplete answers the completion scripts: args are the words typed
// after narad, the last one the word being completed. It prints the
// candidates, one per line: the subcommands of the path so far, or, for a
// word starting with -, the flags of its command.
func runComplete(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		args = []string{""}
	}
	partial, typed := args[len(args)-1], args[:len(args)-1]
	var path []string
	for _, w := range typed {
		if strings.HasPrefix(w, "-") {
			continue
		}
		if next := strings.Join(append(slices.Clone(path), w), " "); slices.Contains(commands[strings.Join(path, " ")], w) || commands[next] != nil {
			path = append(path, w)
		}
	}
	var candidates []string
	if strings.HasPrefix(partial, "-") {
		candidates = commandFlags(ctx, path)
	} else {
		candidates = commands[strings.Join(path, " ")]
	}
	for _, c := range candidates {
		if strings.HasPrefix(c, partial) {
			fmt.Fprintln(stdout, c)
		}
	}
	return nil
}

// commandFlags are the flags the command at path lists in its --help, as
// --name.
func commandFlags(ctx context.Context, path []string) []string {
	if len(path) == 0 {
		return []string{"--help", "--version"}
	}
	args := path
	if path[0] == "cluster" && len(path) == 3 {
		// cluster moves abort and cluster quarantine release take their
		// verb's flags.
		args = path[:2]
	}
	var out bytes.Buffer
	_ = run(ctx, append(slices.Clone(args), "--help"), strings.NewReader(""), &out, &out)
	var flags []string
	for _, m := range flagName.FindAllStringSubmatch(out.String(), -1) {
		if f := "--" + m[1]; !slices.Contains(flags, f) {
			flags = append(flags, f)
		}
	}
	return flags
}

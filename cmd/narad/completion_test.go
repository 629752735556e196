package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// The completion tree holds every command the dispatch knows, and only
// those: each of its words runs (its --help), and the usage's command
// lines name no command it lacks.
func TestCompletionKnowsEveryCommand(t *testing.T) {
	for path, words := range commands {
		for _, w := range words {
			args := append(strings.Fields(path), w, "--help")
			if path == "completion" {
				args = args[:len(args)-1] // its words are the shells; it prints their scripts
			}
			if path == "cluster moves" || path == "cluster quarantine" || w == "help" {
				continue // verbs of a verb, and help itself, have no --help of their own
			}
			var out bytes.Buffer
			err := run(context.Background(), args, strings.NewReader(""), &out, &out)
			if err != nil && !errors.Is(err, flag.ErrHelp) {
				t.Errorf("narad %s: got %v, want its help", strings.Join(args, " "), err)
			}
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^  narad ([a-z]+)`).FindAllStringSubmatch(usage, -1) {
		found := false
		for _, w := range commands[""] {
			found = found || w == m[1]
		}
		if !found {
			t.Errorf("narad's usage lists %q, which completion does not offer", m[1])
		}
	}
}

func TestComplete(t *testing.T) {
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"top"}, []string{"topics"}},
		{[]string{""}, commands[""]},
		{[]string{"topics", "a"}, []string{"alter", "attach"}},
		{[]string{"topics", "create", "--pa"}, []string{"--password", "--partitions", "--parent"}},
		{[]string{"topics", "--server", "x", "de"}, []string{"delete", "detach"}},
		{[]string{"consume", "orders", "--pe"}, []string{"--peek"}},
		{[]string{"serve", "--print"}, []string{"--print-config"}},
		{[]string{"cluster", "moves", "a"}, []string{"abort"}},
		{[]string{"cluster", "decommission", "--dr"}, []string{"--dry-run"}},
		{[]string{"completion", "f"}, []string{"fish"}},
		{[]string{"nosuch", "x"}, nil},
	} {
		var out bytes.Buffer
		if err := runComplete(context.Background(), tc.words, &out); err != nil {
			t.Fatal(err)
		}
		got := strings.Fields(out.String())
		if strings.Join(got, " ") != strings.Join(tc.want, " ") {
			t.Errorf("complete %q: got %q, want %q", tc.words, got, tc.want)
		}
	}
}

// The bash script parses, and hands narad __complete the words typed
// after narad up to the cursor, one candidate per line into COMPREPLY.
func TestCompletionScriptForBash(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	var script bytes.Buffer
	if err := runCompletion([]string{"bash"}, &script, io.Discard); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bash, "-n", "-c", script.String()).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}
	// narad stands in as a function that echoes what it was asked.
	probe := script.String() + `
narad() { local IFS=' '; printf '%s\n' "got:$*" "second candidate"; }
COMP_WORDS=(narad topics create --pa ignored)
COMP_CWORD=3
_narad
printf '%s|' "${COMPREPLY[@]}"
`
	out, err := exec.Command(bash, "-c", probe).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	if got, want := string(out), "got:__complete topics create --pa|second candidate|"; got != want {
		t.Errorf("COMPREPLY: got %q, want %q", got, want)
	}
	for _, shell := range []string{"zsh", "fish"} {
		var s bytes.Buffer
		if err := runCompletion([]string{shell}, &s, io.Discard); err != nil || !strings.Contains(s.String(), "narad __complete") {
			t.Errorf("completion %s: got %q, %v; want a script asking narad __complete", shell, s.String(), err)
		}
	}
	if err := runCompletion([]string{"tcsh"}, io.Discard, io.Discard); err == nil {
		t.Error("completion tcsh: got no error, want one")
	}
}

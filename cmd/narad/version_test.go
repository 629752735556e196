package main

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	old := version
	t.Cleanup(func() { version = old })
	version = "v9.8.7-test"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out bytes.Buffer
		if err := run(context.Background(), args, nil, &out, io.Discard); err != nil {
			t.Fatalf("narad %s: %v", args[0], err)
		}
		for _, want := range []string{"narad v9.8.7-test\n", "go " + runtime.Version() + "\n", "platform " + runtime.GOOS + "/" + runtime.GOARCH + "\n"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("narad %s: got %q, want a line %q", args[0], out.String(), want)
			}
		}
	}
	if err := run(context.Background(), []string{"version", "extra"}, nil, io.Discard, io.Discard); err == nil {
		t.Error("narad version extra: got no error, want one (it takes no arguments)")
	}
	version = ""
	if got := buildVersion(); !strings.HasPrefix(got, "(devel)") && !strings.HasPrefix(got, "v") {
		t.Errorf("buildVersion with nothing linked in: got %q, want the module's version or (devel)", got)
	}
}

package main

import (
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version is the binary's version, linked in by `task image` and release
// builds: go build -ldflags "-X main.version=v1.2.3". Empty in a plain
// go build or go run, where buildVersion falls back to the module's.
var version string

// buildVersion is the version this binary reports (narad version, the
// narad_build_info series): the linked-in one, else the main module's
// version (set by go install of a tagged module), else "(devel)" with the
// commit when the build recorded one.
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(devel)"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	if rev := buildSetting(info, "vcs.revision"); rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if buildSetting(info, "vcs.modified") == "true" {
			rev += "-dirty"
		}
		return "(devel) " + rev
	}
	return "(devel)"
}

func buildSetting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// runVersion prints the version, the commit, the Go version and the
// platform, one per line.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: narad version\n\nPrints the binary's version, the commit it was built from, the Go version and the platform.")
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("version takes no arguments, got %q", fs.Args())
	}
	commit := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		if rev := buildSetting(info, "vcs.revision"); rev != "" {
			commit = rev
			if buildSetting(info, "vcs.modified") == "true" {
				commit += " (modified)"
			}
		}
	}
	_, err := fmt.Fprintf(stdout, "narad %s\ncommit %s\ngo %s\nplatform %s/%s\n", buildVersion(), commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

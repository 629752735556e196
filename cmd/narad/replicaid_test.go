package main

import (
	"flag"
	"io"
	"testing"
)

// A joiner asks the cluster for its replica id unless one is named: the
// flag's default must not count as named.
func TestReplicaIDGivenOnlyWhenNamed(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  bool
		want bool
	}{
		{name: "default", want: false},
		{name: "flag", args: []string{"--replica-id", "7"}, want: true},
		{name: "environment", env: true, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env {
				t.Setenv("NARAD_REPLICA_ID", "7")
			}
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.Uint64("replica-id", 1, "")
			fs.Bool("join", false, "")
			if err := fs.Parse(append([]string{"--join"}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			if got := replicaIDGiven(fs); got != tc.want {
				t.Errorf("replicaIDGiven with %v (env %t): got %t, want %t", tc.args, tc.env, got, tc.want)
			}
		})
	}
}

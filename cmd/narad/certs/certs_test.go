package certs

import (
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// A CA and a node certificate made into one directory: keys only the
// owner reads, the node's certificate names exactly its hosts, serves and
// dials, and chains to the CA, which Check accepts for the node's host.
func TestCreateCAAndNodeWriteFilesServeAccepts(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	if _, err := CreateCA(dir, "", now, DefaultCALifetime, false); err != nil {
		t.Fatal(err)
	}
	c, err := CreateNode(dir, "", NodeName, []string{"host-1.example", "10.0.0.7", "*.narad.default.svc", "*.narad"}, now, DefaultNodeLifetime, false)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]os.FileMode{CAFile: 0o644, CAKeyFile: 0o600, "node.crt": 0o644, "node.key": 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s mode: got %v, want %v", name, got, want)
		}
	}
	if got, want := Hosts(c), []string{"host-1.example", "*.narad.default.svc", "*.narad", "10.0.0.7"}; !slices.Equal(got, want) {
		t.Errorf("hosts: got %v, want %v", got, want)
	}
	if !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Errorf("extended key usages: got %v, want server and client auth (mutual TLS)", c.ExtKeyUsage)
	}
	if got := c.NotAfter.Sub(now).Round(time.Hour); got != DefaultNodeLifetime {
		t.Errorf("node lifetime: got %v, want %v", got, DefaultNodeLifetime)
	}
	ca, crt, key := filepath.Join(dir, CAFile), filepath.Join(dir, "node.crt"), filepath.Join(dir, "node.key")
	for _, host := range []string{"host-1.example", "10.0.0.7", "narad-2.narad.default.svc", "narad-0.narad"} {
		if err := Check(ca, crt, key, host, now); err != nil {
			t.Errorf("Check for %s: got %v, want nil", host, err)
		}
	}
	if err := Check(ca, crt, key, "host-2.example", now); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "create-node ... host-2.example") {
		t.Errorf("Check for a host the certificate does not name: got %v, want %v with the command that makes one", err, ErrRefused)
	}
	if err := Check(ca, crt, key, "host-1.example", now.Add(DefaultNodeLifetime+time.Hour)); !errors.Is(err, ErrRefused) {
		t.Errorf("Check past the certificate's end: got %v, want %v", err, ErrRefused)
	}
}

// A certificate of another CA is refused, and so is a key that is not the
// certificate's.
func TestCheckRefusesAnotherCAsCertificateAndAMismatchedKey(t *testing.T) {
	ours, theirs := t.TempDir(), t.TempDir()
	now := time.Now()
	for _, dir := range []string{ours, theirs} {
		if _, err := CreateCA(dir, "", now, DefaultCALifetime, false); err != nil {
			t.Fatal(err)
		}
		if _, err := CreateNode(dir, "", NodeName, []string{"127.0.0.1"}, now, DefaultNodeLifetime, false); err != nil {
			t.Fatal(err)
		}
	}
	err := Check(filepath.Join(ours, CAFile), filepath.Join(theirs, "node.crt"), filepath.Join(theirs, "node.key"), "127.0.0.1", now)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "does not chain") {
		t.Errorf("another CA's certificate: got %v, want %v saying it does not chain", err, ErrRefused)
	}
	err = Check(filepath.Join(ours, CAFile), filepath.Join(ours, "node.crt"), filepath.Join(theirs, "node.key"), "127.0.0.1", now)
	if !errors.Is(err, ErrRefused) {
		t.Errorf("a key of another certificate: got %v, want %v", err, ErrRefused)
	}
	_, err = CreateNode(ours, filepath.Join(theirs, CAKeyFile), "n2", []string{"127.0.0.1"}, now, DefaultNodeLifetime, false)
	if !errors.Is(err, ErrNotCA) {
		t.Errorf("create-node with another CA's key: got %v, want %v", err, ErrNotCA)
	}
}

// Nothing is replaced unless asked, a node certificate ends with its CA,
// and hosts and lifetimes out of range are refused before anything is
// written.
func TestCreateRefusesWhatWouldHurt(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	a, err := CreateCA(dir, "", now, 24*time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CreateCA(dir, "", now, DefaultCALifetime, false); !errors.Is(err, ErrExists) {
		t.Errorf("a second create-ca: got %v, want %v", err, ErrExists)
	}
	c, err := CreateNode(dir, "", "n1", []string{"127.0.0.1"}, now, DefaultNodeLifetime, false)
	if err != nil {
		t.Fatal(err)
	}
	if !c.NotAfter.Equal(a.Cert.NotAfter) {
		t.Errorf("a node certificate longer than its CA: ends %v, want the CA's end %v", c.NotAfter, a.Cert.NotAfter)
	}
	if _, err := CreateNode(dir, "", "n1", []string{"127.0.0.1"}, now, DefaultNodeLifetime, false); !errors.Is(err, ErrExists) {
		t.Errorf("create-node over n1: got %v, want %v", err, ErrExists)
	}
	if _, err := CreateNode(dir, "", "n1", []string{"127.0.0.2"}, now, DefaultNodeLifetime, true); err != nil {
		t.Errorf("create-node over n1 with overwrite: got %v, want nil", err)
	}
	for _, hosts := range [][]string{nil, {"host-1:7950"}, {"-bad.example"}, {"a..b"}, {"x.*.example"}} {
		if _, err := CreateNode(dir, "", "n9", hosts, now, DefaultNodeLifetime, false); !errors.Is(err, ErrBadHost) {
			t.Errorf("hosts %q: got %v, want %v", hosts, err, ErrBadHost)
		}
	}
	for _, d := range []time.Duration{0, -time.Hour, MaxLifetime + time.Hour} {
		if _, err := CreateNode(dir, "", "n9", []string{"127.0.0.1"}, now, d, false); !errors.Is(err, ErrBadLifetime) {
			t.Errorf("lifetime %v: got %v, want %v", d, err, ErrBadLifetime)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "n9.key")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("n9.key after refusals: got %v, want no file", err)
	}
}

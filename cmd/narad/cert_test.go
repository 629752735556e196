package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cmd/narad/certs"
)

// raftCertFlags makes a CA and a loopback node certificate in dir and
// returns the --raft-tls-* flags of a test's node.
func raftCertFlags(t *testing.T, dir string) []string {
	t.Helper()
	if _, err := certs.CreateCA(dir, "", time.Now(), certs.DefaultCALifetime, false); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.CreateNode(dir, "", certs.NodeName, []string{"127.0.0.1", "localhost"}, time.Now(), certs.DefaultNodeLifetime, false); err != nil {
		t.Fatal(err)
	}
	return []string{"--raft-tls-ca", filepath.Join(dir, certs.CAFile),
		"--raft-tls-cert", filepath.Join(dir, "node.crt"), "--raft-tls-key", filepath.Join(dir, "node.key")}
}

// A node given no Raft certificates and no --insecure-raft refuses to
// start and names the commands that make them; those commands, run as
// written, make files it then starts on; and its Raft port refuses a peer
// whose certificate another CA signed, while a certificate of its own CA
// gets a session.
func TestServeWithoutRaftCertificatesRefusesAndNamesTheCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	t.Chdir(t.TempDir())
	httpAddr, raftAddr := freePort(t), freePort(t)
	args := []string{"--data", "data", "--http", httpAddr, "--raft", raftAddr, "--security-enabled=false", "--log-level", "error"}
	// Cancelled: a node that did not refuse gives up starting rather than
	// serving until a signal.
	refused, cancelRefused := context.WithCancel(context.Background())
	cancelRefused()
	err := runServe(refused, args, io.Discard, io.Discard)
	if !errors.Is(err, errRaftInsecure) {
		t.Fatalf("serve without Raft certificates: got %v, want %v", err, errRaftInsecure)
	}
	var commands [][]string
	var serveFlags []string
	for _, line := range strings.Split(err.Error(), "\n") {
		words := strings.Fields(line)
		switch {
		case len(words) > 2 && words[0] == "narad" && words[1] == "cert":
			commands = append(commands, words[1:])
		case len(words) > 2 && words[0] == "narad" && words[1] == "serve" && words[2] == "...":
			serveFlags = words[3:]
		}
	}
	want := [][]string{{"cert", "create-ca", "--dir", "certs"}, {"cert", "create-node", "--dir", "certs", "127.0.0.1", "localhost"}}
	if len(commands) != 2 || strings.Join(commands[0], " ") != strings.Join(want[0], " ") || strings.Join(commands[1], " ") != strings.Join(want[1], " ") || len(serveFlags) != 6 {
		t.Fatalf("the refusal's commands: got %q and serve flags %q, want %q and the three --raft-tls-* files\n%v", commands, serveFlags, want, err)
	}
	if !strings.Contains(err.Error(), "--insecure-raft (NARAD_INSECURE_RAFT=true)") {
		t.Errorf("the refusal: got %v, want it to name the insecure flag too", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range commands {
		if err := run(ctx, c, strings.NewReader(""), io.Discard, io.Discard); err != nil {
			t.Fatalf("narad %s: %v", strings.Join(c, " "), err)
		}
	}
	for _, f := range []string{"certs/ca.key", "certs/node.key"} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: got %v (%v), want mode 0600", f, fi, err)
		}
	}
	if err := run(ctx, []string{"cert", "create-ca", "--dir", "certs"}, strings.NewReader(""), io.Discard, io.Discard); !errors.Is(err, certs.ErrExists) {
		t.Fatalf("a second create-ca over the cluster's CA: got %v, want %v", err, certs.ErrExists)
	}

	done := make(chan error, 1)
	go func() { done <- runServe(ctx, append(args, serveFlags...), io.Discard, io.Discard) }()
	testnet.Eventually(t, 60*time.Second, "the node ready on its Raft certificates", func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve with the files the refusal named: %v", err)
		default:
		}
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// A peer: a certificate of the cluster's CA, and one of a stranger's.
	if err := run(ctx, []string{"cert", "create-node", "--dir", "certs", "--name", "peer", "127.0.0.1"}, strings.NewReader(""), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"cert", "create-ca", "--dir", "stranger"}, {"cert", "create-node", "--dir", "stranger", "127.0.0.1"}} {
		if err := run(ctx, c, strings.NewReader(""), io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
	}
	caPEM, err := os.ReadFile("certs/ca.crt")
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	dial := func(cert, key string) (*tls.Conn, error) {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		// Presented whatever CAs the node names, as a forger would.
		return tls.Dial("tcp", raftAddr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1",
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }})
	}
	conn, err := dial("certs/peer.crt", "certs/peer.key")
	if err != nil {
		t.Fatalf("a peer with the cluster CA's certificate: got %v, want a TLS session", err)
	}
	conn.Close()
	stranger, err := tls.LoadX509KeyPair("stranger/node.crt", "stranger/node.key")
	if err != nil {
		t.Fatal(err)
	}
	if err := raftRefusal(raftAddr, &stranger); err == nil || !strings.Contains(err.Error(), "remote error: tls") {
		t.Errorf("a peer with a stranger CA's certificate: got %v, want the node's TLS alert", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve after its stop: %v", err)
	}
}

// What serve asks of its Raft settings before it starts: files, or
// --insecure-raft, never both nor neither; files its peers would refuse
// are named.
func TestRaftSecurityWantsCertificatesOrTheInsecureFlag(t *testing.T) {
	dir := t.TempDir()
	f := raftCertFlags(t, dir)
	files := [3]string{f[1], f[3], f[5]}
	now := time.Now()
	for _, tc := range []struct {
		name     string
		files    [3]string
		insecure bool
		addr     string
		want     string // "" for a node that starts
	}{
		{"files", files, false, "127.0.0.1:7950", ""},
		{"insecure", [3]string{}, true, "127.0.0.1:7950", ""},
		{"neither", [3]string{}, false, "host-1:7950", "narad cert create-node --dir certs host-1\n"},
		{"both", files, true, "127.0.0.1:7950", "pick one"},
		{"a host the certificate does not name", files, false, "host-1:7950", "not host-1"},
		{"a partial set, the metastore's to refuse", [3]string{files[0]}, false, "127.0.0.1:7950", ""},
	} {
		err := raftSecurity(tc.files, tc.insecure, tc.addr, now)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// raftRefusal dials a node's Raft port over TLS presenting cert (none when
// nil) whatever CAs the node names, as a forger would, and returns what
// the node answered: the handshake's error, or, since TLS 1.3 reports the
// refusal of a client's certificate at the first read, that read's error.
// A node that accepted the session waits for Raft's header instead, until
// this hang guard.
func raftRefusal(addr string, cert *tls.Certificate) error {
	conn, err := tls.Dial("tcp", addr, &tls.Config{
		// The node's certificate is not under test here, the client's is.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if cert == nil {
				return &tls.Certificate{}, nil
			}
			return cert, nil
		}})
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

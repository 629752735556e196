//go:build !noraft

package metastore

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/transport/testpki"
	"github.com/naradmq/narad/messages"
)

// TestRaftOverMutualTLSRefusesAPeerWithoutAValidCertificate: three
// replicas with certificates of one CA elect and commit; a client that
// presents no certificate, or one of another CA, gets no Raft session.
func TestRaftOverMutualTLSRefusesAPeerWithoutAValidCertificate(t *testing.T) {
	ctx := longTest(t, "starts three NodeHosts")
	ca := testpki.New(t, "raft")
	stores := openClusterWith(t, ctx, func(c *Config) {
		f := ca.Issue(t, c.NodeID)
		c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile = f.CAFile, f.CertFile, f.KeyFile
	})
	retry(t, ctx, "create a topic over mutual TLS", func() error {
		_, err := stores[0].CreateTopic(ctx, messages.Topic{Name: "t", Partitions: 3})
		return err
	})

	addr := stores[0].cfg.RaftAddr
	probe := ca.Issue(t, "probe")
	pem, err := os.ReadFile(probe.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	load := func(f testpki.Files) []tls.Certificate {
		c, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{c}
	}
	// The certificate is presented whatever CAs the server names, as a
	// forger would.
	dial := func(certs []tls.Certificate) (*tls.Conn, error) {
		return tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1",
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
				if len(certs) == 0 {
					return &tls.Certificate{}, nil
				}
				return &certs[0], nil
			}})
	}
	// Control: the Raft port speaks TLS with a certificate of the CA.
	conn, err := dial(load(probe))
	if err != nil {
		t.Fatalf("a client with the CA's certificate: %v, want a TLS session", err)
	}
	conn.Close()

	for name, certs := range map[string][]tls.Certificate{
		"no":           nil,
		"another CA's": load(testpki.New(t, "stranger").Issue(t, "n9")),
	} {
		conn, err := dial(certs)
		if err != nil {
			continue // refused during the handshake
		}
		// TLS 1.3 reports the server's refusal of the client's
		// certificate at the first read; a session it accepted would
		// wait for Raft's header instead, until the deadline.
		conn.SetReadDeadline(time.Now().Add(hangGuard))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		if err == nil || !strings.Contains(err.Error(), "remote error: tls") {
			t.Errorf("a client with %s certificate: read got %v, want the server's TLS alert", name, err)
		}
	}
}

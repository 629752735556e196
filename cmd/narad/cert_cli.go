package main

// narad cert: the cluster's certificate authority and its nodes'
// certificates, for Raft's mutual TLS (cmd/narad/certs).

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/naradmq/narad/cmd/narad/certs"
)

const certUsage = `usage: narad cert <command> [flags]

Raft between nodes runs over mutual TLS: every node presents a certificate
of the cluster's CA and accepts only peers that do. These commands make them:

  create-ca                 make the cluster's CA, once: DIR/ca.crt, and its key
                            DIR/ca.key (or --ca-key), mode 0600
  create-node <host>...     make a node's certificate for every host (name or IP)
                            its peers dial it at: DIR/node.crt, DIR/node.key
  list                      the certificates in DIR, their hosts and ends

Then: narad serve --raft-tls-ca DIR/ca.crt --raft-tls-cert DIR/node.crt --raft-tls-key DIR/node.key

Every command takes --dir DIR (default ` + defaultCertsDir + `). Keep ca.key off the nodes;
a node needs ca.crt, node.crt and node.key.
`

// defaultCertsDir is where the cert commands read and write by default.
const defaultCertsDir = "certs"

var certCommandUsage = map[string]string{
	"create-ca":   "usage: narad cert create-ca [flags]\n\nMakes the cluster's CA: DIR/ca.crt, and its key (mode 0600) in --ca-key.\n\nFlags:\n",
	"create-node": "usage: narad cert create-node [flags] <host>...\n\nMakes a node's certificate, signed by the CA of DIR, valid for every host\ngiven (the host of its --raft; a wildcard *.svc.example names many nodes),\nas a Raft server and client: DIR/NAME.crt and DIR/NAME.key (mode 0600).\n\nFlags:\n",
	"list":        "usage: narad cert list [flags]\n\nLists the certificates in DIR: file, name, hosts, and when each ends.\n\nFlags:\n",
}

// runCert runs `narad cert <create-ca|create-node|list> ...`.
func runCert(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, certUsage)
		return errors.New("cert: no command")
	}
	cmd := args[0]
	if cmd == "-h" || cmd == "--help" || cmd == "-help" || cmd == "help" {
		fmt.Fprint(stdout, certUsage)
		return nil
	}
	help, ok := certCommandUsage[cmd]
	if !ok {
		fmt.Fprint(stderr, certUsage)
		return fmt.Errorf("cert: unknown command %q", cmd)
	}
	fs := flag.NewFlagSet("cert "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, help)
		fs.PrintDefaults()
	}
	dir := fs.String("dir", defaultCertsDir, "the certificate directory")
	var caKey *string
	var lifetime *time.Duration
	overwrite := new(bool)
	name := new(string)
	switch cmd {
	case "create-ca":
		caKey = fs.String("ca-key", "", "where the CA's key goes (default DIR/ca.key); keep it off the nodes")
		lifetime = fs.Duration("lifetime", certs.DefaultCALifetime, "how long the CA is valid")
		fs.BoolVar(overwrite, "overwrite", false, "replace an existing CA: every node's certificate then needs making again")
	case "create-node":
		caKey = fs.String("ca-key", "", "the CA's key (default DIR/ca.key)")
		lifetime = fs.Duration("lifetime", certs.DefaultNodeLifetime, "how long the certificate is valid (at most until the CA's end)")
		fs.StringVar(name, "name", certs.NodeName, "the files' name, NAME.crt and NAME.key, and the certificate's common name")
		fs.BoolVar(overwrite, "overwrite", false, "replace an existing certificate and key of that name")
	}
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	if cmd != "create-node" && len(pos) > 0 {
		return fmt.Errorf("cert %s: takes no arguments, got %q", cmd, pos)
	}
	now := time.Now()
	switch cmd {
	case "create-ca":
		a, err := certs.CreateCA(*dir, *caKey, now, *lifetime, *overwrite)
		if err != nil {
			return fmt.Errorf("cert create-ca: %w", err)
		}
		keyPath := *caKey
		if keyPath == "" {
			keyPath = filepath.Join(*dir, certs.CAKeyFile)
		}
		fmt.Fprintf(stdout, "wrote %s (the cluster's CA, valid until %s) and %s (its key, mode 0600: keep it off the nodes)\nnext, for each node: narad cert create-node --dir %s <host of its --raft>...\n",
			filepath.Join(*dir, certs.CAFile), a.Cert.NotAfter.UTC().Format(time.DateOnly), keyPath, *dir)
		return nil
	case "create-node":
		c, err := certs.CreateNode(*dir, *caKey, *name, pos, now, *lifetime, *overwrite)
		if err != nil {
			return fmt.Errorf("cert create-node: %w", err)
		}
		base := filepath.Join(*dir, *name)
		fmt.Fprintf(stdout, "wrote %s.crt (for %s, valid until %s) and %s.key (mode 0600)\nstart the node with: --raft-tls-ca %s --raft-tls-cert %s.crt --raft-tls-key %s.key\n",
			base, strings.Join(certs.Hosts(c), ", "), c.NotAfter.UTC().Format(time.DateOnly), base, filepath.Join(*dir, certs.CAFile), base, base)
		return nil
	default:
		all, err := certs.List(*dir)
		if err != nil {
			return fmt.Errorf("cert list: %w", err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "FILE\tNAME\tHOSTS\tUNTIL")
		for _, f := range slices.Sorted(maps.Keys(all)) {
			c := all[f]
			hosts := strings.Join(certs.Hosts(c), ",")
			if c.IsCA {
				hosts = "(CA)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f, c.Subject.CommonName, hosts, c.NotAfter.UTC().Format(time.DateOnly))
		}
		return tw.Flush()
	}
}

// raftCertsHowTo is what a node given no Raft certificates is told: the
// commands that make them for host, the host of its --raft.
func raftCertsHowTo(host string) string {
	hosts := host
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		hosts += " localhost"
	}
	return fmt.Sprintf(`make a CA once per cluster and a certificate per node, then pass the files:
  narad cert create-ca --dir %[1]s
  narad cert create-node --dir %[1]s %[2]s
  narad serve ... --raft-tls-ca %[1]s/ca.crt --raft-tls-cert %[1]s/node.crt --raft-tls-key %[1]s/node.key
(or NARAD_RAFT_TLS_CA, NARAD_RAFT_TLS_CERT, NARAD_RAFT_TLS_KEY); every node needs ca.crt and a certificate of its own host.
Only on a network no one else reaches: --insecure-raft (NARAD_INSECURE_RAFT=true) runs Raft over plain TCP`, defaultCertsDir, hosts)
}

// Package certs is a cluster's own certificate authority for Raft's mutual
// TLS: `narad cert create-ca` makes the CA once per cluster, `narad cert
// create-node` a certificate per node (or one shared by nodes whose names
// a wildcard covers), and `narad serve` checks its files with Check before
// it starts. The benches make their clusters' certificates here too, so
// that a binary of any revision that takes --raft-tls-* runs over TLS.
//
// The core (NewCA, Issue, ParseHosts) takes the time and returns
// certificates; the file side (CreateCA, CreateNode, LoadCA, Check, List)
// reads and writes PEM files, keys mode 0600.
package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The files a certificate directory holds, as `narad serve` takes them:
// --raft-tls-ca DIR/ca.crt --raft-tls-cert DIR/node.crt --raft-tls-key
// DIR/node.key.
const (
	CAFile    = "ca.crt"
	CAKeyFile = "ca.key"
	// NodeName is a node certificate's file name (NodeName.crt,
	// NodeName.key) unless create-node is given another.
	NodeName = "node"
)

// Lifetimes. A CA outlives the node certificates it signs (a node's is cut
// at its CA's end); both are long because nothing here renews them, and an
// expired certificate stops Raft between every node at once.
const (
	DefaultCALifetime   = 10 * 365 * 24 * time.Hour
	DefaultNodeLifetime = 5 * 365 * 24 * time.Hour
	// MaxLifetime bounds both: a lifetime past it is a typo (hours for
	// days), not a plan.
	MaxLifetime = 30 * 365 * 24 * time.Hour
	// backdate is how far before its making a certificate is valid from, so
	// that a peer whose clock runs behind by less accepts it at once.
	backdate = time.Hour
)

var (
	// ErrExists is a file that making a certificate would replace; pass
	// overwrite to replace it.
	ErrExists = errors.New("exists")
	// ErrBadHost is a host a certificate cannot name.
	ErrBadHost = errors.New("not a host name or IP address")
	// ErrBadLifetime is a lifetime of zero, below, or past MaxLifetime.
	ErrBadLifetime = errors.New("lifetime out of range")
	// ErrNotCA is a CA file or key that cannot sign node certificates.
	ErrNotCA = errors.New("not a usable CA")
	// ErrRefused is a node's files that its peers would refuse, or that
	// would refuse them.
	ErrRefused = errors.New("certificate refused")
)

// Authority is a CA: its certificate and the key that signs with it.
type Authority struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// NewCA makes a CA valid from now (less backdate) for lifetime.
func NewCA(now time.Time, lifetime time.Duration) (Authority, error) {
	if err := checkLifetime(lifetime); err != nil {
		return Authority{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Authority{}, err
	}
	serial, err := newSerial()
	if err != nil {
		return Authority{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"narad"}, CommonName: "narad cluster CA"},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(lifetime),
		IsCA:         true,
		// It signs node certificates only, never another CA.
		MaxPathLenZero:        true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return Authority{}, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return Authority{}, err
	}
	return Authority{Cert: cert, Key: key}, nil
}

// Issue signs a node certificate named name for hosts (see ParseHosts),
// good both as a Raft server and as a Raft client, as mutual TLS needs.
// It is valid from now (less backdate) for lifetime, cut at the CA's end.
func (a Authority) Issue(name string, hosts []string, now time.Time, lifetime time.Duration) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	if err := checkLifetime(lifetime); err != nil {
		return nil, nil, err
	}
	ips, dns, err := ParseHosts(hosts)
	if err != nil {
		return nil, nil, err
	}
	if !now.Before(a.Cert.NotAfter) {
		return nil, nil, fmt.Errorf("%w: the CA expired at %s; make a new one (every node then needs a certificate of it)", ErrNotCA, a.Cert.NotAfter.UTC().Format(time.RFC3339))
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(lifetime)
	if notAfter.After(a.Cert.NotAfter) {
		notAfter = a.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{Organization: []string{"narad"}, CommonName: name},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  ips,
		DNSNames:     dns,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, &key.PublicKey, a.Key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

// ParseHosts sorts hosts into IP addresses and DNS names; a DNS name may
// start with one wildcard label (*.narad.default.svc names every pod of a
// headless Service). A host with a port, or none at all, is refused.
func ParseHosts(hosts []string) ([]net.IP, []string, error) {
	if len(hosts) == 0 {
		return nil, nil, fmt.Errorf("%w: no host given; name every address peers dial this node at (its --raft host)", ErrBadHost)
	}
	var ips []net.IP
	var dns []string
	for _, h := range hosts {
		if ip := net.ParseIP(strings.Trim(h, "[]")); ip != nil {
			ips = append(ips, ip)
			continue
		}
		if !validDNSName(h) {
			return nil, nil, fmt.Errorf("%q: %w (give the host of --raft without its port)", h, ErrBadHost)
		}
		dns = append(dns, strings.ToLower(h))
	}
	return ips, dns, nil
}

// validDNSName: labels of letters, digits and inner hyphens, 63 bytes at
// most each and 253 in all; the first label may be the wildcard *.
func validDNSName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for i, label := range strings.Split(h, ".") {
		if label == "*" && i == 0 && strings.Contains(h, ".") {
			continue
		}
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

func checkLifetime(d time.Duration) error {
	if d <= 0 || d > MaxLifetime {
		return fmt.Errorf("%w: %s, want more than 0 and at most %s", ErrBadLifetime, d, MaxLifetime)
	}
	return nil
}

// newSerial is a random 128-bit serial: two certificates of one CA never
// share one, whoever makes them and when.
func newSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
}

// CreateCA makes a CA and writes its certificate to dir/ca.crt and its
// key to keyPath (dir/ca.key when empty), mode 0600. It refuses to replace
// either file unless overwrite: a new CA makes every node's certificate
// worthless.
func CreateCA(dir, keyPath string, now time.Time, lifetime time.Duration, overwrite bool) (Authority, error) {
	if keyPath == "" {
		keyPath = filepath.Join(dir, CAKeyFile)
	}
	certPath := filepath.Join(dir, CAFile)
	if err := refuseExisting(overwrite, certPath, keyPath); err != nil {
		return Authority{}, err
	}
	a, err := NewCA(now, lifetime)
	if err != nil {
		return Authority{}, err
	}
	keyPEM, err := keyToPEM(a.Key)
	if err != nil {
		return Authority{}, err
	}
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return Authority{}, err
	}
	if err := writeFile(certPath, certToPEM(a.Cert), 0o644); err != nil {
		return Authority{}, err
	}
	return a, nil
}

// CreateNode signs a certificate for hosts with the CA of dir (its key at
// caKeyPath, dir/ca.key when empty) and writes it to dir/name.crt and
// dir/name.key (mode 0600), unless they exist and not overwrite.
func CreateNode(dir, caKeyPath, name string, hosts []string, now time.Time, lifetime time.Duration, overwrite bool) (*x509.Certificate, error) {
	if caKeyPath == "" {
		caKeyPath = filepath.Join(dir, CAKeyFile)
	}
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." || name == "ca" {
		return nil, fmt.Errorf("node name %q: want a file name other than ca", name)
	}
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := refuseExisting(overwrite, certPath, keyPath); err != nil {
		return nil, err
	}
	a, err := LoadCA(filepath.Join(dir, CAFile), caKeyPath)
	if err != nil {
		return nil, err
	}
	cert, key, err := a.Issue(name, hosts, now, lifetime)
	if err != nil {
		return nil, err
	}
	keyPEM, err := keyToPEM(key)
	if err != nil {
		return nil, err
	}
	if err := writeFile(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeFile(certPath, certToPEM(cert), 0o644); err != nil {
		return nil, err
	}
	return cert, nil
}

// LoadCA reads a CA certificate and its key, and checks they belong
// together and can sign.
func LoadCA(certPath, keyPath string) (Authority, error) {
	certs, err := readCerts(certPath)
	if err != nil {
		return Authority{}, err
	}
	ca := certs[0]
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		return Authority{}, fmt.Errorf("%s: %w: not a CA certificate", certPath, ErrNotCA)
	}
	raw, err := os.ReadFile(keyPath)
	if err != nil {
		return Authority{}, fmt.Errorf("CA key: %w (pass --ca-key where create-ca wrote it)", err)
	}
	key, err := parseKey(raw)
	if err != nil {
		return Authority{}, fmt.Errorf("%s: %w", keyPath, err)
	}
	pub, ok := ca.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(key.Public()) {
		return Authority{}, fmt.Errorf("%w: %s is not the key of %s", ErrNotCA, keyPath, certPath)
	}
	return Authority{Cert: ca, Key: key}, nil
}

// Check is what `narad serve` asks of its Raft files before it starts:
// the key is the certificate's, the certificate chains to the CA at now as
// a server and as a client, and it names host, the one peers dial. Each
// failure says how to make files that pass.
func Check(caPath, certPath, keyPath, host string, now time.Time) error {
	pair, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return fmt.Errorf("%w: %s and %s: %w", ErrRefused, certPath, keyPath, err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrRefused, certPath, err)
	}
	cas, err := readCerts(caPath)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	roots := x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	for _, use := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{use}}); err != nil {
			return fmt.Errorf("%w: %s does not chain to %s (valid %s to %s): %w; make it with narad cert create-node from that CA",
				ErrRefused, certPath, caPath, leaf.NotBefore.UTC().Format(time.DateOnly), leaf.NotAfter.UTC().Format(time.DateOnly), err)
		}
	}
	host = strings.Trim(host, "[]")
	if err := leaf.VerifyHostname(host); err != nil {
		return fmt.Errorf("%w: %s names %s, not %s, the host of --raft its peers dial: make one with narad cert create-node ... %s",
			ErrRefused, certPath, strings.Join(Hosts(leaf), ", "), host, host)
	}
	return nil
}

// Hosts are the names and addresses a certificate is valid for.
func Hosts(c *x509.Certificate) []string {
	hosts := slices.Clone(c.DNSNames)
	for _, ip := range c.IPAddresses {
		hosts = append(hosts, ip.String())
	}
	return hosts
}

// List reads the certificates (*.crt) of dir, sorted by file name.
func List(dir string) (map[string]*x509.Certificate, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.crt"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no certificates (*.crt) in %s", dir)
	}
	out := map[string]*x509.Certificate{}
	for _, f := range files {
		certs, err := readCerts(f)
		if err != nil {
			return nil, err
		}
		out[f] = certs[0]
	}
	return out, nil
}

func readCerts(path string) ([]*x509.Certificate, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, raw = pem.Decode(raw)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return out, nil
}

func parseKey(raw []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(raw)
	if b == nil {
		return nil, errors.New("no PEM key in it")
	}
	var key any
	var err error
	switch b.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	}
	if err != nil {
		return nil, err
	}
	s, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", key)
	}
	return s, nil
}

func certToPEM(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func keyToPEM(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func refuseExisting(overwrite bool, paths ...string) error {
	if overwrite {
		return nil
	}
	for _, p := range paths {
		if _, err := os.Stat(p); err == nil {
			return fmt.Errorf("%s: %w (pass --overwrite to replace it)", p, ErrExists)
		}
	}
	return nil
}

// writeFile writes data whole under path with perm, through a temporary
// file renamed over it: a reader never sees half a key, and the key is
// never readable by others, not even while it is written.
func writeFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := bytes.NewReader(data).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

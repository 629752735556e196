package transport

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
)

// Role is what a NATS identity of a cluster may do. The server enforces it
// (subject permissions), so a client cannot do more by speaking raw NATS.
type Role string

const (
	// RoleNode is a broker node: it serves and calls the node subjects and
	// the admin verbs. Only nodes may publish on node subjects, so nobody
	// else can forge a partition commit or read a chunk.
	RoleNode Role = "node"
	// RoleAdmin may request every admin verb, the mutating ones included
	// (decommission, moves-abort, join, quarantine-release), and nothing
	// else.
	RoleAdmin Role = "admin"
	// RoleViewer may request only the ReadVerbs.
	RoleViewer Role = "viewer"
)

// Roles are every role, in the order credentials are written.
var Roles = []Role{RoleNode, RoleAdmin, RoleViewer}

// ReadVerbs are the admin verbs that change nothing, the viewer's. Every
// other verb, one added later included, needs RoleAdmin: a verb is
// mutating unless it is listed here.
var ReadVerbs = []string{"status", "members", "topics", "moves", "quarantine", "version"}

// Permissions is what one role may publish and subscribe to. Respond lets
// it answer requests it received (NATS's allow_responses) without
// publishing rights on the requester's inbox.
type Permissions struct {
	Publish, Subscribe []string
	Respond            bool
}

// nodeInboxPrefix is where a node's requests get their replies: only the
// node identity may subscribe there. Another identity must never receive
// the replies nodes get (partition chunks, commit outcomes).
func nodeInboxPrefix(cluster string) string { return "_NARAD_INBOX." + cluster }

// InboxPrefix is where the client whose NATS user is user (an nkey's
// public key) gets its replies: _INBOX.<user>. Each admin identity may
// subscribe under its own prefix only (RolePermissions), so a viewer never
// reads the answers an admin asked for. It stays under NATS's _INBOX, so a
// NATS deployment that grants _INBOX.> keeps working, and the nats CLI
// takes it with --inbox-prefix.
func InboxPrefix(user string) string { return "_INBOX." + user }

// RolePermissions is the permission table of cluster's role r whose NATS
// user is user (its public nkey, which names its inbox); ok is false for
// an unknown role.
func RolePermissions(cluster string, r Role, user string) (p Permissions, ok bool) {
	node := subjectRoot + "." + cluster + ".node.>"
	admin := subjectRoot + "." + cluster + ".admin."
	inbox := InboxPrefix(user) + ".>"
	switch r {
	case RoleNode:
		return Permissions{
			Publish:   []string{node, admin + ">"},
			Subscribe: []string{node, admin + ">", nodeInboxPrefix(cluster) + ".>"},
			Respond:   true,
		}, true
	case RoleAdmin:
		return Permissions{Publish: []string{admin + ">"}, Subscribe: []string{inbox}}, true
	case RoleViewer:
		pub := make([]string, len(ReadVerbs))
		for i, v := range ReadVerbs {
			pub[i] = admin + v
		}
		return Permissions{Publish: pub, Subscribe: []string{inbox}}, true
	}
	return Permissions{}, false
}

// Credentials are the nkey seed files of a cluster's roles in one
// directory, and their public keys (what the server checks).
type Credentials struct {
	Dir string
	// Public is each role's public nkey.
	Public map[Role]string
}

// File is the seed file of role r: what --nats-creds takes.
func (c Credentials) File(r Role) string { return filepath.Join(c.Dir, string(r)+".nk") }

// EnsureCredentials reads the seed of every role from dir, writing a new
// one for a role that has none: the first start of a server generates
// them, later starts keep them, so the nodes' files stay valid. created
// reports whether any was written.
func EnsureCredentials(dir string) (c Credentials, created bool, err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Credentials{}, false, fmt.Errorf("credentials: %w", err)
	}
	c = Credentials{Dir: dir, Public: map[Role]string{}}
	for _, r := range Roles {
		pub, made, err := ensureSeed(c.File(r))
		if err != nil {
			return Credentials{}, false, err
		}
		c.Public[r], created = pub, created || made
	}
	return c, created, nil
}

// ensureSeed returns the public key of the user seed in path, creating the
// file (mode 0600) when it does not exist.
func ensureSeed(path string) (pub string, created bool, err error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return "", false, fmt.Errorf("credentials: new nkey: %w", err)
		}
		seed, err := kp.Seed()
		if err != nil {
			return "", false, fmt.Errorf("credentials: new nkey: %w", err)
		}
		raw = append(seed, '\n')
		// Written aside and renamed, so a crash never leaves a half seed
		// that a later start would refuse.
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, raw, 0o600); err != nil {
			return "", false, fmt.Errorf("credentials: %w", err)
		}
		if err := os.Rename(tmp, path); err != nil {
			return "", false, fmt.Errorf("credentials: %w", err)
		}
		created = true
	} else if err != nil {
		return "", false, fmt.Errorf("credentials: %w", err)
	}
	defer clear(raw)
	kp, err := nkeys.ParseDecoratedNKey(raw)
	if err != nil {
		return "", false, fmt.Errorf("credentials: %s: %w", path, err)
	}
	defer kp.Wipe()
	pub, err = kp.PublicKey()
	if err != nil || !nkeys.IsValidPublicUserKey(pub) {
		return "", false, fmt.Errorf("credentials: %s holds no user seed: %w", path, ErrInvalid)
	}
	return pub, created, nil
}

// SecureServer makes o authenticate every client with c's nkeys under
// cluster's permission table, and, when files are set, require TLS with a
// client certificate that chains to files.CAFile. Without it the server
// lets anyone publish anything.
func SecureServer(o *server.Options, cluster string, c Credentials, files TLSFiles) error {
	if err := ValidToken("cluster", cluster); err != nil {
		return err
	}
	o.Nkeys = nil
	for _, r := range Roles {
		p, _ := RolePermissions(cluster, r, c.Public[r])
		o.Nkeys = append(o.Nkeys, &server.NkeyUser{Nkey: c.Public[r], Permissions: serverPermissions(p)})
	}
	if !files.Enabled() {
		return nil
	}
	if err := files.Validate(); err != nil {
		return err
	}
	tc, err := ServerTLS(files)
	if err != nil {
		return err
	}
	o.TLS, o.TLSVerify, o.TLSConfig = true, true, tc
	return nil
}

// ServerTLS is the TLS config of a server that requires a client
// certificate signed by files.CAFile.
func ServerTLS(files TLSFiles) (*tls.Config, error) {
	tc, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: files.CertFile, KeyFile: files.KeyFile, CaFile: files.CAFile, Verify: true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats server tls: %w", err)
	}
	return tc, nil
}

func serverPermissions(p Permissions) *server.Permissions {
	sp := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: p.Publish},
		Subscribe: &server.SubjectPermission{Allow: p.Subscribe},
	}
	if p.Respond {
		// One reply per request, within the server's default window.
		sp.Response = &server.ResponsePermission{MaxMsgs: 1}
	}
	return sp
}

package transport

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/naradmq/narad/cluster/transport/testpki"
)

// securedServer runs an embedded NATS server that authenticates with
// freshly generated credentials under the "test" cluster's permissions
// (and TLS when files are set), until the test ends.
func securedServer(t testing.TB, files TLSFiles) (*server.Server, Credentials) {
	t.Helper()
	creds, created, err := EnsureCredentials(t.TempDir())
	if err != nil || !created {
		t.Fatalf("EnsureCredentials: created %v, err %v; want true, nil", created, err)
	}
	o := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true}
	if err := SecureServer(o, "test", creds, files); err != nil {
		t.Fatal(err)
	}
	return runServer(t, o), creds
}

// rawClient connects a plain nats.go client with auth, as the nats CLI
// would; its async errors (permission violations) go to errs.
func rawClient(t testing.TB, s *server.Server, auth Auth, errs chan<- error) (*nats.Conn, error) {
	t.Helper()
	opts, err := auth.Options()
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, nats.Timeout(liveness), nats.NoReconnect(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			select {
			case errs <- err:
			default:
			}
		}))
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err == nil {
		t.Cleanup(nc.Close)
	}
	return nc, err
}

// securedNode connects a transport for node id with the node credentials.
func securedNode(t testing.TB, s *server.Server, creds Credentials, id string) *Transport {
	return newNode(t, s, id, func(c *Config) { c.Auth = Auth{CredsFile: creds.File(RoleNode)} })
}

func TestAClientWithoutCredentialsCannotConnect(t *testing.T) {
	s, _ := securedServer(t, TLSFiles{})
	_, err := rawClient(t, s, Auth{}, nil)
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("raw connect without credentials: got %v, want %v", err, nats.ErrAuthorization)
	}
	// A node without them neither: Connect gives up, it does not hang.
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	tr, err := Connect(ctx, Config{Cluster: "test", NodeID: "n1", URLs: []string{s.ClientURL()}}, nil)
	if err == nil {
		tr.Close()
		t.Fatal("transport connect without credentials: got nil error, want a refusal")
	}
	if ctx.Err() != nil {
		t.Fatalf("transport connect without credentials waited out its context: %v", err)
	}
}

func TestAClientWithAnotherSeedCannotConnect(t *testing.T) {
	s, _ := securedServer(t, TLSFiles{})
	other, _, err := EnsureCredentials(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawClient(t, s, Auth{CredsFile: other.File(RoleAdmin)}, nil); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("connect with a seed the server does not know: got %v, want %v", err, nats.ErrAuthorization)
	}
}

// TestAnAdminCannotForgeACommitOnANodeSubject is the issue's raw NATS
// attack: `nats req narad.<cluster>.node.n2.partition` with a forged
// commit, here with the admin credentials. The server refuses the publish,
// so the node's handler never runs.
func TestAnAdminCannotForgeACommitOnANodeSubject(t *testing.T) {
	s, creds := securedServer(t, TLSFiles{})
	n2 := securedNode(t, s, creds, "n2")
	var calls atomic.Int64
	if err := n2.Handle("partition", func(context.Context, string, []byte) ([]byte, error) {
		calls.Add(1)
		return []byte("committed"), nil
	}); err != nil {
		t.Fatal(err)
	}
	// The node subject works between nodes.
	n1 := securedNode(t, s, creds, "n1")
	if out, err := n1.Request(context.Background(), "n2", "partition", []byte("{}")); err != nil || string(out) != "committed" {
		t.Fatalf("node to node: got %q, %v; want committed, nil", out, err)
	}
	for _, role := range []Role{RoleAdmin, RoleViewer} {
		errs := make(chan error, 8)
		nc, err := rawClient(t, s, Auth{CredsFile: creds.File(role)}, errs)
		if err != nil {
			t.Fatalf("%s connect: %v", role, err)
		}
		forged := &nats.Msg{Subject: "narad.test.node.n2.partition", Header: nats.Header{"Narad-From": []string{"n1"}},
			Data: []byte(`{"key":{"Topic":"t","Partition":0},"commit":{"Records":[{"Body":"Zm9yZ2Vk"}]}}`)}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err = nc.RequestMsgWithContext(ctx, forged)
		cancel()
		if err == nil {
			t.Fatalf("%s forged commit: got an answer, want a refusal", role)
		}
		if got := waitErr(t, errs); !errors.Is(got, nats.ErrPermissionViolation) {
			t.Fatalf("%s forged commit: server said %v, want %v", role, got, nats.ErrPermissionViolation)
		}
	}
	if got := calls.Load(); got != 1 {
		t.Fatalf("partition handler calls: got %d, want 1 (the node's own request only)", got)
	}
}

// TestAnAdminCannotListenToNodeTraffic: record bodies travel on node
// subjects and their replies on the nodes' inbox; neither may be
// subscribed to by an admin client (`nats sub 'narad.>'`).
func TestAnAdminCannotListenToNodeTraffic(t *testing.T) {
	s, creds := securedServer(t, TLSFiles{})
	for _, subj := range []string{"narad.>", "narad.test.node.>", "_NARAD_INBOX.>", "narad.test.admin.>"} {
		wantSubscribeRefused(t, s, creds, RoleAdmin, subj)
	}
}

// wantSubscribeRefused subscribes to subj as role and fails the test unless
// the server answers with a permission violation.
func wantSubscribeRefused(t *testing.T, s *server.Server, creds Credentials, role Role, subj string) {
	t.Helper()
	errs := make(chan error, 8)
	nc, err := rawClient(t, s, Auth{CredsFile: creds.File(role)}, errs)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nc.SubscribeSync(subj); err != nil {
		t.Fatal(err)
	}
	_ = nc.Flush()
	if got := waitErr(t, errs); !errors.Is(got, nats.ErrPermissionViolation) {
		t.Fatalf("%s subscribes %s: server said %v, want %v", role, subj, got, nats.ErrPermissionViolation)
	}
}

// TestOnlyTheAdminMayCallMutatingVerbs: the viewer asks the read verbs
// and is refused every other; the admin may call them all.
func TestOnlyTheAdminMayCallMutatingVerbs(t *testing.T) {
	s, creds := securedServer(t, TLSFiles{})
	node := securedNode(t, s, creds, "n1")
	verbs := append(append([]string{}, ReadVerbs...), "decommission", "moves-abort", "join", "quarantine-release")
	for _, v := range verbs {
		if err := node.HandleAdmin(v, echo); err != nil {
			t.Fatal(err)
		}
	}
	for _, role := range []Role{RoleAdmin, RoleViewer} {
		for _, v := range verbs {
			errs := make(chan error, 8)
			nc, err := rawClient(t, s, Auth{CredsFile: creds.File(role)}, errs)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = nc.RequestWithContext(ctx, "narad.test.admin."+v, []byte(`{"v":1}`))
			cancel()
			read := strings.Contains(" "+strings.Join(ReadVerbs, " ")+" ", " "+v+" ")
			if want := role == RoleAdmin || read; want != (err == nil) {
				t.Fatalf("%s asks %s: got err %v, want allowed %v", role, v, err, want)
			}
		}
	}
}

// waitErr is the first async error a raw client saw.
func waitErr(t testing.TB, errs <-chan error) error {
	t.Helper()
	select {
	case err := <-errs:
		return err
	case <-time.After(liveness):
		t.Fatalf("no async error after %s", liveness)
		return nil
	}
}

func TestTLSRefusesAClientWithoutAValidCertificate(t *testing.T) {
	ca := testpki.New(t, "cluster")
	s, creds := securedServer(t, TLSFiles(ca.Issue(t, "server")))
	seed := creds.File(RoleNode)

	good := TLSFiles(ca.Issue(t, "n1"))
	cfg := func(files TLSFiles) Config {
		return Config{Cluster: "test", NodeID: "n1", URLs: []string{s.ClientURL()},
			Auth: Auth{CredsFile: seed, TLS: files}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveness)
	defer cancel()
	tr, err := Connect(ctx, cfg(good), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("connect with a certificate of the cluster's CA: %v", err)
	}
	tr.Close()

	if _, err := rawClient(t, s, Auth{CredsFile: seed}, nil); err == nil {
		t.Fatal("connect without TLS: got nil error, want a refusal")
	}
	stranger := testpki.New(t, "stranger")
	forged := TLSFiles(stranger.Issue(t, "n1"))
	forged.CAFile = good.CAFile // trusts the server, presents a foreign cert
	if _, err := rawClient(t, s, Auth{CredsFile: seed, TLS: forged}, nil); err == nil {
		t.Fatal("connect with a certificate of another CA: got nil error, want a refusal")
	}
	noCert := nats.RootCAs(good.CAFile)
	if nc, err := nats.Connect(s.ClientURL(), noCert, nats.Timeout(liveness), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Fatal("connect without a client certificate: got nil error, want a refusal")
	}
}

func TestAuthValidateRefusesHalfConfigurations(t *testing.T) {
	for _, tc := range []struct {
		name string
		auth Auth
	}{
		{"seed and user", Auth{CredsFile: "x.nk", User: "u"}},
		{"password without user", Auth{Password: "p"}},
		{"ca only", Auth{TLS: TLSFiles{CAFile: "ca.pem"}}},
		{"cert without key", Auth{TLS: TLSFiles{CAFile: "ca.pem", CertFile: "c.pem"}}},
	} {
		if err := tc.auth.Validate(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Validate got %v, want %v", tc.name, err, ErrInvalid)
		}
	}
	for _, ok := range []Auth{{}, {CredsFile: "x.nk"}, {User: "u", Password: "p"},
		{TLS: TLSFiles{CAFile: "a", CertFile: "b", KeyFile: "c"}}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%+v): got %v, want nil", ok, err)
		}
	}
}

func TestEnsureCredentialsKeepsTheSeedsOfAnEarlierStart(t *testing.T) {
	dir := t.TempDir()
	first, created, err := EnsureCredentials(dir)
	if err != nil || !created {
		t.Fatalf("first start: created %v, err %v; want true, nil", created, err)
	}
	again, created, err := EnsureCredentials(dir)
	if err != nil || created {
		t.Fatalf("second start: created %v, err %v; want false, nil", created, err)
	}
	for _, r := range Roles {
		if first.Public[r] != again.Public[r] {
			t.Fatalf("%s key: got %s, want %s (kept)", r, again.Public[r], first.Public[r])
		}
	}
	if first.Public[RoleNode] == first.Public[RoleAdmin] {
		t.Fatal("node and admin share a key")
	}
}

func TestUserAndPasswordAuthenticateANode(t *testing.T) {
	o := &server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoSigs: true, NoLog: true,
		Users: []*server.User{{Username: "n1", Password: "right"}}}
	s := runServer(t, o)
	newNode(t, s, "n1", func(c *Config) { c.Auth = Auth{User: "n1", Password: "right"} })
	if _, err := rawClient(t, s, Auth{User: "n1", Password: "wrong"}, nil); !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a wrong password: got %v, want %v", err, nats.ErrAuthorization)
	}
}

// TestAConnectThatCannotAuthenticateSaysWhy: a seed offered to a server
// that takes no nkeys never connects; Connect's error names the cause.
func TestAConnectThatCannotAuthenticateSaysWhy(t *testing.T) {
	s := startServer(t)
	creds, _, err := EnsureCredentials(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tr, err := Connect(ctx, Config{Cluster: "test", NodeID: "n1", URLs: []string{s.ClientURL()},
		Auth: Auth{CredsFile: creds.File(RoleNode)}}, nil)
	if err == nil {
		tr.Close()
		t.Fatal("connect with a seed to a server without nkeys: got nil error, want a refusal")
	}
	if !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), "last error") {
		t.Fatalf("connect: got %v, want %v naming the last error", err, ErrNotConnected)
	}
}

// TestAViewerReadsOnlyItsOwnReplies is issue 48's eavesdropper: admin
// replies come back under each identity's own inbox (_INBOX.<public
// key>), so a viewer may neither subscribe to every inbox (`nats sub
// '_INBOX.>'`) nor to the admin's, while its own admin requests are
// answered.
func TestAViewerReadsOnlyItsOwnReplies(t *testing.T) {
	s, creds := securedServer(t, TLSFiles{})
	node := securedNode(t, s, creds, "n1")
	must(t, node.HandleAdmin("status", echo))
	admin := InboxPrefix(creds.Public[RoleAdmin])
	for _, subj := range []string{"_INBOX.>", admin + ".>", admin + ".reply1", "_INBOX.*"} {
		wantSubscribeRefused(t, s, creds, RoleViewer, subj)
	}
	for _, role := range []Role{RoleViewer, RoleAdmin} {
		nc, err := rawClient(t, s, Auth{CredsFile: creds.File(role)}, make(chan error, 8))
		if err != nil {
			t.Fatal(err)
		}
		msg, err := nc.Request("narad.test.admin.status", []byte(`{"v":1}`), liveness)
		if err != nil || string(msg.Data) != `{"v":1}` {
			t.Fatalf("%s asks status: got %v, %v; want its answer", role, msg, err)
		}
		if want := InboxPrefix(creds.Public[role]) + "."; !strings.HasPrefix(msg.Subject, want) {
			t.Fatalf("%s's reply came on %s, want under %s", role, msg.Subject, want)
		}
	}
}

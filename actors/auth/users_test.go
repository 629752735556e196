package auth

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/naradmq/narad/actors/clock"
	"github.com/naradmq/narad/actors/errs"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// fakeUsers is a replica of users in memory, create-if-absent as the
// metastore's; leader says whether this replica leads the metadata shard.
type fakeUsers struct {
	mu      sync.Mutex
	users   map[string]messages.User
	leader  bool
	creates int
}

func (f *fakeUsers) User(name string) (messages.User, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.users[name]
	return u, ok
}

func (f *fakeUsers) Users() []messages.User {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []messages.User
	for _, u := range f.users {
		out = append(out, u)
	}
	return out
}

func (f *fakeUsers) CreateUser(_ context.Context, u messages.User) (messages.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.creates++
	if had, ok := f.users[u.Username]; ok {
		return had, metastore.ErrExists
	}
	f.users[u.Username] = u
	return u, nil
}

func (f *fakeUsers) DeleteUser(_ context.Context, name string) (messages.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.users[name]
	if !ok {
		return u, metastore.ErrNotFound
	}
	delete(f.users, name)
	return u, nil
}

func (f *fakeUsers) SetUserGrants(_ context.Context, c messages.SetUserGrants) (messages.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.users[c.Username]
	if !ok {
		return u, metastore.ErrNotFound
	}
	u.Grants, u.UpdatedAtMs = c.Grants, c.UpdatedAtMs
	f.users[c.Username] = u
	return u, nil
}

func (f *fakeUsers) SetUserPassword(_ context.Context, c messages.SetUserPassword) (messages.User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.users[c.Username]
	if !ok {
		return u, metastore.ErrNotFound
	}
	u.PasswordHash, u.UpdatedAtMs = c.PasswordHash, c.UpdatedAtMs
	f.users[c.Username] = u
	return u, nil
}

func (f *fakeUsers) Leader(uint64) (uint64, bool) {
	if f.leader {
		return 1, true
	}
	return 2, true
}

func (f *fakeUsers) ReplicaID() uint64 { return 1 }

// fixedClock is a clock that reads one time.
type fixedClock struct{ now time.Time }

func (c fixedClock) Now() time.Time                              { return c.now }
func (c fixedClock) AfterFunc(time.Duration, func()) clock.Timer { return neverFires{} }

// neverFires is fixedClock's timer: its time never comes.
type neverFires struct{}

func (neverFires) Stop() bool               { return true }
func (neverFires) Reset(time.Duration) bool { return true }

func testAccounts(store *fakeUsers, adminPassword string) Accounts {
	return NewAccounts(AccountsDeps{Config: Config{AdminPassword: adminPassword, PasswordHashCost: bcrypt.MinCost, RequestTimeout: time.Second},
		Store: store, Creds: NewCredentials(16, 2, bcrypt.MinCost), Log: slog.New(slog.DiscardHandler), Clock: fixedClock{time.UnixMilli(1234)}})
}

// A user created with a password logs in with it, stamped on the
// accounts' clock; a wrong password and an unknown user are refused
// alike; a missing user's change is not found.
func TestAccountsCreateAuthenticateAndRefuse(t *testing.T) {
	ctx := context.Background()
	a := testAccounts(&fakeUsers{users: map[string]messages.User{}}, "")
	u, err := a.CreateUser(ctx, messages.CreateUserRequest{Username: "ann", Password: "pw"})
	if err != nil || u.CreatedAtMs != 1234 || u.UpdatedAtMs != 1234 {
		t.Fatalf("create: got %+v, %v; want stamped at 1234", u, err)
	}
	if _, err := a.Authenticate(ctx, "ann", "pw"); err != nil {
		t.Fatalf("the right password: got %v, want nil", err)
	}
	for _, c := range []struct{ user, password string }{{"ann", "nope"}, {"bob", "pw"}} {
		if _, err := a.Authenticate(ctx, c.user, c.password); !errors.Is(err, errs.ErrUnauthenticated) {
			t.Fatalf("%s with %q: got %v, want ErrUnauthenticated", c.user, c.password, err)
		}
	}
	if _, err := a.CreateUser(ctx, messages.CreateUserRequest{Username: "ann", Password: "pw"}); !errors.Is(err, errs.ErrConflict) {
		t.Fatalf("a second ann: got %v, want ErrConflict", err)
	}
	if err := a.SetPassword(ctx, "bob", "pw"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("bob's password: got %v, want ErrNotFound", err)
	}
	if _, err := a.CreateUser(ctx, messages.CreateUserRequest{Username: "long", Password: string(make([]byte, 73))}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("a 73-byte password: got %v, want ErrInvalid", err)
	}
}

// Only the metadata leader seeds admin, once: a look on a follower
// proposes nothing, the leader's creates it with the configured
// password, and a look after that proposes nothing more.
func TestSeedAdminOnlyOnTheLeaderAndOnce(t *testing.T) {
	ctx := context.Background()
	store := &fakeUsers{users: map[string]messages.User{}}
	a := testAccounts(store, "rootpw")
	var s adminSeed
	if a.seedAdminOnce(ctx, &s) || store.creates != 0 {
		t.Fatalf("on a follower: got done or %d creates, want neither", store.creates)
	}
	store.leader = true
	if !a.seedAdminOnce(ctx, &s) || store.creates != 1 {
		t.Fatalf("on the leader: got not done or %d creates, want done after 1", store.creates)
	}
	if u, ok := store.User(AdminUser); !ok || !u.Root {
		t.Fatalf("admin after the seed: got %+v, %v; want a root user", u, ok)
	}
	if _, err := a.Authenticate(ctx, AdminUser, "rootpw"); err != nil {
		t.Fatalf("admin with the configured password: got %v, want nil", err)
	}
	if !a.seedAdminOnce(ctx, &adminSeed{}) || store.creates != 1 {
		t.Fatalf("a look once admin exists: got %d creates, want still 1", store.creates)
	}
}

// A generated admin password goes to its file, which only its owner may
// read, and never to the log, which names the file instead; a configured
// password (NARAD_ADMIN_PASSWORD) writes no file.
func TestSeedAdminWritesAGeneratedPasswordToAFileNotTheLog(t *testing.T) {
	ctx := context.Background()
	for _, configured := range []string{"", "rootpw"} {
		store := &fakeUsers{users: map[string]messages.User{}, leader: true}
		var logged bytes.Buffer
		file := filepath.Join(t.TempDir(), "admin.password")
		a := NewAccounts(AccountsDeps{Config: Config{AdminPassword: configured, AdminPasswordFile: file, PasswordHashCost: bcrypt.MinCost, RequestTimeout: time.Second},
			Store: store, Creds: NewCredentials(16, 2, bcrypt.MinCost), Log: slog.New(slog.NewTextHandler(&logged, nil)), Clock: fixedClock{time.UnixMilli(1234)}})
		if !a.seedAdminOnce(ctx, &adminSeed{}) {
			t.Fatalf("configured %q: got the seed not done, want done", configured)
		}
		info, err := os.Stat(file)
		if configured != "" {
			if !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("configured password: got %v stating %s, want no file", err, file)
			}
			if _, err := a.Authenticate(ctx, AdminUser, configured); err != nil {
				t.Fatalf("admin with the configured password: got %v, want nil", err)
			}
			continue
		}
		if err != nil || info.Mode().Perm() != 0o600 {
			t.Fatalf("the generated password's file: got %v, %v; want mode 0600", info, err)
		}
		password, err := os.ReadFile(file)
		if err != nil || len(password) < 16 {
			t.Fatalf("the generated password: got %q, %v; want at least 16 characters", password, err)
		}
		if _, err := a.Authenticate(ctx, AdminUser, string(password)); err != nil {
			t.Fatalf("admin with the file's password: got %v, want nil", err)
		}
		if strings.Contains(logged.String(), string(password)) || !strings.Contains(logged.String(), file) {
			t.Fatalf("the log: got %q, want the file named and the password nowhere", logged.String())
		}
	}
}

// A generated password that lost to another leader's admin is no admin's
// password: its file is removed.
func TestSeedAdminRemovesAPasswordThatLost(t *testing.T) {
	ctx := context.Background()
	store := &fakeUsers{users: map[string]messages.User{}, leader: true}
	file := filepath.Join(t.TempDir(), "admin.password")
	a := NewAccounts(AccountsDeps{Config: Config{AdminPasswordFile: file, PasswordHashCost: bcrypt.MinCost, RequestTimeout: time.Second},
		Store: &racedUsers{fakeUsers: store}, Creds: NewCredentials(16, 2, bcrypt.MinCost), Log: slog.New(slog.DiscardHandler), Clock: fixedClock{time.UnixMilli(1234)}})
	if !a.seedAdminOnce(ctx, &adminSeed{}) {
		t.Fatal("got the seed not done, want done (another leader's admin exists)")
	}
	if _, err := os.Stat(file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the losing password's file: got %v, want none", err)
	}
}

// racedUsers is a replica where another leader's admin lands just before
// this node's create.
type racedUsers struct{ *fakeUsers }

func (r *racedUsers) CreateUser(ctx context.Context, u messages.User) (messages.User, error) {
	r.fakeUsers.CreateUser(ctx, messages.User{Username: u.Username, PasswordHash: "another leader's", Root: true})
	return r.fakeUsers.CreateUser(ctx, u)
}

// KnownLogin answers from memory alone: a password not yet verified is
// not known, a verified one is, and a changed password forgets it.
func TestKnownLoginIsAPasswordVerifiedBefore(t *testing.T) {
	ctx := context.Background()
	a := testAccounts(&fakeUsers{users: map[string]messages.User{}}, "")
	if _, err := a.CreateUser(ctx, messages.CreateUserRequest{Username: "ann", Password: "pw"}); err != nil {
		t.Fatalf("create: got %v, want nil", err)
	}
	if _, ok := a.KnownLogin("ann", "pw"); ok {
		t.Fatal("before any login: got known, want not known")
	}
	if _, err := a.Authenticate(ctx, "ann", "pw"); err != nil {
		t.Fatalf("login: got %v, want nil", err)
	}
	if u, ok := a.KnownLogin("ann", "pw"); !ok || u.Username != "ann" {
		t.Fatalf("after a login: got %+v, %t; want ann, known", u, ok)
	}
	if _, ok := a.KnownLogin("ann", "other"); ok {
		t.Fatal("another password: got known, want not known")
	}
	if err := a.SetPassword(ctx, "ann", "pw2"); err != nil {
		t.Fatalf("set password: got %v, want nil", err)
	}
	if _, ok := a.KnownLogin("ann", "pw"); ok {
		t.Fatal("the old password after a change: got known, want not known")
	}
}

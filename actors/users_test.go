package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/actors/auth"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/messages"
)

func secured(password string) func(*Config) {
	return func(c *Config) {
		c.SecurityEnabled = true
		c.AdminPassword = password
		c.PasswordHashCost = bcrypt.MinCost
	}
}

// as sends a request with Basic credentials.
func (tn *testNode) as(user, password, method, path, body string) (int, []byte) {
	tn.t.Helper()
	req, err := http.NewRequest(method, tn.base+path, bytes.NewReader([]byte(body)))
	if err != nil {
		tn.t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	resp, err := tn.http.Do(req)
	if err != nil {
		tn.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// waitForAdmin polls GET /v1/users as admin until the seeding landed, as
// the contract's scripts do.
func (tn *testNode) waitForAdmin(password string) {
	tn.t.Helper()
	for range 300 {
		if code, _ := tn.as("admin", password, "GET", "/v1/users", ""); code == http.StatusOK {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	tn.t.Fatal("admin never could log in")
}

func wantStatus(t *testing.T, what string, code int, body []byte, want int) {
	t.Helper()
	if code != want {
		t.Fatalf("%s: got %d %s, want %d", what, code, body, want)
	}
}

// The §11 table on a real node with security on: the seeded root, every
// route and status, the escalation rules, and the hash never shown.
func TestUsersContractOnASecuredNode(t *testing.T) {
	tn := newTestNode(t, secured("rootpw"))
	tn.waitForAdmin("rootpw")
	code, body := tn.as("admin", "rootpw", "GET", "/v1/users", "")
	var list []map[string]any
	if err := json.Unmarshal(body, &list); err != nil || len(list) != 1 || list[0]["username"] != "admin" || list[0]["root"] != true {
		t.Fatalf("GET /v1/users: got %d %s, want a JSON array of the root admin", code, body)
	}
	if bytes.Contains(body, []byte("hash")) || bytes.Contains(body, []byte("$2a$")) {
		t.Fatalf("GET /v1/users shows the password hash: %s", body)
	}

	steps := []struct {
		what, user, password, method, path, body string
		want                                     int
	}{
		{"create", "admin", "rootpw", "POST", "/v1/users", `{"username":"ann","password":"annpw","grants":[{"action":"produce","patterns":["orders*"]},{"action":"create","patterns":["orders*"]}]}`, 201},
		{"create taken", "admin", "rootpw", "POST", "/v1/users", `{"username":"ann","password":"x"}`, 409},
		{"bad username", "admin", "rootpw", "POST", "/v1/users", `{"username":"a b","password":"x"}`, 400},
		{"empty password", "admin", "rootpw", "POST", "/v1/users", `{"username":"bob","password":""}`, 400},
		{"scoped grant without patterns", "admin", "rootpw", "POST", "/v1/users", `{"username":"bob","password":"x","grants":[{"action":"produce"}]}`, 400},
		{"admin grant with patterns", "admin", "rootpw", "POST", "/v1/users", `{"username":"bob","password":"x","grants":[{"action":"admin","patterns":["x"]}]}`, 400},
		{"unknown field", "admin", "rootpw", "POST", "/v1/users", `{"username":"bob","password":"x","extra":1}`, 400},
		{"create as non-admin", "ann", "annpw", "POST", "/v1/users", `{"username":"bob","password":"x"}`, 403},
		{"get", "admin", "rootpw", "GET", "/v1/users/ann", "", 200},
		{"get missing", "admin", "rootpw", "GET", "/v1/users/nobody", "", 404},
		{"list as non-admin", "ann", "annpw", "GET", "/v1/users", "", 403},
		{"root gives admin", "admin", "rootpw", "POST", "/v1/users", `{"username":"ops","password":"opspw","grants":[{"action":"admin"}]}`, 201},
		{"non-root admin gives admin", "ops", "opspw", "POST", "/v1/users", `{"username":"bob","password":"x","grants":[{"action":"admin"}]}`, 403},
		{"non-root admin gives a scoped grant", "ops", "opspw", "POST", "/v1/users", `{"username":"bob","password":"bobpw","grants":[{"action":"consume","patterns":["*"]}]}`, 201},
		{"grants of root", "ops", "opspw", "PUT", "/v1/users/admin/grants", `{"grants":[]}`, 403},
		{"own grants", "ops", "opspw", "PUT", "/v1/users/ops/grants", `{"grants":[]}`, 403},
		{"escalation by a non-root admin", "ops", "opspw", "PUT", "/v1/users/ann/grants", `{"grants":[{"action":"admin"}]}`, 403},
		{"bad grants", "admin", "rootpw", "PUT", "/v1/users/ann/grants", `{"grants":[{"action":"fly","patterns":["x"]}]}`, 400},
		{"grants of a missing user", "admin", "rootpw", "PUT", "/v1/users/nobody/grants", `{"grants":[]}`, 404},
		{"replace grants", "admin", "rootpw", "PUT", "/v1/users/ann/grants", `{"grants":[{"action":"produce","patterns":["orders"]}]}`, 200},
		{"password without new_password", "ann", "annpw", "PUT", "/v1/users/ann/password", `{}`, 400},
		{"own password, wrong current", "ann", "annpw", "PUT", "/v1/users/ann/password", `{"new_password":"n","current_password":"nope"}`, 403},
		{"own password, no current", "ann", "annpw", "PUT", "/v1/users/ann/password", `{"new_password":"n"}`, 403},
		{"someone else's password as non-admin", "ann", "annpw", "PUT", "/v1/users/bob/password", `{"new_password":"n"}`, 403},
		{"root's password as non-root admin", "ops", "opspw", "PUT", "/v1/users/admin/password", `{"new_password":"n"}`, 403},
		{"password of a missing user", "admin", "rootpw", "PUT", "/v1/users/nobody/password", `{"new_password":"n"}`, 404},
		{"own password", "ann", "annpw", "PUT", "/v1/users/ann/password", `{"new_password":"annpw2","current_password":"annpw"}`, 204},
		{"old password after the change", "ann", "annpw", "GET", "/v1/topics", "", 401},
		{"new password", "ann", "annpw2", "GET", "/v1/topics", "", 200},
		{"admin sets a password", "ops", "opspw", "PUT", "/v1/users/bob/password", `{"new_password":"bobpw2"}`, 204},
		{"delete root", "ops", "opspw", "DELETE", "/v1/users/admin", "", 403},
		{"delete self", "ops", "opspw", "DELETE", "/v1/users/ops", "", 403},
		{"delete missing", "admin", "rootpw", "DELETE", "/v1/users/nobody", "", 404},
		{"delete", "admin", "rootpw", "DELETE", "/v1/users/bob", "", 204},
		{"deleted user logs in", "bob", "bobpw2", "GET", "/v1/topics", "", 401},
	}
	for _, s := range steps {
		code, body := tn.as(s.user, s.password, s.method, s.path, s.body)
		wantStatus(t, s.what+": "+s.method+" "+s.path, code, body, s.want)
	}
}

// A topic's owner is its creator; grants decide produce; the stored owner
// shows in the topic JSON.
func TestSecuredNodeOwnersAndGrants(t *testing.T) {
	tn := newTestNode(t, secured("rootpw"))
	tn.waitForAdmin("rootpw")
	code, body := tn.as("admin", "rootpw", "POST", "/v1/users", `{"username":"ann","password":"annpw","grants":[{"action":"create","patterns":["orders*"]},{"action":"produce","patterns":["orders*"]}]}`)
	wantStatus(t, "create ann", code, body, 201)
	code, body = tn.as("ann", "annpw", "POST", "/v1/topics", `{"name":"orders","owner":"mallory"}`)
	wantStatus(t, "ann creates orders", code, body, 201)
	code, body = tn.as("ann", "annpw", "GET", "/v1/topics/orders", "")
	var ti messages.TopicInfo
	if json.Unmarshal(body, &ti) != nil || ti.Owner != "ann" {
		t.Fatalf("GET /v1/topics/orders: got %d %s, want owner ann", code, body)
	}
	code, body = tn.as("ann", "annpw", "POST", "/v1/topics", `{"name":"billing"}`)
	wantStatus(t, "ann creates billing", code, body, 403)
	code, body = tn.as("admin", "rootpw", "POST", "/v1/topics", `{"name":"billing"}`)
	wantStatus(t, "admin creates billing", code, body, 201)
	code, body = tn.as("ann", "annpw", "POST", "/v1/topics/orders/produce", "x")
	wantStatus(t, "ann produces to orders", code, body, 202)
	code, body = tn.as("ann", "annpw", "POST", "/v1/topics/billing/produce", "x")
	wantStatus(t, "ann produces to billing", code, body, 403)
	code, body = tn.as("ann", "annpw", "GET", "/v1/topics/orders/consume", "")
	wantStatus(t, "ann consumes orders", code, body, 403)
	code, body = tn.as("ann", "annpw", "DELETE", "/v1/topics/billing", "")
	wantStatus(t, "ann deletes admin's billing", code, body, 403)
	code, body = tn.as("ann", "annpw", "DELETE", "/v1/topics/orders", "")
	wantStatus(t, "ann deletes her orders", code, body, 204)
}

// The seeding is idempotent: a restart neither makes a second admin nor
// changes its password (another NARAD_ADMIN_PASSWORD is ignored).
func TestAdminSeedIsIdempotentAcrossRestarts(t *testing.T) {
	tn := newTestNode(t, secured("first"))
	tn.waitForAdmin("first")
	before, _ := tn.n.store.User(auth.AdminUser)
	tn.cfg.AdminPassword = "second"
	tn.restart()
	tn.waitForAdmin("first")
	if code, _ := tn.as("admin", "second", "GET", "/v1/users", ""); code != http.StatusUnauthorized {
		t.Fatalf("admin with the second password after a restart: got %d, want 401", code)
	}
	after, _ := tn.n.store.User(auth.AdminUser)
	if after.PasswordHash != before.PasswordHash || after.CreatedAtMs != before.CreatedAtMs || len(tn.n.store.Users()) != 1 {
		t.Fatalf("admin after a restart: got %+v (%d users), want %+v alone", after, len(tn.n.store.Users()), before)
	}
}

// A node started secured without NARAD_ADMIN_PASSWORD writes the admin
// password it generated to admin.password in its data directory, mode
// 0600, and admin logs in with it.
func TestAGeneratedAdminPasswordIsInTheDataDirectory(t *testing.T) {
	tn := newTestNode(t, secured(""))
	file := filepath.Join(tn.cfg.DataDir, AdminPasswordFileName)
	testnet.Eventually(t, 15*time.Second, "the generated password's file", func() bool {
		_, err := os.Stat(file)
		return err == nil
	})
	info, err := os.Stat(file)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("%s: got %v, %v; want mode 0600", file, info, err)
	}
	password, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	tn.waitForAdmin(string(password))
}

// The credential cache answers a known password without the slow hash,
// and misses once the user's password changed: the old one is refused.
func TestCredentialCacheForgetsAChangedPassword(t *testing.T) {
	tn := newTestNode(t, secured("rootpw"))
	tn.waitForAdmin("rootpw")
	ctx := context.Background()
	if _, err := tn.n.CreateUser(ctx, messages.CreateUserRequest{Username: "ann", Password: "old"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.n.Authenticate(ctx, "ann", "old"); err != nil {
		t.Fatalf("first login: got %v, want nil", err)
	}
	u, _ := tn.n.store.User("ann")
	if !tn.n.creds.Known("ann", "old", u.PasswordHash) {
		t.Fatal("after a login: got the credentials not cached, want cached")
	}
	if err := tn.n.SetPassword(ctx, "ann", "new"); err != nil {
		t.Fatal(err)
	}
	if _, err := tn.n.Authenticate(ctx, "ann", "old"); !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("old password after the change: got %v, want ErrUnauthenticated", err)
	}
	if _, err := tn.n.Authenticate(ctx, "ann", "new"); err != nil {
		t.Fatalf("new password: got %v, want nil", err)
	}
}

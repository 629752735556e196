package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/naradmq/narad/actors"
	"github.com/naradmq/narad/cluster/metastore"
	"github.com/naradmq/narad/messages"
)

// securedNode starts a node in process with security on and admin's
// password rootpw, and waits until admin can log in.
func securedNode(t *testing.T) string {
	t.Helper()
	cfg := actors.DefaultConfig()
	cfg.DataDir, cfg.HTTPAddr = t.TempDir(), freePort(t)
	cfg.AdminPassword, cfg.PasswordHashCost = "rootpw", bcrypt.MinCost
	mcfg := metastore.Config{NodeID: cfg.NodeID, ReplicaID: 1, RaftAddr: freePort(t), RTTMillisecond: 2, ElectionRTT: 20, HeartbeatRTT: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := actors.Start(ctx, cfg, mcfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(context.Background()) })
	base := "http://" + cfg.HTTPAddr
	for range 300 {
		req, _ := http.NewRequest("GET", base+"/v1/users", nil)
		req.SetBasicAuth("admin", "rootpw")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("admin never could log in")
	return ""
}

func narad(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(""), &out, io.Discard)
	return out.String(), err
}

// The CLI against a secured node: users create, list, grant, passwd and
// delete, topics with --user/--password and with NARAD_USER/NARAD_PASSWORD,
// and a refusal without credentials.
func TestUsersCLIOnASecuredNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	base := securedNode(t)
	as := []string{"--server", base, "--user", "admin", "--password", "rootpw"}
	cmd := func(args ...string) []string { return append(args, as...) }
	if out, err := narad(t, cmd("users", "create", "ann", "--new-password", "annpw", "--grant", "create:orders*", "--grant", "produce:orders*")...); err != nil || !strings.Contains(out, `"username":"ann"`) {
		t.Fatalf("users create: got %q, %v; want ann's record", out, err)
	}
	out, err := narad(t, cmd("users", "list")...)
	if err != nil || !strings.Contains(out, "admin") || !strings.Contains(out, "ann") || !strings.Contains(out, "produce:orders*") {
		t.Fatalf("users list: got %q, %v; want admin and ann with her grants", out, err)
	}
	if _, err := narad(t, "topics", "create", "orders", "--server", base, "--user", "ann", "--password", "annpw"); err != nil {
		t.Fatalf("topics create as ann: %v", err)
	}
	if _, err := narad(t, "topics", "create", "billing", "--server", base, "--user", "ann", "--password", "annpw"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("topics create billing as ann: got %v, want a 403", err)
	}
	if _, err := narad(t, "topics", "list", "--server", base); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("topics list without credentials: got %v, want a 401", err)
	}
	t.Setenv("NARAD_USER", "ann")
	t.Setenv("NARAD_PASSWORD", "annpw")
	if out, err := narad(t, "topics", "list", "--server", base); err != nil || !strings.Contains(out, "orders") {
		t.Fatalf("topics list with NARAD_USER/NARAD_PASSWORD: got %q, %v; want orders", out, err)
	}
	if out, err := narad(t, cmd("users", "grant", "ann", "--grant", "consume:orders")...); err != nil || !strings.Contains(out, `"consume"`) || strings.Contains(out, `"produce"`) {
		t.Fatalf("users grant: got %q, %v; want only the consume grant", out, err)
	}
	if _, err := narad(t, "users", "passwd", "ann", "--new-password", "annpw2", "--current-password", "annpw", "--server", base); err != nil {
		t.Fatalf("users passwd of her own as ann: %v", err)
	}
	if _, err := narad(t, "topics", "list", "--server", base); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("topics list with the old password: got %v, want a 401", err)
	}
	if _, err := narad(t, cmd("users", "delete", "ann")...); err != nil {
		t.Fatalf("users delete: %v", err)
	}
	if _, err := narad(t, cmd("users", "delete", "ann")...); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("users delete again: got %v, want a 404", err)
	}
}

func TestParseGrant(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want messages.Grant
		ok   bool
	}{
		{"produce:orders*,billing", messages.Grant{Action: "produce", Patterns: []string{"orders*", "billing"}}, true},
		{"admin", messages.Grant{Action: "admin"}, true},
		{"produce", messages.Grant{}, false},
		{"produce:", messages.Grant{}, false},
	} {
		g, err := parseGrant(tc.in)
		if (err == nil) != tc.ok || !reflect.DeepEqual(g, tc.want) {
			t.Errorf("parseGrant(%q): got %+v, %v; want %+v (ok %t)", tc.in, g, err, tc.want, tc.ok)
		}
	}
}

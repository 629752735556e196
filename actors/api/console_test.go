package api

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/naradmq/narad/messages"
)

// The console's files are served without credentials (they hold no data)
// at /ui/, with /ui sent there; its script's calls are the API's.
func TestTheConsoleIsServedWithoutCredentialsAndItsDataIsNot(t *testing.T) {
	a := newAuthRig(t)
	for _, path := range []string{"/ui/", "/ui/console.js", "/ui/console.css"} {
		rec := a.do("", "", "GET", path, "")
		if rec.Code != http.StatusOK {
			t.Errorf("GET %s without credentials: got %d, want 200", path, rec.Code)
		}
		if got := rec.Header().Get("Content-Security-Policy"); !strings.Contains(got, "default-src 'self'") {
			t.Errorf("GET %s: got Content-Security-Policy %q, want default-src 'self'", path, got)
		}
	}
	if rec := a.do("", "", "GET", "/ui/", ""); !strings.Contains(rec.Body.String(), `<script src="console.js"`) {
		t.Errorf("GET /ui/: got %q, want the page that loads console.js", rec.Body.String())
	}
	if rec := a.do("", "", "GET", "/ui", ""); rec.Code != http.StatusFound || rec.Header().Get("Location") != "/ui/" {
		t.Errorf("GET /ui: got %d to %q, want 302 to /ui/", rec.Code, rec.Header().Get("Location"))
	}
	wantAnswer(t, "GET /v1/whoami without credentials", a.do("", "", "GET", "/v1/whoami", ""), http.StatusUnauthorized, textAuthRequired)
}

// A call of the console's script that fails to log in answers 401 without
// the challenge, which would open the browser's own login dialog; any
// other client still gets it.
func TestAConsoleCallIsRefusedWithoutTheBrowsersLoginDialog(t *testing.T) {
	a := newAuthRig(t)
	req := httptest.NewRequest("GET", "/v1/whoami", nil)
	req.SetBasicAuth("admin", "wrong")
	req.Header.Set(ConsoleHeader, "1")
	rec := httptest.NewRecorder()
	a.h.ServeHTTP(rec, req)
	wantAnswer(t, "console's whoami with a wrong password", rec, http.StatusUnauthorized, textAuthRequired)
	if got := rec.Header().Get("WWW-Authenticate"); got != "" {
		t.Errorf("console's 401: got WWW-Authenticate %q, want none", got)
	}
	if got := a.do("admin", "wrong", "GET", "/v1/whoami", "").Header().Get("WWW-Authenticate"); got != `Basic realm="narad"` {
		t.Errorf("another client's 401: got WWW-Authenticate %q, want the challenge", got)
	}
}

// whoami tells any user who it is and whether it is an admin, so the
// console shows a viewer no action; while security is off every caller is
// root.
func TestWhoAmISaysWhetherTheCallerIsAnAdmin(t *testing.T) {
	a := newAuthRig(t)
	a.book.add(messages.UserInfo{Username: "viewer", Grants: []messages.Grant{{Action: ActionConsume, Patterns: []string{"orders*"}}}}, "vpw")
	a.book.add(messages.UserInfo{Username: "ops", Grants: []messages.Grant{{Action: ActionAdmin}}}, "opw")
	for _, tc := range []struct {
		user, password string
		want           messages.WhoAmI
	}{
		{"viewer", "vpw", messages.WhoAmI{Username: "viewer", Grants: []messages.Grant{{Action: ActionConsume, Patterns: []string{"orders*"}}}}},
		{"ops", "opw", messages.WhoAmI{Username: "ops", Admin: true, Grants: []messages.Grant{{Action: ActionAdmin}}}},
		{"admin", "rootpw", messages.WhoAmI{Username: "admin", Admin: true, Grants: []messages.Grant{}}},
	} {
		rec := a.do(tc.user, tc.password, "GET", "/v1/whoami", "")
		want, _ := json.Marshal(tc.want)
		if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != string(want) {
			t.Errorf("whoami as %s: got %d %s, want 200 %s", tc.user, rec.Code, rec.Body, want)
		}
	}
	code, body := serve(t, readyNode(), "GET", "/v1/whoami", "")
	if want := `{"username":"","admin":true,"grants":[]}`; code != http.StatusOK || strings.TrimSpace(body) != want {
		t.Errorf("whoami with security off: got %d %s, want 200 %s", code, body, want)
	}
}

// summary=1 adds the summary line of `narad cluster moves --watch`; the
// plain answer stays the contract's; leaders names each shard's leader.
func TestMovesGiveTheirSummaryOnlyWhenAskedAndLeadersAreListed(t *testing.T) {
	f := readyNode()
	if _, body := serve(t, f, "GET", "/v1/cluster/moves", ""); strings.Contains(body, "summary") {
		t.Errorf("moves without summary=1: got %s, want no summary", body)
	}
	code, body := serve(t, f, "GET", "/v1/cluster/moves?summary=1", "")
	if code != http.StatusOK || !strings.Contains(body, `"summary":{"done":7,`) {
		t.Errorf("moves with summary=1: got %d %s, want 200 with the summary", code, body)
	}
	code, body = serve(t, f, "GET", "/v1/cluster/moves?summary=maybe", "")
	wantError(t, "summary=maybe", code, body, http.StatusBadRequest, "invalid argument: summary must be true, 1, false or 0")
	code, body = serve(t, f, "GET", "/v1/cluster/leaders", "")
	if want := `{"shards":[{"shard":1,"kind":"metadata","leader":"n2","term":4}]}`; code != http.StatusOK || strings.TrimSpace(body) != want {
		t.Errorf("leaders: got %d %s, want 200 %s", code, body, want)
	}
}

// The copies set aside: any user lists them, only an admin releases one,
// with a strict body naming node and path; the member's refusal is
// answered with its own reason.
func TestSetAsideCopiesAreListedByAnyUserAndReleasedByAnAdmin(t *testing.T) {
	a := newAuthRig(t)
	a.book.add(messages.UserInfo{Username: "viewer"}, "vpw")
	if rec := a.do("viewer", "vpw", "GET", "/v1/cluster/quarantine?node=n1", ""); rec.Code != http.StatusOK || a.book.got != "n1" {
		t.Errorf("viewer's quarantine listing of n1: got %d %s (asked for %v), want 200 for n1", rec.Code, rec.Body, a.book.got)
	}
	release := `{"node":"n1","path":"topics/t/1/0","dry_run":true}`
	wantAnswer(t, "viewer's release", a.do("viewer", "vpw", "POST", "/v1/cluster/quarantine/release", release), http.StatusForbidden, textAdminRequired)
	rec := a.do("admin", "rootpw", "POST", "/v1/cluster/quarantine/release", release)
	if want := `{"node":"n1","path":"topics/t/1/0","kind":"","bytes":0,"dry_run":true,"released":false}`; rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != want {
		t.Errorf("admin's dry run: got %d %s, want 200 %s", rec.Code, rec.Body, want)
	}
	wantAnswer(t, "release without a path", a.do("admin", "rootpw", "POST", "/v1/cluster/quarantine/release", `{"node":"n1"}`),
		http.StatusBadRequest, "invalid argument: a release needs node and path")
	if rec := a.do("admin", "rootpw", "POST", "/v1/cluster/quarantine/release", `{"node":"n1","path":"p","force":true}`); rec.Code != http.StatusBadRequest {
		t.Errorf("release with an unknown field: got %d %s, want 400", rec.Code, rec.Body)
	}
	a.book.err = &Refusal{Kind: ErrNotFound, Reason: `no copy set aside at "p" on n1`}
	wantAnswer(t, "release of nothing", a.do("admin", "rootpw", "POST", "/v1/cluster/quarantine/release", `{"node":"n1","path":"p"}`),
		http.StatusNotFound, `no copy set aside at "p" on n1`)
	a.book.err = &Refusal{Kind: ErrUnavailable, Reason: "release on n2: timeout; list its copies to see whether it happened"}
	wantAnswer(t, "release whose outcome is unknown", a.do("admin", "rootpw", "GET", "/v1/cluster/quarantine", ""),
		http.StatusServiceUnavailable, "release on n2: timeout; list its copies to see whether it happened")
}

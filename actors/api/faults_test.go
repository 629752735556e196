package api

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/naradmq/narad/messages"
)

// switches is a Faults that remembers what it was told.
type switches struct {
	disk string
	step time.Duration
}

func (s *switches) SetDiskFault(fail string) error {
	if fail != "off" && fail != "fsync" && fail != "write" {
		return fmt.Errorf("fail %q: %w", fail, ErrInvalid)
	}
	s.disk = fail
	return nil
}
func (s *switches) StepClock(d time.Duration) { s.step += d }
func (s *switches) FaultsStatus() messages.FaultsStatus {
	return messages.FaultsStatus{Disk: s.disk, ClockOffsetMs: s.step.Milliseconds()}
}

// With security on, /debug/faults is an admin's route like the other
// admin routes: no credentials is 401, a user without the admin grant 403,
// and only an admin's requests reach the switches.
func TestFaultRoutesNeedAnAdminWithSecurityOn(t *testing.T) {
	a := newAuthRig(t)
	sw := &switches{disk: "off"}
	a.h = Handler(a.book, Options{Security: true, Clock: a.clock, MaxAuthFailureUsers: 100, Faults: sw})
	a.book.add(messages.UserInfo{Username: "ann", Grants: []messages.Grant{{Action: ActionProduce, Patterns: []string{"*"}}}}, "annpw")
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/debug/faults", ""},
		{"POST", "/debug/faults/disk", `{"fail":"fsync"}`},
		{"POST", "/debug/faults/clock", `{"step_ms":1000}`},
	} {
		wantAnswer(t, tc.method+" "+tc.path+" without credentials", a.do("", "", tc.method, tc.path, tc.body), http.StatusUnauthorized, textAuthRequired)
		wantAnswer(t, tc.method+" "+tc.path+" as a producer", a.do("ann", "annpw", tc.method, tc.path, tc.body), http.StatusForbidden, textAdminRequired)
	}
	if sw.disk != "off" || sw.step != 0 {
		t.Fatalf("switches after refused requests: got disk %q, step %v, want off, 0", sw.disk, sw.step)
	}
	if rec := a.do("admin", "rootpw", "POST", "/debug/faults/disk", `{"fail":"write"}`); rec.Code != http.StatusNoContent || sw.disk != "write" {
		t.Fatalf("disk fault as admin: got %d %s, disk %q, want 204, write", rec.Code, rec.Body, sw.disk)
	}
	if rec := a.do("admin", "rootpw", "POST", "/debug/faults/clock", `{"step_ms":-2500}`); rec.Code != http.StatusNoContent || sw.step != -2500*time.Millisecond {
		t.Fatalf("clock step as admin: got %d %s, step %v, want 204, -2.5s", rec.Code, rec.Body, sw.step)
	}
	rec := a.do("admin", "rootpw", "GET", "/debug/faults", "")
	if want := `{"disk":"write","clock_offset_ms":-2500}` + "\n"; rec.Code != http.StatusOK || rec.Body.String() != want {
		t.Fatalf("GET /debug/faults as admin: got %d %q, want 200 %q", rec.Code, rec.Body, want)
	}
	// Without Options.Faults an admin finds no such path.
	a.h = Handler(a.book, Options{Security: true, Clock: a.clock, MaxAuthFailureUsers: 100})
	if rec := a.do("admin", "rootpw", "GET", "/debug/faults", ""); rec.Code != http.StatusNotFound {
		t.Fatalf("GET /debug/faults without Faults: got %d, want 404", rec.Code)
	}
}

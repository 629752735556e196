package api

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/naradmq/narad/messages"
)

// The OpenAPI description (openapi.json) is held to the route table here:
// every route the mux serves is described, and every described path and
// method reaches that route through the real mux. The answers themselves
// are held to it by the contract tests (actors/api_openapi_test.go).

// loadOpenAPI is the embedded description, parsed and checked as an
// OpenAPI 3.1 document.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPIDocument())
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.json is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	return doc
}

// described is every "METHOD /path" of doc, in the mux's pattern syntax
// (both write a path parameter as {name}).
func described(doc *openapi3.T) []string {
	var out []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out = append(out, method+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

// served is every pattern of the route table.
func served() []string {
	var out []string
	for _, rt := range (&handlers{}).routes(Options{}) {
		out = append(out, rt.pattern)
	}
	slices.Sort(out)
	return out
}

func TestEveryRouteIsDescribedAndEveryDescribedRouteServed(t *testing.T) {
	doc := loadOpenAPI(t)
	desc, serve := described(doc), served()
	// Every /v1 route is described. A route outside /v1 is not the
	// client API (a page for people, say) and may go undescribed; the
	// health routes are described all the same, so the other direction
	// holds them.
	for _, p := range serve {
		_, path, _ := strings.Cut(p, " ")
		if strings.HasPrefix(path, "/v1/") && !slices.Contains(desc, p) {
			t.Errorf("route %q: served, but openapi.json has no operation for it; want it described", p)
		}
	}
	for _, p := range desc {
		if !slices.Contains(serve, p) {
			t.Errorf("openapi.json describes %q: got no such route in the table, want it served or the description removed", p)
		}
	}

	// Described is served: the mux (as Handler builds it) sends a request
	// for each described path and method to the route of that pattern.
	mux := (&handlers{}).mux(Options{})
	sample := regexp.MustCompile(`\{[^}]+\}`)
	for _, p := range desc {
		method, path, _ := strings.Cut(p, " ")
		req := httptest.NewRequest(method, sample.ReplaceAllString(path, "0"), nil)
		if _, got := mux.Handler(req); got != p {
			t.Errorf("%s %s: the mux routes it to %q, want %q", method, req.URL.Path, got, p)
		}
	}
}

// TestNoRouteBypassesTheTable reads the package's source for patterns of
// /v1 routes: a route registered on the mux by hand, beside the table,
// would escape the test above.
func TestNoRouteBypassesTheTable(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	pattern := regexp.MustCompile(`"((?:GET|HEAD|POST|PUT|PATCH|DELETE) /v1/[^"]*)"`)
	serve := served()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pattern.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(serve, m[1]) {
				t.Errorf("%s names route %q: not in the route table (api.go, routes); want it registered there, and described in openapi.json", f, m[1])
			}
		}
	}
}

// The description is served to any user who logs in, with no grant, and
// to nobody who does not.
func TestTheDescriptionIsServedToAnyAuthenticatedUser(t *testing.T) {
	a := newAuthRig(t)
	a.book.add(messages.UserInfo{Username: "nogrants"}, "pw")
	wantAnswer(t, "GET /v1/openapi.json without credentials", a.do("", "", "GET", "/v1/openapi.json", ""), http.StatusUnauthorized, textAuthRequired)
	rec := a.do("nogrants", "pw", "GET", "/v1/openapi.json", "")
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/openapi.json as a user without grants: got %d %q, want 200 application/json", rec.Code, rec.Header().Get("Content-Type"))
	}
	if !bytes.Equal(rec.Body.Bytes(), openapiJSON) {
		t.Errorf("GET /v1/openapi.json: got %d bytes, want openapi.json's %d", rec.Body.Len(), len(openapiJSON))
	}
}

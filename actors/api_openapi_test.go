package actors

// The node held to its OpenAPI description (actors/api/openapi.json). The
// test nodes' clients (newTestNode, newTestCluster) carry a transport that
// checks every answer of a described route against it (status, headers,
// body), so the contract tests and every other test of the API hold the
// description to what the node sends.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/naradmq/narad/actors/api"
)

// openapiRouter is the description's router, loaded once per test binary.
var openapiRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPIDocument())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	// Any host: the tests' nodes listen on ports of their own.
	doc.Servers = nil
	// The description leaves its answers open, as a client must read them
	// (the contract welcomes new fields); here they are closed, so that a
	// field the node sends and the description lacks fails the test.
	for _, s := range doc.Components.Schemas {
		if v := s.Value; v != nil && len(v.Properties) > 0 && v.AdditionalProperties.Has == nil && v.AdditionalProperties.Schema == nil {
			closed := false
			v.AdditionalProperties.Has = &closed
		}
	}
	return gorillamux.NewRouter(doc)
})

// openapiChecked is next with every answer to a described route and
// method checked against the description; a mismatch fails t. An answer
// to anything else (the mux's 404 and 405) passes unchecked.
type openapiChecked struct {
	t      testing.TB
	next   http.RoundTripper
	router routers.Router
}

func checkOpenAPI(t testing.TB, next http.RoundTripper) *openapiChecked {
	t.Helper()
	router, err := openapiRouter()
	if err != nil {
		t.Fatalf("load the OpenAPI description: %v", err)
	}
	if next == nil {
		next = http.DefaultTransport
	}
	return &openapiChecked{t: t, next: next, router: router}
}

func (c *openapiChecked) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		return resp, nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp, nil // the caller reads the same error from the body
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
		c.t.Errorf("%s %s: got %d %q, not an answer openapi.json describes: %v", req.Method, req.URL.RequestURI(), resp.StatusCode, body, err)
	}
	return resp, nil
}

// CloseIdleConnections passes on to next, as the client's own would.
func (c *openapiChecked) CloseIdleConnections() {
	if ci, ok := c.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

func TestTheOpenAPICheckFailsAnAnswerTheDescriptionLacks(t *testing.T) {
	for _, tc := range []struct {
		what   string
		status int
		body   string
		fails  bool
	}{
		{"the contract's answer", http.StatusOK, `{"members":[]}` + "\n", false},
		{"a field the description lacks", http.StatusOK, `{"members":[],"extra":1}` + "\n", true},
		{"a field of the wrong type", http.StatusOK, `{"members":{}}` + "\n", true},
		{"a status the route does not answer", http.StatusTeapot, `{"error":"x"}` + "\n", true},
	} {
		srv := &fakeAnswer{status: tc.status, body: tc.body}
		rec := &recordingTB{TB: t}
		client := &http.Client{Transport: checkOpenAPI(rec, srv)}
		resp, err := client.Get("http://node.test/v1/cluster/members")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if rec.failed != tc.fails {
			t.Errorf("%s: check failed %v (%s), want %v", tc.what, rec.failed, rec.msg, tc.fails)
		}
	}
}

// fakeAnswer answers every request with status and body, as JSON.
type fakeAnswer struct {
	status int
	body   string
}

func (f *fakeAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: f.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader([]byte(f.body))), Request: req}, nil
}

// recordingTB records an Errorf instead of failing the test.
type recordingTB struct {
	testing.TB
	failed bool
	msg    string
}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.failed, r.msg = true, fmt.Sprintf(format, args...)
}


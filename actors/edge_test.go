package actors

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// Issue 14 item 4: a schema's $ref resolves inside the schema document
// only. A file on the host, /etc/passwd or a URL is a 400 on create and on
// alter whose message holds none of the target's bytes, and nothing is
// loaded; an internal ref still works.
func TestIssue14SchemaRefsResolveOnlyInsideTheDocument(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host.json")
	if err := os.WriteFile(host, []byte(`{"type":"string","description":"secret-from-the-host"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Write([]byte(`{"type":"string"}`))
	}))
	defer web.Close()
	tn := ctNode(t)
	ctCreate(t, tn, `{"name":"plain"}`)
	for _, tc := range []struct{ schema, outside string }{
		{`{"$ref":"file:///etc/passwd"}`, "file:///etc/passwd"},
		{`{"$ref":"file://` + host + `"}`, "file://" + host},
		{`{"properties":{"a":{"$ref":"file://` + host + `#/type"}}}`, "file://" + host},
		{`{"$ref":"` + web.URL + `/s.json"}`, web.URL + "/s.json"},
		{`{"$id":"` + web.URL + `/root.json","$ref":"other.json"}`, web.URL + "/other.json"},
		{`{"$schema":"file://` + host + `"}`, "file://" + host},
	} {
		want := fmt.Sprintf(`invalid argument: schema does not compile: %q is outside the schema document; a $ref may only point inside it (such as "#/$defs/name")`, tc.outside)
		r := ctDo(t, tn, "POST", "/v1/topics", []byte(`{"name":"refs","schema":`+tc.schema+`}`))
		ctWantError(t, "create with "+tc.schema, r, http.StatusBadRequest, want)
		ctWantNoTopic(t, tn, "refs")
		r = ctDo(t, tn, "PATCH", "/v1/topics/plain", []byte(`{"schema":`+tc.schema+`}`))
		ctWantError(t, "alter with "+tc.schema, r, http.StatusBadRequest, want)
		if strings.Contains(string(r.body), "secret-from-the-host") || strings.Contains(string(r.body), "root:") {
			t.Fatalf("alter with %s: the answer %q holds bytes of the target", tc.schema, r.body)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("web server: got %d requests, want none", n)
	}
	ctProduce(t, tn, "plain", "", []byte(`not json`)) // no schema took

	ctCreate(t, tn, `{"name":"inner","schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"id":{"type":"integer"}},"type":"object","properties":{"id":{"$ref":"#/$defs/id"}}}}`)
	ctProduce(t, tn, "inner", "", []byte(`{"id":1}`))
	ctWantError(t, "produce against an internal ref", ctDo(t, tn, "POST", "/v1/topics/inner/produce", []byte(`{"id":"one"}`)), http.StatusBadRequest, "invalid argument: ...")
}

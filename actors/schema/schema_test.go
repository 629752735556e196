package schema

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A $ref may point only inside the document: the compiler loads nothing,
// so a client cannot make the node read its own files.
func TestCompileRefusesARefOutsideTheDocument(t *testing.T) {
	// A file on the node that is a valid schema: the default loader would
	// read it and compile.
	file := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(file, []byte(`{"type":"integer"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(json.RawMessage(`{"$ref":"file://` + file + `"}`)); err == nil || !strings.Contains(err.Error(), "outside the schema document") {
		t.Fatalf("a $ref to a file on the node: got %v, want it refused as outside the document", err)
	}
	if _, err := Compile(json.RawMessage(`{"$defs":{"n":{"type":"integer"}},"properties":{"a":{"$ref":"#/$defs/n"}}}`)); err != nil {
		t.Fatalf("a $ref inside the document: got %v, want it compiled", err)
	}
}

func TestValidateChecksABody(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"type":"object","required":["id"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(s, []byte(`{"id":1}`)); err != nil {
		t.Fatalf("a matching body: got %v, want nil", err)
	}
	for _, body := range []string{`{}`, `not json`} {
		if err := Validate(s, []byte(body)); err == nil {
			t.Fatalf("body %s: got nil, want refused", body)
		}
	}
}

// A new version must accept what the old one did: no property removed,
// no type changed, no new required field, at any depth.
func TestCompatibleSaysWhatANewVersionBreaks(t *testing.T) {
	prev := `{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},"meta":{"type":"object","properties":{"at":{"type":"string"}}}}}`
	for _, tc := range []struct{ next, want string }{
		{`{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},"meta":{"type":"object","properties":{"at":{"type":"string"}}},"extra":{}}}`, ""},
		{`{"type":"object","required":["id"],"properties":{"meta":{"type":"object","properties":{"at":{"type":"string"}}}}}`, `property "id" removed`},
		{`{"type":"object","required":["id"],"properties":{"id":{"type":"string"},"meta":{"type":"object","properties":{"at":{"type":"string"}}}}}`, `type of "id" changed`},
		{`{"type":"object","required":["id","meta"],"properties":{"id":{"type":"integer"},"meta":{"type":"object","properties":{"at":{"type":"string"}}}}}`, `new required field "meta"`},
		{`{"type":"object","required":["id"],"properties":{"id":{"type":"integer"},"meta":{"type":"object","properties":{"at":{"type":"number"}}}}}`, `type of "meta.at" changed`},
		{`true`, ""},
	} {
		err := Compatible(json.RawMessage(prev), json.RawMessage(tc.next))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("next %s: got %v, want compatible", tc.next, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("next %s: got %v, want %q", tc.next, err, tc.want)
		}
	}
}

// The cache compiles each version once and keeps incarnations apart.
func TestCacheCompilesEachVersionOnce(t *testing.T) {
	var c Cache
	doc := json.RawMessage(`{"type":"object"}`)
	a, err := c.Get(7, 1, doc)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Get(7, 1, json.RawMessage(`{"type":"string"}`)) // the same version: the cached one
	if a != b {
		t.Fatal("the same incarnation and version: got two compilations, want the cached one")
	}
	if other, _ := c.Get(8, 1, doc); other == a {
		t.Fatal("another incarnation: got the first one's schema, want its own")
	}
	if _, err := c.Get(9, 1, json.RawMessage(`{"$ref":"http://example.com/x"}`)); err == nil {
		t.Fatal("a document that does not compile: got a schema, want an error")
	}
}

// Issue 48 item 6: the cache keeps one schema an incarnation, the newest
// version asked for, however many versions an incarnation goes through,
// and no more than maxCachedIncarnations in all. Keyed by version, it kept
// every version of every incarnation it ever compiled.
func TestCacheKeepsTheNewestVersionOfEachIncarnation(t *testing.T) {
	var c Cache
	for v := 1; v <= 20; v++ {
		if _, err := c.Get(7, v, json.RawMessage(`{"type":"object"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.m) != 1 || c.m[7].version != 20 {
		t.Fatalf("after 20 versions of one incarnation: got %d entries (version %d), want 1 (version 20)", len(c.m), c.m[7].version)
	}
	newest := c.m[7].schema
	if old, _ := c.Get(7, 19, json.RawMessage(`{"type":"string"}`)); old == newest || c.m[7].schema != newest {
		t.Fatal("an older version asked for: got the newest's schema or the newest replaced, want its own, not kept")
	}
	for inc := range uint64(maxCachedIncarnations + 10) {
		if _, err := c.Get(100+inc, 1, json.RawMessage(`true`)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.m); n > maxCachedIncarnations {
		t.Fatalf("after %d incarnations: got %d entries, want at most %d", maxCachedIncarnations+10, n, maxCachedIncarnations)
	}
}

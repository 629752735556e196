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

// Package schema is a topic's JSON Schema on the produce path: Compile
// checks a document when a topic is created or altered (its $refs may
// point only inside it), Cache keeps each topic incarnation's newest
// compiled version so a produce compiles nothing, Validate checks a body, and
// Compatible says why a new version would break the records the old one
// let in.
package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Cache keeps the compiled schema of each topic incarnation's newest
// version, so a produce compiles nothing. The zero Cache is ready to use.
//
// It holds one schema an incarnation, not one a version: a produce only
// ever validates against a topic's latest schema, and kept by version
// the cache would grow with every alter that registers one, as the
// topic's record did before it kept only its newest. It holds at most
// maxCachedIncarnations, and starts over when full.
type Cache struct {
	mu sync.Mutex
	m  map[uint64]compiled
}

// compiled is an incarnation's schema of version.
type compiled struct {
	version int
	schema  *jsonschema.Schema
}

// maxCachedIncarnations bounds the cache, whose entries a deleted topic
// leaves behind: 4,096 topics with a schema is past what a node of
// ordinary size serves, and a cache that starts over costs each topic
// one compilation on its next produce.
const maxCachedIncarnations = 4096

// Compile compiles a topic's schema document; a $ref outside it is
// refused.
func Compile(doc json.RawMessage) (*jsonschema.Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	// The default loader reads file:// URLs: a client's $ref would read the
	// server's files (and show their first bytes in the error). Only the
	// document itself, and the metaschemas the library embeds, resolve.
	c.UseLoader(noLoads{})
	// An absolute URL: a relative one resolves against the working
	// directory, which would show up in error messages.
	const url = "urn:narad:topic-schema"
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("schema: %v", err)
	}
	s, err := c.Compile(url)
	if le, ok := errors.AsType[*jsonschema.LoadURLError](err); ok {
		return nil, fmt.Errorf("schema does not compile: %q is outside the schema document; a $ref may only point inside it (such as \"#/$defs/name\")", le.URL)
	}
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %v", err)
	}
	return s, nil
}

// errOutsideSchema is a load the compiler asked for: never done.
var errOutsideSchema = errors.New("outside the schema document")

// noLoads is the compiler's loader: it loads nothing.
type noLoads struct{}

func (noLoads) Load(string) (any, error) { return nil, errOutsideSchema }

// Get is the schema of version of a topic incarnation, compiled from doc
// the first time. A version older than the one cached (a produce that
// read the topic's record before an alter) is compiled and not kept.
func (c *Cache) Get(incarnation uint64, version int, doc json.RawMessage) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cached, ok := c.m[incarnation]
	if ok && cached.version == version {
		return cached.schema, nil
	}
	s, err := Compile(doc)
	if err != nil {
		return nil, err
	}
	if ok && cached.version > version {
		return s, nil
	}
	if c.m == nil || len(c.m) >= maxCachedIncarnations {
		c.m = map[uint64]compiled{}
	}
	c.m[incarnation] = compiled{version: version, schema: s}
	return s, nil
}

// Validate checks a produce body against a compiled schema.
func Validate(s *jsonschema.Schema, body []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("body is not JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("body does not match the schema: %v", err)
	}
	return nil
}

// Compatible reports why next is not backward compatible with prev:
// a property removed, a property's type changed, or a new required field.
// It walks nested "properties" too.
func Compatible(prev, next json.RawMessage) error {
	var a, b map[string]any
	if json.Unmarshal(prev, &a) != nil || json.Unmarshal(next, &b) != nil {
		return nil // a non-object schema (true/false) has nothing to compare
	}
	return compareSchemaObjects("", a, b)
}

func compareSchemaObjects(path string, a, b map[string]any) error {
	if ta, tb := fmt.Sprint(a["type"]), fmt.Sprint(b["type"]); a["type"] != nil && ta != tb {
		return fmt.Errorf("type of %q changed from %s to %s", pathOr(path), ta, tb)
	}
	req := map[string]bool{}
	if ra, ok := a["required"].([]any); ok {
		for _, r := range ra {
			req[fmt.Sprint(r)] = true
		}
	}
	if rb, ok := b["required"].([]any); ok {
		for _, r := range rb {
			if !req[fmt.Sprint(r)] {
				return fmt.Errorf("new required field %q", joinPath(path, fmt.Sprint(r)))
			}
		}
	}
	pa, _ := a["properties"].(map[string]any)
	pb, _ := b["properties"].(map[string]any)
	for name, sa := range pa {
		sb, ok := pb[name]
		if !ok {
			return fmt.Errorf("property %q removed", joinPath(path, name))
		}
		ma, okA := sa.(map[string]any)
		mb, okB := sb.(map[string]any)
		if okA && okB {
			if err := compareSchemaObjects(joinPath(path, name), ma, mb); err != nil {
				return err
			}
		}
	}
	return nil
}

func joinPath(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func pathOr(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

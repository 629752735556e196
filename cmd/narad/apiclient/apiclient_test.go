package apiclient_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/naradmq/narad/actors/api"
	"github.com/naradmq/narad/cmd/narad/apiclient"
)

// canonical is a description as kin-openapi reads it, written back: the
// same for the same description however its JSON is spaced. The
// operation ids are capitalised, as oapi-codegen keeps them.
func canonical(t *testing.T, what string, b []byte) string {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(b)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			if op.OperationID != "" {
				op.OperationID = strings.ToUpper(op.OperationID[:1]) + op.OperationID[1:]
			}
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return string(out)
}

// The client is made from the description as it is now: a change to
// actors/api/openapi.json without go generate fails here.
func TestTheClientIsGeneratedFromTheCurrentDescription(t *testing.T) {
	made, err := apiclient.GetSpecJSON()
	if err != nil {
		t.Fatal(err)
	}
	if canonical(t, "the client's description", made) != canonical(t, "actors/api/openapi.json", api.OpenAPIDocument()) {
		t.Fatalf("cmd/narad/apiclient: got a client made from another description than actors/api/openapi.json, want it remade: go generate ./cmd/narad/apiclient")
	}
}

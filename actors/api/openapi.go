package api

import (
	"bytes"
	_ "embed"
	"net/http"
	"strconv"
)

// openapiJSON is the OpenAPI 3.1 description of every route of routes,
// written by hand in openapi.json. openapi_test.go holds it to the route
// table both ways and checks it is a valid document; the contract tests
// (actors/api_openapi_test.go) hold the node's answers to it, and
// cmd/narad/apiclient is a client generated from it.
//
//go:embed openapi.json
var openapiJSON []byte

// OpenAPIDocument is a copy of the description GET /v1/openapi.json
// serves.
func OpenAPIDocument() []byte { return bytes.Clone(openapiJSON) }

// serveOpenAPI answers the description. It needs no grant, only the
// credentials every /v1 route needs with security on: it tells no more
// than the repository does, but an open /v1 path would be the only one,
// and the contract's list of routes without credentials is exact (§2.1).
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(openapiJSON)))
	w.Write(openapiJSON)
}

// Package apiclient is a Go client of the /v1 API generated from its
// OpenAPI description (actors/api/openapi.json) by oapi-codegen: no line
// of apiclient.gen.go is written by hand. After a change to the
// description, regenerate it with
//
//	go generate ./cmd/narad/apiclient
//
// (apiclient_test.go fails until then: the generated code keeps the
// description it was made from.)
// The test that runs the README's walk-through with it against a real
// node is actors/api_openapi_test.go; the CLI and the benches use the
// hand-written client of cmd/narad/client.
package apiclient

//go:generate go run github.com/oapi-codegen/oapi-codegen/v2/cmd/oapi-codegen@v2.8.2 -config oapi-codegen.yaml ../../../actors/api/openapi.json

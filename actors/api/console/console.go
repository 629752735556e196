// Package console is the operator's console that every node serves at
// /ui: the cluster's members and leaders, the moves as they happen, the
// topics with their partitions and a peek at their records, and the
// operator's actions (decommission, abort a move, release a copy set
// aside), each after a dry run or a confirmation. It is three static
// files embedded in the binary (static/), with no build step and nothing
// fetched from elsewhere; the page's script reads and acts through the
// node's own /v1 API with the user's credentials, so the console has the
// API's users and grants and no access of its own. Start with
// static/console.js: its header says how the page is laid out.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var files embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// Handler serves the console's files under Prefix; the API package mounts
// it (actors/api) and serves /ui as a redirect to it.
func Handler() http.Handler {
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embed above names the directory: a build error, not input
	}
	serve := http.StripPrefix(Prefix[:len(Prefix)-1], http.FileServerFS(static))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		// The page loads only its own files and talks only to its own node.
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		// An upgrade changes the files under the same names.
		h.Set("Cache-Control", "no-cache")
		serve.ServeHTTP(w, r)
	})
}

// Package deploy holds what an operator runs Narad with: the local
// cluster script, the systemd units, the Kubernetes manifests, the vmui
// and Grafana dashboards, the vmalert rules and the observability stack
// (README.md says which is which). It has no code of its own: its tests
// hold each file against the code it describes (the flags of `narad serve
// --help`, the series /metrics exports, strict decoding of the manifests),
// so that none of them drifts. Start with README.md, then
// observability_test.go.
package deploy

package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/naradmq/narad/cluster/testnet"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// manifests is every object of deploy/k8s, decoded strictly: a field the
// Kubernetes API types do not have fails the test, as kubectl's strict
// field validation would fail the apply.
type manifests struct {
	services   map[string]*corev1.Service
	sets       map[string]*appsv1.StatefulSet
	budgets    map[string]*policyv1.PodDisruptionBudget
	configMaps map[string]*corev1.ConfigMap
	// scrapes are the ServiceMonitor and VMServiceScrape objects, by kind.
	scrapes map[string]*scrape
	// certificates are cert-manager's Certificates, by name.
	certificates map[string]*certificate
}

// certificate is what a cert-manager Certificate says, the fields the
// chart sets; decoded strictly, so a misspelt field fails.
type certificate struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		SecretName  string   `json:"secretName"`
		CommonName  string   `json:"commonName"`
		DNSNames    []string `json:"dnsNames"`
		Duration    string   `json:"duration"`
		RenewBefore string   `json:"renewBefore"`
		PrivateKey  struct {
			Algorithm string `json:"algorithm"`
			Size      int    `json:"size"`
		} `json:"privateKey"`
		Usages    []string `json:"usages"`
		IssuerRef struct {
			Name  string `json:"name"`
			Kind  string `json:"kind"`
			Group string `json:"group"`
		} `json:"issuerRef"`
	} `json:"spec"`
}

// scrape is what a ServiceMonitor or a VMServiceScrape says, the fields
// the chart sets; decoded strictly, so a misspelt field fails.
type scrape struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Scheme   string `json:"scheme"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// readManifests is every object of deploy/k8s.
func readManifests(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in k8s/: %v", err)
	}
	var text []string
	for _, f := range files {
		raw := readFile(t, f)
		text = append(text, string(raw))
	}
	return decodeManifests(t, "k8s", strings.Join(text, "\n---\n"))
}

// decodeManifests decodes a stream of YAML documents (files joined, or
// what helm template writes) strictly, by kind.
func decodeManifests(t *testing.T, source, stream string) manifests {
	t.Helper()
	m := manifests{map[string]*corev1.Service{}, map[string]*appsv1.StatefulSet{}, map[string]*policyv1.PodDisruptionBudget{},
		map[string]*corev1.ConfigMap{}, map[string]*scrape{}, map[string]*certificate{}}
	for i, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(stream, -1) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		where := fmt.Sprintf("%s document %d", source, i+1)
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var obj any
		var name *string
		switch tm.APIVersion + " " + tm.Kind {
		case "v1 Service":
			s := &corev1.Service{}
			obj, name = s, &s.Name
			defer func() { m.services[s.Name] = s }()
		case "apps/v1 StatefulSet":
			s := &appsv1.StatefulSet{}
			obj, name = s, &s.Name
			defer func() { m.sets[s.Name] = s }()
		case "policy/v1 PodDisruptionBudget":
			s := &policyv1.PodDisruptionBudget{}
			obj, name = s, &s.Name
			defer func() { m.budgets[s.Name] = s }()
		case "v1 ConfigMap":
			s := &corev1.ConfigMap{}
			obj, name = s, &s.Name
			defer func() { m.configMaps[s.Name] = s }()
		case "monitoring.coreos.com/v1 ServiceMonitor", "operator.victoriametrics.com/v1beta1 VMServiceScrape":
			s := &scrape{}
			obj, name = s, &s.Metadata.Name
			defer func() { m.scrapes[s.Kind] = s }()
		case "cert-manager.io/v1 Certificate":
			s := &certificate{}
			obj, name = s, &s.Metadata.Name
			defer func() { m.certificates[s.Metadata.Name] = s }()
		default:
			t.Fatalf("%s: kind %q of %q, want Service, StatefulSet, PodDisruptionBudget, ConfigMap, ServiceMonitor, VMServiceScrape or Certificate (or teach this test the new kind)", where, tm.Kind, tm.APIVersion)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: strict decode: %v", where, err)
		}
		if *name == "" {
			t.Fatalf("%s: no metadata.name", where)
		}
	}
	return m
}

func stripComments(doc string) string {
	return regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(doc, "")
}

// container is the one container of set's pods.
func container(t *testing.T, set *appsv1.StatefulSet) corev1.Container {
	t.Helper()
	cs := set.Spec.Template.Spec.Containers
	if len(cs) != 1 {
		t.Fatalf("StatefulSet %s: %d containers, want 1", set.Name, len(cs))
	}
	return cs[0]
}

// envOf is the container's literal env values; secrets lists the
// variables taken from a Secret.
func envOf(c corev1.Container) (vals map[string]string, secrets map[string]*corev1.SecretKeySelector) {
	vals, secrets = map[string]string{}, map[string]*corev1.SecretKeySelector{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			secrets[e.Name] = e.ValueFrom.SecretKeyRef
		case e.ValueFrom == nil:
			vals[e.Name] = e.Value
		}
	}
	return vals, secrets
}

// setting is the value set's container gives flag name: --name=v in its
// args wins over its NARAD_* variable, which wins over the key of the
// config file --config names (a ConfigMap the pod mounts).
func setting(t *testing.T, m manifests, set *appsv1.StatefulSet, flagName, envName string) (string, bool) {
	t.Helper()
	c := container(t, set)
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--"+flagName+"="); ok {
			return v, true
		}
	}
	vals, _ := envOf(c)
	if v, ok := vals[envName]; ok {
		return v, true
	}
	v, ok := configFile(t, m, set)[flagName]
	return v, ok
}

// configFile is the keys of the config file set's container reads
// (--config=PATH, PATH in a mounted ConfigMap), a list joined with commas
// as the node joins it; none without --config.
func configFile(t *testing.T, m manifests, set *appsv1.StatefulSet) map[string]string {
	t.Helper()
	c := container(t, set)
	var path string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			path = v
		}
	}
	if path == "" {
		return nil
	}
	var volume string
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == filepath.Dir(path) {
			volume = vm.Name
		}
	}
	for _, v := range set.Spec.Template.Spec.Volumes {
		if v.Name != volume || v.ConfigMap == nil {
			continue
		}
		cm := m.configMaps[v.ConfigMap.Name]
		if cm == nil {
			t.Fatalf("%s: --config %s is in ConfigMap %s, which the manifests do not hold", set.Name, path, v.ConfigMap.Name)
		}
		text, ok := cm.Data[filepath.Base(path)]
		if !ok {
			t.Fatalf("%s: ConfigMap %s has no key %s for --config %s", set.Name, cm.Name, filepath.Base(path), path)
		}
		return parseConfigFile(t, set.Name+": config file "+path, []byte(text))
	}
	t.Fatalf("%s: --config %s is in no ConfigMap the pod mounts", set.Name, path)
	return nil
}

// portNamed is the container port called name.
func portNamed(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	t.Fatalf("container %s has no port named %s", c.Name, name)
	return 0
}

// addrPort is the port of host:port.
func addrPort(t *testing.T, what, addr string) int32 {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", what, addr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s %q: bad port", what, addr)
	}
	return int32(p)
}

// podAddrs are the stable names of set's pods under its headless service,
// with port: what peers and clients of a StatefulSet must name.
func podAddrs(set *appsv1.StatefulSet, port int32) map[string]bool {
	return firstPodAddrs(set, port, *set.Spec.Replicas)
}

// firstPodAddrs is podAddrs of set's first n pods.
func firstPodAddrs(set *appsv1.StatefulSet, port int32, n int32) map[string]bool {
	out := map[string]bool{}
	for i := range n {
		out[fmt.Sprintf("%s-%d.%s:%d", set.Name, i, set.Spec.ServiceName, port)] = true
	}
	return out
}

// urlHosts is the host:port of each URL of a comma-separated list.
func urlHosts(t *testing.T, what, list string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, s := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Scheme != "nats" {
			t.Fatalf("%s: %q is not a nats:// URL", what, s)
		}
		out[u.Host] = true
	}
	return out
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// Every manifest decodes strictly; each StatefulSet has a headless
// Service that selects its pods and publishes ports its container has,
// and a PodDisruptionBudget that selects the same pods and lets at most
// one go; credentials come from the Secret narad-credentials only.
func TestManifestsShape(t *testing.T) { checkShape(t, readManifests(t)) }

func checkShape(t *testing.T, m manifests) {
	t.Helper()
	for _, name := range []string{"narad", "narad-nats"} {
		set := m.sets[name]
		if set == nil {
			t.Fatalf("no StatefulSet %s", name)
		}
		pods := labels.Set(set.Spec.Template.Labels)
		sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
		if err != nil || !sel.Matches(pods) {
			t.Errorf("StatefulSet %s: selector %v does not select its own template's labels %v (%v)", name, set.Spec.Selector, pods, err)
		}
		svc := m.services[set.Spec.ServiceName]
		if svc == nil {
			t.Fatalf("StatefulSet %s: no Service %s", name, set.Spec.ServiceName)
		}
		if svc.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("Service %s: clusterIP %q, want None (headless, for the pods' stable names)", svc.Name, svc.Spec.ClusterIP)
		}
		if !labels.SelectorFromSet(svc.Spec.Selector).Matches(pods) {
			t.Errorf("Service %s: selector %v does not select StatefulSet %s's pods %v", svc.Name, svc.Spec.Selector, name, pods)
		}
		c := container(t, set)
		for _, p := range svc.Spec.Ports {
			if p.TargetPort.Type != intstr.String || portNamed(t, c, p.TargetPort.StrVal) != p.Port {
				t.Errorf("Service %s port %s: targetPort %v, want a named container port equal to %d", svc.Name, p.Name, p.TargetPort.String(), p.Port)
			}
		}
		pdb := m.budgets[name]
		if pdb == nil {
			t.Fatalf("no PodDisruptionBudget %s", name)
		}
		psel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || psel.Empty() || !psel.Matches(pods) {
			t.Errorf("PodDisruptionBudget %s: selector %v does not select StatefulSet %s's pods %v (%v)", name, pdb.Spec.Selector, name, pods, err)
		}
		if mu := pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget %s: maxUnavailable %v, want 1 (a quorum of three survives one down)", name, mu)
		}
		_, secrets := envOf(c)
		for env, ref := range secrets {
			if ref.Name != "narad-credentials" {
				t.Errorf("%s: %s from Secret %s, want narad-credentials", name, env, ref.Name)
			}
		}
		for _, v := range set.Spec.Template.Spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName != "narad-credentials" && v.Secret.SecretName != raftSecret {
				t.Errorf("%s: volume %s from Secret %s, want narad-credentials or %s (Raft's certificate)", name, v.Name, v.Secret.SecretName, raftSecret)
			}
		}
	}
	checkRaftTLS(t, m)
	// Passwords never as literal values: a manifest is not a secret store.
	for _, set := range m.sets {
		vals, _ := envOf(container(t, set))
		for _, k := range []string{"NARAD_ADMIN_PASSWORD", "NARAD_NATS_ROUTE_PASSWORD", "NARAD_NATS_PASSWORD"} {
			if _, ok := vals[k]; ok {
				t.Errorf("%s: %s is a literal, want a secretKeyRef", set.Name, k)
			}
		}
	}
}

// raftSecret is the Secret of Raft's CA, certificate and key the
// manifests and the chart's defaults mount.
const raftSecret = "narad-raft-tls"

// checkRaftTLS: the nodes run Raft over mutual TLS, never --insecure-raft,
// each of the three files in the mount of Secret raftSecret.
func checkRaftTLS(t *testing.T, m manifests) {
	t.Helper()
	node := m.sets["narad"]
	if v, ok := setting(t, m, node, "insecure-raft", "NARAD_INSECURE_RAFT"); ok && v != "false" {
		t.Errorf("narad: insecure-raft %q, want Raft over mutual TLS", v)
	}
	c := container(t, node)
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.MountPath] = vm.Name
	}
	secretOf := map[string]string{}
	for _, v := range node.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secretOf[v.Name] = v.Secret.SecretName
		}
	}
	for _, f := range []string{"raft-tls-ca", "raft-tls-cert", "raft-tls-key"} {
		path, ok := setting(t, m, node, f, "NARAD_"+strings.ToUpper(strings.ReplaceAll(f, "-", "_")))
		if got := secretOf[mounts[filepath.Dir(path)]]; !ok || got != raftSecret {
			t.Errorf("narad %s: got %q (in Secret %q), want a file of Secret %s's mount", f, path, got, raftSecret)
		}
	}
}

// The containers' flags and variables exist in the binary, their listen
// addresses agree with the ports they publish, the peers and servers they
// name are the StatefulSets' pods, and the nodes' grace period outlasts
// the hand-off plus the WAL drain.
func TestManifestsAgreeWithFlags(t *testing.T) { checkFlags(t, readManifests(t)) }

func checkFlags(t *testing.T, m manifests) {
	t.Helper()
	nats, node := m.sets["narad-nats"], m.sets["narad"]
	if nats == nil || node == nil {
		t.Fatal("want StatefulSets narad-nats and narad")
	}
	nc, sc := container(t, nats), container(t, node)
	for _, c := range []corev1.Container{nc, sc} {
		if len(c.Args) == 0 {
			t.Fatalf("container %s has no args", c.Name)
		}
		h := help(t, c.Args[0])
		for _, a := range c.Args[1:] {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.HasPrefix(a, "--") || !hasFlag(h, name) {
				t.Errorf("container %s: narad %s has no flag %s", c.Name, c.Args[0], a)
			}
		}
		for _, e := range c.Env {
			if strings.HasPrefix(e.Name, "NARAD_") && !regexp.MustCompile(`(^|[^A-Z0-9_])`+e.Name+`([^A-Z0-9_]|$)`).MatchString(h) {
				t.Errorf("container %s: narad %s reads no %s", c.Name, c.Args[0], e.Name)
			}
		}
	}

	for key := range configFile(t, m, node) {
		if !hasFlag(help(t, "serve"), key) {
			t.Errorf("narad's config file sets %s, which is no flag of narad serve", key)
		}
	}

	listen, _ := setting(t, m, nats, "listen", "NARAD_NATS_LISTEN")
	if got, want := addrPort(t, "nats --listen", listen), portNamed(t, nc, "client"); got != want {
		t.Errorf("nats listens on %d, publishes client port %d", got, want)
	}
	clusterListen, _ := setting(t, m, nats, "cluster-listen", "NARAD_NATS_CLUSTER_LISTEN")
	clusterPort := portNamed(t, nc, "cluster")
	if got := addrPort(t, "nats --cluster-listen", clusterListen); got != clusterPort {
		t.Errorf("nats routes listen on %d, publishes cluster port %d", got, clusterPort)
	}
	routes, _ := setting(t, m, nats, "routes", "NARAD_NATS_ROUTES")
	if got, want := urlHosts(t, "NARAD_NATS_ROUTES", routes), podAddrs(nats, clusterPort); !sameSet(got, want) {
		t.Errorf("nats routes %v, want every pod's cluster port %v", got, want)
	}

	httpAddr, _ := setting(t, m, node, "http", "NARAD_HTTP_ADDR")
	if got, want := addrPort(t, "serve --http", httpAddr), portNamed(t, sc, "http"); got != want {
		t.Errorf("narad serves HTTP on %d, publishes http port %d", got, want)
	}
	natsURLs, _ := setting(t, m, node, "nats", "NARAD_NATS")
	if got, want := urlHosts(t, "NARAD_NATS", natsURLs), podAddrs(nats, portNamed(t, nc, "client")); !sameSet(got, want) {
		t.Errorf("narad's NATS servers %v, want every NATS pod's client port %v", got, want)
	}
	peers, _ := setting(t, m, node, "peers", "NARAD_PEERS")
	// The initial voters are the first pods: all of them, or, when the
	// pods past them join (--join beside --peers), as many as --peers names.
	voters := *node.Spec.Replicas
	if join, _ := setting(t, m, node, "join", "NARAD_JOIN"); join == "true" {
		voters = int32(strings.Count(peers, ",") + 1)
	}
	if voters > *node.Spec.Replicas {
		t.Errorf("NARAD_PEERS names %d voters, more than the %d pods", voters, *node.Spec.Replicas)
	}
	gotPeers, wantPeers := map[string]bool{}, firstPodAddrs(node, portNamed(t, sc, "raft"), voters)
	for _, p := range strings.Split(peers, ",") {
		id, addr, _ := strings.Cut(p, "=")
		if !strings.HasPrefix(addr, id+".") {
			t.Errorf("peer %q: id %s is not its pod's name (NARAD_ID is the pod name)", p, id)
		}
		gotPeers[addr] = true
	}
	if !sameSet(gotPeers, wantPeers) {
		t.Errorf("NARAD_PEERS %v, want the first %d node pods' raft port %v", gotPeers, voters, wantPeers)
	}

	h := help(t, "serve")
	bound := func(flagName, envName string) time.Duration {
		if v, ok := setting(t, m, node, flagName, envName); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatalf("%s=%q: %v", envName, v, err)
			}
			return d
		}
		return flagDefault(t, h, flagName)
	}
	need := bound("shutdown-handoff-timeout", "NARAD_SHUTDOWN_HANDOFF_TIMEOUT") + bound("shutdown-drain-timeout", "NARAD_SHUTDOWN_DRAIN_TIMEOUT")
	grace := node.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil {
		t.Fatalf("narad has no terminationGracePeriodSeconds, want more than hand-off plus drain, %s", need)
	}
	if got := time.Duration(*grace) * time.Second; got <= need {
		t.Errorf("narad terminationGracePeriodSeconds %s, want more than hand-off plus drain, %s", got, need)
	}
}

// The probes' paths answer on a real node: narad serve, alone and without
// NATS, on free loopback ports.
func TestManifestsProbePathsExist(t *testing.T) {
	m := readManifests(t)
	node := m.sets["narad"]
	if node == nil {
		t.Fatal("no StatefulSet narad")
	}
	c := container(t, node)
	probes := map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe}
	wantPath := map[string]string{"readiness": "/readyz", "liveness": "/healthz"}
	for kind, p := range probes {
		if p == nil || p.HTTPGet == nil {
			t.Fatalf("narad %s probe: got %v, want an httpGet", kind, p)
		}
		if p.HTTPGet.Path != wantPath[kind] || p.HTTPGet.Port.StrVal != "http" {
			t.Errorf("narad %s probe: got %s on port %s, want %s on http", kind, p.HTTPGet.Path, p.HTTPGet.Port.String(), wantPath[kind])
		}
	}
	bin := naradBinary(t)
	httpAddr, raftAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--id", "n1", "--data", t.TempDir(), "--http", httpAddr, "--raft", raftAddr, "--log-level", "error"}, raftCertFlags(t, bin)...)...)
	cmd.Env = append(os.Environ(), "NARAD_ADMIN_PASSWORD=probe-test-password")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	for kind, p := range probes {
		u := "http://" + httpAddr + p.HTTPGet.Path
		deadline := time.Now().Add(60 * time.Second) // liveness bound only: a node's start-up
		for {
			resp, err := http.Get(u)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s probe %s: got %v %v, want 200 within 60s; node output:\n%s", kind, u, statusOf(resp), err, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func statusOf(r *http.Response) string {
	if r == nil {
		return "no response"
	}
	return r.Status
}

// deployPorts hands out this package's ports (testnet.Deploy): a port
// below the kernel's ephemeral range, which no outgoing connection takes
// before the process under test listens on it.
var deployPorts = testnet.Deploy.Ports()

// freeAddr is a loopback address with a port of this package's range.
func freeAddr(t *testing.T) string { return deployPorts.Addr(t) }

package deploy

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// helmModule is Helm, run with go run at a pinned version: nothing to
// install. Its first build takes a few minutes on a fresh machine; go
// caches it after that.
const helmModule = "helm.sh/helm/v3/cmd/helm@v3.22.0"

const chartDir = "helm/narad"

// helm runs helm with args and returns its stdout; err is its failure,
// with stderr in it.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds Helm")
	}
	home := t.TempDir()
	cmd := exec.Command("go", append([]string{"run", helmModule}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), &buildError{err: err, out: errOut.String() + out.String()}
	}
	return out.String(), nil
}

// render is helm template of the chart as release narad (so its objects
// carry the raw manifests' names) with values set.
func render(t *testing.T, set ...string) manifests {
	t.Helper()
	args := []string{"template", "narad", chartDir}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm template %q: %v", set, err)
	}
	return decodeManifests(t, "helm template "+strings.Join(set, " "), out)
}

// everything is every switch of the chart on.
var everything = []string{"replicas=5", "voters=3", "tls.httpSecret=narad-http-tls", "tls.natsSecret=narad-nats-tls",
	"tls.raftCertManager.enabled=true", "tls.raftCertManager.issuer=narad-raft-ca",
	"metrics.serviceMonitor.enabled=true", "metrics.vmServiceScrape.enabled=true", "config.max-in-flight-moves=64"}

func TestHelmLint(t *testing.T) {
	for _, set := range [][]string{nil, everything} {
		args := []string{"lint", "--strict", chartDir}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		if out, err := helm(t, args...); err != nil {
			t.Errorf("helm lint %q: %v\n%s", set, err, out)
		}
	}
}

// With its defaults the chart renders what deploy/k8s holds, checked the
// same way: strict decoding, Services, budgets and Secrets, every flag,
// variable and config key held against the binary's --help, addresses
// agreeing with ports, and a grace that outlasts hand-off plus drain.
func TestHelmTemplateDefaults(t *testing.T) {
	m := render(t)
	checkShape(t, m)
	checkFlags(t, m)
	checkChartPods(t, m, "HTTP")
	// The binary reads the rendered file as it is.
	cm := m.configMaps["narad-config"]
	if cm == nil {
		t.Fatal("no ConfigMap narad-config")
	}
	f := filepath.Join(t.TempDir(), "narad.yaml")
	if err := os.WriteFile(f, []byte(cm.Data["narad.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(naradBinary(t), "serve", "--config", f, "--print-config").CombinedOutput(); err != nil {
		t.Errorf("narad serve --config (the chart's file) --print-config: %v\n%s", err, out)
	}
	if len(m.scrapes) != 0 {
		t.Errorf("scrape objects %v by default, want none (they need their operators' CRDs)", m.scrapes)
	}
}

// Every switch on: TLS from the named Secrets (files the config names, in
// the mounts), probes over HTTPS, both scrape objects selecting the nodes'
// Service on a port it has, and pods past the voters joining.
func TestHelmTemplateEverything(t *testing.T) {
	m := render(t, everything...)
	checkFlags(t, m)
	checkChartPods(t, m, "HTTPS")
	node := m.sets["narad"]
	if got := *node.Spec.Replicas; got != 5 {
		t.Errorf("replicas: got %d, want 5", got)
	}
	file := configFile(t, m, node)
	if file["join"] != "true" || strings.Count(file["peers"], "=") != 3 {
		t.Errorf("config join %q peers %q: want join true beside the three voters, so pods 3 and 4 join", file["join"], file["peers"])
	}
	if file["max-in-flight-moves"] != "64" {
		t.Errorf("config max-in-flight-moves: got %q, want the value set, 64", file["max-in-flight-moves"])
	}
	mounts := map[string]string{}
	c := container(t, node)
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm.MountPath
	}
	secretOf := map[string]string{}
	for _, v := range node.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secretOf[v.Name] = v.Secret.SecretName
		}
	}
	for key, secret := range map[string]string{"http-tls-cert": "narad-http-tls", "http-tls-key": "narad-http-tls",
		"nats-tls-ca": "narad-nats-tls", "nats-tls-cert": "narad-nats-tls", "nats-tls-key": "narad-nats-tls",
		"raft-tls-ca": raftSecret, "raft-tls-cert": raftSecret, "raft-tls-key": raftSecret} {
		path, found := file[key], false
		for vol, dir := range mounts {
			if filepath.Dir(path) == dir && secretOf[vol] == secret {
				found = true
			}
		}
		if !found {
			t.Errorf("config %s %q: want a file of Secret %s's mount", key, path, secret)
		}
	}
	checkRaftCertificate(t, m, node)
	svc := m.services["narad"]
	for _, kind := range []string{"ServiceMonitor", "VMServiceScrape"} {
		s := m.scrapes[kind]
		if s == nil {
			t.Errorf("no %s with its switch on", kind)
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&s.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(svc.Labels)) || sel.Matches(labels.Set(m.services["narad-client"].Labels)) {
			t.Errorf("%s selects %v: want the headless Service narad (every node, ready or not) and not narad-client (%v)", kind, s.Spec.Selector, err)
		}
		if len(s.Spec.Endpoints) != 1 {
			t.Fatalf("%s: %d endpoints, want 1", kind, len(s.Spec.Endpoints))
		}
		e := s.Spec.Endpoints[0]
		hasPort := false
		for _, p := range svc.Spec.Ports {
			hasPort = hasPort || p.Name == e.Port
		}
		if !hasPort || e.Path != "/metrics" || e.Scheme != "https" {
			t.Errorf("%s endpoint %+v: want port http of Service narad, /metrics, https", kind, e)
		}
	}
}

// checkRaftCertificate: cert-manager's Certificate writes the Secret the
// nodes mount, with a name Go's TLS (Dragonboat's) accepts for the Raft
// address of every pod, as a server and as a client, from the issuer set.
func checkRaftCertificate(t *testing.T, m manifests, node *appsv1.StatefulSet) {
	t.Helper()
	crt := m.certificates[raftSecret]
	if crt == nil {
		t.Fatalf("no Certificate %s with tls.raftCertManager.enabled", raftSecret)
	}
	if crt.Spec.SecretName != raftSecret || crt.Spec.IssuerRef.Name != "narad-raft-ca" || crt.Spec.IssuerRef.Kind != "Issuer" {
		t.Errorf("Certificate: secretName %q issuer %+v, want %s from Issuer narad-raft-ca", crt.Spec.SecretName, crt.Spec.IssuerRef, raftSecret)
	}
	if !slices.Contains(crt.Spec.Usages, "server auth") || !slices.Contains(crt.Spec.Usages, "client auth") {
		t.Errorf("Certificate usages %v: want server auth and client auth (mutual TLS)", crt.Spec.Usages)
	}
	vals, _ := envOf(container(t, node))
	named := &x509.Certificate{DNSNames: crt.Spec.DNSNames}
	for i := range *node.Spec.Replicas {
		pod := fmt.Sprintf("%s-%d", node.Name, i)
		host, _, err := net.SplitHostPort(strings.ReplaceAll(vals["NARAD_RAFT_ADDR"], "$(POD_NAME)", pod))
		if err != nil {
			t.Fatalf("NARAD_RAFT_ADDR %q: %v", vals["NARAD_RAFT_ADDR"], err)
		}
		if err := named.VerifyHostname(host); err != nil {
			t.Errorf("Certificate dnsNames %v: pod %s's Raft host %s not among them (%v)", crt.Spec.DNSNames, pod, host, err)
		}
	}
}

// tls.insecureRaft runs Raft over plain TCP, said by name in the config,
// with no certificate mounted or asked of cert-manager.
func TestHelmInsecureRaftSaysSo(t *testing.T) {
	m := render(t, "tls.insecureRaft=true", "tls.raftCertManager.enabled=true", "tls.raftCertManager.issuer=x")
	node := m.sets["narad"]
	file := configFile(t, m, node)
	if file["insecure-raft"] != "true" || file["raft-tls-ca"] != "" {
		t.Errorf("config insecure-raft %q raft-tls-ca %q: want true and no file", file["insecure-raft"], file["raft-tls-ca"])
	}
	for _, v := range node.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == raftSecret {
			t.Errorf("volume %s of Secret %s with insecureRaft: want none", v.Name, raftSecret)
		}
	}
	if len(m.certificates) != 0 {
		t.Errorf("Certificates %v with insecureRaft: want none", m.certificates)
	}
}

// checkChartPods: the nodes run as the image's user, not root; probes ask
// /readyz and /healthz on the http port over scheme; the config file's
// checksum rolls the pods when it changes.
func checkChartPods(t *testing.T, m manifests, scheme corev1.URIScheme) {
	t.Helper()
	for _, name := range []string{"narad", "narad-nats"} {
		set := m.sets[name]
		sc := set.Spec.Template.Spec.SecurityContext
		// 65532: the user deploy/image makes the image run as.
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.FSGroup == nil || *sc.FSGroup != 65532 {
			t.Errorf("%s: pod securityContext %+v, want non-root, user and fsGroup 65532", name, sc)
		}
	}
	node := m.sets["narad"]
	c := container(t, node)
	for path, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.StrVal != "http" || p.HTTPGet.Scheme != scheme {
			t.Errorf("narad probe for %s: got %+v, want an httpGet of %s on port http over %s", path, p, path, scheme)
		}
	}
	if node.Spec.Template.Annotations["checksum/config"] == "" {
		t.Error("narad pods carry no checksum/config annotation: a changed config would not roll them")
	}
	if node.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("narad podManagementPolicy %q, want Parallel: the voters must start together", node.Spec.PodManagementPolicy)
	}
}

// Bad values fail before anything is rendered, saying which value.
func TestHelmRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{[]string{"replicas=0"}, "/replicas"},
		{[]string{"replica=3"}, "'replica' not allowed"},
		{[]string{"voters=4"}, "voters (4) must not exceed replicas (3)"},
		{[]string{"image.pullPolicy=Sometimes"}, "/image/pullPolicy"},
		{[]string{"config.Max_moves=1"}, "'Max_moves' does not match"},
		{[]string{"nats.enabled=false"}, "nats.external.urls"},
		{[]string{"metrics.serviceMonitor.interval=often"}, "/metrics/serviceMonitor/interval"},
		{[]string{"tls.raftSecret="}, "narad cert create-ca --dir certs"},
		{[]string{"tls.raftCertManager.enabled=true"}, "tls.raftCertManager.issuer"},
		{[]string{"tls.raftCertManager.issuerKind=Vault"}, "/tls/raftCertManager/issuerKind"},
	} {
		args := []string{"template", "narad", chartDir}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		_, err := helm(t, args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("helm template --set %q: got %v, want a refusal naming %q", tc.set, err, tc.want)
		}
	}
}

package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// guideBlock is one sh block of an operate/ page.
type guideBlock struct {
	page, text string
	line       int
	// notRun is the reason a `<!-- not run: REASON -->` line right
	// before the block gives; "" for a block the test runs.
	notRun string
}

var notRunComment = regexp.MustCompile(`^<!-- not run: (.*\S) -->$`)

// guidePages are the operator's guide's pages in the order its index
// lists them, which is the order the test runs them in.
func guidePages(t *testing.T) []string {
	t.Helper()
	index := readFile(t, "operate/README.md")
	var pages []string
	for _, m := range regexp.MustCompile(`\]\(([a-z-]+\.md)\)`).FindAllStringSubmatch(string(index), -1) {
		if _, err := os.Stat(filepath.Join("operate", m[1])); err != nil {
			t.Fatalf("operate/README.md links %s: %v", m[1], err)
		}
		pages = append(pages, m[1])
	}
	all, _ := filepath.Glob("operate/*.md")
	if len(pages) != len(all)-1 {
		t.Fatalf("operate/README.md lists %v; want every page of operate/ (%v) once", pages, all)
	}
	return pages
}

// guideBlocks are page's sh blocks. A not-run comment must name its
// reason and stand right before a block.
func guideBlocks(t *testing.T, page string) []guideBlock {
	t.Helper()
	raw := readFile(t, filepath.Join("operate", page))
	lines := strings.Split(string(raw), "\n")
	var blocks []guideBlock
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "<!-- not run") {
			if !notRunComment.MatchString(l) || i+1 >= len(lines) || lines[i+1] != "```sh" {
				t.Fatalf("%s:%d: %q: want `<!-- not run: REASON -->` right before a sh block", page, i+1, l)
			}
			continue
		}
		if l != "```sh" {
			continue
		}
		b := guideBlock{page: page, line: i + 1}
		if i > 0 {
			if m := notRunComment.FindStringSubmatch(lines[i-1]); m != nil {
				b.notRun = m[1]
			}
		}
		var body []string
		for i++; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		if i == len(lines) {
			t.Fatalf("%s:%d: a sh block that never ends", page, b.line)
		}
		b.text = strings.Join(body, "\n") + "\n"
		blocks = append(blocks, b)
	}
	return blocks
}

// Every command of the operator's guide (deploy/operate) runs, in the
// order of its pages, against a local cluster of processes: the guide
// cannot drift from the binary. A block that cannot run here (systemctl,
// kubectl, helm install) says why before it.
func TestOperatorGuideRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a local cluster")
	}
	bin := naradBinary(t)
	binDir := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(binDir, "narad")); err != nil {
		t.Fatal(err)
	}
	clusterDir := t.TempDir()
	httpBase, raftBase := deployPorts.Block(t, 4)-1, deployPorts.Block(t, 4)-1
	natsAddr := freeAddr(t)
	natsPort := natsAddr[strings.LastIndex(natsAddr, ":")+1:]
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NARAD_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	// The blocks' scratch files go under the test's own directory: a
	// second copy of the suite on the machine must not meet them. The
	// guide writes /tmp/… as a reader would; the test runs it in scratch.
	scratch := t.TempDir()
	env = append(env, "TMPDIR="+scratch, "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CLUSTER_DIR="+clusterDir, "NARAD_LOCAL_BIN="+bin,
		fmt.Sprintf("NARAD_LOCAL_HTTP_BASE=%d", httpBase), fmt.Sprintf("NARAD_LOCAL_RAFT_BASE=%d", raftBase),
		"NARAD_LOCAL_NATS_PORT="+natsPort)
	// sh runs a script from the repository's root, as the guide's blocks
	// expect, bounded: a liveness bound, not a performance threshold.
	// Without pipefail, as a reader's shell runs them: every pipe in the
	// guide ends in a check of what was printed, and a check that stops
	// reading at its answer (grep -q, head) kills the writer with SIGPIPE,
	// which pipefail would call a failure (and inside `if`, a pass).
	sh := func(script string, env []string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", "-c", "set -eu\n"+script)
		cmd.Dir, cmd.Env = "..", env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	logs := func() string {
		var b strings.Builder
		files, _ := filepath.Glob(filepath.Join(clusterDir, "*.log"))
		for _, f := range files {
			raw, _ := os.ReadFile(f)
			lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
			fmt.Fprintf(&b, "--- %s (last lines)\n%s\n", filepath.Base(f), strings.Join(lines[max(0, len(lines)-15):], "\n"))
		}
		return b.String()
	}
	if out, err := sh("deploy/local-cluster.sh up", env); err != nil {
		t.Fatalf("deploy/local-cluster.sh up: %v\n%s\n%s", err, out, logs())
	}
	t.Cleanup(func() {
		if out, err := sh("deploy/local-cluster.sh down", env); err != nil {
			t.Errorf("deploy/local-cluster.sh down: %v\n%s", err, out)
		}
	})
	password := readFile(t, filepath.Join(clusterDir, "admin.password"))
	// The script waits 30 s for admin to log in; a loaded machine may take
	// longer, and every block needs it. A liveness bound only.
	users := fmt.Sprintf("http://127.0.0.1:%d/v1/users", httpBase+1)
	for deadline := time.Now().Add(2 * time.Minute); ; {
		req, _ := http.NewRequest(http.MethodGet, users, nil)
		req.SetBasicAuth("admin", string(password))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin cannot log in at %s after 2 minutes (%v)\n%s", users, err, logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	env = append(env, fmt.Sprintf("NARAD_SERVER=http://127.0.0.1:%d", httpBase+1), "NARAD_USER=admin", "NARAD_PASSWORD="+string(password),
		"NARAD_NATS=nats://"+natsAddr, "NARAD_NATS_CREDS="+filepath.Join(clusterDir, "nats", "admin.nk"))

	ran, skipped := 0, 0
	for _, page := range guidePages(t) {
		for _, b := range guideBlocks(t, page) {
			if b.notRun != "" {
				skipped++
				continue
			}
			out, err := sh(strings.ReplaceAll(b.text, "/tmp/", scratch+"/"), env)
			if err != nil {
				t.Fatalf("operate/%s:%d: the block failed: %v\n--- block\n%s--- output\n%s\n%s", b.page, b.line, err, b.text, out, logs())
			}
			ran++
		}
	}
	if ran < 10 {
		t.Fatalf("ran %d blocks of the guide (%d marked not run): want its commands run, not only listed", ran, skipped)
	}
	t.Logf("ran %d blocks of the guide, %d marked not run", ran, skipped)
}

// anchors are the GitHub-style anchors of a markdown file's headings.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw := readFile(t, path)
	out := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#+ (.+)$`).FindAllStringSubmatch(string(raw), -1) {
		a := strings.ToLower(strings.TrimSpace(m[1]))
		a = regexp.MustCompile(`[^a-z0-9 _-]`).ReplaceAllString(a, "")
		out[strings.ReplaceAll(a, " ", "-")] = true
	}
	return out
}

// Every alert names its remedy in the guide (runbook_url), deploy/README.md
// links the same place, and every link between the guide's pages lands on
// a heading that exists.
func TestEveryAlertLinksItsRemedy(t *testing.T) {
	r := readRules(t)
	readme := readFile(t, "README.md")
	remedies := anchors(t, "operate/troubleshooting.md")
	n := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			n++
			url := rule.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, "deploy/operate/troubleshooting.md#")
			if !ok || !remedies[anchor] {
				t.Errorf("alert %s: runbook_url %q, want deploy/operate/troubleshooting.md#<a heading of it>", rule.Alert, url)
			}
			if link := "[`" + rule.Alert + "`](operate/troubleshooting.md#" + anchor + ")"; !strings.Contains(string(readme), link) {
				t.Errorf("deploy/README.md: no %s", link)
			}
		}
	}
	if n == 0 {
		t.Fatal("no alerts read")
	}
	pages, _ := filepath.Glob("operate/*.md")
	for _, p := range pages {
		raw := readFile(t, p)
		for _, m := range regexp.MustCompile(`\]\(([a-z-]*\.md)?(#[a-z0-9_-]+)?\)`).FindAllStringSubmatch(string(raw), -1) {
			target := p
			if m[1] != "" {
				target = filepath.Join("operate", m[1])
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s links %s: %v", p, m[0], err)
				continue
			}
			if m[2] != "" && !anchors(t, target)[m[2][1:]] {
				t.Errorf("%s links %s: %s has no heading %s", p, m[0], target, m[2])
			}
		}
	}
}

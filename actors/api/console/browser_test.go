package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/naradmq/narad/bench/proc"
	"github.com/naradmq/narad/cluster/testnet"
	"github.com/naradmq/narad/cmd/narad/client"
	"github.com/naradmq/narad/messages"
)

// The console in a real browser: a cluster of three narad processes, a
// fourth that joins (a rebalance onto it), and a headless Chromium that
// logs in, watches the moves run down to none, peeks at a record, runs a
// decommission's dry run, and then, as a viewer, is shown no action.
// Screenshots go to the test's artifact directory (go test -artifacts
// keeps them; -v logs where).

const (
	adminPassword  = "console-admin-pw"
	viewerPassword = "console-viewer-pw"
	topic          = "console-orders"
	// partitions is more than the console's page of 50 rows, so the
	// topic view pages.
	partitions = 60
	// recordsPerPartition of recordBytes each give the moves something to
	// copy, so that they are seen in flight.
	recordsPerPartition = 40
	recordBytes         = 4096
	// within bounds every wait: something that must happen, never a
	// measure of how long it takes.
	within = 3 * time.Minute
)

func TestTheConsoleShowsARebalanceAndActsOnlyForAnAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four narad processes and a browser")
	}
	chromium := findChromium(t)
	// The browser lives in ctx: it ends after the cleanups that use it.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	bin, err := proc.Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := proc.New(bin, dir, 3, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The first metadata leader seeds admin with it (CONTRACT.md §2.1).
	// Two moves at a time, each of whose freezes waits a while for the
	// lease fill leaves out in its partition, so that the rebalance onto
	// n4 (a dozen moves) lasts many of the page's once-a-second refreshes.
	c.Env = proc.Environ([]string{"NARAD_ADMIN_PASSWORD"}, "NARAD_ADMIN_PASSWORD="+adminPassword)
	c.Args = []string{"--max-in-flight-moves", "2", "--lease-drain-timeout", "1500ms"}
	if err := c.StartNATS(ctx, within); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes[:3] {
		if err := c.StartNode(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes[:3] {
		if _, err := c.WaitReady(ctx, n, within); err != nil {
			t.Fatal(err)
		}
	}
	n1, n4 := c.Nodes[0], c.Nodes[3]
	admin, err := client.New(n1.URL(), client.Options{User: "admin", Password: adminPassword})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	testnet.Eventually(t, within, "admin to log in (seeded after the first election)", func() bool {
		_, err := admin.ListTopics(ctx, 1, "")
		return err == nil
	})
	createViewer(t, n1.URL())
	fill(t, ctx, admin)

	artifacts := t.ArtifactDir()
	t.Logf("screenshots in %s", artifacts)
	browser := newBrowser(t, ctx, chromium)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the page when the test failed: %s, problem %q", evalString(t, browser, `location.hash`), text(t, browser, "#problem"))
			screenshot(t, browser, filepath.Join(artifacts, "failed.png"))
		}
	})

	// Log in as admin; the header says who and that they are an admin.
	login(t, browser, n1.URL(), "admin", adminPassword)
	if who := text(t, browser, "#who"); !strings.Contains(who, "admin · admin") {
		t.Fatalf("header after the admin's login: got %q, want it to name admin as an admin", who)
	}

	// The rebalance: n4 joins while the page shows the moves.
	run(t, browser, chromedp.Navigate(n1.URL()+"/ui/#/moves"), chromedp.WaitVisible(chromedp.CSS("#moves-in-flight")))
	if err := c.StartNode(n4); err != nil {
		t.Fatal(err)
	}
	// The page polls once a second; the test reads what it shows far more
	// often, so every state it draws is seen.
	maxInFlight, shots, arrows, halfway := 0, 0, 0, false
	var flow, aborted string
	testnet.Eventually(t, within, "the moves view to show none in flight, some done, and n4 owning its share", func() bool {
		inFlight, ok1 := cardValue(t, browser, "moves-in-flight")
		done, ok2 := cardValue(t, browser, "moves-done")
		if inFlight > 0 && aborted == "" {
			// An admin aborts one move; the planner plans it again.
			aborted = abortFirstMove(t, browser, filepath.Join(artifacts, "moves-abort.png"))
		}
		if inFlight > 0 {
			// The picture draws each move as an arrow onto its target.
			arrows = max(arrows, evalInt(t, browser, `document.querySelectorAll('#flow-svg path.flow-arrow[data-to="`+n4.ID+`"]').length`))
		}
		if done >= partitions/8 && !halfway {
			halfway = true
			screenshot(t, browser, filepath.Join(artifacts, "moves-halfway.png"))
		}
		if inFlight > maxInFlight {
			maxInFlight = inFlight
			if shots < 3 {
				shots++
				screenshot(t, browser, filepath.Join(artifacts, fmt.Sprintf("moves-in-flight-%d.png", shots)))
			}
		}
		flow = evalString(t, browser, `Array.from(document.querySelectorAll('#flow-svg g.node')).map((g) => g.dataset.node + '=' + g.querySelector('.owned').textContent).join(' ')`)
		return ok1 && ok2 && inFlight == 0 && done > 0 && ownedIn(flow, n4.ID) >= partitions/4-1
	})
	if aborted == "" {
		t.Errorf("moves view during the rebalance: got no move to abort, want one")
	}
	if maxInFlight == 0 || arrows == 0 {
		t.Errorf("moves view during the rebalance: got at most %d moves in flight and %d arrows onto %s, want some of each", maxInFlight, arrows, n4.ID)
	}
	if got := text(t, browser, "#no-moves"); got != "Nothing moves." {
		t.Errorf("moves view after the rebalance: got %q, want %q", got, "Nothing moves.")
	}
	t.Logf("partitions per node after the rebalance, as the page draws them: %s", flow)
	screenshot(t, browser, filepath.Join(artifacts, "moves-done.png"))

	// The topic's partitions, and a peek at the first record of partition
	// 0: a replay read, nothing leased.
	run(t, browser, chromedp.Navigate(n1.URL()+"/ui/#/topic/"+topic), chromedp.WaitVisible(chromedp.CSS("#partitions-table tbody tr")))
	// Each page of the partitions as "index:owner:leases" rows; the
	// second page is the Next button's.
	const rowsJS = `Array.from(document.querySelectorAll('#partitions-table tbody tr')).
		map((tr) => tr.children[0].textContent + ':' + tr.children[1].textContent + ':' + tr.querySelector('td.lease').textContent).join(' ')`
	var page1, page2 []string
	testnet.Eventually(t, within, "the topic view to list its first page of partitions", func() bool {
		page1 = strings.Fields(evalString(t, browser, rowsJS))
		return len(page1) == 50
	})
	run(t, browser, chromedp.Click(chromedp.CSS("#partitions-pager button:last-child")))
	testnet.Eventually(t, within, "the topic view's second page to list the other partitions", func() bool {
		page2 = strings.Fields(evalString(t, browser, rowsJS))
		return len(page2) == partitions-50
	})
	// fill left one lease out in each partition; those that stayed where
	// they were (every one n4 does not own: the rebalance moved only onto
	// it) still hold it.
	stayed := 0
	for i, row := range append(page1, page2...) {
		f := strings.Split(row, ":")
		if f[0] != strconv.Itoa(i) {
			t.Fatalf("topic view: got row %q in place %d, want partition %d", row, i, i)
		}
		if f[1] != n4.ID {
			if f[2] != "1" {
				t.Errorf("topic view: got %s leases out on partition %s of %s, want the 1 fill left", f[2], f[0], f[1])
			}
			stayed++
		}
	}
	if want := partitions - ownedIn(flow, n4.ID); stayed != want {
		t.Errorf("topic view: got %d partitions not on %s, want %d", stayed, n4.ID, want)
	}
	run(t, browser,
		chromedp.SetValue(chromedp.CSS("#peek-partition"), "0"),
		chromedp.SetValue(chromedp.CSS("#peek-offset"), "0"),
		chromedp.Click(chromedp.CSS("#peek-submit")))
	testnet.Eventually(t, within, "the peek to show the record at partition 0, offset 0", func() bool {
		return strings.Contains(text(t, browser, "#peek-result"), `"seq": 0`)
	})
	if got := text(t, browser, "#peek-result"); strings.Contains(got, "receipt_handle") || !strings.Contains(got, `"partition": 0`) {
		t.Errorf("peek: got %s, want partition 0's record without a receipt handle", got)
	}
	screenshot(t, browser, filepath.Join(artifacts, "topic-peek.png"))

	// A decommission's dry run: its verdict first, then a cancel leaves
	// n4 a member that does not drain.
	run(t, browser, chromedp.Navigate(n1.URL()+"/ui/#/cluster"), chromedp.WaitVisible(chromedp.CSS("#members-table")))
	testnet.Eventually(t, within, "the cluster view to list four members and the metadata leader", func() bool {
		return evalInt(t, browser, `document.querySelectorAll('#members-table tbody tr').length`) == 4 &&
			strings.HasPrefix(text(t, browser, "#metadata-leader"), "n")
	})
	run(t, browser, chromedp.Click(chromedp.CSS(`tr[data-member="n4"] button[data-action="decommission"]`)),
		chromedp.WaitVisible(chromedp.CSS("#verdict")))
	verdict := text(t, browser, "#verdict")
	if !strings.HasPrefix(verdict, "Dry run verdict: ok. n4 owns ") {
		t.Errorf("decommission dry run of n4: got %q, want an ok verdict naming what n4 owns", verdict)
	}
	screenshot(t, browser, filepath.Join(artifacts, "decommission-dry-run.png"))
	run(t, browser, chromedp.Click(chromedp.CSS("#confirm-cancel")))
	testnet.Eventually(t, within, "the cluster view to say the dry run did nothing", func() bool {
		return strings.Contains(text(t, browser, "#answer"), "Decommission of n4: dry run ok; nothing done.")
	})
	if got := memberDraining(t, n1.URL(), n4.ID); got {
		t.Errorf("n4 after a dry run and a cancel: got draining, want not draining")
	}
	screenshot(t, browser, filepath.Join(artifacts, "cluster.png"))

	// A viewer sees the same pages and no action.
	run(t, browser, chromedp.Click(chromedp.CSS("#logout")))
	login(t, browser, n1.URL(), "viewer", viewerPassword)
	if who := text(t, browser, "#who"); !strings.Contains(who, "viewer · viewer") {
		t.Fatalf("header after the viewer's login: got %q, want it to name the viewer as a viewer", who)
	}
	for _, view := range []struct{ hash, ready string }{
		{"#/cluster", "#members-table"}, {"#/moves", "#moves-table"}, {"#/topic/" + topic, "#partitions-table"},
	} {
		run(t, browser, chromedp.Navigate(n1.URL()+"/ui/"+view.hash), chromedp.WaitVisible(chromedp.CSS(view.ready)))
		testnet.Eventually(t, within, view.hash+" to draw its table for the viewer", func() bool {
			return evalInt(t, browser, `document.querySelectorAll('`+view.ready+` tbody tr').length`) > 0 || view.hash == "#/moves"
		})
		if got := evalString(t, browser, `Array.from(document.querySelectorAll('button.action, #peek-form')).map((b) => b.textContent || b.id).join(', ')`); got != "" {
			t.Errorf("viewer's %s: got actions %q, want none", view.hash, got)
		}
	}
	screenshot(t, browser, filepath.Join(artifacts, "viewer-topic.png"))
}

// abortFirstMove aborts the first move the moves view lists, through its
// Abort button and the confirmation, and checks the answer the page shows:
// aborted, or refused when the move ended first. It returns the move's
// topic/partition, "" when the view listed none any more. The page's own
// script clicks the button, so that a row redrawn between a lookup and a
// click is not missed.
func abortFirstMove(t *testing.T, browser context.Context, shot string) string {
	t.Helper()
	move := evalString(t, browser, `(() => {
		const b = document.querySelector('#moves-table button.action');
		if (!b) return '';
		const tr = b.closest('tr');
		b.click();
		return tr.children[0].textContent + '/' + tr.children[1].textContent;
	})()`)
	if move == "" {
		return ""
	}
	run(t, browser, chromedp.WaitVisible(chromedp.CSS("#confirm-ok")))
	if got, want := text(t, browser, "#confirm-title"), "Abort the move of "+move; got != want {
		t.Errorf("abort's confirmation: got %q, want %q", got, want)
	}
	run(t, browser, chromedp.Click(chromedp.CSS("#confirm-ok")))
	var answer string
	testnet.Eventually(t, within, "the moves view to show the abort's answer", func() bool {
		answer = text(t, browser, "#answer")
		return answer != ""
	})
	if !strings.HasPrefix(answer, "Move of "+move+" aborted") && !strings.HasPrefix(answer, "Abort of "+move+": ") {
		t.Errorf("abort of %s: got answer %q, want it aborted or the refusal", move, answer)
	}
	t.Logf("abort of %s: the page answered %q", move, answer)
	screenshot(t, browser, shot)
	return move
}

// findChromium is Debian's chromium, installed when missing and the test
// may (root, or sudo without a password), as a fresh CI machine needs.
// Where it cannot be had, the test fails in CI (CI set, as .ci/run and CI
// services set it) and is skipped, saying why, on a developer's machine,
// so that `go test ./...` still runs there with Go alone.
func findChromium(t *testing.T) string {
	if path, err := exec.LookPath("chromium"); err == nil {
		return path
	}
	install := []string{"apt-get", "install", "-y", "chromium"}
	if os.Geteuid() != 0 {
		install = append([]string{"sudo", "-n"}, install...)
	}
	out, err := exec.Command(install[0], install[1:]...).CombinedOutput()
	if path, lerr := exec.LookPath("chromium"); lerr == nil {
		return path
	}
	why := fmt.Sprintf("no chromium, and %q failed: %v\n%s\ninstall it (Debian: apt-get install chromium)", strings.Join(install, " "), err, out)
	if os.Getenv("CI") != "" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// newBrowser starts a headless Chromium on a fresh profile. On a closed
// network it stalls without these flags: it tries to reach its update,
// sync and component services.
func newBrowser(t *testing.T, ctx context.Context, path string) context.Context {
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	browser, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	// The first call starts the browser, which lives as long as its
	// context: it takes no timeout of its own.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return browser
}

func run(t *testing.T, browser context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, within)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

func login(t *testing.T, browser context.Context, base, user, password string) {
	t.Helper()
	run(t, browser,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS("#login-form")),
		chromedp.SendKeys(chromedp.CSS("#login-user"), user),
		chromedp.SendKeys(chromedp.CSS("#login-password"), password),
		chromedp.Click(chromedp.CSS("#login-submit")),
		chromedp.WaitVisible(chromedp.CSS("#nav")))
}

func text(t *testing.T, browser context.Context, sel string) string {
	t.Helper()
	return evalString(t, browser, `(document.querySelector(`+strconv.Quote(sel)+`) || {}).textContent || ''`)
}

func evalString(t *testing.T, browser context.Context, js string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, within)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("browser: evaluate %s: %v", js, err)
	}
	return s
}

func evalInt(t *testing.T, browser context.Context, js string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, within)
	defer cancel()
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
	if err != nil {
		t.Fatalf("browser: evaluate %s: %v", js, err)
	}
	return n
}

// cardValue is the number a summary card of the moves view shows; false
// while it shows none.
func cardValue(t *testing.T, browser context.Context, id string) (int, bool) {
	t.Helper()
	n, err := strconv.Atoi(text(t, browser, "#"+id+" .value"))
	return n, err == nil
}

// ownedIn is node's count in the page's "n1=12 n2=12 ..." summary of the
// picture's bars; -1 when it has none.
func ownedIn(flow, node string) int {
	for _, f := range strings.Fields(flow) {
		if id, n, ok := strings.Cut(f, "="); ok && id == node {
			v, err := strconv.Atoi(n)
			if err == nil {
				return v
			}
		}
	}
	return -1
}

func screenshot(t *testing.T, browser context.Context, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(browser, within)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// createViewer makes a user with no grant: it may read the cluster and
// the topics, and act on nothing.
func createViewer(t *testing.T, base string) {
	body, _ := json.Marshal(messages.CreateUserRequest{Username: "viewer", Password: viewerPassword})
	req, err := http.NewRequest("POST", base+"/v1/users", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", adminPassword)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t.Fatalf("create the viewer: got %d, want 201", resp.StatusCode)
	}
}

// fill creates the topic and gives each partition its records, the first
// of partition 0 being {"seq":0,...}, waits until every one is committed,
// then leases one of each partition.
func fill(t *testing.T, ctx context.Context, admin *client.Broker) {
	// Leases that outlast the test, so the topic view's count is fill's.
	visibility := int64(time.Hour / time.Millisecond)
	if _, err := admin.CreateTopic(ctx, messages.CreateTopicRequest{Name: topic, Partitions: partitions, VisibilityTimeoutMs: &visibility}); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, within, "the topic's partitions to start", func() bool {
		d, err := admin.GetTopic(ctx, topic)
		return err == nil && len(d.PartitionStats) == partitions
	})
	pad := strings.Repeat("x", recordBytes)
	for p := range partitions {
		recs := make([]messages.BatchRecord, recordsPerPartition)
		for i := range recs {
			body := fmt.Sprintf(`{"seq":%d,"partition":%d,"pad":%q}`, i, p, pad)
			recs[i] = client.BatchRecordOf("", &p, []byte(body))
		}
		res, err := admin.ProduceBatch(ctx, topic, recs)
		if err != nil || res.Accepted != len(recs) {
			t.Fatalf("produce to partition %d: got %d accepted, %v; want %d", p, res.Accepted, err, len(recs))
		}
	}
	testnet.Eventually(t, within, "every record to be committed", func() bool {
		d, err := admin.GetTopic(ctx, topic)
		if err != nil || len(d.PartitionStats) != partitions {
			return false
		}
		for _, s := range d.PartitionStats {
			if s.HighWatermark < recordsPerPartition {
				return false
			}
		}
		return true
	})
	// One record of each partition leased and left out: a move's freeze
	// waits for it (--lease-drain-timeout) before it goes on.
	for p := range partitions {
		if _, err := admin.Consume(ctx, topic, client.ConsumeOptions{Partition: &p}); err != nil {
			t.Fatalf("lease a record of partition %d: %v", p, err)
		}
	}
}

// memberDraining is whether the members listing says id drains.
func memberDraining(t *testing.T, base, id string) bool {
	req, err := http.NewRequest("GET", base+"/v1/cluster/members", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", adminPassword)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list messages.MemberList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Members {
		if m.ID == id {
			return m.Draining
		}
	}
	t.Fatalf("members: got no %s", id)
	return false
}

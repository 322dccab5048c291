package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/dpproxy/dpproxy/budget"
)

// syncBuffer collects a command's output from its goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// chromium finds the headless browser: Debian's chromium (.ci/run installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	needClient(t, "chromium", errors.New("no chromium on PATH"))
	return ""
}

// TestConsoleInBrowser runs `dpproxy serve` with the embedded demo and the
// web console, makes a few DP queries through the Go driver, and drives
// headless Chromium through the console as the auditor and as an analyst:
// the plots render, the ledger rows are there (a zero-cost reuse marked),
// the ledger verifies, an analyst sees only their own, and EXPLAIN charges
// nothing. Screenshots go to the test's temp dir (or DPPROXY_CONSOLE_SHOTS,
// to keep them); with DPPROXY_CONSOLE_SCREENSHOT=FILE the auditor's budgets
// page, as the window shows it, is also saved there (the README's
// docs/console.png).
func TestConsoleInBrowser(t *testing.T) {
	browser := chromium(t)
	dataDir := t.TempDir()
	src := demoData(t)
	if err := os.Link(src, filepath.Join(dataDir, "demo.sqlite")); err != nil {
		copyFile(t, src, filepath.Join(dataDir, "demo.sqlite"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out syncBuffer
	srvCtx, stop := context.WithCancel(ctx)
	exited := make(chan int, 1)
	go func() {
		exited <- run(srvCtx, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--http", "127.0.0.1:0"}, &out, io.Discard)
	}()
	defer func() {
		stop()
		<-exited
	}()
	lines := regexp.MustCompile(`(?s)on (127\.0\.0\.1:\d+) \(data.*web console: (https://127\.0\.0\.1:\d+/)`)
	var m []string
	for deadline := time.Now().Add(time.Minute); m == nil; {
		if m = lines.FindStringSubmatch(out.String()); m == nil {
			if time.Now().After(deadline) {
				t.Fatalf("serve did not print the console's address:\n%s", out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	mysqlAddr, consoleURL := m[1], m[2]

	// A few DP queries: analyst three and one repeat (a free reuse), bob two at ε = 0.5.
	adb := connect(t, mysqlAddr, "analyst", "analyst", "")
	for _, q := range []string{
		"SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40",
		"SELECT sex, COUNT(*) FROM adult GROUP BY sex",
		"SELECT education, AVG(hours_per_week) FROM adult GROUP BY education",
		"SELECT COUNT(*) FROM adult WHERE age BETWEEN 30 AND 40",
	} {
		drain(t, adb, q)
	}
	bdb := connect(t, mysqlAddr, "bob", "bob", "")
	bdb.SetMaxOpenConns(1)
	drain(t, bdb, "SET @dp_epsilon = 0.5")
	drain(t, bdb, "SELECT income, COUNT(*) FROM adult GROUP BY income")
	drain(t, bdb, "SELECT race, COUNT(*) FROM adult WHERE sex = 'Female' GROUP BY race")

	ledgerPath := filepath.Join(dataDir, "ledger.sqlite")
	head := func() int64 {
		t.Helper()
		l, err := budget.OpenReadOnly(ctx, ledgerPath)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		seq, _, err := l.Head(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return seq
	}
	entriesBefore := head()

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(browser),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.IgnoreCertErrors, // the demo's self-signed certificate
		chromedp.WindowSize(1200, 900),
	)
	defer cancelAlloc()
	shots := t.TempDir()
	if d := os.Getenv("DPPROXY_CONSOLE_SHOTS"); d != "" {
		shots = d // keep them
	}
	shot := func(bctx context.Context, name string) []byte {
		t.Helper()
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		return png
	}
	evalBool := func(bctx context.Context, what, js string) {
		t.Helper()
		ok, err := chromedp.Run(bctx, chromedp.Evaluate[bool](js))
		if err != nil || !ok {
			t.Errorf("%s: %v (%s)", what, err, js)
		}
	}
	bodyText := func(bctx context.Context) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("body")))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	login := func(bctx context.Context, user, pw string) {
		t.Helper()
		if err := chromedp.Do(bctx,
			chromedp.Navigate(consoleURL),
			chromedp.WaitVisible(chromedp.CSS(`input[name=user]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name=user]`), user),
			chromedp.SendKeys(chromedp.CSS(`input[name=password]`), pw),
			chromedp.Click(chromedp.CSS(`button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`img.plot`)),
		); err != nil {
			t.Fatalf("log in as %s: %v", user, err)
		}
		// Every plot is an SVG the browser could load and draw.
		if _, err := chromedp.Run(bctx, chromedp.Poll[bool](
			`document.images.length > 0 && Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)`,
			chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("plots did not load: %v", err)
		}
	}

	// The auditor: budgets with plots, the whole ledger, verification.
	actx, cancelA := chromedp.NewContext(alloc)
	defer cancelA()
	login(actx, "auditor", "auditor")
	text := bodyText(actx)
	for _, want := range []string{"remaining for space adult", "analyst", "bob", "adult"} {
		if !strings.Contains(text, want) {
			t.Errorf("auditor's budgets page lacks %q:\n%s", want, text)
		}
	}
	png := shot(actx, "auditor-budgets")
	if dst := os.Getenv("DPPROXY_CONSOLE_SCREENSHOT"); dst != "" {
		view, err := chromedp.Run(actx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, view, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if len(png) < 10_000 {
		t.Errorf("budgets screenshot is only %d bytes", len(png))
	}
	if err := chromedp.Do(actx, chromedp.Navigate(consoleURL+"ledger"), chromedp.WaitVisible(chromedp.CSS(`table.ledger`))); err != nil {
		t.Fatal(err)
	}
	// 4 limits entries (two per demo table) + 3 charges and a reuse of analyst + 2 charges of bob.
	evalBool(actx, "ledger rows", `document.querySelectorAll('table.ledger tbody tr[id^="e"]').length === 10`)
	evalBool(actx, "the reuse is marked free", `document.querySelectorAll('tr.is-free .kind.free').length === 1`)
	evalBool(actx, "bob's rows", `Array.from(document.querySelectorAll('table.ledger tbody tr td:nth-child(4)')).filter(td => td.textContent === 'bob').length === 2`)
	shot(actx, "auditor-ledger")
	if err := chromedp.Do(actx, chromedp.Navigate(consoleURL+"verify"), chromedp.WaitVisible(chromedp.CSS(`.status`))); err != nil {
		t.Fatal(err)
	}
	if text := bodyText(actx); !strings.Contains(text, "Ledger OK: 10 entries") {
		t.Errorf("verify page: %s", text)
	}
	shot(actx, "auditor-verify")

	// Log out; the session is gone.
	if err := chromedp.Do(actx, chromedp.Click(chromedp.CSS(`button.link`)), chromedp.WaitVisible(chromedp.CSS(`input[name=user]`)),
		chromedp.Navigate(consoleURL+"ledger"), chromedp.WaitVisible(chromedp.CSS(`input[name=user]`))); err != nil {
		t.Fatalf("log out: %v", err)
	}

	// An analyst, in the same browser: their own budget and entries only, and EXPLAIN.
	nctx := actx
	login(nctx, "analyst", "analyst")
	if text := bodyText(nctx); !strings.Contains(text, "of your ε") || strings.Contains(text, "bob") {
		t.Errorf("analyst's budgets page:\n%s", text)
	}
	shot(nctx, "analyst-budgets")
	if err := chromedp.Do(nctx, chromedp.Navigate(consoleURL+"ledger"), chromedp.WaitVisible(chromedp.CSS(`table.ledger`))); err != nil {
		t.Fatal(err)
	}
	evalBool(nctx, "analyst's ledger rows", `document.querySelectorAll('table.ledger tbody tr[id^="e"]').length === 4`)
	evalBool(nctx, "only the analyst's own rows", `Array.from(document.querySelectorAll('table.ledger tbody tr td:nth-child(4)')).every(td => td.textContent === 'analyst')`)
	if err := chromedp.Do(nctx,
		chromedp.Navigate(consoleURL+"explain"),
		chromedp.WaitVisible(chromedp.CSS(`textarea[name=query]`)),
		chromedp.SetValue(chromedp.CSS(`textarea[name=query]`), "SELECT sex, COUNT(*) FROM adult WHERE age > 60 GROUP BY sex"),
		chromedp.SendKeys(chromedp.CSS(`input[name=epsilon]`), "0.25"),
		chromedp.Click(chromedp.CSS(`form.explain button`)),
		chromedp.WaitVisible(chromedp.CSS(`table.explain-result`)),
	); err != nil {
		t.Fatalf("EXPLAIN box: %v", err)
	}
	if text := bodyText(nctx); !strings.Contains(text, "nothing (EXPLAIN)") || !strings.Contains(text, "0.25") {
		t.Errorf("EXPLAIN result:\n%s", text)
	}
	shot(nctx, "analyst-explain")
	if n := head(); n != entriesBefore {
		t.Errorf("the console moved the ledger from %d to %d entries", entriesBefore, n)
	}
	t.Logf("screenshots in %s", shots)
}

// drain runs a statement and reads its rows.
func drain(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}
